-- Public pages, the rest of issue 33.
--
-- Verified profile links (Mastodon's `fields[].verified_at`): a row per field value of ours
-- that was found linking back with `rel="me"` (tasks::verify_links). Keyed by the value, so a
-- field whose value changes has no verification, and `update_credentials` deletes the rows of
-- values no longer in the profile (a value removed and typed again is checked again).
CREATE TABLE account_field_verifications (
    account_id   uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    value        text        NOT NULL,
    verified_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, value)
);

-- Our accounts' boosts on their profile page, newest first: one range scan per page. Partial:
-- remote boosts (`actor_iri`) are never listed by account. Additive (the previous version
-- never reads it); built in the migration's transaction, as the other indexes are — the scan
-- reads `reblogs` once.
CREATE INDEX reblogs_account ON reblogs (account_id, id) WHERE account_id IS NOT NULL;
