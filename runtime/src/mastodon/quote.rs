//! Mastodon 4.5's `Quote` and `ShallowQuote` (a status's `quote`) and `QuoteApproval` (its
//! `quote_approval`).
//!
//! The quoted status is rendered by `status::render`, so the one visibility rule decides
//! whether the viewer sees it: a quote the viewer may not read says `unauthorized` with no
//! status. Only `accepted` quotes show the quoted status; a quoted status inside a quote
//! carries its own quote shallowly (its id), so nesting stops at one level.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

/// `S` is the quoted status's entity (`status::Status`): generic so that this module, which
/// `status` uses, does not use `status` back.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Quote<S> {
    Full {
        state: &'static str,
        quoted_status: Option<Box<S>>,
    },
    Shallow {
        state: &'static str,
        quoted_status_id: Option<String>,
    },
}

#[derive(Clone, Debug, Serialize)]
pub struct QuoteApproval {
    pub automatic: Vec<String>,
    pub manual: Vec<String>,
    /// `automatic`, `manual`, `denied` or `unknown` (no viewer).
    pub current_user: &'static str,
}

/// The quotes the posts among `ids` make: by quoting post, the quoted post's id (when we
/// have it) and the stored state.
pub struct Quotes {
    rows: HashMap<Uuid, (Option<Uuid>, String)>,
}

impl Quotes {
    pub async fn of(conn: &mut PgConnection, ids: &[Uuid]) -> Result<Quotes, sqlx::Error> {
        let rows: Vec<(Uuid, Option<Uuid>, String)> = sqlx::query_as(
            "SELECT q.post_id, p.id, q.state FROM quotes q
               LEFT JOIN LATERAL (SELECT id FROM posts WHERE uri = q.quoted_uri LIMIT 1) p ON true
              WHERE q.post_id = ANY($1)",
        )
        .bind(ids)
        .fetch_all(conn)
        .await?;
        Ok(Quotes {
            rows: rows.into_iter().map(|(p, q, s)| (p, (q, s))).collect(),
        })
    }

    /// The quoted posts of accepted quotes (what needs rendering).
    pub fn quoted_ids(&self) -> Vec<Uuid> {
        let mut ids: Vec<Uuid> = self
            .rows
            .values()
            .filter(|(_, s)| s == "accepted")
            .filter_map(|(q, _)| *q)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The state shown and the quoted post shown, for `post`: `readable` holds the quoted
    /// posts the viewer may read.
    fn shown(
        &self,
        post: Uuid,
        readable: &dyn Fn(Uuid) -> bool,
    ) -> Option<(&'static str, Option<Uuid>)> {
        let (quoted, state) = self.rows.get(&post)?;
        Some(match (state.as_str(), quoted) {
            ("accepted", Some(q)) if readable(*q) => ("accepted", Some(*q)),
            ("accepted", Some(_)) => ("unauthorized", None),
            ("accepted", None) => ("deleted", None),
            ("rejected", _) => ("rejected", None),
            ("revoked", _) => ("revoked", None),
            _ => ("pending", None),
        })
    }

    /// The full quote of `post`, its quoted status taken from `rendered`.
    pub fn full<S: Clone>(&self, post: Uuid, rendered: &HashMap<Uuid, S>) -> Option<Quote<S>> {
        let (state, quoted) = self.shown(post, &|q| rendered.contains_key(&q))?;
        Some(Quote::Full {
            state,
            quoted_status: quoted.and_then(|q| rendered.get(&q)).cloned().map(Box::new),
        })
    }

    /// The shallow quote of `post` (inside a quoted status): `readable` as for [`Self::full`].
    pub fn shallow<S>(&self, post: Uuid, readable: &HashSet<Uuid>) -> Option<Quote<S>> {
        let (state, quoted) = self.shown(post, &|q| readable.contains(&q))?;
        Some(Quote::Shallow {
            state,
            quoted_status_id: quoted.map(|q| q.to_string()),
        })
    }
}
