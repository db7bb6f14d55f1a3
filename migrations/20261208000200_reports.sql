-- Reports (R-MAPI-6, Mastodon's `POST /api/v1/reports` and its admin list): one account's
-- complaint about another, made here by a local account or received as an ActivityPub `Flag`
-- from another server about one of ours. Additive only: nothing older reads this table, and
-- the relaxed NOT NULL below only admits rows older binaries never write.
CREATE TABLE reports (
    id                uuid        PRIMARY KEY,            -- v7 of its creation
    -- Who reports: a local account, or (a `Flag` received) a remote actor's IRI.
    account_id        uuid        REFERENCES accounts (id) ON DELETE CASCADE,
    reporter_iri      text,
    -- Whom: the Account entity id (local account, or `remote_actors.id`) and its actor IRI.
    target_account_id uuid        NOT NULL,
    target_iri        text        NOT NULL,
    -- The statuses named (posts view ids; a received `Flag` names ours by IRI).
    status_ids        uuid[]      NOT NULL DEFAULT '{}',
    comment           text        NOT NULL DEFAULT '',
    category          text        NOT NULL DEFAULT 'other'
                      CHECK (category IN ('spam', 'legal', 'violation', 'other')),
    -- A local report sent to the target's server as a `Flag` (from the instance actor).
    forwarded         boolean     NOT NULL DEFAULT false,
    -- A received `Flag`'s id: a redelivery stores nothing more.
    flag_id           text,
    action_taken_at   timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CHECK ((account_id IS NULL) <> (reporter_iri IS NULL)),
    CHECK (char_length(comment) <= 5000)
);
-- The admin's list: open ones first, newest first, paged by id.
CREATE INDEX reports_listed ON reports ((action_taken_at IS NOT NULL), id);
CREATE UNIQUE INDEX reports_flag ON reports (flag_id, target_account_id) WHERE flag_id IS NOT NULL;

-- An activity the instance actor sends (a forwarded report's `Flag`) has no account: Mastodon
-- sends reports from its instance actor, so the reporter stays unnamed to the other server.
ALTER TABLE outbox_activities ALTER COLUMN account_id DROP NOT NULL;
