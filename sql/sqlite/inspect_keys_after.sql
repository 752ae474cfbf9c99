-- inspect_keys_after: a page of the key table in key order, after a cursor, optionally
-- limited to a prefix: a range seek on cairnq_task_keys' primary key, each key
-- joined to the task it points at (its status, name and queue).
-- Params: :key_from, :key_to (the prefix as a range, NULL = open); :after_key (the cursor, NULL = from the first);
-- :limit.
select k.key, k.task_id, t.status, t.name, t.queue, k.created_at_ms, k.updated_at_ms
from cairnq_task_keys k
left join cairnq_tasks t on t.id = k.task_id
where (:key_from is null or k.key >= :key_from)
  and (:key_to is null or k.key < :key_to)
  and (:after_key is null or k.key > :after_key)
order by k.key asc
limit :limit;
