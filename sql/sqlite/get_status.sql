-- get_status: just (id, status) of one task, or no row.
-- Params: :id
select id, status from cairnq_tasks where id = :id;
