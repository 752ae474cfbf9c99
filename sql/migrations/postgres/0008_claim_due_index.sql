-- 0008_claim_due_index.sql (Postgres): both claim indexes in their final shape,
-- ordered exactly like the claim (priority desc, run_at_ms, id) so a draw reads
-- due rows first instead of walking delayed ones. Same names, new definitions,
-- hence drop-then-create (an "if not exists" would keep the old shape).
drop index if exists cairnq_tasks_claim_idx;
create index cairnq_tasks_claim_idx
    on cairnq_tasks (queue, status, priority desc, run_at_ms, id);

drop index if exists cairnq_tasks_claim_name_idx;
create index cairnq_tasks_claim_name_idx
    on cairnq_tasks (queue, status, name, priority desc, run_at_ms, id);

update cairnq_meta set value = '8' where key = 'schema_version';
