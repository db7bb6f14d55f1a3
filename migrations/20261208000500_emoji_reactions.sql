-- Emoji reactions (R-MAPI-6, issue 32 item 3), as Hollo, Pleroma and Misskey have them: a
-- local account's (`account_id`) or a remote actor's (`actor_iri`) reaction to a post we
-- store (ours or theirs; one id space, so no foreign key to either table), with one emoji —
-- a Unicode emoji, or a custom one by `:shortcode:` with its image (`emoji_url`, a remote
-- emoji's; NULL for Unicode and for our own emojis, found by shortcode). One reaction per
-- reactor, post and emoji; the activity that made it (`EmojiReact`, or Misskey's `Like` with
-- `content`) is unique, so a redelivery stores nothing twice and an `Undo` finds it.
-- Additive only: older binaries neither read nor write this table.
CREATE TABLE emoji_reactions (
    id uuid PRIMARY KEY,
    post_id uuid NOT NULL,
    account_id uuid REFERENCES accounts (id) ON DELETE CASCADE,
    actor_iri text,
    emoji text NOT NULL,
    emoji_url text,
    activity_id text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((account_id IS NULL) <> (actor_iri IS NULL))
);
CREATE UNIQUE INDEX emoji_reactions_local ON emoji_reactions (post_id, account_id, emoji)
    WHERE account_id IS NOT NULL;
CREATE UNIQUE INDEX emoji_reactions_remote ON emoji_reactions (post_id, actor_iri, emoji)
    WHERE actor_iri IS NOT NULL;
CREATE INDEX emoji_reactions_post ON emoji_reactions (post_id, created_at);
