//! Mastodon's `Tag` (<https://docs.joinmastodon.org/entities/Tag/>) as the tags API, search
//! and followed tags answer it, and `FeaturedTag` (R-MAPI-6).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Urls;
use crate::tags::{Day, featured::Featured};

#[derive(Clone, Debug, Serialize)]
pub struct Tag {
    pub name: String,
    pub url: Option<String>,
    pub history: Vec<History>,
    /// Whether the viewer follows it; absent for an anonymous reader.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub following: Option<bool>,
}

/// One day of use; Mastodon sends the numbers as strings.
#[derive(Clone, Debug, Serialize)]
pub struct History {
    pub day: String,
    pub uses: String,
    pub accounts: String,
}

impl History {
    /// A week of use as Mastodon shows it: numbers as strings, days as UNIX times.
    pub fn of(days: &[Day]) -> Vec<History> {
        days.iter()
            .map(|d| History {
                day: d.day.timestamp().to_string(),
                uses: d.uses.to_string(),
                accounts: d.accounts.to_string(),
            })
            .collect()
    }
}

impl Tag {
    pub fn new(urls: Urls<'_>, name: &str, history: &[Day], following: Option<bool>) -> Tag {
        Tag {
            name: name.to_string(),
            url: urls.tag(name),
            history: History::of(history),
            following,
        }
    }
}

/// <https://docs.joinmastodon.org/entities/FeaturedTag/>
#[derive(Clone, Debug, Serialize)]
pub struct FeaturedTag {
    pub id: String,
    pub name: String,
    /// The account's posts with the tag (`<profile>/tagged/<name>` on Mastodon; here the
    /// tag's page, the one a browser can open).
    pub url: Option<String>,
    /// A string, as Mastodon's serializer sends it.
    pub statuses_count: String,
    /// The day of the latest, as Mastodon gives it (a date, not a time).
    pub last_status_at: Option<String>,
}

impl FeaturedTag {
    pub fn new(urls: Urls<'_>, f: &Featured) -> FeaturedTag {
        FeaturedTag {
            id: f.id.to_string(),
            name: f.name.clone(),
            url: urls.tag(&f.name),
            statuses_count: f.statuses_count.to_string(),
            last_status_at: f
                .last_status_at
                .map(|t: DateTime<Utc>| t.date_naive().to_string()),
        }
    }
}
