-- Mastodon client API: accounts and relationships (SPEC §11, R-MAPI-2, issue 18).
--
-- Profiles: what update_credentials changes and the actor document serves.
ALTER TABLE accounts
    ADD COLUMN display_name text        NOT NULL DEFAULT '',
    ADD COLUMN note         text        NOT NULL DEFAULT '',   -- the user's plain text
    ADD COLUMN locked       boolean     NOT NULL DEFAULT false,
    ADD COLUMN bot          boolean     NOT NULL DEFAULT false,
    ADD COLUMN fields       jsonb       NOT NULL DEFAULT '[]', -- [{"name","value"}], plain text
    ADD COLUMN updated_at   timestamptz NOT NULL DEFAULT now();

-- A remote actor gets a stable local id when first stored: clients name accounts by id.
ALTER TABLE remote_actors ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX remote_actors_id ON remote_actors (id);
CREATE INDEX remote_actors_handle ON remote_actors (lower(handle));

-- Relationship rows get an ordered id: Mastodon paginates follower and following lists by the
-- relationship, not by the account (max_id/since_id/min_id and the Link header).
ALTER TABLE follows ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;
CREATE UNIQUE INDEX follows_id ON follows (id);
ALTER TABLE followers ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;
CREATE UNIQUE INDEX followers_id ON followers (id);

-- Follows of a locked account wait here until its owner authorizes (→ followers, Accept) or
-- rejects (→ Reject) them.
CREATE TABLE follow_requests (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id          uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    actor_iri           text        NOT NULL,
    follow_activity_id  text        NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, actor_iri)
);
