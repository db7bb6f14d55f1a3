-- Favourites, boosts and bookmarks by local accounts (SPEC §11, R-MAPI-3, issue 19 item 1).
--
-- `GET /api/v1/statuses/:id/favourited_by` lists local favourites (`favourites`) and remote
-- `Like`s (`remote_interactions`) as one list, paginated as Mastodon does by the favourite's
-- id. Remote Likes draw their order from the favourites' own sequence, so both tables share
-- one key space ordered by when each was stored, and a cursor from either names a place in
-- the whole list.
ALTER TABLE remote_interactions
    ADD COLUMN seq bigint NOT NULL DEFAULT nextval('favourites_id_seq'::regclass);
CREATE INDEX remote_interactions_likes ON remote_interactions (object, seq)
    WHERE kind = 'like' AND undone_at IS NULL;

-- `GET /api/v1/favourites` and `/api/v1/bookmarks` page an account's rows newest first.
CREATE INDEX favourites_account ON favourites (account_id, id);
