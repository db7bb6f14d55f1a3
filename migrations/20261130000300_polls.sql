-- Local posts with polls, votes (local and remote), notifications, and the shared cursor of
-- recovery scans (SPEC.md §7, issue 6).
--
-- Never twice: a notification is unique per (poll, account). Never lost: a poll whose expiry
-- has passed and that has no `notified_at` is found by the recovery scan, whatever happened to
-- its queue message (deferred at the cap, evicted, failed, never enqueued).

CREATE TABLE statuses (
    id          uuid        PRIMARY KEY,
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    uri         text        NOT NULL UNIQUE,   -- ActivityPub id; remote votes reply to it
    content     text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    edited_at   timestamptz
);
CREATE INDEX statuses_account ON statuses (account_id, created_at);

CREATE TABLE polls (
    id           uuid        PRIMARY KEY,
    status_id    uuid        NOT NULL UNIQUE REFERENCES statuses (id) ON DELETE CASCADE,
    options      jsonb       NOT NULL,          -- array of option titles
    multiple     boolean     NOT NULL DEFAULT false,
    expires_at   timestamptz NOT NULL,
    -- Set in the transaction that writes the poll's notifications (and completes its message).
    notified_at  timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);
-- What recovery scans: expired polls without notifications, in (expires_at, id) order.
CREATE INDEX polls_unnotified ON polls (expires_at, id) WHERE notified_at IS NULL;

-- One row per chosen option. A voter is a local account or a remote actor, never both.
CREATE TABLE poll_votes (
    poll_id     uuid        NOT NULL REFERENCES polls (id) ON DELETE CASCADE,
    account_id  uuid        REFERENCES accounts (id) ON DELETE CASCADE,
    actor_iri   text,
    choice      integer     NOT NULL CHECK (choice >= 0),
    activity_id text,                           -- the remote vote's Create, for the record
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((account_id IS NULL) <> (actor_iri IS NULL))
);
CREATE UNIQUE INDEX poll_votes_local ON poll_votes (poll_id, account_id, choice)
    WHERE account_id IS NOT NULL;
CREATE UNIQUE INDEX poll_votes_remote ON poll_votes (poll_id, actor_iri, choice)
    WHERE actor_iri IS NOT NULL;
CREATE INDEX poll_votes_account ON poll_votes (account_id) WHERE account_id IS NOT NULL;

CREATE TABLE notifications (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    type        text        NOT NULL,
    poll_id     uuid        REFERENCES polls (id) ON DELETE CASCADE,
    status_id   uuid        REFERENCES statuses (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_account ON notifications (account_id, id);
-- R-POLL-2: at most one poll notification per (poll, account), whatever runs twice.
CREATE UNIQUE INDEX notifications_poll_once ON notifications (poll_id, account_id)
    WHERE type = 'poll';

-- Cursors of recovery scans, shared by every node so pages advance across the cluster.
CREATE TABLE hollo_recovery_cursor (
    name           text        PRIMARY KEY,
    after_expires  timestamptz,
    after_id       uuid,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
