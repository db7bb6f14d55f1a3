-- Polls of remote posts (a GoToSocial or Mastodon `Question`; issue 61): the same `polls` row
-- as ours, naming the remote post instead of a status of ours, so the Poll entity, votes,
-- `own_votes` and the end-of-poll notifications are one model (`polls`).
--
-- Their counts are the origin's: what its `Question` last said (each option's
-- `replies.totalItems`, `votersCount`), plus our own users' votes since (counted at once, until
-- the origin's next `Update` says what it counted). Our users' votes are `poll_votes` rows as
-- on our polls (`own_votes`, one vote per account); remote votes on a remote poll never come
-- here. A remote poll may have no end (`expires_at` NULL); `closed` sets its end.
--
-- A remote poll has nobody here to notify until one of our users votes in it: it is stored as
-- notified (`notified_at` set), and a local vote clears that, so the recovery scan of expired
-- polls without notifications only meets polls that have someone to notify.
--
-- Pre-deploy: a new nullable column and two columns loosened. The previous version only
-- writes polls of its own statuses (which satisfy the new check) and only reaches a remote
-- poll by its id, which no response of it names.

ALTER TABLE polls
    ALTER COLUMN status_id  DROP NOT NULL,
    ALTER COLUMN expires_at DROP NOT NULL,
    ADD COLUMN remote_post_id uuid UNIQUE REFERENCES remote_posts (id) ON DELETE CASCADE,
    -- Votes per option as the origin counts them, in option order (a remote poll only).
    ADD COLUMN remote_counts  bigint[],
    -- The origin's `votersCount` (NULL when it gave none).
    ADD COLUMN remote_voters  bigint,
    ADD CONSTRAINT polls_of_one_post CHECK ((status_id IS NULL) <> (remote_post_id IS NULL));
