-- inspect_tasks_older: a page of tasks, newest first, strictly older than a cursor,
-- for filters that match many rows. Ids are ULIDs led by the creation millisecond,
-- so id order is creation order, and walking the primary key costs about
-- page / share-of-matching-rows entries whatever the table size (no index covers
-- created_at_ms, and the schema is the protocol's). The filters are written
-- "(col = :p or :p is null)": no index serves that form, so SQLite keeps the
-- primary-key walk instead of sorting every match of a filter index. The id bounds
-- are a range the walk seeks whatever their values: an open one (NULL) is '' (before
-- every text) or x'' (a BLOB, after every text).
-- Params: :status, :queue, :name (NULL = any); :id_from, :id_to (an id-prefix
-- range, NULL = open); :before_id (the cursor, NULL = from the newest); :limit.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where (status = :status or :status is null)
  and (queue = :queue or :queue is null)
  and (name = :name or :name is null)
  and id >= coalesce(:id_from, '')
  and id < min(coalesce(:id_to, x''), coalesce(:before_id, x''))
order by id desc
limit :limit;
