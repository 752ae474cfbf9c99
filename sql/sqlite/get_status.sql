-- get_status: just (id, status) of one task, or no row.
-- Params: :id
select t.id, t.status from cairnq_tasks as t where t.id = :id;
