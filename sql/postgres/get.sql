-- get: one task by id, or no row. Params: %(id)s.
select * from cairnq_tasks where id = %(id)s::text
