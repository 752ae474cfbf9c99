-- claimable_probe: is there anything for a claim session to do? A due queued row
-- on :queues passing the name filter (:names NULL = any name), or any expired
-- lease anywhere (recovery is global). Params: :queues, :names.
--
-- The queued arm looks per queue (and per name when :names is given) for the
-- first row in claim order, as the claim itself does, so it seeks the claim
-- indexes and stops at the first due row whatever lies in the table. (A plain
-- EXISTS over `queue = any(...)` was planned as a sequential scan once the
-- table held a large backlog: with the clock unknown at plan time the planner
-- expected a match early in the heap; measured 21 ms per probe at 100k rows.)
-- The clock sits in a scalar sub-select so it is computed once and can bound
-- the index scan.
select
    exists (
        select 1
        from unnest(:queues::text[]) as q(queue)
        cross join lateral (
            select 1
            from cairnq_tasks
            where :names::text[] is null
                and status = 'queued'
                and queue = q.queue
                and run_at_ms <= (select (extract(epoch from clock_timestamp()) * 1000)::bigint)
            order by priority desc, run_at_ms, id
            limit 1
        ) as due
    )
    or exists (
        select 1
        from unnest(:queues::text[]) as q(queue)
        cross join unnest(:names::text[]) as n(name)
        cross join lateral (
            select 1
            from cairnq_tasks
            where status = 'queued'
                and queue = q.queue
                and name = n.name
                and run_at_ms <= (select (extract(epoch from clock_timestamp()) * 1000)::bigint)
            order by priority desc, run_at_ms, id
            limit 1
        ) as due
    )
    or exists (
        select 1
        from cairnq_tasks
        where status = 'running'
            and lease_until_ms is not null
            and lease_until_ms
                <= (select (extract(epoch from clock_timestamp()) * 1000)::bigint)
    ) as has_work
