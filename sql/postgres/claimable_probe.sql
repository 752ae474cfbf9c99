-- claimable_probe: is there anything for a claim session to do? A due queued row
-- on %(queues)s passing the name filter (%(names)s NULL = any name), or any expired
-- lease anywhere (recovery is global). Params: %(queues)s, %(names)s.
--
-- The queued arms never let the planner pick: a plain EXISTS over
-- `queue = any(...)` was planned as a sequential scan behind a backlog (21 ms
-- per probe at 100k rows). And an index scan for the first row in claim order
-- with `run_at_ms <= now` is no bound either: the claim indexes put priority
-- before due time, so when nothing is due it walks every queued row of the
-- queue (126 ms at 1M rows with 250k delayed). So each arm steps through the
-- distinct priority values present, per queue (and per name on the name
-- index when %(names)s is given): one seek finds the next lower value, one range
-- seek asks whether that value has a due row, and the walk stops at the first
-- that does. Its cost follows the number of priority values, not of undue rows.
-- The clock is read once per queue (or queue and name), in the walk's first
-- row, and carried along it. Each step's "is one due?" is a first-row lookup
-- in claim order, in the select list: as an EXISTS (in WHERE or in the select
-- list) the planner may cost it as a sequential scan expected to hit a due row
-- early (seen: 0.5-4 s at 1M rows); the ORDER BY makes the index the only
-- cheap plan.
select
    exists (
        with recursive level(queue, priority, now_ms, due) as (
            select s.queue, s.priority, s.now_ms,
                (select t.id from cairnq_tasks as t
                 where t.queue = s.queue and t.status = 'queued'
                     and t.priority = s.priority and t.run_at_ms <= s.now_ms
                 order by t.priority desc, t.run_at_ms, t.id
                 limit 1) is not null
            from (
                select q.queue,
                    (select t.priority from cairnq_tasks as t
                     where t.queue = q.queue and t.status = 'queued'
                     order by t.priority desc limit 1) as priority,
                    (select (extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
                from unnest(%(queues)s::text[]) as q(queue)
                where %(names)s::text[] is null
            ) as s
            union all
            select s.queue, s.priority, s.now_ms,
                (select t.id from cairnq_tasks as t
                 where t.queue = s.queue and t.status = 'queued'
                     and t.priority = s.priority and t.run_at_ms <= s.now_ms
                 order by t.priority desc, t.run_at_ms, t.id
                 limit 1) is not null
            from (
                select l.queue, l.now_ms,
                    (select t.priority from cairnq_tasks as t
                     where t.queue = l.queue and t.status = 'queued'
                         and t.priority < l.priority
                     order by t.priority desc limit 1) as priority
                from level as l
                where l.priority is not null and not l.due
            ) as s
        )
        select 1 from level where due
    )
    or
    exists (
        with recursive level(queue, name, priority, now_ms, due) as (
            select s.queue, s.name, s.priority, s.now_ms,
                (select t.id from cairnq_tasks as t
                 where t.queue = s.queue and t.status = 'queued' and t.name = s.name
                     and t.priority = s.priority and t.run_at_ms <= s.now_ms
                 order by t.priority desc, t.run_at_ms, t.id
                 limit 1) is not null
            from (
                select q.queue, n.name,
                    (select t.priority from cairnq_tasks as t
                     where t.queue = q.queue and t.status = 'queued' and t.name = n.name
                     order by t.priority desc limit 1) as priority,
                    (select (extract(epoch from clock_timestamp()) * 1000)::bigint) as now_ms
                from unnest(%(queues)s::text[]) as q(queue)
                cross join unnest(%(names)s::text[]) as n(name)
            ) as s
            union all
            select s.queue, s.name, s.priority, s.now_ms,
                (select t.id from cairnq_tasks as t
                 where t.queue = s.queue and t.status = 'queued' and t.name = s.name
                     and t.priority = s.priority and t.run_at_ms <= s.now_ms
                 order by t.priority desc, t.run_at_ms, t.id
                 limit 1) is not null
            from (
                select l.queue, l.name, l.now_ms,
                    (select t.priority from cairnq_tasks as t
                     where t.queue = l.queue and t.status = 'queued' and t.name = l.name
                         and t.priority < l.priority
                     order by t.priority desc limit 1) as priority
                from level as l
                where l.priority is not null and not l.due
            ) as s
        )
        select 1 from level where due
    )
    or exists (
        select 1
        from cairnq_tasks
        where status = 'running'
            and lease_until_ms is not null
            and lease_until_ms
                <= (select (extract(epoch from clock_timestamp()) * 1000)::bigint)
    ) as has_work
