-- inspect_keys_before: a page of the key table in reverse key order, before a cursor (the caller reverses it), optionally
-- limited to a prefix: a range seek on cairnq_task_keys' primary key, each key
-- joined to the task it points at (its status, name and queue). The bounds are
-- written so that an open one (NULL) is still a range the seek takes: '' sorts
-- before every text and x'' (a BLOB) after every text, so one plan serves every value.
-- Params: :key_from, :key_to (the prefix as a range, NULL = open); :before_key (the cursor);
-- :limit.
select k.key, k.task_id, t.status, t.name, t.queue, k.created_at_ms, k.updated_at_ms
from cairnq_task_keys k
left join cairnq_tasks t on t.id = k.task_id
where k.key >= coalesce(:key_from, '')
  and k.key < min(coalesce(:key_to, x''), coalesce(:before_key, x''))
order by k.key desc
limit :limit;
