-- inspect_tasks_newer: a page of tasks, oldest first, just newer than a cursor (the caller reverses it),
-- for filters that match many rows. Ids are ULIDs led by the creation millisecond,
-- so id order is creation order, and walking the primary key costs about
-- page / share-of-matching-rows entries whatever the table size (no index covers
-- created_at_ms, and the schema is the protocol's). The filters are written
-- "(col = :p or :p is null)" on purpose: that form is not specialised, so SQLite
-- keeps the primary-key walk instead of sorting every match of a filter index.
-- Params: :status, :queue, :name (NULL = any); :id_from, :id_to (an id-prefix
-- range, NULL = open); :after_id (the cursor, NULL = from the oldest); :limit.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where (status = :status or :status is null)
  and (queue = :queue or :queue is null)
  and (name = :name or :name is null)
  and (:id_from is null or id >= :id_from)
  and (:id_to is null or id < :id_to)
  and (:after_id is null or id > :after_id)
order by id asc
limit :limit;
