-- Statuses as Mastodon apps use them (SPEC §11, R-MAPI-3/4, issue 19): the attributes clients
-- show and servers address by, one id space for local and remote posts, interactions,
-- timelines written when a post arrives, markers and richer notifications.
--
-- One id space: a status id is a UUID naming a row of `statuses` (ours) or `remote_posts`
-- (theirs), or a row of `reblogs` (a boost, which Mastodon shows as a status of its own). The
-- ids are UUIDv7 minted from the post's time, so ordering by id is ordering by time: that is how
-- Mastodon's max_id/since_id/min_id paginate, and why a timeline page is one index range scan.

-- A UUIDv7 whose time part is `ts` (PostgreSQL 15 has no uuidv7()): random v4 bytes with the
-- millisecond timestamp laid over the first six and the version nibble set to 7.
CREATE FUNCTION hollo_uuid_v7(ts timestamptz) RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM ts) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

ALTER TABLE statuses
    ADD COLUMN visibility      text    NOT NULL DEFAULT 'public'
        CHECK (visibility IN ('public', 'unlisted', 'private', 'direct')),
    ADD COLUMN spoiler_text    text    NOT NULL DEFAULT '',
    ADD COLUMN sensitive       boolean NOT NULL DEFAULT false,
    ADD COLUMN language        text,
    -- The parent's IRI (ours or theirs) is always kept; its id is found through `posts`.
    ADD COLUMN in_reply_to_uri text,
    -- {"name", "website"} of the OAuth app that posted it (Mastodon's `application`).
    ADD COLUMN application     jsonb,
    -- Hashtags of the text, lowercased, for the tag timeline (`content::render` finds them).
    ADD COLUMN tags            text[]  NOT NULL DEFAULT '{}',
    -- Local accounts it addresses beyond its visibility (the mentioned ones): who may read a
    -- followers-only or direct status besides its author.
    ADD COLUMN audience        uuid[]  NOT NULL DEFAULT '{}';
CREATE INDEX statuses_in_reply_to ON statuses (in_reply_to_uri) WHERE in_reply_to_uri IS NOT NULL;
CREATE INDEX statuses_tags ON statuses USING gin (tags);

-- What a status looked like before each edit (`GET /api/v1/statuses/:id/history`).
CREATE TABLE status_edits (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status_id     uuid        NOT NULL REFERENCES statuses (id) ON DELETE CASCADE,
    content       text        NOT NULL,
    spoiler_text  text        NOT NULL DEFAULT '',
    sensitive     boolean     NOT NULL DEFAULT false,
    poll_options  jsonb,
    created_at    timestamptz NOT NULL               -- when this version was written
);
CREATE INDEX status_edits_status ON status_edits (status_id, id);

-- `Idempotency-Key`: a retried post is stored once (Mastodon keeps keys for an hour).
CREATE TABLE status_idempotency (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key         text        NOT NULL,
    status_id   uuid        NOT NULL REFERENCES statuses (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, key)
);

-- A deleted local status answers 410 with a Tombstone at its URI.
CREATE TABLE status_tombstones (
    uri         text        PRIMARY KEY,
    deleted_at  timestamptz NOT NULL DEFAULT now()
);

-- Remote posts get what the API shows and what reads must honour. Their ids so far were v4;
-- they become v7 from the post's time so they sort with ours.
ALTER TABLE remote_posts
    ADD COLUMN visibility   text    NOT NULL DEFAULT 'public'
        CHECK (visibility IN ('public', 'unlisted', 'private', 'direct')),
    ADD COLUMN sensitive    boolean NOT NULL DEFAULT false,
    ADD COLUMN language     text,
    -- [{"href": actor IRI, "name": "@user@host"}] from the `Mention` tags.
    ADD COLUMN mentions     jsonb   NOT NULL DEFAULT '[]',
    ADD COLUMN tags         text[]  NOT NULL DEFAULT '{}',
    -- ActivityPub `Document`s as received (http(s) urls only).
    ADD COLUMN attachments  jsonb   NOT NULL DEFAULT '[]',
    -- Local accounts the post addresses (to/cc/mentions), so direct and followers-only posts
    -- reach exactly them.
    ADD COLUMN audience     uuid[]  NOT NULL DEFAULT '{}',
    ADD COLUMN edited_at    timestamptz;
UPDATE remote_posts SET id = hollo_uuid_v7(coalesce(published, created_at));
ALTER TABLE remote_posts ALTER COLUMN id SET DEFAULT hollo_uuid_v7(now());
CREATE INDEX remote_posts_tags ON remote_posts USING gin (tags);
CREATE INDEX remote_posts_public ON remote_posts (id) WHERE visibility = 'public' AND deleted_at IS NULL;

-- Every post that can be shown, ours and theirs, under one set of column names. `author_id` is
-- the Account entity's id (a local account's id, or the remote actor's stable id). Who may
-- read one is one rule (`statuses::access`): public and unlisted, everyone; otherwise its
-- local author and the local accounts in `audience`.
CREATE VIEW posts AS
    SELECT s.id, s.uri, true AS local, s.account_id, NULL::text AS actor_iri,
           s.account_id AS author_id, s.visibility, s.created_at, s.in_reply_to_uri, s.tags,
           s.audience
      FROM statuses s
    UNION ALL
    SELECT r.id, r.iri, false, NULL, r.actor, ra.id, r.visibility,
           coalesce(r.published, r.created_at), r.in_reply_to, r.tags, r.audience
      FROM remote_posts r JOIN remote_actors ra ON ra.iri = r.actor
     WHERE r.deleted_at IS NULL;

-- Favourites by local accounts (of any post). Remote `Like`s of our posts stay in
-- remote_interactions.
CREATE TABLE favourites (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- paginates /favourites
    account_id   uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    post_id      uuid        NOT NULL,
    post_uri     text        NOT NULL,
    activity_id  text        NOT NULL UNIQUE,   -- our Like, so the Undo names it
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, post_id)
);
CREATE INDEX favourites_post ON favourites (post_id);

-- Boosts, ours (`account_id`) and theirs (`actor_iri`, an `Announce` received). A boost is a
-- status of its own in timelines: its `id` is what home entries and GET /statuses/:id name.
CREATE TABLE reblogs (
    id           uuid        PRIMARY KEY,        -- v7 of when it was boosted
    post_id      uuid        NOT NULL,
    post_uri     text        NOT NULL,
    account_id   uuid        REFERENCES accounts (id) ON DELETE CASCADE,
    actor_iri    text,
    activity_id  text        NOT NULL UNIQUE,
    visibility   text        NOT NULL DEFAULT 'public',
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK ((account_id IS NULL) <> (actor_iri IS NULL))
);
CREATE UNIQUE INDEX reblogs_local ON reblogs (account_id, post_id) WHERE account_id IS NOT NULL;
CREATE UNIQUE INDEX reblogs_remote ON reblogs (actor_iri, post_id) WHERE actor_iri IS NOT NULL;
CREATE INDEX reblogs_post ON reblogs (post_id);

-- Bookmarks (from imports, by post IRI) get an order for /api/v1/bookmarks and the post id.
ALTER TABLE bookmarks
    ADD COLUMN id      bigint GENERATED ALWAYS AS IDENTITY,
    ADD COLUMN post_id uuid;
CREATE UNIQUE INDEX bookmarks_id ON bookmarks (account_id, id);

-- Home timelines, written when a post or boost arrives (fan-in on write): reading a page is
-- one range scan of (account_id, entry_id). `entry_id` is a post id or a reblog id;
-- `post_id` is the post shown, so a Delete removes every entry showing it; `source` is the
-- actor whose follow put it here, so an unfollow can remove theirs.
CREATE TABLE home_feed (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    entry_id    uuid        NOT NULL,
    post_id     uuid        NOT NULL,
    source      text        NOT NULL,   -- an actor IRI, or 'self'
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, entry_id)
);
CREATE INDEX home_feed_post ON home_feed (post_id);
CREATE INDEX home_feed_source ON home_feed (account_id, source);

-- Where an account stopped reading (`/api/v1/markers`): `home` and `notifications`.
CREATE TABLE markers (
    account_id    uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    timeline      text        NOT NULL CHECK (timeline IN ('home', 'notifications')),
    last_read_id  text        NOT NULL,
    version       integer     NOT NULL DEFAULT 1,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, timeline)
);

-- Notifications of every type: who caused it (`from_account_id`, the Account entity id),
-- the post it is about (`post_id`, ours or theirs), and the activity that caused it, unique
-- per account and type, so a redelivered activity never notifies twice.
ALTER TABLE notifications
    ADD COLUMN from_account_id uuid,
    ADD COLUMN post_id         uuid,
    ADD COLUMN activity_id     text;
CREATE UNIQUE INDEX notifications_once ON notifications (account_id, type, activity_id)
    WHERE activity_id IS NOT NULL;
