-- get_key: the task id a key points at, or no row. Params: %(key)s.
select task_id from cairnq_task_keys where key = %(key)s::text
