//! Emoji reactions (R-MAPI-6), as Hollo, Pleroma and Misskey have them: one
//! emoji — Unicode, or a custom one by shortcode — from an account to a post, beside (not
//! instead of) favourites.
//!
//! A local account reacts to a post it may read (the handler checked it); the row, the local
//! author's `emoji_reaction` notification and, for a remote author, the `EmojiReact` activity
//! are written in the caller's transaction (`federation::outbound::interactions`), as a
//! favourite is. A remote actor's `EmojiReact` (or Misskey's `Like` with `content`) is stored by
//! `federation::inbound::interactions`. Every change is idempotent: one reaction per reactor,
//! post and emoji.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::accounts::Account;
use crate::emojis;
pub use crate::emojis::Reaction;
use crate::federation::Federation;
use crate::federation::outbound::interactions;
use crate::statuses::notify::{self, Kind, Notification};
use crate::statuses::post::Post;

/// The most reactions of one account on one post (Pleroma has no limit; Misskey allows one).
pub const MAX_PER_POST: i64 = 16;

/// Why a reaction is refused.
#[derive(Debug, thiserror::Error)]
pub enum ReactionError {
    #[error("{0:?} is neither an emoji nor a custom emoji of this server")]
    Invalid(String),
    #[error("at most {MAX_PER_POST} reactions per post")]
    TooMany,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Whether `s` is one Unicode emoji: pictographs, with the joiners, variation selectors,
/// skin tones, keycaps and flag tags that combine them (at most 16 code points), and no
/// letters, spaces or markup.
pub fn is_unicode_emoji(s: &str) -> bool {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() || chars.len() > 16 {
        return false;
    }
    let pictograph = |c: char| {
        matches!(c as u32,
            0x1F000..=0x1FAFF | 0x2600..=0x27BF | 0x2300..=0x23FF | 0x2B00..=0x2BFF
            | 0x2190..=0x21FF | 0x25A0..=0x25FF | 0x2900..=0x297F | 0x3030 | 0x303D | 0x3297
            | 0x3299 | 0x00A9 | 0x00AE | 0x203C | 0x2049 | 0x2122 | 0x2139 | 0x24C2)
    };
    let combining = |c: char| {
        matches!(
            c as u32,
            0x200D | 0xFE0E | 0xFE0F | 0x20E3 | 0xE0020..=0xE007F
        )
    };
    let keycap_base = |i: usize| {
        matches!(chars[i], '0'..='9' | '#' | '*')
            && chars[i + 1..].iter().any(|c| *c as u32 == 0x20E3)
    };
    chars.iter().any(|c| pictograph(*c) || *c as u32 == 0x20E3)
        && (0..chars.len()).all(|i| pictograph(chars[i]) || combining(chars[i]) || keycap_base(i))
}

/// Reads `raw` (as a client sends it: the emoji, `:shortcode:` or `shortcode`) into a
/// reaction this server can make.
pub async fn parse(conn: &mut PgConnection, raw: &str) -> Result<Reaction, ReactionError> {
    let raw = raw.trim();
    if is_unicode_emoji(raw) {
        return Ok(Reaction::Unicode(raw.to_string()));
    }
    let code = raw.trim_matches(':');
    if emojis::valid_shortcode(code)
        && let Some(e) = emojis::used_in(conn, &[&format!(":{code}:")])
            .await?
            .into_iter()
            .next()
    {
        return Ok(Reaction::Custom(e));
    }
    Err(ReactionError::Invalid(raw.to_string()))
}

/// Reacts to `post` with `reaction`. True when it is new (false: the account had already
/// reacted so, nothing changed); then a local author is notified and a remote one sent our
/// `EmojiReact`.
pub async fn react(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    reaction: &Reaction,
) -> Result<bool, ReactionError> {
    let name = reaction.name();
    let mine: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM emoji_reactions WHERE post_id = $1 AND account_id = $2 AND emoji <> $3",
    )
    .bind(post.id)
    .bind(account.id)
    .bind(&name)
    .fetch_one(&mut *tx)
    .await?;
    if mine >= MAX_PER_POST {
        return Err(ReactionError::TooMany);
    }
    let activity = fed.new_activity_id();
    let new: Option<String> = sqlx::query_scalar(
        "INSERT INTO emoji_reactions (id, post_id, account_id, emoji, activity_id)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (post_id, account_id, emoji) WHERE account_id IS NOT NULL DO NOTHING
         RETURNING activity_id",
    )
    .bind(Uuid::now_v7())
    .bind(post.id)
    .bind(account.id)
    .bind(&name)
    .bind(&activity)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(activity) = new else {
        return Ok(false);
    };
    if let Some(author) = post.account_id.filter(|a| *a != account.id) {
        let n = Notification {
            account: author,
            kind: Kind::EmojiReaction,
            from_account: account.id,
            post: Some(post.id),
            cause: &activity,
        };
        notify::notify(&mut *tx, &n).await?;
    }
    interactions::Interaction { fed, account, post }
        .emoji_react(tx, &activity, reaction)
        .await?;
    Ok(true)
}

/// Takes back the account's reaction `name` to `post`: its notification is withdrawn and a
/// remote author sent the `Undo`. True when there was one.
pub async fn unreact(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    name: &str,
) -> Result<bool, sqlx::Error> {
    let code = name.trim().trim_matches(':');
    // The name as stored: the emoji itself, or `:shortcode:` however the client wrote it.
    let candidates = [name.trim().to_string(), format!(":{code}:")];
    let gone: Option<(String, String)> = sqlx::query_as(
        "DELETE FROM emoji_reactions WHERE post_id = $1 AND account_id = $2 AND emoji = ANY($3)
         RETURNING activity_id, emoji",
    )
    .bind(post.id)
    .bind(account.id)
    .bind(&candidates[..])
    .fetch_optional(&mut *tx)
    .await?;
    let Some((activity, emoji)) = gone else {
        return Ok(false);
    };
    notify::withdraw(&mut *tx, Kind::EmojiReaction, &activity).await?;
    let reaction = match emoji.strip_prefix(':').and_then(|e| e.strip_suffix(':')) {
        Some(code) => emojis::used_in(&mut *tx, &[&format!(":{code}:")])
            .await?
            .into_iter()
            .next()
            .map_or(Reaction::Unicode(emoji.clone()), Reaction::Custom),
        None => Reaction::Unicode(emoji),
    };
    interactions::Interaction { fed, account, post }
        .undo_emoji_react(tx, &activity, &reaction)
        .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::is_unicode_emoji;

    #[test]
    fn emojis_are_told_from_text() {
        for ok in ["👍", "❤️", "🏳️‍🌈", "👩🏽‍💻", "1️⃣", "🇯🇵", "🎉", "©️", "⭐"]
        {
            assert!(is_unicode_emoji(ok), "{ok}");
        }
        for bad in [
            "",
            "a",
            "👍a",
            ":+1:",
            "<b>",
            "👍 👍",
            "1",
            "🎉🎉🎉🎉🎉🎉🎉🎉🎉🎉🎉🎉🎉🎉🎉🎉🎉",
        ] {
            assert!(!is_unicode_emoji(bad), "{bad}");
        }
    }
}
