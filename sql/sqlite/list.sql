-- list: tasks matching every supplied filter, newest first, paged.
-- SQLite plans a statement once, whatever its values, and seeks no index through
-- "(:p is null or col = :p)". So the statement is one branch per shape of the
-- filters, each guarded so that exactly one runs: each combination of queue,
-- status and name, written as the equalities that seek claim_name_idx, claim_idx,
-- name_idx or status_completed_idx; without those, a root id (root_idx), else a
-- correlation id (correlation_idx), else every task
-- (tests/engine/test_query_plans.py). A guard names only parameters, so SQLite
-- tests it once, before its branch reads a row: the branches whose guard is
-- false read nothing. Each branch sorts its own rows for the merge (a sorter each:
-- ~0.4 ms a call whichever runs; one sort of a subquery of the branches is cheaper
-- for a few rows but copies every row of a broad filter first, 20-40% slower).
-- "status = +:status": with a bare parameter SQLite weighs the value against the
-- partial lease index's "status = 'running'" and compiles the statement again at
-- each new status; the unary plus (same value) keeps the seek and the compiled plan.
-- Params: :status, :queue, :name, :root_id, :correlation_id (NULL = no filter),
--         :limit, :offset
select t.*
from cairnq_tasks as t
where :queue is not null and :status is not null and :name is not null
  and t.queue = :queue
  and t.status = +:status
  and t.name = :name
  and (:root_id is null or t.root_id = :root_id)
  and (:correlation_id is null or t.correlation_id = :correlation_id)
union all
select t.*
from cairnq_tasks as t
where :queue is not null and :status is not null and :name is null
  and t.queue = :queue
  and t.status = +:status
  and (:root_id is null or t.root_id = :root_id)
  and (:correlation_id is null or t.correlation_id = :correlation_id)
union all
select t.*
from cairnq_tasks as t
where :queue is not null and :status is null and :name is not null
  and t.queue = :queue
  and t.name = :name
  and (:root_id is null or t.root_id = :root_id)
  and (:correlation_id is null or t.correlation_id = :correlation_id)
union all
select t.*
from cairnq_tasks as t
where :queue is not null and :status is null and :name is null
  and t.queue = :queue
  and (:root_id is null or t.root_id = :root_id)
  and (:correlation_id is null or t.correlation_id = :correlation_id)
union all
select t.*
from cairnq_tasks as t
where :queue is null and :status is not null and :name is not null
  and t.status = +:status
  and t.name = :name
  and (:root_id is null or t.root_id = :root_id)
  and (:correlation_id is null or t.correlation_id = :correlation_id)
union all
select t.*
from cairnq_tasks as t
where :queue is null and :status is not null and :name is null
  and t.status = +:status
  and (:root_id is null or t.root_id = :root_id)
  and (:correlation_id is null or t.correlation_id = :correlation_id)
union all
select t.*
from cairnq_tasks as t
where :queue is null and :status is null and :name is not null
  and t.name = :name
  and (:root_id is null or t.root_id = :root_id)
  and (:correlation_id is null or t.correlation_id = :correlation_id)
union all
select t.*
from cairnq_tasks as t
where :queue is null and :status is null and :name is null
  and :root_id is not null
  and t.root_id = :root_id
  and (:correlation_id is null or t.correlation_id = :correlation_id)
union all
select t.*
from cairnq_tasks as t
where :queue is null and :status is null and :name is null
  and :root_id is null and :correlation_id is not null
  and t.correlation_id = :correlation_id
union all
select t.*
from cairnq_tasks as t
where :queue is null and :status is null and :name is null
  and :root_id is null and :correlation_id is null
order by created_at_ms desc, id desc
limit :limit offset :offset;
