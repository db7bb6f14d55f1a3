-- Remote reply collection (SPEC.md §6, issue 5). A job per replies collection IRI and a row per
-- remote host; both are the shared truth every worker paces and leases by. Queue messages
-- (`hollo.remote-reply-collect.v1 {jobId}`) only wake a worker: losing one costs a minute until
-- recovery dispatches the job again, never the job itself.

-- Remote posts get a stable API id (`/api/v1/statuses/{id}`); the IRI stays the key.
ALTER TABLE remote_posts ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX remote_posts_id ON remote_posts (id);
CREATE INDEX remote_posts_in_reply_to ON remote_posts (in_reply_to);

-- status: waiting | processing | completed | partial | failed
CREATE TABLE reply_collection_jobs (
    id               uuid        PRIMARY KEY,
    kind             text        NOT NULL DEFAULT 'replies',
    post_iri         text        NOT NULL,
    replies_iri      text        NOT NULL,
    host             text        NOT NULL,   -- authority (host[:port]) of replies_iri
    account_id       uuid        REFERENCES accounts (id) ON DELETE SET NULL,  -- whose key signs
    max_depth        integer     NOT NULL,
    status           text        NOT NULL DEFAULT 'waiting',
    attempts         integer     NOT NULL DEFAULT 0,
    pages_fetched    integer     NOT NULL DEFAULT 0,
    requests         integer     NOT NULL DEFAULT 0,
    items_stored     integer     NOT NULL DEFAULT 0,
    items_skipped    integer     NOT NULL DEFAULT 0,
    error            text,
    -- Fencing token: bumped by every claim; a worker only writes while it still holds its value.
    claim            integer     NOT NULL DEFAULT 0,
    claimed_by       uuid,
    lease_until      timestamptz,
    heartbeat_at     timestamptz,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),   -- not runnable before (429 back-off)
    next_dispatch_at timestamptz NOT NULL DEFAULT now(),   -- recovery's next look at a waiting job
    cooldown_until   timestamptz,                          -- no re-collection before
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    UNIQUE (kind, replies_iri)
);
CREATE INDEX reply_jobs_waiting ON reply_collection_jobs (next_dispatch_at) WHERE status = 'waiting';
CREATE INDEX reply_jobs_processing ON reply_collection_jobs (lease_until) WHERE status = 'processing';
CREATE INDEX reply_jobs_host ON reply_collection_jobs (host, status);

CREATE TABLE reply_collection_hosts (
    host                  text        PRIMARY KEY,
    next_request_at       timestamptz NOT NULL DEFAULT now(),  -- pacing: earliest next request
    last_request_at       timestamptz,
    processing_job_id     uuid,                                -- one job per host at a time
    processing_started_at timestamptz,
    cooldown_until        timestamptz                          -- 429 back-off for the host
);
CREATE INDEX reply_hosts_leased ON reply_collection_hosts (processing_job_id) WHERE processing_job_id IS NOT NULL;
