-- get: the full row of one task, or no row.
-- Params: :id
select t.* from cairnq_tasks as t where t.id = :id;
