-- inspect_task_errors: the error envelope's type and message of the listed tasks that
-- are failed, or queued again after an error (a retry pending), for the error
-- columns of a page. One primary-key lookup per id. Params: %(ids)s (a text array).
select id, error ->> 'type' as error_type,
       left(error ->> 'message', 2000) as error_message
from cairnq_tasks
where id = any(%(ids)s::text[])
  and status in ('failed', 'queued')
  and error is not null;
