-- The two PostgreSQL-backed queues (SPEC.md §2). Both tables share one shape so one engine
-- drives them. The columns the seed's monitoring SQL reads (id, message, delay, created) keep
-- their meaning: a row is *ready* when `created + delay <= now()`.
--
-- Unlike Fedify, a claimed row is not deleted: the claim pushes `delay` forward to the lease's
-- end and records the owner. A worker killed with SIGKILL therefore leaves rows that become due
-- again when the lease ends, and the monitoring SQL counts in-flight rows as "delayed" (they are
-- not claimable) rather than "ready".
--
-- Storage: the queues stay small and churn fast, so autovacuum runs every 1 000 changed rows
-- and unthrottled (cost delay 0): dead claim/delete versions are reclaimed before they slow the
-- `due` index scans of claims.
--
-- `due` mirrors `created + delay`: the expression is only STABLE in PostgreSQL (interval
-- arithmetic depends on the time zone), so it cannot be indexed; every statement that writes
-- `delay` writes `due` with it.

CREATE TABLE hollo_task_message_v1 (
    id            uuid        PRIMARY KEY,
    message       jsonb       NOT NULL,
    delay         interval    NOT NULL DEFAULT '0',
    created       timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    due           timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    kind          text        NOT NULL,
    coalesce_key  text,
    attempts      integer     NOT NULL DEFAULT 0,   -- recorded failures; a process exit never counts
    claims        integer     NOT NULL DEFAULT 0,   -- fencing token for lease holders
    lease_owner   uuid,
    ready_at      timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP  -- when it last became due; enqueue-to-start latency
) WITH (fillfactor = 70,
        autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 1000,
        autovacuum_analyze_scale_factor = 0.0, autovacuum_analyze_threshold = 1000,
        autovacuum_vacuum_cost_delay = 0);

CREATE INDEX hollo_task_message_v1_due ON hollo_task_message_v1 (due);
CREATE INDEX hollo_task_message_v1_kind_due ON hollo_task_message_v1 (kind, due);
CREATE UNIQUE INDEX hollo_task_message_v1_coalesce ON hollo_task_message_v1 (coalesce_key)
    WHERE coalesce_key IS NOT NULL;
-- No index on lease_owner: renewals, releases and completions find rows by id (the primary
-- key), and every index is one more write per claim (a claim moves `due`, so it is never a HOT
-- update). `due` serves claims of the general slots, `(kind, due)` the lanes' claims.

-- The activity queue has no lanes (sub-limits exist only among tasks), so its claims read
-- `due` alone and it gets no `(kind, due)` index: one index write less per claim on the busiest
-- queue. A lane added there later still works, by filtering the `due` scan.
CREATE TABLE hollo_activity_message_v1
    (LIKE hollo_task_message_v1 INCLUDING ALL EXCLUDING INDEXES, PRIMARY KEY (id))
    WITH (fillfactor = 70,
          autovacuum_vacuum_scale_factor = 0.0, autovacuum_vacuum_threshold = 1000,
          autovacuum_analyze_scale_factor = 0.0, autovacuum_analyze_threshold = 1000,
          autovacuum_vacuum_cost_delay = 0);
CREATE INDEX hollo_activity_message_v1_due ON hollo_activity_message_v1 (due);
CREATE UNIQUE INDEX hollo_activity_message_v1_coalesce ON hollo_activity_message_v1 (coalesce_key)
    WHERE coalesce_key IS NOT NULL;

-- Messages whose retry policy gave up. Kept for operators to inspect and replay.
CREATE TABLE hollo_failed_message (
    id          uuid        PRIMARY KEY,
    queue       text        NOT NULL,
    kind        text        NOT NULL,
    message     jsonb       NOT NULL,
    attempts    integer     NOT NULL,
    error       text        NOT NULL,
    created     timestamptz NOT NULL,
    failed_at   timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX hollo_failed_message_kind ON hollo_failed_message (kind, failed_at);

-- Live nodes (R-ROLE-4): one row per process, refreshed every few seconds.
CREATE TABLE hollo_node (
    node_id       uuid        PRIMARY KEY,
    role          text        NOT NULL,
    version       text        NOT NULL,
    task_definition_version integer NOT NULL,
    environment   text        NOT NULL,
    hostname      text        NOT NULL,
    pid           integer     NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    last_seen     timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    stopped_at    timestamptz,
    in_flight     jsonb       NOT NULL DEFAULT '{}'
);

-- The probe task (`hollo.probe.v1`): operators use it to prove workers consume, tests and
-- benchmarks to drive load. One row per key, written in the same transaction that completes
-- the message, so a recorded probe is never recorded twice.
CREATE TABLE hollo_probe_result (
    key         text        PRIMARY KEY,
    attempts    integer     NOT NULL,
    node_id     uuid        NOT NULL,
    enqueued_at timestamptz NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    duplicates  integer     NOT NULL DEFAULT 0
);
CREATE TABLE hollo_probe_counter (
    name  text   PRIMARY KEY,
    value bigint NOT NULL
);
