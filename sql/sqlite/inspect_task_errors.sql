-- inspect_task_errors: the error envelope's type and message of the listed tasks that
-- are failed, or queued again after an error (a retry pending), for the error
-- columns of a page. One primary-key lookup per id. Params: :ids (a JSON array).
select id, json_extract(error, '$.type') as error_type,
       substr(json_extract(error, '$.message'), 1, 2000) as error_message
from cairnq_tasks
where id in (select value from json_each(:ids))
  and status in ('failed', 'queued')
  and error is not null;
