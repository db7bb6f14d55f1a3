-- The `post_tags` rows follow the `tags` arrays (20261202000700_timelines.sql), but the
-- trigger ran its PL/pgSQL function for every stored post, tagged or not: most incoming notes
-- have no hashtag, and for them the call did nothing but cost the inbox a function call per
-- insert (issue 36 item 3). A `WHEN` condition is checked by the executor without calling the
-- function, so each event gets its own trigger that fires only when there is something to do:
-- an insert with tags, an update that changes them, a delete of a post that had some.
DROP TRIGGER statuses_post_tags ON statuses;
DROP TRIGGER remote_posts_post_tags ON remote_posts;

CREATE TRIGGER statuses_post_tags_insert AFTER INSERT ON statuses
    FOR EACH ROW WHEN (cardinality(NEW.tags) > 0) EXECUTE FUNCTION hollo_sync_post_tags();
CREATE TRIGGER statuses_post_tags_update AFTER UPDATE OF tags ON statuses
    FOR EACH ROW WHEN (OLD.tags IS DISTINCT FROM NEW.tags) EXECUTE FUNCTION hollo_sync_post_tags();
CREATE TRIGGER statuses_post_tags_delete AFTER DELETE ON statuses
    FOR EACH ROW WHEN (cardinality(OLD.tags) > 0) EXECUTE FUNCTION hollo_sync_post_tags();

CREATE TRIGGER remote_posts_post_tags_insert AFTER INSERT ON remote_posts
    FOR EACH ROW WHEN (cardinality(NEW.tags) > 0) EXECUTE FUNCTION hollo_sync_post_tags();
CREATE TRIGGER remote_posts_post_tags_update AFTER UPDATE OF tags ON remote_posts
    FOR EACH ROW WHEN (OLD.tags IS DISTINCT FROM NEW.tags) EXECUTE FUNCTION hollo_sync_post_tags();
CREATE TRIGGER remote_posts_post_tags_delete AFTER DELETE ON remote_posts
    FOR EACH ROW WHEN (cardinality(OLD.tags) > 0) EXECUTE FUNCTION hollo_sync_post_tags();
