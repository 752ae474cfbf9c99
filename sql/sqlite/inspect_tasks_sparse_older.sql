-- inspect_tasks_sparse_older: a page of tasks, newest first, strictly older than a cursor,
-- for filters that match few rows (the caller knows from inspect_count_tasks). A
-- covering index (claim, claim_name, name, status_completed) finds the matching
-- ids; an id range the primary key when bounded on both sides (a prefix, a time
-- range, or one bound and the cursor) or from a "since" time with no filter but
-- the status (which matches a large share of the rows); "+id" keeps SQLite from
-- walking the primary key instead; only the page's rows are then read in full.
-- SQLite plans a statement once, whatever its values, so each shape of the
-- filters is a branch written as the equalities that seek its index, guarded so
-- that exactly one runs (a guard names only parameters: SQLite tests it before
-- its branch reads a row). Without a filter, the id bounds are a range of the
-- primary key ('' and x'' stand for open bounds: they sort before and after every text).
-- "status = +:status": with a bare parameter SQLite weighs the value against the
-- partial lease index's "status = 'running'" and compiles the statement again at
-- each new status; the unary plus (same value) keeps the seek and the compiled plan.
-- Params: :status, :queue, :name (NULL = any); :id_from, :id_to (an id-prefix
-- range, NULL = open); :before_id (the cursor, NULL = from the newest); :limit.
select id, name, queue, status, attempt, max_attempts, priority, worker_id, lease_until_ms,
       run_at_ms, cancel_requested_at_ms, progress, substr(message, 1, 200) as message,
       created_at_ms, updated_at_ms, completed_at_ms
from cairnq_tasks
where id in (
    select id from (
        select id from cairnq_tasks
        where (:id_from is not null
               and (:id_to is not null or :before_id is not null
                    or (:queue is null and :name is null)))
          and id >= :id_from and id < min(coalesce(:id_to, x''), coalesce(:before_id, x''))
          and (:status is null or status = :status)
          and (:queue is null or queue = :queue)
          and (:name is null or name = :name)
        union all
        select id from cairnq_tasks
        where not (:id_from is not null
               and (:id_to is not null or :before_id is not null
                    or (:queue is null and :name is null)))
          and :queue is not null and :status is not null and :name is not null
          and queue = :queue
          and status = +:status
          and name = :name
          and (:id_from is null or id >= :id_from)
          and (:id_to is null or id < :id_to)
          and (:before_id is null or id < :before_id)
        union all
        select id from cairnq_tasks
        where not (:id_from is not null
               and (:id_to is not null or :before_id is not null
                    or (:queue is null and :name is null)))
          and :queue is not null and :status is not null and :name is null
          and queue = :queue
          and status = +:status
          and (:id_from is null or id >= :id_from)
          and (:id_to is null or id < :id_to)
          and (:before_id is null or id < :before_id)
        union all
        select id from cairnq_tasks
        where not (:id_from is not null
               and (:id_to is not null or :before_id is not null
                    or (:queue is null and :name is null)))
          and :queue is not null and :status is null and :name is not null
          and queue = :queue
          and name = :name
          and (:id_from is null or id >= :id_from)
          and (:id_to is null or id < :id_to)
          and (:before_id is null or id < :before_id)
        union all
        select id from cairnq_tasks
        where not (:id_from is not null
               and (:id_to is not null or :before_id is not null
                    or (:queue is null and :name is null)))
          and :queue is not null and :status is null and :name is null
          and queue = :queue
          and (:id_from is null or id >= :id_from)
          and (:id_to is null or id < :id_to)
          and (:before_id is null or id < :before_id)
        union all
        select id from cairnq_tasks
        where not (:id_from is not null
               and (:id_to is not null or :before_id is not null
                    or (:queue is null and :name is null)))
          and :queue is null and :status is not null and :name is not null
          and status = +:status
          and name = :name
          and (:id_from is null or id >= :id_from)
          and (:id_to is null or id < :id_to)
          and (:before_id is null or id < :before_id)
        union all
        select id from cairnq_tasks
        where not (:id_from is not null
               and (:id_to is not null or :before_id is not null
                    or (:queue is null and :name is null)))
          and :queue is null and :status is not null and :name is null
          and status = +:status
          and (:id_from is null or id >= :id_from)
          and (:id_to is null or id < :id_to)
          and (:before_id is null or id < :before_id)
        union all
        select id from cairnq_tasks
        where not (:id_from is not null
               and (:id_to is not null or :before_id is not null
                    or (:queue is null and :name is null)))
          and :queue is null and :status is null and :name is not null
          and name = :name
          and (:id_from is null or id >= :id_from)
          and (:id_to is null or id < :id_to)
          and (:before_id is null or id < :before_id)
        union all
        select id from cairnq_tasks
        where not (:id_from is not null
               and (:id_to is not null or :before_id is not null
                    or (:queue is null and :name is null)))
          and :queue is null and :status is null and :name is null
          and id >= coalesce(:id_from, '')
          and id < min(coalesce(:id_to, x''), coalesce(:before_id, x''))
    )
    order by +id desc
    limit :limit
)
order by id desc;
