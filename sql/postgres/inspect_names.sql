-- inspect_names: distinct task names in name order (for completion), by a skip scan
-- over cairnq_tasks_name_idx: one seek per name, never a full scan.
-- Params: %(limit)s (the most names returned).
with recursive names(name) as (
    select min(name) from cairnq_tasks
    union all
    select (select min(t.name) from cairnq_tasks t where t.name > names.name)
    from names
    where names.name is not null
)
select name from names where name is not null
limit %(limit)s;
