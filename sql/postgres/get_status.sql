-- get_status: just (id, status) of one task, the cheap probe waits poll with.
-- Params: :id.
select id, status from cairnq_tasks where id = :id::text
