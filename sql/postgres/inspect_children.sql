-- inspect_children: the tasks submitted from a task. A child shares its parent's
-- root_id, so cairnq_tasks_root_idx narrows the search to one tree.
-- Params: %(root_id)s, %(parent_id)s, %(limit)s.
select id, name, queue, status, created_at_ms
from cairnq_tasks
where root_id = %(root_id)s and parent_id = %(parent_id)s
order by id
limit %(limit)s;
