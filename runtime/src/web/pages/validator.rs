//! The cheap validator (R-WEB-1): a page's `ETag` computed from a few database facts *before*
//! rendering, so the common anonymous revalidation (`If-None-Match` with the current tag) is a
//! `304` after one small query instead of a full render (≈ a dozen queries, the templates and a
//! SHA-256 of the body).
//!
//! The tag is a SHA-256 of: this build's page code (the crate version, every template and the
//! stylesheet), the page's identity (its kind, its key and cursor, the public origin), the ids
//! of every item it lists in their order, and [`FACTS_SQL`]'s answer about them. Why every
//! visible change changes it — what a page shows, and which fact moves with it:
//!
//! - **which items, in which order** (a new post, a boost or its undo, a deletion, a pin or
//!   unpin, a post leaving the page as a newer one arrives, a visibility rule): the list of
//!   ids is part of the tag, and the ids are the ones the page renders (the handlers compute
//!   them once, for both). A deleted or hidden item is also absent from the facts (`present`).
//! - **a profile** (display name, bio, fields, avatar, header, locked, bot): every write of
//!   them is `profiles::update_in`, which sets `accounts.updated_at`; field verifications are
//!   their own rows (value and time); counts come from `account_stats`, listed as they are
//!   shown (an account's public and unlisted posts: a direct message moves no tag).
//! - **a post's text, warning, sensitivity, media and poll options**: only an edit changes
//!   them, and an edit sets `edited_at` (ours and theirs); a remote post's every change
//!   (edit, deletion, audience) sets its `updated_at`. Our post's stored mentions (the links of
//!   its text) and tags are listed themselves, as they are written apart from the text. Our attachments are listed as whole rows (`md5` of each), so a description
//!   or a finished processing changes the tag too.
//! - **counts under a post** (replies, boosts, favourites) and **poll tallies**: counted, as
//!   `render` counts them for an anonymous reader (public and unlisted replies), per item; a poll's closing (a time, no write) is `expires_at <=
//!   now()`.
//! - **authors** (a boosted post's author, the authors of a tag page): our accounts'
//!   `updated_at`, a remote actor's `fetched_at` and `gone_at` (its name is from its document,
//!   stored with `fetched_at`).
//! - **custom emojis** shown as images: the whole set (id, shortcode, URL) is hashed; it is
//!   small and an emoji added, removed or replaced changes how any text renders.
//!
//! What the tag does not need: the viewer (pages are the anonymous view), `Last-Modified`
//! (derived from the same facts, sent with the 200). A fact read before a change and a body rendered after it
//! can only make a reader fetch once more (its tag is then older than the page); a body older
//! than its tag cannot happen, as the facts are read first.

use sha2::Digest;
use sqlx::PgConnection;
use uuid::Uuid;

/// One statement: for the accounts `$1` (shown as profiles or list entries) and the items `$2`
/// (posts or boosts, in page order), everything the page shows that can change; plus the
/// custom emojis. Each id is probed by primary key or an index (`reblogs`, `statuses`,
/// `remote_posts`, `accounts` by id; counts by `reblogs_post`, `favourites_post`,
/// `remote_interactions_object`, `statuses_in_reply_to` and the posts view by uri).
const FACTS_SQL: &str = "
WITH acc AS (
    SELECT string_agg(concat_ws(',', a.id, a.username, a.updated_at, st.public_statuses, st.followers,
                                st.following,
                                (SELECT string_agg(v.value || '=' || v.verified_at, '|' ORDER BY v.value)
                                   FROM account_field_verifications v WHERE v.account_id = a.id)),
                      ';' ORDER BY a.id) AS facts
      FROM accounts a LEFT JOIN account_stats st ON st.account_id = a.id
     WHERE a.id = ANY($1)
), items AS (
    SELECT t.n, t.id, r.id AS boost, r.visibility AS boost_visibility, r.account_id AS booster,
           r.pending_approval AS boost_pending,
           coalesce(r.post_id, t.id) AS pid
      FROM unnest($2::uuid[]) WITH ORDINALITY AS t(id, n)
      LEFT JOIN reblogs r ON r.id = t.id
), shown AS (
    SELECT i.n, concat_ws(',', i.id, i.boost, i.boost_visibility, i.boost_pending, i.booster,
           i.pid, s.id IS NOT NULL, s.visibility, s.pending_approval, s.edited_at,
           s.in_reply_to_uri, md5(s.mentions::text),
           array_to_string(s.tags, ' '), la.updated_at,
           rp.id IS NOT NULL, rp.deleted_at, rp.edited_at, rp.updated_at, rp.visibility,
           ra.fetched_at, ra.gone_at,
           (SELECT count(*) FROM posts c WHERE c.in_reply_to_uri = coalesce(s.uri, rp.iri)
               AND c.visibility IN ('public', 'unlisted') AND NOT c.pending_approval),
           (SELECT count(*) FROM reblogs b WHERE b.post_id = i.pid AND NOT b.pending_approval),
           (SELECT count(*) FROM favourites f WHERE f.post_id = i.pid AND NOT f.pending_approval),
           (SELECT count(*) FROM remote_interactions x
             WHERE x.object = coalesce(s.uri, rp.iri) AND x.kind = 'like' AND x.undone_at IS NULL),
           (SELECT count(*) FROM posts pp WHERE pp.uri = coalesce(s.in_reply_to_uri, rp.in_reply_to)),
           (SELECT string_agg(md5(m::text), '|' ORDER BY m.id)
              FROM media_attachments m WHERE m.status_id = s.id),
           (SELECT concat_ws('/', pl.id, pl.expires_at <= now(),
                   (SELECT string_agg(v.choice || ':' || v.n, '|' ORDER BY v.choice)
                      FROM (SELECT choice, count(*) AS n FROM poll_votes
                             WHERE poll_id = pl.id GROUP BY choice) v),
                   (SELECT count(DISTINCT coalesce(pv.account_id::text, pv.actor_iri))
                      FROM poll_votes pv WHERE pv.poll_id = pl.id))
              FROM polls pl WHERE pl.status_id = s.id)) AS facts
      FROM items i
      LEFT JOIN statuses s ON s.id = i.pid
      LEFT JOIN accounts la ON la.id = s.account_id
      LEFT JOIN remote_posts rp ON rp.id = i.pid AND s.id IS NULL
      LEFT JOIN remote_actors ra ON ra.iri = rp.actor
)
SELECT concat_ws('#',
    (SELECT facts FROM acc),
    (SELECT string_agg(facts, ';' ORDER BY n) FROM shown),
    (SELECT string_agg(concat_ws(',', e.id, e.shortcode, e.url), ';' ORDER BY e.id)
       FROM custom_emojis e))";

/// This build's page code: anything in it may change a page's bytes.
fn code_version() -> &'static str {
    static V: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let mut h = sha2::Sha256::new();
        h.update(crate::VERSION.as_bytes());
        for (name, source) in super::TEMPLATES {
            h.update(name.as_bytes());
            h.update(source.as_bytes());
        }
        h.update(super::css_version().as_bytes());
        hex(&h.finalize())
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The strong `ETag` of the page `page` (its kind, key and cursor, as the handler names it),
/// which shows the `accounts` (as profiles or list entries) and the `items` (posts or boosts,
/// in page order).
pub async fn etag(
    conn: &mut PgConnection,
    origin: &str,
    page: &str,
    accounts: &[Uuid],
    items: &[Uuid],
) -> Result<String, sqlx::Error> {
    let facts: Option<String> = sqlx::query_scalar(FACTS_SQL)
        .bind(accounts)
        .bind(items)
        .fetch_one(conn)
        .await?;
    let mut h = sha2::Sha256::new();
    for part in [code_version(), origin, page] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for id in items {
        h.update(id.as_bytes());
    }
    h.update([0]);
    h.update(facts.unwrap_or_default().as_bytes());
    Ok(format!("\"{}\"", hex(&h.finalize())))
}
