//! A reader's filters in force, applied to what they are shown (R-MAPI-6): a status
//! matching a filter of the context it is shown in carries a `FilterResult` in `filtered`
//! (`warn`), or is left out (`hide`). Loaded once per request or stream, matched on the
//! rendered entities — the text Mastodon matches (content warning, content, poll options,
//! media descriptions) is all in the entity, so every path (timelines, threads, notifications,
//! streams) applies the same rule the same way.
//!
//! Why after rendering rather than in SQL: keywords are regular expressions over the text of
//! HTML, which the timelines' index scans cannot test; a `hide` filter therefore makes a page
//! shorter, as on GoToSocial, while the page's `Link` cursors still come from what was read.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::keywords::KeywordSet;
use super::{Action, Context};
use crate::mastodon::Status;
use crate::mastodon::filter::{Filter as FilterEntity, FilterResult};
use crate::mastodon::notification::Notification;

/// One filter, ready to match.
#[derive(Clone, Debug)]
struct Compiled {
    entity: FilterEntity,
    contexts: Vec<Context>,
    action: Action,
    expires_at: Option<DateTime<Utc>>,
    /// Its keywords, each with its position in the reader's [`KeywordSet`].
    keywords: Vec<(String, usize)>,
    statuses: HashSet<Uuid>,
}

/// The filters of one reader that had not ended when loaded. Cheap to clone: a page is
/// matched on the blocking pool with a clone ([`Active::apply`]).
#[derive(Clone, Debug, Default)]
pub struct Active {
    /// The reader's Account id, as entities name it: their own statuses are never filtered
    /// (GoToSocial's rule, and Mastodon's apps').
    viewer: String,
    filters: Arc<[Compiled]>,
    /// Every keyword of `filters`, matched together in one pass per status.
    keywords: Arc<KeywordSet>,
}

/// Matching a page's filters was cut short (the blocking pool went away at shutdown, or the
/// match panicked): the request fails rather than showing what a filter may hide.
#[derive(Debug, thiserror::Error)]
#[error("the reader's filters could not be applied")]
pub struct Unfinished;

/// The reader's keywords compiled, on the blocking pool when there are any: an account's
/// whole allowance of nested keywords takes tens of milliseconds to compile.
async fn compile(keywords: Vec<(String, bool)>) -> Arc<KeywordSet> {
    if keywords.is_empty() {
        return Arc::default();
    }
    let build =
        |k: &[(String, bool)]| Arc::new(KeywordSet::new(k.iter().map(|(k, w)| (k.as_str(), *w))));
    let copy = keywords.clone();
    match tokio::task::spawn_blocking(move || build(&copy)).await {
        Ok(set) => set,
        // Only when the pool is going away: compiled here instead, as before.
        Err(_) => build(&keywords),
    }
}

/// The text a status is matched on, as Mastodon builds it: content warning, content (HTML
/// to text, paragraphs and line breaks kept apart), poll options, media descriptions.
fn searchable_text(s: &Status) -> String {
    let content = s
        .content
        .replace("<br>", "\n")
        .replace("<br/>", "\n")
        .replace("<br />", "\n")
        .replace("</p><p>", "\n\n");
    let mut parts = vec![
        s.spoiler_text.clone(),
        crate::html::text_of_sanitized(&content),
    ];
    if let Some(p) = &s.poll {
        parts.extend(p.options.iter().map(|o| o.title.clone()));
    }
    parts.extend(
        s.media_attachments
            .iter()
            .filter_map(|m| m.description.clone()),
    );
    parts.join("\n\n")
}

impl Active {
    /// `viewer`'s filters that have not ended (nothing for an anonymous reader).
    pub async fn load(
        conn: &mut PgConnection,
        viewer: Option<Uuid>,
    ) -> Result<Active, sqlx::Error> {
        let Some(viewer) = viewer else {
            return Ok(Active::default());
        };
        let all = super::all(conn, viewer).await?;
        let now = Utc::now();
        let live: Vec<&super::Filter> = all
            .iter()
            .filter(|f| f.expires_at.is_none_or(|e| e > now))
            .collect();
        let keywords: Vec<(String, bool)> = live
            .iter()
            .flat_map(|f| f.keywords.iter())
            .map(|k| (k.keyword.clone(), k.whole_word))
            .collect();
        let keywords = compile(keywords).await;
        let mut position = 0..;
        let filters = live
            .iter()
            .map(|f| Compiled {
                entity: FilterEntity::summary(f),
                contexts: f.context.clone(),
                action: f.action,
                expires_at: f.expires_at,
                keywords: f
                    .keywords
                    .iter()
                    .zip(&mut position)
                    .map(|(k, at)| (k.keyword.clone(), at))
                    .collect(),
                statuses: f.statuses.iter().map(|s| s.status_id).collect(),
            })
            .collect();
        Ok(Active {
            viewer: viewer.to_string(),
            filters,
            keywords,
        })
    }

    /// [`Active::load`] on a connection of `pool` (none taken for an anonymous reader).
    pub async fn of(pool: &sqlx::PgPool, viewer: Option<Uuid>) -> Result<Active, sqlx::Error> {
        if viewer.is_none() {
            return Ok(Active::default());
        }
        Active::load(&mut *pool.acquire().await?, viewer).await
    }

    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// What the filters of `context` say of `s` (a boost is judged by its boosted status):
    /// the results for `filtered`, and whether one of them hides it. A filter that has ended
    /// since it was loaded (a long-lived stream's) no longer applies.
    fn judge(&self, context: Context, s: &Status, now: DateTime<Utc>) -> (Vec<FilterResult>, bool) {
        let proper = s.reblog.as_deref().unwrap_or(s);
        let mut results = Vec::new();
        if proper.account.id == self.viewer {
            return (results, false);
        }
        let mut hide = false;
        let mut found: Option<Vec<bool>> = None;
        let id = proper.uuid();
        for f in self.filters.iter() {
            if !f.contexts.contains(&context) || f.expires_at.is_some_and(|e| e <= now) {
                continue;
            }
            let keyword_matches: Vec<String> = if f.keywords.is_empty() {
                Vec::new()
            } else {
                let found = found
                    .get_or_insert_with(|| self.keywords.scan(&searchable_text(proper)).keywords);
                f.keywords
                    .iter()
                    .filter(|(_, at)| found.get(*at).copied().unwrap_or(false))
                    .map(|(k, _)| k.clone())
                    .collect()
            };
            let status_matches: Vec<String> = match id {
                Some(id) if f.statuses.contains(&id) => vec![id.to_string()],
                _ => Vec::new(),
            };
            if keyword_matches.is_empty() && status_matches.is_empty() {
                continue;
            }
            hide |= f.action == Action::Hide;
            results.push(FilterResult {
                filter: f.entity.clone(),
                keyword_matches: (!keyword_matches.is_empty()).then_some(keyword_matches),
                status_matches: (!status_matches.is_empty()).then_some(status_matches),
            });
        }
        (results, hide)
    }

    /// `s` as shown in `context`: `None` when a `hide` filter matches, else with `filtered`
    /// set (on a boost, on both it and the boosted status, as Mastodon sets them).
    pub fn apply_one(&self, context: Context, mut s: Status) -> Option<Status> {
        if self.filters.is_empty() {
            return Some(s);
        }
        let (results, hide) = self.judge(context, &s, Utc::now());
        if hide {
            return None;
        }
        if let Some(inner) = s.reblog.as_deref_mut() {
            inner.filtered = results.clone();
        }
        s.filtered = results;
        Some(s)
    }

    /// [`Active::apply_one`] over a page, in order.
    pub async fn apply(
        &self,
        context: Context,
        statuses: Vec<Status>,
    ) -> Result<Vec<Status>, Unfinished> {
        self.off_workers(move |f| {
            statuses
                .into_iter()
                .filter_map(|s| f.apply_one(context, s))
                .collect()
        })
        .await
    }

    /// Notifications as shown in the `notifications` context, in order
    /// ([`Notification::filtered`]).
    pub async fn apply_notifications(
        &self,
        notifications: Vec<Notification>,
    ) -> Result<Vec<Notification>, Unfinished> {
        self.off_workers(move |f| {
            notifications
                .into_iter()
                .filter_map(|n| n.filtered(f))
                .collect()
        })
        .await
    }

    /// `work` with these filters: on the blocking pool when there are keywords to match (a
    /// page of long statuses is milliseconds of matching, which must not hold an async
    /// worker that health checks and every other request share), inline otherwise.
    async fn off_workers<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Active) -> T + Send + 'static,
    ) -> Result<T, Unfinished> {
        if self.keywords.is_empty() {
            return Ok(work(self));
        }
        let filters = self.clone();
        tokio::task::spawn_blocking(move || work(&filters))
            .await
            .map_err(|err| {
                tracing::error!(error = %err, "matching a reader's filters failed");
                Unfinished
            })
    }
}
