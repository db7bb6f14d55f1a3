-- no-transaction
-- The activity queue's `(kind, due)` index (R-Q-3). Deliveries have had slots of their own
-- since the activity table was made (`DELIVERY_CONCURRENCY`): that consumer claims only
-- `hollo.deliver.v1`, the activity consumer only the others, so each one's claim read the `due`
-- index past every due row of the other's kinds. 200 000 inbox activities due made each
-- delivery claim walk all of them: `hollo-bench --backlog 200000` drained 720 jobs/s instead
-- of 22 000. With this index a claim reads its own kinds only (`queue/claim.rs`).
-- CONCURRENTLY: the table is the busiest one and keeps being written while this runs; it
-- must be the file's only statement (it cannot run in a transaction).
CREATE INDEX CONCURRENTLY IF NOT EXISTS hollo_activity_message_v1_kind_due
    ON hollo_activity_message_v1 (kind, due);
