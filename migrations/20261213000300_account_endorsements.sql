-- Accounts a local account features on its profile (Mastodon's endorsements, `POST
-- /api/v1/accounts/{id}/pin`): only accounts it follows; by actor IRI, as follows name them.
-- `id` pages the list. Pre-deploy: a new table the previous version does not know.
CREATE TABLE account_endorsements (
    id          bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    target_iri  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, target_iri)
);
