-- purge_ids: delete the listed tasks that are finished (succeeded, failed,
-- canceled); live ones and unknown ids are left alone. Their key rows go with them
-- (on delete cascade). One primary-key lookup per id. Params: %(ids)s (a text array)
delete from cairnq_tasks
where id = any(%(ids)s::text[])
  and status in ('succeeded', 'failed', 'canceled')
returning id
