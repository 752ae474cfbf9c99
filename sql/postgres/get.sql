-- get: one task by id, or no row. Params: :id.
select * from cairnq_tasks where id = :id::text
