-- claim_one_queue: claim up to %(limit)s due queued tasks on one %(queue)s with any of %(names)s (NULL = any name), in claim order
-- (priority desc, run_at_ms, id), for %(worker_id)s with a lease of %(lease_ms)s.
-- Candidates are taken FOR UPDATE SKIP LOCKED so concurrent workers neither wait
-- on each other nor double-dispatch; the clock (clock_timestamp(): this may run
-- after waiting on locks) is read once. Params: %(queue)s, %(names)s, %(worker_id)s, %(limit)s, %(lease_ms)s.
-- Returns the claimed rows in no particular order (the store sorts them into claim order).
with clock as (
    select (extract(epoch from clock_timestamp()) * 1000)::bigint as now_ms
)
update cairnq_tasks as t
set status = 'running',
    worker_id = %(worker_id)s::text,
    lease_until_ms = clock.now_ms + %(lease_ms)s::bigint,
    attempt = t.attempt + 1,
    updated_at_ms = clock.now_ms
from clock
where t.id in (
    select id
    from cairnq_tasks
    where status = 'queued'
        and queue = %(queue)s::text
        and (%(names)s::text[] is null or name = any(%(names)s::text[]))
        and run_at_ms <= (select now_ms from clock)
    order by priority desc, run_at_ms, id
    limit %(limit)s::bigint
    for update skip locked
)
returning t.*
