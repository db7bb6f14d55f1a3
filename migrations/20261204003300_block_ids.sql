-- Blocks get an ordered id: `GET /api/v1/blocks` pages by the block, newest first, as Mastodon
-- does (max_id/since_id/min_id and the Link header) — issue 30 item 7.
ALTER TABLE account_blocks ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;
CREATE UNIQUE INDEX account_blocks_account_id ON account_blocks (account_id, id);
