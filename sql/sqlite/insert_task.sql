-- insert_task: add one queued task (docs/protocol-notes.md, Statements). No RETURNING: the
-- application chose every value, so the store builds the row from what it bound
-- (RETURNING costs ~10 µs per row here, a third of a batched insert).
-- Params: :id, :name, :queue, :payload, :metadata, :max_attempts, :priority,
--         :parent_id, :root_id, :correlation_id, :delay_ms (relative), :now_ms
--         (the names Postgres' insert_task takes, plus the clock)
insert into cairnq_tasks
    (id, queue, name, status,
     payload, metadata,
     priority, max_attempts,
     parent_id, root_id, correlation_id,
     run_at_ms, created_at_ms, updated_at_ms)
values
    (:id, :queue, :name, 'queued',
     :payload, :metadata,
     :priority, :max_attempts,
     :parent_id, :root_id, :correlation_id,
     :now_ms + :delay_ms, :now_ms, :now_ms);
