-- claimable_probe: is there anything a claim could do? Due queued work on the
-- given queues/names, or an expired lease anywhere (recovery is global).
-- The lease arm spells the partial index's predicate so the index is usable.
-- Params: :queues (JSON array), :names (JSON array or NULL), :now_ms
select exists (
    select 1 from cairnq_tasks
    where (
        status = 'queued'
        and queue in (select value from json_each(:queues))
        and (:names is null or name in (select value from json_each(:names)))
        and run_at_ms <= :now_ms
    ) or (
        status = 'running'
        and lease_until_ms is not null
        and lease_until_ms <= :now_ms
    )
) as has_work;
