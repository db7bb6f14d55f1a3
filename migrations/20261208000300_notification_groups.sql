-- Grouped notifications (R-MAPI-6, Mastodon 4.3's `/api/v2/notifications`): a favourite, a
-- boost or a follow is written with the group it joins, as Mastodon sets `group_key` when it
-- stores one — favourites of one post (boosts of one post, follows) within a 12-hour span
-- make one group. `group_prefix` is `favourite-<post>`, `reblog-<post>` or `follow`;
-- `group_bucket` the hour (since the epoch) the group started. The key clients see is
-- `<prefix>-<bucket>`; a notification without a prefix is its own group (`ungrouped-<id>`).
-- Additive only: older binaries neither read nor write these columns.
ALTER TABLE notifications
    ADD COLUMN group_prefix text,
    ADD COLUMN group_bucket integer;
-- A group's notifications, newest first (counts, samples, the group a new one joins).
CREATE INDEX notifications_group ON notifications (account_id, group_prefix, group_bucket, id)
    WHERE group_prefix IS NOT NULL;
