//! What a reader chose not to see (R-MAPI-6): the accounts they mute or block
//! and the servers they block. Their posts, and boosts by them or of their posts, stay out of
//! the reader's home, list, public and tag timelines and streams; their notifications too when
//! the mute says so (a block, of an account or a domain, always). Opening such a status directly still works, as on Mastodon: this is a preference,
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
    /// Blocked domains (`account_domain_blocks`): every actor whose IRI's host is one of them
    /// or under one (`hollo_host_in`).
    pub domains: Vec<String>,
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
        .fetch_all(&mut *conn)
        .await?;
        let mut hidden = Hidden {
            domains: sqlx::query_scalar(
                "SELECT domain FROM account_domain_blocks WHERE account_id = $1",
            )
            .bind(viewer)
            .fetch_all(&mut *conn)
            .await?,
            ..Hidden::default()
        };
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

    /// [`Hidden::load`] on a connection of `pool` (nothing, and no connection, for an
    /// anonymous reader).
    pub async fn of(
        pool: &sqlx::PgPool,
        urls: Urls<'_>,
        viewer: Option<Uuid>,
    ) -> Result<Hidden, sqlx::Error> {
        if viewer.is_none() {
            return Ok(Hidden::default());
        }
        Hidden::load(&mut *pool.acquire().await?, urls, viewer).await
    }

    pub fn is_empty(&self) -> bool {
        self.iris.is_empty() && self.domains.is_empty()
    }

    /// `iri_expr` names an actor on a blocked domain, for the domains bound as `$domains_param`.
    fn on_domain(iri_expr: &str, domains_param: u32) -> String {
        format!("hollo_host_in(hollo_iri_host({iri_expr}), ${domains_param}::text[])")
    }

    /// The condition on the `posts` row `alias` for the ids bound as `$ids_param` (`uuid[]`)
    /// and the domains as `$domains_param` (`text[]`): its author is not hidden. Empty when
    /// nothing is hidden, so an unfiltered reader's plan is the plain one.
    pub fn post_sql(&self, alias: &str, ids_param: u32, domains_param: u32) -> String {
        let mut sql = String::new();
        if !self.ids.is_empty() {
            sql.push_str(&format!(
                " AND NOT ({alias}.author_id = ANY(${ids_param}::uuid[]))"
            ));
        }
        if !self.domains.is_empty() {
            let on = Self::on_domain(&format!("{alias}.actor_iri"), domains_param);
            sql.push_str(&format!(" AND NOT {on}"));
        }
        sql
    }

    /// The condition on a feed row `alias` (`home_feed`, `list_feed`: `source`, `post_id`)
    /// for the IRIs bound as `$iris_param`, the ids as `$ids_param` and the domains as
    /// `$domains_param`: the entry is not by a hidden account or server (a post or a boost of
    /// theirs) nor a boost of their post. The post is probed by id in a scalar subquery, one
    /// index lookup per candidate (an `EXISTS` may be planned as a hash of the whole `posts`
    /// view, R-MAPI-4).
    pub fn entry_sql(
        &self,
        alias: &str,
        iris_param: u32,
        ids_param: u32,
        domains_param: u32,
    ) -> String {
        if self.is_empty() {
            return String::new();
        }
        let source_on = Self::on_domain(&format!("{alias}.source"), domains_param);
        let author_on = Self::on_domain("hp.actor_iri", domains_param);
        format!(
            " AND NOT ({alias}.source = ANY(${iris_param}::text[])) AND NOT {source_on}
              AND coalesce((SELECT true FROM posts hp
                             WHERE hp.id = {alias}.post_id
                               AND (hp.author_id = ANY(${ids_param}::uuid[]) OR {author_on})
                             LIMIT 1), false) = false"
        )
    }

    /// The condition on a `notifications` row `alias` for the ids bound as `$quiet_param` and
    /// the domains as `$domains_param`: it is not from an account whose notifications are
    /// hidden, nor from a blocked server. Empty when there is none.
    pub fn notification_sql(&self, alias: &str, quiet_param: u32, domains_param: u32) -> String {
        let mut sql = String::new();
        if !self.quiet.is_empty() {
            sql.push_str(&format!(
                " AND NOT coalesce({alias}.from_account_id = ANY(${quiet_param}::uuid[]), false)"
            ));
        }
        if !self.domains.is_empty() {
            let on = Self::on_domain("ra.iri", domains_param);
            sql.push_str(&format!(
                " AND NOT coalesce((SELECT {on} FROM remote_actors ra
                                     WHERE ra.id = {alias}.from_account_id), false)"
            ));
        }
        sql
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
        assert_eq!(none.post_sql("p", 3, 4), "");
        assert_eq!(none.entry_sql("h", 3, 4, 5), "");
        assert_eq!(none.notification_sql("n", 3, 4), "");
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
            domains: vec![],
        };
        assert!(
            h.post_sql("p", 3, 4)
                .contains("p.author_id = ANY($3::uuid[])")
        );
        assert!(
            !h.post_sql("p", 3, 4).contains("$4"),
            "no domain, no domain filter"
        );
        let entry = h.entry_sql("h", 3, 4, 5);
        assert!(entry.contains("h.source = ANY($3::text[])") && entry.contains("ANY($4::uuid[])"));
        assert!(
            h.notification_sql("n", 5, 6)
                .contains("n.from_account_id = ANY($5::uuid[])")
        );
        let servers = Hidden {
            domains: vec!["example.com".into()],
            ..Hidden::default()
        };
        assert!(!servers.is_empty());
        assert!(
            servers
                .post_sql("p", 3, 4)
                .contains("hollo_iri_host(p.actor_iri), $4::text[]")
        );
        assert!(
            servers
                .entry_sql("h", 3, 4, 5)
                .contains("hollo_iri_host(h.source), $5::text[]")
        );
        assert!(servers.notification_sql("n", 5, 6).contains("$6::text[]"));
        assert!(h.hides(muted, None));
        assert!(
            h.hides(Uuid::nil(), Some(muted)),
            "a boost of a muted author's post"
        );
        assert!(!h.hides(Uuid::nil(), Some(Uuid::from_u128(9))));
        assert!(h.silences(Some(quiet)) && !h.silences(Some(muted)) && !h.silences(None));
    }
}
