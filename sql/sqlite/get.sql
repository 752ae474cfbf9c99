-- get: the full row of one task, or no row.
-- Params: :id
select * from cairnq_tasks where id = :id;
