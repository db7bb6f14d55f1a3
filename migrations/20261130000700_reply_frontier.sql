-- Resumable reply collection (issue 5 follow-up): the walk's frontier — sources still to visit,
-- IRIs already seen, items counted — saved after every fetch, fenced like the counters. A job
-- that stops on a 429, a shutdown or a crash resumes from it instead of re-walking from the
-- collection's first page (which spent the request cap on pages already stored). NULL: start at
-- `replies_iri`. Cleared when a walk ends and when a finished job is re-armed.
ALTER TABLE reply_collection_jobs ADD COLUMN frontier jsonb;
