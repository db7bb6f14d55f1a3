-- The instance's own custom emojis (issue 30 item 5): added by the admin from an image,
-- listed by /api/v1/custom_emojis, carried as `Emoji` tags by our posts that use them.
-- Additive only.
CREATE TABLE custom_emojis (
    id                uuid        PRIMARY KEY,
    shortcode         text        NOT NULL CHECK (shortcode ~ '^[A-Za-z0-9_]{2,64}$'),
    file_key          text        NOT NULL,
    url               text        NOT NULL,
    media_type        text        NOT NULL,
    category          text,
    visible_in_picker boolean     NOT NULL DEFAULT true,
    created_at        timestamptz NOT NULL DEFAULT now()
);
-- Shortcodes are one namespace whatever their case, as Mastodon's.
CREATE UNIQUE INDEX custom_emojis_shortcode ON custom_emojis (lower(shortcode));
