-- inspect_tasks_newer: a page of tasks, oldest first, just newer than a cursor (the caller reverses it),
-- for filters that match many rows. Ids are ULIDs led by the creation millisecond,
-- so id order is creation order, and walking the primary key costs about
-- page / share-of-matching-rows entries whatever the table size (no index covers
-- created_at_ms, and the schema is the protocol's). The filters are written
-- "(col = :p or :p is null)": no index serves that form, so SQLite keeps the
-- primary-key walk instead of sorting every match of a filter index. The id bounds
-- are a range the walk seeks whatever their values: an open one (NULL) is '' (before
-- every text) or x'' (a BLOB, after every text); the cursor's strict bound is then
-- checked on the rows the seek yields.
-- Params: :status, :queue, :name (NULL = any); :id_from, :id_to (an id-prefix
-- range, NULL = open); :after_id (the cursor, NULL = from the oldest); :limit.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where (status = :status or :status is null)
  and (queue = :queue or :queue is null)
  and (name = :name or :name is null)
  and id >= max(coalesce(:id_from, ''), coalesce(:after_id, ''))
  and id < coalesce(:id_to, x'')
  and (:after_id is null or id > :after_id)
order by id asc
limit :limit;
