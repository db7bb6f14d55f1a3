-- Import and cleanup jobs (SPEC.md §5, issue 4). A job and all its items are written by the web
-- node in one transaction with the first dispatch message, so no staging file is shared between
-- pods. Imports and cleanups have the same shape so one engine (runtime/src/tasks/jobs) runs both.
--
-- Job status: pending | processing | completed | failed | cancelled.
-- Item status: pending | completed | failed | cancelled (final outcomes only, R-JOB-2).

CREATE TABLE import_jobs (
    id                uuid        PRIMARY KEY,
    account_id        uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    kind              text        NOT NULL,   -- following | blocks | mutes | bookmarks | lists
    mode              text        NOT NULL,   -- merge | overwrite
    params            jsonb       NOT NULL DEFAULT '{}',
    content_sha256    text,
    environment       text,                   -- RUNTIME_ENV; NULL belongs to production (R-JOB-9)
    status            text        NOT NULL DEFAULT 'pending',
    total_items       integer     NOT NULL,
    -- False until the first dispatch has checked that every item of the upload is stored.
    dispatched        boolean     NOT NULL DEFAULT false,
    error             text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    -- Progress heartbeat (R-JOB-8): every item outcome and dispatch touches it.
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    -- When recovery may enqueue a dispatch again; pushed a minute out by every dispatch.
    next_dispatch_at  timestamptz NOT NULL DEFAULT now()
);
-- R-JOB-7: one live or finished job per account, type and content; failed and cancelled jobs
-- do not count, so the same bytes can be uploaded again after them.
CREATE UNIQUE INDEX import_jobs_dedup ON import_jobs (account_id, kind, content_sha256)
    WHERE status IN ('pending', 'processing', 'completed');
CREATE INDEX import_jobs_active ON import_jobs (next_dispatch_at)
    WHERE status IN ('pending', 'processing');

CREATE TABLE import_job_items (
    job_id            uuid        NOT NULL REFERENCES import_jobs (id) ON DELETE CASCADE,
    id                integer     NOT NULL,   -- 1-based row number in the upload
    status            text        NOT NULL DEFAULT 'pending',
    data              jsonb       NOT NULL,
    error             text,
    attempts          integer     NOT NULL DEFAULT 0,  -- recorded failures (R-JOB-3)
    result            text,                   -- e.g. the resolved actor IRI (for overwrite)
    -- Reserved by a dispatch (or waiting for its retry) until then; due again after it.
    next_dispatch_at  timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    PRIMARY KEY (job_id, id)
);
CREATE INDEX import_job_items_pending ON import_job_items (job_id, next_dispatch_at)
    WHERE status = 'pending';

-- What an import item did outside the database: the activity it stored (stable id) before
-- delivery. Written in the item's transaction, so an item's effect exists at most once.
CREATE TABLE import_job_effects (
    job_id       uuid        NOT NULL,
    item_id      integer     NOT NULL,
    activity_id  text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, item_id),
    FOREIGN KEY (job_id, item_id) REFERENCES import_job_items (job_id, id) ON DELETE CASCADE
);

CREATE TABLE cleanup_jobs (
    id                uuid        PRIMARY KEY,
    account_id        uuid,                   -- always NULL: cleanups are an admin's
    kind              text        NOT NULL,   -- remote_posts | media
    mode              text        NOT NULL DEFAULT 'delete',
    params            jsonb       NOT NULL DEFAULT '{}',
    content_sha256    text,
    environment       text,
    status            text        NOT NULL DEFAULT 'pending',
    total_items       integer     NOT NULL,
    dispatched        boolean     NOT NULL DEFAULT false,
    error             text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    next_dispatch_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cleanup_jobs_active ON cleanup_jobs (next_dispatch_at)
    WHERE status IN ('pending', 'processing');

CREATE TABLE cleanup_job_items (
    job_id            uuid        NOT NULL REFERENCES cleanup_jobs (id) ON DELETE CASCADE,
    id                integer     NOT NULL,
    status            text        NOT NULL DEFAULT 'pending',
    data              jsonb       NOT NULL,
    error             text,
    attempts          integer     NOT NULL DEFAULT 0,
    result            text,
    next_dispatch_at  timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    PRIMARY KEY (job_id, id)
);
CREATE INDEX cleanup_job_items_pending ON cleanup_job_items (job_id, next_dispatch_at)
    WHERE status = 'pending';

-- Import targets. Following keeps Mastodon's per-follow options.
ALTER TABLE follows
    ADD COLUMN show_reblogs boolean NOT NULL DEFAULT true,
    ADD COLUMN notify       boolean NOT NULL DEFAULT false,
    ADD COLUMN languages    text[];

CREATE TABLE account_blocks (
    account_id         uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    target_iri         text        NOT NULL,
    block_activity_id  text        NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, target_iri)
);

CREATE TABLE account_mutes (
    account_id     uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    target_iri     text        NOT NULL,
    notifications  boolean     NOT NULL DEFAULT true,   -- Mastodon's "Hide notifications"
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, target_iri)
);

CREATE TABLE bookmarks (
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    post_iri    text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, post_iri)
);
CREATE INDEX bookmarks_post ON bookmarks (post_iri);

CREATE TABLE lists (
    id          uuid        PRIMARY KEY,
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    title       text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, title)
);

CREATE TABLE list_members (
    list_id     uuid        NOT NULL REFERENCES lists (id) ON DELETE CASCADE,
    target_iri  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (list_id, target_iri)
);

-- Stored media files (keys under FS_STORAGE_PATH). A file whose key is not here is orphaned.
CREATE TABLE media_files (
    key         text        PRIMARY KEY,
    account_id  uuid        REFERENCES accounts (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
