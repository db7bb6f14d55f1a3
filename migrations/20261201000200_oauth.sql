-- OAuth 2 as Mastodon speaks it (SPEC §11, R-MAPI-1; issue 18 items 1–3).

-- An argon2id PHC string; NULL: the account cannot sign in with a password (CLI tokens only).
ALTER TABLE accounts ADD COLUMN password_hash text;

-- Registered client apps (POST /api/v1/apps). Only a SHA-256 of the client secret is kept.
CREATE TABLE oauth_apps (
    id                  uuid        PRIMARY KEY,
    name                text        NOT NULL,
    website             text,
    redirect_uris       text[]      NOT NULL,
    scopes              text        NOT NULL,
    client_id           text        NOT NULL UNIQUE,
    client_secret_hash  bytea       NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now()
);

-- Tokens issued through OAuth name their app; a client_credentials token has no account.
-- CLI tokens keep app_id NULL and an account.
ALTER TABLE account_tokens
    ALTER COLUMN account_id DROP NOT NULL,
    ADD COLUMN app_id uuid REFERENCES oauth_apps (id) ON DELETE CASCADE,
    ADD CONSTRAINT account_tokens_holder CHECK (account_id IS NOT NULL OR app_id IS NOT NULL);
CREATE INDEX account_tokens_app ON account_tokens (app_id) WHERE app_id IS NOT NULL;

-- Authorization codes: hashed, short-lived, single-use. A used code remembers the token it
-- bought, so a replay revokes that token (RFC 6749 §4.1.2).
CREATE TABLE oauth_codes (
    code_hash       bytea       PRIMARY KEY,
    app_id          uuid        NOT NULL REFERENCES oauth_apps (id) ON DELETE CASCADE,
    account_id      uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    redirect_uri    text        NOT NULL,
    scopes          text        NOT NULL,
    code_challenge  text,                 -- PKCE S256 challenge, when the app sent one
    expires_at      timestamptz NOT NULL,
    used_at         timestamptz,
    token_hash      bytea
);

-- Sign-in sessions of the authorization pages (cookie value hashed), shared by every web node.
CREATE TABLE web_sessions (
    id_hash     bytea       PRIMARY KEY,
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

-- Failed sign-ins, per subject (`account:<name>` or `address:<ip>`), for the limits every web
-- node enforces alike.
CREATE TABLE sign_in_failures (
    id       bigserial   PRIMARY KEY,
    subject  text        NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sign_in_failures_subject ON sign_in_failures (subject, at);
