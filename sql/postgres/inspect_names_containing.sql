-- inspect_names_containing: the distinct task names that contain %(text)s (the console's
-- name filter), in name order. A skip scan over cairnq_tasks_name_idx visits at most
-- %(scan)s distinct names (one seek each), so the cost is bounded whatever the table
-- size; the text is matched as plain text, so % and _ in it match themselves.
-- Params: %(text)s; %(scan)s (names visited at most); %(limit)s (names returned at most).
with recursive names(name, visited) as (
    select min(name), 1 from cairnq_tasks
    union all
    select (select min(t.name) from cairnq_tasks t where t.name > names.name), visited + 1
    from names
    where names.name is not null and visited < %(scan)s::bigint
)
select name from names
where name is not null and strpos(name, %(text)s::text) > 0
limit %(limit)s;
