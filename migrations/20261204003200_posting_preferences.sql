-- A local account's posting defaults (issue 30 item 1, Mastodon's `source[privacy]`,
-- `source[sensitive]`, `source[language]`): a status or boost sent without a visibility takes
-- `default_visibility`, so someone whose posts are followers-only does not post publicly by
-- leaving the field out. Mastodon allows public, unlisted and private as the default.
ALTER TABLE accounts
    ADD COLUMN default_visibility text NOT NULL DEFAULT 'public'
        CHECK (default_visibility IN ('public', 'unlisted', 'private')),
    ADD COLUMN default_sensitive  boolean NOT NULL DEFAULT false,
    ADD COLUMN default_language   text
        CHECK (default_language ~ '^[a-z]{2,3}(-[A-Za-z]{2,4})?$');
