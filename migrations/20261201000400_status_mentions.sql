-- The mentions of a local status as resolved when it was written or last edited (issue 17/2):
-- [{"key": "bob@host" | "alice", "name": "@bob@host", "href": "<actor IRI>"}]. Its HTML is
-- rendered from the text and these, the same way for our API and our federation; a mention
-- that did not resolve stays text.
ALTER TABLE statuses ADD COLUMN mentions jsonb NOT NULL DEFAULT '[]'::jsonb;
