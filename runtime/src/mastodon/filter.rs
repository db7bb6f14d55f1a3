//! Mastodon's filter entities (R-MAPI-6): `Filter`, `FilterKeyword`, `FilterStatus`,
//! the `FilterResult` a matching status carries in `filtered`, and the v1 `Filter` old
//! clients read (one per keyword).

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::filters;

/// <https://docs.joinmastodon.org/entities/Filter/>. In a `FilterResult` the rules are left
/// out, as Mastodon does.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Filter {
    pub id: String,
    pub title: String,
    pub context: Vec<&'static str>,
    pub expires_at: Option<DateTime<Utc>>,
    pub filter_action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keywords: Option<Vec<FilterKeyword>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statuses: Option<Vec<FilterStatus>>,
}

/// <https://docs.joinmastodon.org/entities/FilterKeyword/>
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FilterKeyword {
    pub id: String,
    pub keyword: String,
    pub whole_word: bool,
}

/// <https://docs.joinmastodon.org/entities/FilterStatus/>
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FilterStatus {
    pub id: String,
    pub status_id: String,
}

/// <https://docs.joinmastodon.org/entities/FilterResult/>
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FilterResult {
    pub filter: Filter,
    pub keyword_matches: Option<Vec<String>>,
    pub status_matches: Option<Vec<String>>,
}

/// The v1 `Filter` (<https://docs.joinmastodon.org/entities/V1_Filter/>): one keyword of a
/// filter, with its filter's contexts and end; `irreversible` is the `hide` action.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct V1Filter {
    pub id: String,
    pub phrase: String,
    pub context: Vec<&'static str>,
    pub whole_word: bool,
    pub expires_at: Option<DateTime<Utc>>,
    pub irreversible: bool,
}

impl Filter {
    /// The entity without its rules (as in `filtered`).
    pub fn summary(f: &filters::Filter) -> Filter {
        Filter {
            id: f.id.to_string(),
            title: f.title.clone(),
            context: f.context.iter().map(|c| c.as_str()).collect(),
            expires_at: f.expires_at,
            filter_action: f.action.as_str(),
            keywords: None,
            statuses: None,
        }
    }

    /// The entity with its rules (the filters API).
    pub fn full(f: &filters::Filter) -> Filter {
        Filter {
            keywords: Some(f.keywords.iter().map(FilterKeyword::from).collect()),
            statuses: Some(f.statuses.iter().map(FilterStatus::from).collect()),
            ..Filter::summary(f)
        }
    }
}

impl From<&filters::Keyword> for FilterKeyword {
    fn from(k: &filters::Keyword) -> FilterKeyword {
        FilterKeyword {
            id: k.id.to_string(),
            keyword: k.keyword.clone(),
            whole_word: k.whole_word,
        }
    }
}

impl From<&filters::StatusRule> for FilterStatus {
    fn from(s: &filters::StatusRule) -> FilterStatus {
        FilterStatus {
            id: s.id.to_string(),
            status_id: s.status_id.to_string(),
        }
    }
}

impl V1Filter {
    /// Keyword `k` of filter `f`, as a v1 filter.
    pub fn of(f: &filters::Filter, k: &filters::Keyword) -> V1Filter {
        V1Filter {
            id: k.id.to_string(),
            phrase: k.keyword.clone(),
            context: f.context.iter().map(|c| c.as_str()).collect(),
            whole_word: k.whole_word,
            expires_at: f.expires_at,
            irreversible: f.action == filters::Action::Hide,
        }
    }
}
