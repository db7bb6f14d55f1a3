-- Timelines, inbound interactions and notifications (issue 19 items 2, 3, 6; R-MAPI-4).
--
-- The public timeline walks `posts` newest first: each branch of the view needs an index whose
-- order is the id order among public posts, so the planner merges the two branches
-- (Merge Append) and stops after a page instead of sorting every public post.
CREATE INDEX statuses_public ON statuses (id) WHERE visibility = 'public';

-- The tag timeline: one row per (tag, post), ours and theirs, kept by triggers from the
-- `tags` arrays, so a page is one backward range scan of (tag, post_id) instead of a GIN
-- lookup of every tagged post sorted per page.
CREATE TABLE post_tags (
    tag      text NOT NULL,
    post_id  uuid NOT NULL,
    PRIMARY KEY (tag, post_id)
);
CREATE INDEX post_tags_post ON post_tags (post_id);

CREATE FUNCTION hollo_sync_post_tags() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM post_tags WHERE post_id = OLD.id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO post_tags (tag, post_id)
        SELECT DISTINCT t, NEW.id FROM unnest(NEW.tags) AS t
        ON CONFLICT DO NOTHING;
        RETURN NEW;
    END IF;
    RETURN OLD;
END
$$;
CREATE TRIGGER statuses_post_tags AFTER INSERT OR DELETE OR UPDATE OF tags ON statuses
    FOR EACH ROW EXECUTE FUNCTION hollo_sync_post_tags();
CREATE TRIGGER remote_posts_post_tags AFTER INSERT OR DELETE OR UPDATE OF tags ON remote_posts
    FOR EACH ROW EXECUTE FUNCTION hollo_sync_post_tags();
INSERT INTO post_tags (tag, post_id)
    SELECT DISTINCT t, s.id FROM statuses s, unnest(s.tags) AS t
    UNION
    SELECT DISTINCT t, r.id FROM remote_posts r, unnest(r.tags) AS t
    ON CONFLICT DO NOTHING;

-- One standing `Like` per remote actor and post: a `Like` re-sent under a new id counts and
-- notifies once. Older duplicates are closed first.
UPDATE remote_interactions i SET undone_at = now()
 WHERE i.kind = 'like' AND i.undone_at IS NULL
   AND EXISTS (SELECT 1 FROM remote_interactions o
                WHERE o.kind = 'like' AND o.undone_at IS NULL AND o.actor = i.actor
                  AND o.object = i.object AND o.activity_id < i.activity_id);
CREATE UNIQUE INDEX remote_interactions_one_like ON remote_interactions (actor, object)
    WHERE kind = 'like' AND undone_at IS NULL;

-- Home feeds are filled from the followers of an actor: local follows by target.
CREATE INDEX follows_target_accepted ON follows (target_iri) WHERE state = 'accepted';

-- Notifications filtered by type page over the same (account_id, id) order.
CREATE INDEX notifications_account_type ON notifications (account_id, type, id);
