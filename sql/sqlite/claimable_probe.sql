-- claimable_probe: is there anything a claim could do? Due queued work on the
-- given queues/names, or an expired lease anywhere (recovery is global).
-- The lease arm spells the partial index's predicate so the index is usable.
-- Params: :queues (JSON array), :names (JSON array or NULL), :now_ms
select exists (
           select 1 from cairnq_tasks
           where queue in (select q.value from json_each(:queues) as q)
             and status = 'queued'
             and :now_ms >= run_at_ms
             and (name in (select n.value from json_each(:names) as n) or :names is null)
       )
    or exists (
           select 1 from cairnq_tasks
           where status = 'running' and lease_until_ms is not null
             and :now_ms >= lease_until_ms
       ) as has_work;
