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

use chrono::{DateTime, Utc};
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
    keywords: Vec<(String, KeywordMatcher)>,
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

/// One keyword, ready to match: Mastodon's rule — case-insensitive; a whole-word keyword must
/// not run on into a word character where it begins or ends with one (so `#tag` or `:)`
/// still match inside text). Matched by searching the lowercased text, not by a regular
/// expression: compiling 50 Unicode-aware patterns on every request cost a signed-in
/// timeline page 20-50 ms (bench/timelines), finding a literal costs microseconds.
#[derive(Clone, Debug)]
pub struct KeywordMatcher {
    lower: String,
    /// Whole word, at the keyword's start / end (only where it has a word character there).
    bound_start: bool,
    bound_end: bool,
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl KeywordMatcher {
    pub fn new(keyword: &str, whole_word: bool) -> KeywordMatcher {
        KeywordMatcher {
            lower: keyword.to_lowercase(),
            bound_start: whole_word && keyword.chars().next().is_some_and(is_word),
            bound_end: whole_word && keyword.chars().last().is_some_and(is_word),
        }
    }

    /// Whether the keyword occurs in `text_lower` (the text, lowercased).
    pub fn is_match(&self, text_lower: &str) -> bool {
        if self.lower.is_empty() {
            return false;
        }
        text_lower
            .match_indices(self.lower.as_str())
            .any(|(at, m)| {
                let before = text_lower[..at].chars().next_back();
                let after = text_lower[at + m.len()..].chars().next();
                let runs_on = (self.bound_start && before.is_some_and(is_word))
                    || (self.bound_end && after.is_some_and(is_word));
                !runs_on
            })
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
                    .map(|k| {
                        (
                            k.keyword.clone(),
                            KeywordMatcher::new(&k.keyword, k.whole_word),
                        )
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
                let text = text.get_or_insert_with(|| searchable_text(proper).to_lowercase());
                f.keywords
                    .iter()
                    .filter(|(_, m)| m.is_match(text))
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

    fn hit(keyword: &str, whole_word: bool, text: &str) -> bool {
        KeywordMatcher::new(keyword, whole_word).is_match(&text.to_lowercase())
    }

    #[test]
    fn whole_words_do_not_match_inside_words() {
        assert!(hit("cat", true, "a Cat sat"));
        assert!(hit("Cat", true, "cat."));
        assert!(!hit("cat", true, "concatenate"));
        assert!(!hit("cat", true, "cats"));
        assert!(
            hit("cat", true, "cats and a cat"),
            "a later occurrence counts"
        );
        assert!(hit("cat", false, "concatenate"));
        assert!(hit("two words", true, "said two  words? no: two words!"));
    }

    #[test]
    fn keywords_are_literal_and_edges_follow_the_keyword() {
        assert!(
            hit("#rust", true, "I like #Rust!"),
            "no boundary before a non-word start"
        );
        assert!(!hit("#rust", true, "#rustacean"));
        assert!(
            hit("a.b", false, "xa.by") && !hit("a.b", false, "axb"),
            "literal, not a pattern"
        );
        assert!(
            hit("über", true, "ÜBER alles") && !hit("über", true, "überall"),
            "Unicode words"
        );
        assert!(hit(":)", true, "fine:)"), "no word edge to check");
        assert!(!hit("", false, "anything"));
    }
}
