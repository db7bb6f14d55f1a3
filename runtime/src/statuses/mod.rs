//! Statuses as Mastodon apps see them (SPEC §11, R-MAPI-3/4): one id space for our
//! posts (`statuses`), theirs (`remote_posts`) and boosts (`reblogs`), joined by the `posts`
//! view; who may read what (`access`, which `mastodon::status` renders through); and the one way each of home timelines (`feed::push`) and notifications
//! (`notify::notify`) is written, so streaming hears of both from one place.

pub mod access;
pub mod context;
pub mod conversation_mutes;
pub mod conversations;
pub mod feed;
pub mod followers;
pub mod hidden;
pub mod interact;
pub mod notify;
pub mod pins;
pub mod post;
pub mod preferences;
pub mod scheduled;
pub mod write;

use serde_json::Value;

/// Mastodon's four visibilities, as stored (`statuses.visibility`, `remote_posts.visibility`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    Public,
    Unlisted,
    Private,
    Direct,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Public => "public",
            Visibility::Unlisted => "unlisted",
            Visibility::Private => "private",
            Visibility::Direct => "direct",
        }
    }

    /// A client's `visibility` parameter; `None` for anything Mastodon would not accept.
    pub fn parse(s: &str) -> Option<Visibility> {
        Some(match s {
            "public" => Visibility::Public,
            "unlisted" => Visibility::Unlisted,
            "private" => Visibility::Private,
            "direct" => Visibility::Direct,
            _ => return None,
        })
    }

    /// What a remote post's addressing means, as Mastodon reads it: the public collection in
    /// `to` is public, in `cc` unlisted; otherwise the author's followers collection anywhere
    /// is followers-only, and anything else is direct.
    pub fn of_addressing(object: &Value, followers: Option<&str>) -> Visibility {
        let has = |key: &str, iri: &str| match object.get(key) {
            Some(Value::String(s)) => s == iri,
            Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(iri)),
            _ => false,
        };
        let public = |key: &str| PUBLIC_FORMS.iter().any(|p| has(key, p));
        if public("to") {
            Visibility::Public
        } else if public("cc") {
            Visibility::Unlisted
        } else if followers.is_some_and(|f| has("to", f) || has("cc", f)) {
            Visibility::Private
        } else {
            Visibility::Direct
        }
    }
}

/// The public collection and the compact forms implementations send for it.
const PUBLIC_FORMS: [&str; 3] = [crate::federation::vocab::PUBLIC, "as:Public", "Public"];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn addressing_reads_as_mastodon_does() {
        let f = "https://r.example/users/a/followers";
        let p = crate::federation::vocab::PUBLIC;
        for (o, want) in [
            (json!({"to": [p], "cc": [f]}), Visibility::Public),
            (json!({"to": "as:Public"}), Visibility::Public),
            (json!({"to": [f], "cc": [p]}), Visibility::Unlisted),
            (json!({"to": [f]}), Visibility::Private),
            (json!({"cc": f}), Visibility::Private),
            (
                json!({"to": ["https://h.example/users/me"]}),
                Visibility::Direct,
            ),
            (json!({}), Visibility::Direct),
        ] {
            assert_eq!(Visibility::of_addressing(&o, Some(f)), want, "{o}");
        }
        assert_eq!(
            Visibility::of_addressing(&json!({"to": [f]}), None),
            Visibility::Direct
        );
    }

    #[test]
    fn parse_round_trips_and_refuses_others() {
        for v in ["public", "unlisted", "private", "direct"] {
            assert_eq!(Visibility::parse(v).map(Visibility::as_str), Some(v));
        }
        assert_eq!(Visibility::parse("limited"), None);
        assert_eq!(Visibility::parse("Public"), None);
    }
}
