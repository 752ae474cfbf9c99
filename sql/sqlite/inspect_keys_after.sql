-- inspect_keys_after: a page of the key table in key order, after a cursor, optionally
-- limited to a prefix: a range seek on cairnq_task_keys' primary key, each key
-- joined to the task it points at (its status, name and queue). The bounds are
-- written so that an open one (NULL) is still a range the seek takes: '' sorts
-- before every text and x'' (a BLOB) after every text, so one plan serves every
-- value; the cursor's strict bound is then checked on the rows the seek yields.
-- Params: :key_from, :key_to (the prefix as a range, NULL = open); :after_key (the cursor, NULL = from the first);
-- :limit.
select k.key, k.task_id, t.status, t.name, t.queue, k.created_at_ms, k.updated_at_ms
from cairnq_task_keys k
left join cairnq_tasks t on t.id = k.task_id
where k.key >= max(coalesce(:key_from, ''), coalesce(:after_key, ''))
  and k.key < coalesce(:key_to, x'')
  and (:after_key is null or k.key > :after_key)
order by k.key asc
limit :limit;
