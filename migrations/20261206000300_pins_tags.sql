-- Pins and hashtags (issue 30 items 3 and 6). Additive only.

-- Statuses an account pinned to its profile (Mastodon: at most 5; `featured` collection).
CREATE TABLE status_pins (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    status_id   uuid        NOT NULL REFERENCES statuses (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, status_id)
);

-- Remote actors' pinned posts, as their `Add`/`Remove` to their `featured` collection say.
-- Named by IRI: the post may not have reached us (yet); only known posts are shown.
CREATE TABLE remote_pins (
    actor_iri   text        NOT NULL,
    post_iri    text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (actor_iri, post_iri)
);

-- Followed hashtags: public posts with one reach the follower's home (`source` 'tag:<name>',
-- so unfollowing the tag takes out what only it brought, found by `home_feed_source`).
CREATE TABLE tag_follows (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    tag         text        NOT NULL,
    id          bigint      GENERATED ALWAYS AS IDENTITY,   -- pages /api/v1/followed_tags
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, tag)
);
CREATE INDEX tag_follows_tag ON tag_follows (tag);
CREATE UNIQUE INDEX tag_follows_account_id ON tag_follows (account_id, id);

-- Featured hashtags of a profile (Mastodon: at most 10; the actor's `featuredTags`).
CREATE TABLE featured_tags (
    id          uuid        PRIMARY KEY,
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name        text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, name)
);
