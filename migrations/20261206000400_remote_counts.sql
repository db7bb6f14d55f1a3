-- Remote accounts' counts as their servers publish them (issue 30 item 8): the `totalItems`
-- of their followers, following and outbox collections, fetched by `hollo.actor-counts.v1`
-- when someone looks at the account and what we have is a day old or missing. Additive only.
ALTER TABLE remote_actors
    ADD COLUMN followers_count bigint,
    ADD COLUMN following_count bigint,
    ADD COLUMN statuses_count  bigint,
    ADD COLUMN counts_fetched_at timestamptz;
