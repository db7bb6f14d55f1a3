-- Every timeline page one index range scan (issue 38, R-MAPI-4): the public and tag timelines
-- already have theirs (`statuses_public`, `remote_posts_public`, `post_tags_pkey`) and walk
-- them (`statuses::access::readable_page_sql`); an account's statuses had none in their order.

-- A local account's statuses, newest first: ids are time-ordered, so (account_id, id) is the
-- page's order and its cursors (`statuses_account` is by created_at, which pages do not use).
CREATE INDEX statuses_account_id ON statuses (account_id, id);

-- A remote account's posts that reached us, in the order its statuses list shows them: when
-- published (else received), then id; deleted ones are never listed.
CREATE INDEX remote_posts_actor_published
    ON remote_posts (actor, (coalesce(published, created_at)), id)
 WHERE deleted_at IS NULL;
