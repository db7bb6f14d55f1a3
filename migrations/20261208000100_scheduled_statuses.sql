-- Scheduled statuses (R-MAPI-6, Mastodon's `scheduled_at`): a status an account asked to be
-- published later, kept as the request's validated parameters until a worker publishes it
-- (`hollo.scheduled-status.v1`, queued in the same transaction as the row). Publishing
-- deletes the row in the transaction that writes the status, so it happens once. Additive
-- only: nothing older reads these tables or the new column.
CREATE TABLE scheduled_statuses (
    id              uuid        PRIMARY KEY,            -- v7 of its creation
    account_id      uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    scheduled_at    timestamptz NOT NULL,
    -- Mastodon's ScheduledStatus `params` as we validated them (text, visibility, poll, …).
    params          jsonb       NOT NULL,
    -- A retried `POST /api/v1/statuses` with the same `Idempotency-Key` answers this row.
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
-- The owner's list, newest first, paged by id.
CREATE INDEX scheduled_statuses_account ON scheduled_statuses (account_id, id);
-- The per-day limit counts an account's rows by their day.
CREATE INDEX scheduled_statuses_account_day ON scheduled_statuses (account_id, scheduled_at);
CREATE UNIQUE INDEX scheduled_statuses_idempotency
    ON scheduled_statuses (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- An upload a scheduled status will attach: kept from the stale-upload cleanup and from being
-- attached elsewhere until it is published (then `status_id` takes over) or cancelled.
ALTER TABLE media_attachments
    ADD COLUMN scheduled_status_id uuid REFERENCES scheduled_statuses (id) ON DELETE SET NULL;
CREATE INDEX media_attachments_scheduled ON media_attachments (scheduled_status_id)
    WHERE scheduled_status_id IS NOT NULL;
