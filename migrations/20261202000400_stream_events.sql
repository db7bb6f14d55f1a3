-- Streaming events (R-MAPI-5, issue 19): what the Mastodon streaming API tells connected
-- clients. A producer writes the row in its own transaction and sends `pg_notify` with its id
-- from the same transaction, so an event exists (and is heard) only if its cause committed.
-- Every web node LISTENs on `hollo_stream`, reads the row, and renders the payload per
-- connection with the viewer's account at send time; rows keep ids only, never rendered JSON.
-- A node that lost its LISTEN connection catches up from the ids it has seen. Rows are
-- deleted after a while (`streaming::cleanup`): a stream is live, not a history.
CREATE TABLE stream_events (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- `user` (a home timeline entry or a deletion for one account), `notification` (one
    -- account's), `public` (a new public status: the public, public:local and hashtag
    -- streams), `delete` (a status is gone: every stream).
    kind             text        NOT NULL
        CHECK (kind IN ('user', 'notification', 'public', 'delete')),
    -- Mastodon's event name: update, notification, delete, status.update.
    event            text        NOT NULL,
    -- The account a `user` / `notification` event is for; NULL for everyone's streams.
    account_id       uuid,
    -- The status shown (an `update`), or the id deleted.
    post_id          uuid,
    notification_id  bigint,
    -- For `public`: whether the status is ours (public:local) and its hashtags (lowercased).
    local            boolean     NOT NULL DEFAULT false,
    tags             text[]      NOT NULL DEFAULT '{}'
);
CREATE INDEX stream_events_created ON stream_events (created_at);
