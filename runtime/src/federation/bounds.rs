//! How much of a remote object we keep (R-API, issue 61 F1). A remote server decides how long
//! its lists and strings are; we decide how much of them we store and show. Every document
//! that comes in — an inbox activity, a fetched object or actor, a collected reply — passes
//! through `normalize::normalize`, whose walk cuts every list and every string of every object
//! to the caps below before anything reads or stores it. So a stored post or actor is bounded
//! by construction, and what one rendered status (its author, attachments, tags) and one page
//! of them can cost follows from these numbers, not from what a remote server sent.
//!
//! Lists keep their first entries, as Mastodon keeps the first 4 attachments of a remote
//! status. Strings are cut at a character boundary.
//!
//! | what | cap | why |
//! |---|---|---|
//! | a post's `attachment` | 4 | Mastodon's `Status::MEDIA_ATTACHMENTS_LIMIT`: it keeps the first 4 |
//! | an actor's `attachment` (profile fields) | 16 | the most a common server lets its users fill (Misskey 16; Mastodon 4, GoToSocial 6, Pleroma 10) |
//! | `tag` entries of each kind (`Mention`, `Hashtag`, `Emoji`, any other) | 32 | a few dozen: more mentions than a 500-character post can hold |
//! | poll options (`oneOf`, `anyOf`) | 20 | Pleroma's and Akkoma's default `max_options`, the largest of the common servers (Mastodon 4, Misskey 10) |
//! | `alsoKnownAs` | 16 | aliases a person names by hand (Misskey offers 10, GoToSocial 5) |
//! | each of `to`, `cc`, `bto`, `bcc`, `audience` | 1024 | never shown, read once when stored; room for servers that address every recipient of a private post |
//! | languages of `contentMap`, `summaryMap`, `nameMap` | 16 | |
//! | any other list | 128 | collection pages, keys, approvals, a `Flag`'s objects (our own reports name at most 100 statuses) |
//! | `content` | 64 KiB | several times the longest post a common server lets its users write (Pleroma and Akkoma 5 000 characters, Misskey 3 000) |
//! | `summary` | 8 KiB | a profile's bio or a content warning (Pleroma's 5 000-character bios) |
//! | `name`, `value` | 4 KiB | alt text (Mastodon's 1 500 characters), display names, profile fields |
//! | a poll option's `name` | 1 KiB | Pleroma's and Akkoma's default `max_option_chars` (200), the longest of the common servers (Mastodon and GoToSocial 50), in any script |
//! | a poll option's count, `votersCount` | 10⁹ | more votes than any poll has had; the sum of 20 stays far from overflowing |
//! | every string of a `tag` entry | 512 B | `@user@host` (a DNS name is at most 253 bytes), hashtags of at most 100 characters, shortcodes of 64, their URLs |
//! | `publicKeyPem` | 8 KiB | an RSA key of 16 384 bits is under 3 KiB |
//! | any other string (ids, URLs, media types, dates) | 2 KiB | the longest URL commonly accepted |
//! | a property name | 256 B | no term we read is longer than 30 |
//!
//! `@context` is kept as it came (it is never shown; what it may hold is checked by
//! `normalize::malformed_context`), and so is whatever lies deeper than `normalize::MAX_DEPTH`,
//! which nothing reads. How many properties an object has is not capped: a document is at
//! most 1 MiB when it arrives (inbox and fetch limits), and what is read of a stored one for
//! every status — its author's profile (`directory::remote_columns`), the post's columns and
//! tags (`mastodon::status`) — is a projection of the properties shown, never the whole.
//!
//! Rows stored before these caps are bounded again where they are read: a rendered status
//! shows at most these many attachments, mentions, hashtags and emojis, a remote account at
//! most these many fields and emojis, and the queries that load them slice their lists.

/// A post's `attachment`: Mastodon's `Status::MEDIA_ATTACHMENTS_LIMIT`.
pub const MAX_ATTACHMENTS: usize = 4;
/// An actor's `attachment`: its profile fields.
pub const MAX_FIELDS: usize = 16;
/// `tag` entries of one kind (`Mention`, `Hashtag`, `Emoji`, or any other type).
pub const MAX_TAGS_PER_KIND: usize = 32;
/// `oneOf` / `anyOf`: a poll's options.
pub const MAX_POLL_OPTIONS: usize = 20;
/// `alsoKnownAs`.
pub const MAX_ALIASES: usize = 16;
/// Each addressing property (`to`, `cc`, `bto`, `bcc`, `audience`).
pub const MAX_ADDRESSEES: usize = 1024;
/// Languages of a `contentMap`, `summaryMap` or `nameMap`.
pub const MAX_LANGUAGES: usize = 16;
/// Any other list.
pub const MAX_LIST: usize = 128;

/// `content` (and each language of `contentMap`), in bytes.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;
/// `summary` (and `summaryMap`), in bytes.
pub const MAX_SUMMARY_BYTES: usize = 8 * 1024;
/// `name` (and `nameMap`) and `value`, in bytes.
pub const MAX_NAME_BYTES: usize = 4 * 1024;
/// Every string of a `tag` entry, in bytes.
pub const MAX_TAG_STRING_BYTES: usize = 512;
/// A poll option's `name` (and `nameMap`), in bytes. Votes name the option by this text, so
/// one cut here cannot be voted on at its origin; no common server allows one this long.
pub const MAX_POLL_OPTION_BYTES: usize = 1024;
/// A remote poll's count of one option, or of its voters: larger numbers are read as this.
pub const MAX_POLL_COUNT: i64 = 1_000_000_000;
/// `publicKeyPem`, in bytes.
pub const MAX_PEM_BYTES: usize = 8 * 1024;
/// Any other string, in bytes.
pub const MAX_STRING_BYTES: usize = 2 * 1024;
/// A property name, in bytes: a longer one is dropped with its value.
pub const MAX_KEY_BYTES: usize = 256;

/// `s` cut to at most `max` bytes, at a character boundary.
pub fn cut(mut s: String, max: usize) -> String {
    s.truncate(cut_str(&s, max).len());
    s
}

/// The longest start of `s` of at most `max` bytes that ends at a character boundary.
pub fn cut_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_cut_at_a_character_boundary() {
        assert_eq!(cut("abc".into(), 5), "abc");
        assert_eq!(cut("abcdef".into(), 3), "abc");
        // "é" is two bytes: a cut inside it keeps the character out.
        assert_eq!(cut("aé".into(), 2), "a");
        assert_eq!(cut_str("日本語", 7), "日本");
        assert_eq!(cut_str("", 0), "");
    }
}
