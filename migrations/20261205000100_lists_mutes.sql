-- Lists and mutes in the client API (issue 31 items 1 and 2). The tables came with the CSV
-- import (issue 5); this gives them what Mastodon's API shows and pages by.

-- Mastodon's List entity: which replies reach the list, and whether its members' posts stay
-- out of the home timeline.
ALTER TABLE lists
    ADD COLUMN replies_policy text NOT NULL DEFAULT 'list'
        CHECK (replies_policy IN ('followed', 'list', 'none')),
    ADD COLUMN exclusive boolean NOT NULL DEFAULT false;

-- `GET /api/v1/lists/:id/accounts` pages by membership, newest first; "which lists hold this
-- account" (fan-out, `GET /api/v1/accounts/:id/lists`, an unfollow) looks members up by IRI.
ALTER TABLE list_members ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;
CREATE UNIQUE INDEX list_members_id ON list_members (list_id, id);
CREATE INDEX list_members_target ON list_members (target_iri);

-- List timelines, written when a post or boost reaches its owner's home (fan-in on write, as
-- `home_feed`): a page is one range scan of (list_id, entry_id). `source` is the member whose
-- post or boost it is, so removing a member removes theirs.
CREATE TABLE list_feed (
    list_id     uuid        NOT NULL REFERENCES lists (id) ON DELETE CASCADE,
    entry_id    uuid        NOT NULL,
    post_id     uuid        NOT NULL,
    source      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (list_id, entry_id)
);
CREATE INDEX list_feed_post ON list_feed (post_id);
CREATE INDEX list_feed_source ON list_feed (list_id, source);

-- Mutes: an ordered id for `GET /api/v1/mutes`, and an optional end. A mute whose
-- `expires_at` has passed hides nothing (every reader checks it), and a queued task removes
-- the row after that moment.
ALTER TABLE account_mutes
    ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY,
    ADD COLUMN expires_at timestamptz;
CREATE UNIQUE INDEX account_mutes_account_id ON account_mutes (account_id, id);
CREATE INDEX account_mutes_expiring ON account_mutes (expires_at) WHERE expires_at IS NOT NULL;

-- Streams: `list` events (an entry new in some lists, named in `lists`) and `relationship`
-- events (an account's mutes or blocks changed: its open streams reload what they hide).
-- `authors` are the accounts an event is by (a status's author, a boost's booster and the
-- boosted post's author, a notification's sender), so each stream leaves out what its
-- reader mutes or blocks without reading the status again.
ALTER TABLE stream_events
    DROP CONSTRAINT stream_events_kind_check,
    ADD CONSTRAINT stream_events_kind_check
        CHECK (kind IN ('home', 'notification', 'public', 'delete', 'revoke', 'list',
                        'relationship')),
    DROP CONSTRAINT stream_events_event_check,
    ADD CONSTRAINT stream_events_event_check
        CHECK (event IN ('update', 'status.update', 'notification', 'delete', 'revoke',
                         'relationship')),
    ADD COLUMN lists uuid[] NOT NULL DEFAULT '{}',
    ADD COLUMN authors uuid[] NOT NULL DEFAULT '{}';
