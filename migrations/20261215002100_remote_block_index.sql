-- Who blocks a reader (R-MAPI-VIS, issue 61): a remote author's `Block` of one of our accounts
-- hides that author's posts from it, as Mastodon does, so the visibility rule asks, for a remote
-- post, whether its author blocks the reader. One probe of this index per such post: the
-- blocks an actor sent that stand.
--
-- Pre-deploy: an index only.

CREATE INDEX remote_interactions_blocks ON remote_interactions (actor)
    WHERE kind = 'block' AND undone_at IS NULL;
