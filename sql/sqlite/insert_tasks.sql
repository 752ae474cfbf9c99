-- insert_tasks: several new queued tasks in one statement, each row what
-- insert_task would write (the group commit's form of insert_task for plain
-- submits arriving together; engine-only, not a protocol statement).
-- Params: :rows, a JSON array with one array per task holding insert_task's
--         values in this order: [id, name, queue, payload, metadata,
--         max_attempts, priority, parent_id, root_id, correlation_id, delay_ms]
--         (payload and metadata as JSON strings holding their JSON text);
--         :now_ms, shared by every row of the statement.
-- Positions, not names, and json_extract rather than ->>: each cheaper (an
-- object's members cost ~25% more of the statement's CPU at 64 rows).
-- JSON cannot carry a NUL character into SQLite text (3.40 cuts the string
-- there), so rows holding one are written with insert_task instead.
-- Rows are written in array order. No RETURNING, like insert_task.
insert into cairnq_tasks
    (id, name, queue, status,
     payload, metadata,
     max_attempts, priority,
     parent_id, root_id, correlation_id,
     run_at_ms, created_at_ms, updated_at_ms)
select
    json_extract(r.value, '$[0]'),  -- id
    json_extract(r.value, '$[1]'),  -- name
    json_extract(r.value, '$[2]'),  -- queue
    'queued',
    json_extract(r.value, '$[3]'),  -- payload
    json_extract(r.value, '$[4]'),  -- metadata
    json_extract(r.value, '$[5]'),  -- max_attempts
    json_extract(r.value, '$[6]'),  -- priority
    json_extract(r.value, '$[7]'),  -- parent_id
    json_extract(r.value, '$[8]'),  -- root_id
    json_extract(r.value, '$[9]'),  -- correlation_id
    :now_ms + json_extract(r.value, '$[10]'),  -- delay_ms
    :now_ms,
    :now_ms
from json_each(:rows) as r;
