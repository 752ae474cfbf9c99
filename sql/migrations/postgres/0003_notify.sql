-- 0003_notify.sql (Postgres only): wakeups for listeners in any process.
-- cairnq_queued carries the queue of a row that became queued (insert, requeue,
-- retry); cairnq_done carries the id of a row that just entered a terminal
-- status. The trigger's WHEN clause keeps claims (status -> running, the most
-- frequent status write) out of plpgsql entirely, and "update of status" keeps
-- heartbeats and progress writes from firing it. schema_version is not touched.
create or replace function cairnq_notify() returns trigger
language plpgsql
as $$
begin
    if new.status = 'queued'
        and (tg_op = 'INSERT' or old.status is distinct from new.status) then
        perform pg_notify('cairnq_queued', new.queue);
    elsif tg_op = 'UPDATE'
        and new.status in ('succeeded', 'failed', 'canceled')
        and old.status not in ('succeeded', 'failed', 'canceled') then
        perform pg_notify('cairnq_done', new.id);
    end if;
    return null;
end;
$$;

drop trigger if exists cairnq_tasks_notify on cairnq_tasks;
create trigger cairnq_tasks_notify
    after insert or update of status on cairnq_tasks
    for each row
    when (new.status is distinct from 'running')
    execute function cairnq_notify();
