-- 0001_init.sql (Postgres): the three protocol tables, the first index set, the
-- two meta rows. Constraints are declared inline and unnamed on purpose: the
-- generated names (cairnq_tasks_pkey, cairnq_tasks_status_check, ...) are part of
-- what other SDKs expect to find. Every creation is "if not exists" so a partly
-- migrated database converges. Time columns are bigint epoch milliseconds.
create table if not exists cairnq_tasks (
    id text primary key,
    name text not null,
    queue text not null default 'default',
    status text not null
        check (status in ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    payload jsonb not null,
    result jsonb,
    error jsonb,
    metadata jsonb not null default '{}'::jsonb,
    progress double precision,
    message text,
    attempt integer not null default 0,
    max_attempts integer not null default 3,
    priority integer not null default 0,
    worker_id text,
    lease_until_ms bigint,
    run_at_ms bigint not null,
    cancel_requested_at_ms bigint,
    parent_id text,
    root_id text,
    correlation_id text,
    created_at_ms bigint not null,
    updated_at_ms bigint not null,
    completed_at_ms bigint
);

-- The claim index in its first shape; 0008 rebuilds it ordered by due time.
create index if not exists cairnq_tasks_claim_idx
    on cairnq_tasks (queue, status, priority desc, created_at_ms);
-- Dropped again by 0010; created here so the history matches every other SDK.
create index if not exists cairnq_tasks_status_idx on cairnq_tasks (status);
create index if not exists cairnq_tasks_name_idx on cairnq_tasks (name);
create index if not exists cairnq_tasks_root_idx on cairnq_tasks (root_id);
create index if not exists cairnq_tasks_correlation_idx on cairnq_tasks (correlation_id);

-- A key points at the task currently standing for it; purging the task frees it.
create table if not exists cairnq_task_keys (
    key text primary key,
    task_id text not null references cairnq_tasks (id) on delete cascade,
    created_at_ms bigint not null,
    updated_at_ms bigint not null
);

create table if not exists cairnq_meta (
    key text primary key,
    value text not null
);

-- Seed only: a database touched by a newer SDK keeps its values.
insert into cairnq_meta (key, value) values ('protocol_version', '1')
on conflict (key) do nothing;
insert into cairnq_meta (key, value) values ('schema_version', '1')
on conflict (key) do nothing;
