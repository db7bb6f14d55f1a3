-- Streaming events (R-MAPI-5, issue 19 item 5): what the Mastodon streaming API tells connected
-- clients, across every web node. A producer writes the row and `pg_notify('hollo_stream', id)`
-- in one statement of its own transaction, so an event exists (and is heard) only if its cause
-- committed. Every web node LISTENs on `hollo_stream`, reads the rows it is told of, and renders
-- the payload per connection with the viewer's account at send time: rows hold ids, never
-- rendered JSON. A node that lost its LISTEN connection catches up from this table. Rows are
-- deleted after a few minutes (`streaming::listen::cleanup_loop`): a stream is live, not a
-- history.
CREATE TABLE stream_events (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- `home`: an entry new in (or a status edited in) the home timelines of `accounts`;
    -- `notification`: a notification of the one account in `accounts`; `public`: a public
    -- status, for the public, public:local/remote and hashtag streams; `delete`: a status is
    -- gone, for every stream.
    kind             text        NOT NULL
        CHECK (kind IN ('home', 'notification', 'public', 'delete')),
    -- Mastodon's event name.
    event            text        NOT NULL
        CHECK (event IN ('update', 'status.update', 'notification', 'delete')),
    -- Whose streams a `home` / `notification` event is for (one row for all of them, so a
    -- post reaching a thousand home timelines is one row and one NOTIFY); empty otherwise.
    accounts         uuid[]      NOT NULL DEFAULT '{}',
    -- The status shown (an entry id: a post or a boost), or the id deleted.
    post_id          uuid,
    notification_id  bigint,
    -- For `public`: whether the status is ours (public:local) and its hashtags (lowercased).
    local            boolean     NOT NULL DEFAULT false,
    tags             text[]      NOT NULL DEFAULT '{}'
);
CREATE INDEX stream_events_created ON stream_events (created_at);
