-- Media attachments of the Mastodon client API (R-MAPI-3, issue 19 item 4). An upload is a
-- row owned by its account and, until a status takes it, unattached (`status_id` NULL);
-- unattached rows older than a day are removed by the media cleanup with their files. Files
-- are also registered in `media_files` (the cleanup's list of live keys).
--
-- `state`: `processing` (stored raw, the `hollo.media.process.v1` task makes the thumbnail),
-- `ready`, or `failed` with the reason in `error`.

CREATE TABLE media_attachments (
    id              uuid        PRIMARY KEY,          -- v7: creation order
    account_id      uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    status_id       uuid        REFERENCES statuses (id) ON DELETE CASCADE,
    -- Order within the status (the order of `media_ids` when it was attached).
    position        smallint,
    kind            text        NOT NULL DEFAULT 'image'
                    CHECK (kind IN ('image', 'gifv', 'video', 'audio', 'unknown')),
    content_type    text        NOT NULL,
    file_key        text        NOT NULL,
    thumbnail_key   text,
    size            bigint      NOT NULL,
    width           integer,
    height          integer,
    thumbnail_width  integer,
    thumbnail_height integer,
    blurhash        text,
    description     text,
    focus_x         real        NOT NULL DEFAULT 0 CHECK (focus_x BETWEEN -1 AND 1),
    focus_y         real        NOT NULL DEFAULT 0 CHECK (focus_y BETWEEN -1 AND 1),
    state           text        NOT NULL DEFAULT 'processing'
                    CHECK (state IN ('processing', 'ready', 'failed')),
    error           text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    processed_at    timestamptz
);
CREATE INDEX media_attachments_status ON media_attachments (status_id, position)
    WHERE status_id IS NOT NULL;
CREATE INDEX media_attachments_account ON media_attachments (account_id, created_at);
-- What the cleanup looks for: unattached uploads by age.
CREATE INDEX media_attachments_unattached ON media_attachments (created_at)
    WHERE status_id IS NULL;

-- However an attachment goes (its status deleted, its account deleted, the cleanup, DELETE
-- /api/v1/media/:id), its files stop being registered, so the media cleanup's orphan scan
-- removes them.
CREATE FUNCTION media_attachments_unregister_files() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM media_files WHERE key IN (OLD.file_key, OLD.thumbnail_key);
    RETURN OLD;
END;
$$;
CREATE TRIGGER media_attachments_unregister_files
    AFTER DELETE ON media_attachments
    FOR EACH ROW EXECUTE FUNCTION media_attachments_unregister_files();
