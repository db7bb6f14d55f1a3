-- Federation (SPEC.md §8, issue 3): local accounts with their keys and API tokens, what we know
-- of remote actors and keys, the inbox (stored before it is processed), the outbox (stored once
-- with a stable id, then one delivery row per target inbox) and the effects of processing.
--
-- Idempotency lives in unique keys: an activity id is stored once in the inbox and processed
-- once; a delivery is keyed by (activity, inbox) so a redelivery after a crash sends the same
-- activity id again and never a second copy.

CREATE TABLE accounts (
    id               uuid        PRIMARY KEY,
    username         text        NOT NULL,
    admin            boolean     NOT NULL DEFAULT false,
    public_key_pem   text        NOT NULL,
    -- AES-256-GCM under a key derived from SECRET_KEY: 12-byte nonce || ciphertext (PKCS#8 DER).
    private_key_enc  bytea       NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX accounts_username ON accounts (lower(username));

-- Only a SHA-256 of each bearer token is stored.
CREATE TABLE account_tokens (
    token_hash  bytea       PRIMARY KEY,
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE remote_actors (
    iri           text        PRIMARY KEY,
    handle        text,                 -- name@host when known (WebFinger)
    inbox         text        NOT NULL,
    shared_inbox  text,
    key_id        text,
    public_key_pem text,
    document      jsonb       NOT NULL,
    gone_at       timestamptz,          -- a delivery got 410 Gone
    fetched_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX remote_actors_inbox ON remote_actors (inbox);
CREATE INDEX remote_actors_shared_inbox ON remote_actors (shared_inbox);

-- Public keys of remote signers, refetched when a signature stops verifying (key rotation).
CREATE TABLE remote_keys (
    key_id          text        PRIMARY KEY,
    owner           text        NOT NULL,
    public_key_pem  text        NOT NULL,
    fetched_at      timestamptz NOT NULL DEFAULT now()
);

-- Every verified incoming activity, once per id. `processed_at` is set in the transaction that
-- applies its effects and completes its queue message.
CREATE TABLE inbox_activities (
    id            text        PRIMARY KEY,
    type          text        NOT NULL,
    actor         text        NOT NULL,
    account_id    uuid        REFERENCES accounts (id) ON DELETE SET NULL,  -- NULL: shared inbox
    key_id        text        NOT NULL,
    body          jsonb       NOT NULL,
    received_at   timestamptz NOT NULL DEFAULT now(),
    processed_at  timestamptz,
    outcome       text
);

-- Our outgoing activities, each stored once with its stable id.
CREATE TABLE outbox_activities (
    id          text        PRIMARY KEY,
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    type        text        NOT NULL,
    body        jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per (activity, target inbox). state: pending | delivered | failed | gone.
CREATE TABLE deliveries (
    activity_id   text        NOT NULL REFERENCES outbox_activities (id) ON DELETE CASCADE,
    inbox         text        NOT NULL,
    actor_iri     text,                 -- the recipient, for 410 on a personal inbox
    state         text        NOT NULL DEFAULT 'pending',
    attempts      integer     NOT NULL DEFAULT 0,
    last_status   integer,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    delivered_at  timestamptz,
    PRIMARY KEY (activity_id, inbox)
);
CREATE INDEX deliveries_pending ON deliveries (state) WHERE state = 'pending';

-- Local accounts following remote actors. state: pending | accepted | rejected.
CREATE TABLE follows (
    account_id          uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    target_iri          text        NOT NULL,
    follow_activity_id  text        NOT NULL UNIQUE,
    state               text        NOT NULL DEFAULT 'pending',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, target_iri)
);

-- Remote actors following local accounts (auto-accepted).
CREATE TABLE followers (
    account_id          uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    actor_iri           text        NOT NULL,
    follow_activity_id  text        NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, actor_iri)
);

CREATE TABLE remote_posts (
    iri           text        PRIMARY KEY,
    actor         text        NOT NULL,
    content       text,
    summary       text,
    in_reply_to   text,
    replies_iri   text,
    url           text,
    published     timestamptz,
    body          jsonb       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz
);
CREATE INDEX remote_posts_actor ON remote_posts (actor);

-- Like, Announce and Block received from remote actors, once per activity id.
CREATE TABLE remote_interactions (
    activity_id  text        PRIMARY KEY,
    kind         text        NOT NULL,   -- like | announce | block
    actor        text        NOT NULL,
    object       text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    undone_at    timestamptz
);
CREATE INDEX remote_interactions_object ON remote_interactions (object, kind);
