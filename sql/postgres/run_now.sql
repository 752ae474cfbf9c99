-- run_now: an operator makes a queued task due now (the server's clock). A task due
-- earlier keeps its time (it must not lose its place in the claim order); a running
-- or finished task matches nothing (the caller says why). The notify trigger fires
-- only when a row becomes queued, so the statement sends the same cairnq_queued
-- notification itself: listening workers of every SDK claim the task at once.
-- Params: :id
with moved as (
    update cairnq_tasks
    set run_at_ms = least(run_at_ms, (extract(epoch from now()) * 1000)::bigint),
        updated_at_ms = (extract(epoch from now()) * 1000)::bigint
    where id = :id::text and status = 'queued'
    returning *
)
select moved.*
from moved
cross join lateral (select pg_notify('cairnq_queued', moved.queue)) as woken
