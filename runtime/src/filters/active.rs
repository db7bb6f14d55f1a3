//! A reader's filters in force, applied to what they are shown (issue 31 item 3): a status
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

use chrono::{DateTime, Utc};
use regex::Regex;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{Action, Context};
use crate::mastodon::Status;
use crate::mastodon::filter::{Filter as FilterEntity, FilterResult};

/// One filter, ready to match.
#[derive(Clone, Debug)]
struct Compiled {
    entity: FilterEntity,
    contexts: Vec<Context>,
    action: Action,
    expires_at: Option<DateTime<Utc>>,
    keywords: Vec<(String, Regex)>,
    statuses: HashSet<Uuid>,
}

/// The filters of one reader that had not ended when loaded.
#[derive(Clone, Debug, Default)]
pub struct Active {
    /// The reader's Account id, as entities name it: their own statuses are never filtered
    /// (GoToSocial's rule, and Mastodon's apps').
    viewer: String,
    filters: Vec<Compiled>,
}

/// Mastodon's keyword rule: case-insensitive; a whole-word keyword must not run on into a
/// word character where it begins or ends with one (so `#tag` or `:)` still match inside
/// text). `None` only for a pattern the regex engine refuses (too big).
pub fn keyword_regex(keyword: &str, whole_word: bool) -> Option<Regex> {
    let escaped = regex::escape(keyword);
    let pattern = if whole_word {
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        let start = if word(keyword.chars().next()) {
            r"\b"
        } else {
            ""
        };
        let end = if word(keyword.chars().last()) {
            r"\b"
        } else {
            ""
        };
        format!("(?i){start}{escaped}{end}")
    } else {
        format!("(?i){escaped}")
    };
    Regex::new(&pattern).ok()
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
    let mut parts = vec![s.spoiler_text.clone(), crate::html::to_text(&content)];
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
        let filters = all
            .iter()
            .filter(|f| f.expires_at.is_none_or(|e| e > now))
            .map(|f| Compiled {
                entity: FilterEntity::summary(f),
                contexts: f.context.clone(),
                action: f.action,
                expires_at: f.expires_at,
                keywords: f
                    .keywords
                    .iter()
                    .filter_map(|k| {
                        Some((k.keyword.clone(), keyword_regex(&k.keyword, k.whole_word)?))
                    })
                    .collect(),
                statuses: f.statuses.iter().map(|s| s.status_id).collect(),
            })
            .collect();
        Ok(Active {
            viewer: viewer.to_string(),
            filters,
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
        let mut text: Option<String> = None;
        let id = proper.uuid();
        for f in &self.filters {
            if !f.contexts.contains(&context) || f.expires_at.is_some_and(|e| e <= now) {
                continue;
            }
            let keyword_matches: Vec<String> = if f.keywords.is_empty() {
                Vec::new()
            } else {
                let text = text.get_or_insert_with(|| searchable_text(proper));
                f.keywords
                    .iter()
                    .filter(|(_, re)| re.is_match(text))
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
    pub fn apply(&self, context: Context, statuses: Vec<Status>) -> Vec<Status> {
        if self.filters.is_empty() {
            return statuses;
        }
        statuses
            .into_iter()
            .filter_map(|s| self.apply_one(context, s))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_words_do_not_match_inside_words() {
        let re = keyword_regex("cat", true).unwrap();
        assert!(re.is_match("a Cat sat"));
        assert!(re.is_match("cat."));
        assert!(!re.is_match("concatenate"));
        assert!(!re.is_match("cats"));
        let loose = keyword_regex("cat", false).unwrap();
        assert!(loose.is_match("concatenate"));
    }

    #[test]
    fn keywords_are_literal_and_edges_follow_the_keyword() {
        let re = keyword_regex("#rust", true).unwrap();
        assert!(
            re.is_match("I like #Rust!"),
            "no boundary before a non-word start"
        );
        assert!(!re.is_match("#rustacean"));
        let dots = keyword_regex("a.b", false).unwrap();
        assert!(
            dots.is_match("xa.by") && !dots.is_match("axb"),
            "escaped, not a pattern"
        );
        let ue = keyword_regex("über", true).unwrap();
        assert!(
            ue.is_match("ÜBER alles") && !ue.is_match("überall"),
            "Unicode words"
        );
    }
}
