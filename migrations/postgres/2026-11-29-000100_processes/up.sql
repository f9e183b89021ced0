-- The mercer processes running on this database, each registered once it has migrated and kept
-- up to date by its heartbeat: a binary with migrations to apply refuses to while processes of
-- another schema are alive here. A row whose last_seen is older than three of its own
-- heartbeats (heartbeat_ms) belongs to a process that died without removing it, and is ignored.
-- Times are microseconds since the Unix epoch.
CREATE TABLE processes (
    id TEXT PRIMARY KEY NOT NULL,
    version TEXT NOT NULL,
    schema_version TEXT NOT NULL,
    name TEXT NOT NULL,
    heartbeat_ms BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    last_seen BIGINT NOT NULL
);
