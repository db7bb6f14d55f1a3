//! Mastodon's List entity (R-MAPI-6).

use serde::Serialize;

/// <https://docs.joinmastodon.org/entities/List/>
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct List {
    pub id: String,
    pub title: String,
    /// `followed`, `list` or `none`.
    pub replies_policy: &'static str,
    pub exclusive: bool,
}

impl From<&crate::lists::List> for List {
    fn from(l: &crate::lists::List) -> List {
        List {
            id: l.id.to_string(),
            title: l.title.clone(),
            replies_policy: l.replies_policy.as_str(),
            exclusive: l.exclusive,
        }
    }
}
