-- Per-account write rate limits (issue 28 item 11): one token bucket per account and action
-- (`status`), shared by every web node. `tokens` is what was left at `updated_at`; the bucket
-- refills continuously up to its capacity (`web::write_limits`).
CREATE TABLE write_limits (
    account_id  uuid             NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    action      text             NOT NULL,
    tokens      double precision NOT NULL,
    updated_at  timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, action)
);
