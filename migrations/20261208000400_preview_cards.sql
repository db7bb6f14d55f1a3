-- Link previews (R-MAPI-6, issue 32 item 1): the first link of a post gets a card that a
-- worker fetches (`tasks::preview_card`). A card is kept once per URL, so a link many posts
-- share is fetched once; a failed fetch is kept too (`failed_at`), so a hostile or broken page
-- is not asked again for every post that links it until the retry interval has passed.
-- Additive only: older binaries neither read nor write these tables.
CREATE TABLE preview_cards (
    id uuid PRIMARY KEY,
    url text NOT NULL UNIQUE,
    -- Mastodon's `type`: link, photo, video or rich.
    kind text NOT NULL DEFAULT 'link',
    title text NOT NULL DEFAULT '',
    description text NOT NULL DEFAULT '',
    author_name text NOT NULL DEFAULT '',
    author_url text NOT NULL DEFAULT '',
    provider_name text NOT NULL DEFAULT '',
    provider_url text NOT NULL DEFAULT '',
    -- An oEmbed player, cut down to one https iframe; empty otherwise.
    html text NOT NULL DEFAULT '',
    width integer NOT NULL DEFAULT 0,
    height integer NOT NULL DEFAULT 0,
    -- The preview image as this server stored it (drive key), its size and BlurHash.
    image_key text,
    image_width integer,
    image_height integer,
    image_description text NOT NULL DEFAULT '',
    blurhash text,
    language text,
    published_at timestamptz,
    fetched_at timestamptz,
    -- Set when the last fetch gave no card; the reason, for operators.
    failed_at timestamptz,
    error text
);

-- Which card a post shows (its first link's). One id space covers our statuses and remote
-- posts, so this table names either (no foreign key); a deleted post is never rendered, so
-- its row is inert.
CREATE TABLE post_preview_cards (
    post_id uuid PRIMARY KEY,
    card_id uuid NOT NULL REFERENCES preview_cards (id) ON DELETE CASCADE
);
CREATE INDEX post_preview_cards_card ON post_preview_cards (card_id);
