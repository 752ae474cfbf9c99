-- claimable_probe: is there anything a claim could do? Due queued work on the
-- given queues/names, or an expired lease anywhere (recovery is global).
-- Params: :queues (JSON array), :names (JSON array or NULL), :now_ms
--
-- The claim indexes order a queue's queued rows by priority before due time,
-- so "any row due?" cannot be one range seek: a plain filter on run_at_ms
-- walks every queued row of the queue (22 ms at 250k delayed rows). Instead
-- the queued arms step through the distinct priority values present (each
-- step one seek for the next lower value, per queue, or per queue and name on
-- the name index) and, at each value, seek the first row with
-- run_at_ms <= :now_ms. The walk stops at the first value with a due row, so
-- its cost follows the number of distinct priorities, not of undue rows.
-- The lease arm spells the partial index's predicate so the index is usable.
-- The statement starts with `select`: the store's write grouping treats
-- anything else as a write.
select
    exists (
        with recursive level(queue, priority) as (
            select q.value,
                   (select t.priority from cairnq_tasks as t
                    where t.queue = q.value and t.status = 'queued'
                    order by t.priority desc limit 1)
            from json_each(:queues) as q
            where :names is null
            union all
            select l.queue,
                   (select t.priority from cairnq_tasks as t
                    where t.queue = l.queue and t.status = 'queued'
                      and t.priority < l.priority
                    order by t.priority desc limit 1)
            from level as l
            where l.priority is not null
              and not exists (
                  select 1 from cairnq_tasks as t
                  where t.queue = l.queue and t.status = 'queued'
                    and t.priority = l.priority and t.run_at_ms <= :now_ms
              )
        )
        select 1 from level as l
        where l.priority is not null
          and exists (
              select 1 from cairnq_tasks as t
              where t.queue = l.queue and t.status = 'queued'
                and t.priority = l.priority and t.run_at_ms <= :now_ms
          )
    )
    or exists (
        with recursive level(queue, name, priority) as (
            select q.value, n.value,
                   (select t.priority from cairnq_tasks as t
                    where t.queue = q.value and t.status = 'queued' and t.name = n.value
                    order by t.priority desc limit 1)
            from json_each(:queues) as q, json_each(:names) as n
            union all
            select l.queue, l.name,
                   (select t.priority from cairnq_tasks as t
                    where t.queue = l.queue and t.status = 'queued' and t.name = l.name
                      and t.priority < l.priority
                    order by t.priority desc limit 1)
            from level as l
            where l.priority is not null
              and not exists (
                  select 1 from cairnq_tasks as t
                  where t.queue = l.queue and t.status = 'queued' and t.name = l.name
                    and t.priority = l.priority and t.run_at_ms <= :now_ms
              )
        )
        select 1 from level as l
        where l.priority is not null
          and exists (
              select 1 from cairnq_tasks as t
              where t.queue = l.queue and t.status = 'queued' and t.name = l.name
                and t.priority = l.priority and t.run_at_ms <= :now_ms
          )
    )
    or exists (
        select 1 from cairnq_tasks
        where status = 'running' and lease_until_ms is not null
          and :now_ms >= lease_until_ms
    ) as has_work;
