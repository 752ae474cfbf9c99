-- get_status: just (id, status) of one task, the cheap probe waits poll with.
-- Params: %(id)s.
select id, status from cairnq_tasks where id = %(id)s::text
