-- claimable_probe: is there anything for a claim session to do? A due queued row
-- on :queues passing the name filter (:names NULL = any name), or any expired
-- lease anywhere (recovery is global). Two EXISTS so each arm seeks its own
-- index; the clock sits in a scalar sub-select so it is computed once and can
-- bound the index scan. Params: :queues, :names.
select
    exists (
        select 1
        from cairnq_tasks
        where status = 'queued'
            and queue = any(:queues::text[])
            and (:names::text[] is null or name = any(:names::text[]))
            and run_at_ms <= (select (extract(epoch from clock_timestamp()) * 1000)::bigint)
    )
    or exists (
        select 1
        from cairnq_tasks
        where status = 'running'
            and lease_until_ms is not null
            and lease_until_ms
                <= (select (extract(epoch from clock_timestamp()) * 1000)::bigint)
    ) as has_work
