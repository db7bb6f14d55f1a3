//! What a reader chose not to see (issue 31 item 2): the accounts they mute or block. Their
//! posts, and boosts by them or of their posts, stay out of the reader's home, list, public
//! and tag timelines and streams; their notifications too when the mute says so (a block
//! always). Opening such a status directly still works, as on Mastodon: this is a preference,
//! not the visibility rule (`access`), and it is applied where timelines are listed.
//!
//! Why a set loaded per request rather than a join in every timeline query: mutes and blocks
//! are named by actor IRI (local accounts too), posts by account id, and a reader has few of
//! them; one small query turns them into both forms, bound as arrays, so each timeline's own
//! index scan stays as it was and only filters its candidates. A mute past its `expires_at`
//! hides nothing from that moment on, whether or not the expiry task has removed it yet.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::mastodon::Urls;

/// The accounts one reader does not want to see.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hidden {
    /// Their actor IRIs (as `home_feed.source` names whose activity an entry is).
    pub iris: Vec<String>,
    /// Their Account entity ids (as `posts.author_id` and `notifications.from_account_id`).
    pub ids: Vec<Uuid>,
    /// The ids whose notifications are hidden too: blocks, and mutes with `notifications`.
    pub quiet: Vec<Uuid>,
}

impl Hidden {
    /// The mutes in force and the blocks of `viewer` (nothing for an anonymous reader).
    pub async fn load(
        conn: &mut PgConnection,
        urls: Urls<'_>,
        viewer: Option<Uuid>,
    ) -> Result<Hidden, sqlx::Error> {
        let Some(viewer) = viewer else {
            return Ok(Hidden::default());
        };
        // A local target's id is its account's: `<origin>/users/<name>` names it.
        let local_prefix = urls.actor("");
        let rows: Vec<(String, bool, Option<Uuid>)> = sqlx::query_as(
            "SELECT h.iri, h.quiet, coalesce(ra.id, a.id)
               FROM (SELECT target_iri AS iri, notifications AS quiet FROM account_mutes
                      WHERE account_id = $1 AND (expires_at IS NULL OR expires_at > now())
                     UNION ALL
                     SELECT target_iri, true FROM account_blocks WHERE account_id = $1) h
               LEFT JOIN remote_actors ra ON ra.iri = h.iri
               LEFT JOIN accounts a ON starts_with(h.iri, $2)
                     AND lower(a.username) = lower(substr(h.iri, length($2) + 1))",
        )
        .bind(viewer)
        .bind(&local_prefix)
        .fetch_all(conn)
        .await?;
        let mut hidden = Hidden::default();
        for (iri, quiet, id) in rows {
            if let Some(id) = id {
                hidden.ids.push(id);
                if quiet {
                    hidden.quiet.push(id);
                }
            }
            hidden.iris.push(iri);
        }
        Ok(hidden)
    }

    pub fn is_empty(&self) -> bool {
        self.iris.is_empty()
    }

    /// The condition on the `posts` row `alias` for the ids bound as `$ids_param`
    /// (`uuid[]`): its author is not hidden. Empty when nothing is hidden, so an unfiltered
    /// reader's plan is the plain one.
    pub fn post_sql(&self, alias: &str, ids_param: u32) -> String {
        if self.ids.is_empty() {
            return String::new();
        }
        format!(" AND NOT ({alias}.author_id = ANY(${ids_param}::uuid[]))")
    }

    /// The condition on a feed row `alias` (`home_feed`, `list_feed`: `source`, `post_id`)
    /// for the IRIs bound as `$iris_param` and the ids as `$ids_param`: the entry is not by a
    /// hidden account (a post or a boost of theirs) nor a boost of a hidden account's post.
    /// The post is probed by id in a scalar subquery, one index lookup per candidate (an
    /// `EXISTS` may be planned as a hash of the whole `posts` view, issue 38).
    pub fn entry_sql(&self, alias: &str, iris_param: u32, ids_param: u32) -> String {
        if self.is_empty() {
            return String::new();
        }
        format!(
            " AND NOT ({alias}.source = ANY(${iris_param}::text[]))
              AND coalesce((SELECT true FROM posts hp
                             WHERE hp.id = {alias}.post_id
                               AND hp.author_id = ANY(${ids_param}::uuid[]) LIMIT 1), false) = false"
        )
    }

    /// The condition on a `notifications` row `alias` for the ids bound as `$quiet_param`: it
    /// is not from an account whose notifications are hidden. Empty when there is none.
    pub fn notification_sql(&self, alias: &str, quiet_param: u32) -> String {
        if self.quiet.is_empty() {
            return String::new();
        }
        format!(" AND NOT coalesce({alias}.from_account_id = ANY(${quiet_param}::uuid[]), false)")
    }

    /// Whether a rendered entry by `author` (and, for a boost, of a post by `boosted`) is
    /// hidden: the streams' check, on the entity they are about to send.
    pub fn hides(&self, author: Uuid, boosted: Option<Uuid>) -> bool {
        self.ids.contains(&author) || boosted.is_some_and(|b| self.ids.contains(&b))
    }

    /// Whether a notification from `from` is hidden.
    pub fn silences(&self, from: Option<Uuid>) -> bool {
        from.is_some_and(|f| self.quiet.contains(&f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_hidden_adds_no_condition() {
        let none = Hidden::default();
        assert_eq!(none.post_sql("p", 3), "");
        assert_eq!(none.entry_sql("h", 3, 4), "");
        assert_eq!(none.notification_sql("n", 3), "");
        assert!(!none.hides(Uuid::nil(), None));
        assert!(!none.silences(Some(Uuid::nil())));
    }

    #[test]
    fn hidden_authors_and_boosts_are_caught() {
        let muted = Uuid::from_u128(1);
        let quiet = Uuid::from_u128(2);
        let h = Hidden {
            iris: vec![
                "https://a.example/u/1".into(),
                "https://a.example/u/2".into(),
            ],
            ids: vec![muted, quiet],
            quiet: vec![quiet],
        };
        assert!(h.post_sql("p", 3).contains("p.author_id = ANY($3::uuid[])"));
        let entry = h.entry_sql("h", 3, 4);
        assert!(entry.contains("h.source = ANY($3::text[])") && entry.contains("ANY($4::uuid[])"));
        assert!(
            h.notification_sql("n", 5)
                .contains("n.from_account_id = ANY($5::uuid[])")
        );
        assert!(h.hides(muted, None));
        assert!(
            h.hides(Uuid::nil(), Some(muted)),
            "a boost of a muted author's post"
        );
        assert!(!h.hides(Uuid::nil(), Some(Uuid::from_u128(9))));
        assert!(h.silences(Some(quiet)) && !h.silences(Some(muted)) && !h.silences(None));
    }
}
