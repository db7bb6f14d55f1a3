-- A local account's avatar and header (issue 30 item 2): the processed image's drive key (so
-- a replacement or a removal can delete the file, which is also registered in `media_files`
-- for the media cleanup), its public URL as the drive gave it when stored (so the Account
-- entity and the actor document are rendered without the drive), and its MIME type (the
-- actor's `icon`/`image` carry `mediaType`). NULL: none, the "missing" placeholder is shown.
-- Additive: an older binary ignores the columns.
ALTER TABLE accounts
    ADD COLUMN avatar_key        text,
    ADD COLUMN avatar_url        text,
    ADD COLUMN avatar_media_type text,
    ADD COLUMN header_key        text,
    ADD COLUMN header_url        text,
    ADD COLUMN header_media_type text,
    ADD CONSTRAINT accounts_avatar_whole
        CHECK ((avatar_key IS NULL) = (avatar_url IS NULL)
               AND (avatar_key IS NULL) = (avatar_media_type IS NULL)),
    ADD CONSTRAINT accounts_header_whole
        CHECK ((header_key IS NULL) = (header_url IS NULL)
               AND (header_key IS NULL) = (header_media_type IS NULL));
