-- Filters (issue 31 item 3), as Mastodon's v2 filters: a titled filter with the contexts it
-- applies in, what it does (`warn`: the status carries `filtered` and clients fold it;
-- `hide`: the status is left out), an optional end, and its rules — keywords (whole word or
-- not) and statuses. Additive only: nothing older reads these tables.
CREATE TABLE filters (
    id          uuid        PRIMARY KEY,            -- v7 of its creation
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    title       text        NOT NULL CHECK (length(title) BETWEEN 1 AND 256),
    context     text[]      NOT NULL
        CHECK (cardinality(context) > 0
               AND context <@ ARRAY['home', 'notifications', 'public', 'thread', 'account']),
    action      text        NOT NULL DEFAULT 'warn' CHECK (action IN ('warn', 'hide')),
    expires_at  timestamptz,
    -- The end the expiry task last announced to the owner's streams (`filters_changed`): a
    -- redelivered message, or a second message for the same end, announces nothing again.
    expiry_announced timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
-- Every reader loads all of an account's filters at once.
CREATE INDEX filters_account ON filters (account_id, id);

CREATE TABLE filter_keywords (
    id          uuid        PRIMARY KEY,
    filter_id   uuid        NOT NULL REFERENCES filters (id) ON DELETE CASCADE,
    keyword     text        NOT NULL CHECK (length(keyword) BETWEEN 1 AND 512),
    whole_word  boolean     NOT NULL DEFAULT true
);
CREATE INDEX filter_keywords_filter ON filter_keywords (filter_id, id);

CREATE TABLE filter_statuses (
    id          uuid        PRIMARY KEY,
    filter_id   uuid        NOT NULL REFERENCES filters (id) ON DELETE CASCADE,
    status_id   uuid        NOT NULL,               -- any post (ours or theirs), by its id
    UNIQUE (filter_id, status_id)
);

-- Muted conversations (`POST /api/v1/statuses/:id/mute`): a thread, named by the IRI at its
-- top (the root post's, or the parent no one here has), stops notifying the account.
CREATE TABLE conversation_mutes (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    root_uri    text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, root_uri)
);

-- Streams: `filters` events (an account's filters changed or one ran out): its open streams
-- reload the filters, and its `user` streams tell the client (`filters_changed`).
ALTER TABLE stream_events
    DROP CONSTRAINT stream_events_kind_check,
    ADD CONSTRAINT stream_events_kind_check
        CHECK (kind IN ('home', 'notification', 'public', 'delete', 'revoke', 'list',
                        'relationship', 'filters')),
    DROP CONSTRAINT stream_events_event_check,
    ADD CONSTRAINT stream_events_event_check
        CHECK (event IN ('update', 'status.update', 'notification', 'delete', 'revoke',
                         'relationship', 'filters_changed'));
