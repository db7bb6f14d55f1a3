-- Accounts a local account asked not to be suggested to it again (`DELETE
-- /api/v1/suggestions/{account_id}`), by actor IRI as follows and blocks name them.
-- Pre-deploy: a new table the previous version does not know.
CREATE TABLE suggestion_dismissals (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    target_iri  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, target_iri)
);
