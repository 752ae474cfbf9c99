-- 0001_init: the three protocol tables, the first indexes and the meta rows.
-- The claim index is created in its first shape; 0008 replaces it.
CREATE TABLE IF NOT EXISTS cairnq_tasks (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    queue TEXT NOT NULL DEFAULT 'default',
    status TEXT NOT NULL
        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    payload TEXT NOT NULL CHECK (json_valid(payload)),
    result TEXT CHECK (result IS NULL OR json_valid(result)),
    error TEXT CHECK (error IS NULL OR json_valid(error)),
    metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    progress REAL,
    message TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 3,
    priority INTEGER NOT NULL DEFAULT 0,
    worker_id TEXT,
    lease_until_ms INTEGER,
    run_at_ms INTEGER NOT NULL,
    cancel_requested_at_ms INTEGER,
    parent_id TEXT,
    root_id TEXT,
    correlation_id TEXT,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    completed_at_ms INTEGER
);

CREATE TABLE IF NOT EXISTS cairnq_task_keys (
    key TEXT PRIMARY KEY,
    task_id TEXT NOT NULL REFERENCES cairnq_tasks (id) ON DELETE CASCADE,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS cairnq_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS cairnq_tasks_claim_idx
    ON cairnq_tasks (queue, status, priority DESC, created_at_ms);
CREATE INDEX IF NOT EXISTS cairnq_tasks_status_idx ON cairnq_tasks (status);
CREATE INDEX IF NOT EXISTS cairnq_tasks_name_idx ON cairnq_tasks (name);
CREATE INDEX IF NOT EXISTS cairnq_tasks_root_idx ON cairnq_tasks (root_id);
CREATE INDEX IF NOT EXISTS cairnq_tasks_correlation_idx ON cairnq_tasks (correlation_id);

INSERT INTO cairnq_meta (key, value) VALUES ('protocol_version', '1')
    ON CONFLICT (key) DO NOTHING;
INSERT INTO cairnq_meta (key, value) VALUES ('schema_version', '1')
    ON CONFLICT (key) DO NOTHING;
