-- A local account's private note on another account (`POST /api/v1/accounts/{id}/note`),
-- shown only to it, as the `note` of its Relationship with that account; by actor IRI, as
-- follows and blocks name accounts. Pre-deploy: a new table the previous version does not
-- know.
CREATE TABLE account_notes (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    target_iri  text        NOT NULL,
    comment     text        NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, target_iri)
);
