//! Mastodon's `Suggestion` entity (v2): an account to follow and why.

use serde::Serialize;

use super::Account;
use crate::suggestions::Source;

#[derive(Clone, Debug, Serialize)]
pub struct Suggestion {
    /// The deprecated single reason, as Mastodon 4.3 still sends it: `past_interactions` for
    /// what one's network does, `global` for what the server does.
    pub source: &'static str,
    /// Mastodon 4.3's reasons.
    pub sources: Vec<&'static str>,
    pub account: Account,
}

impl Suggestion {
    pub fn new(sources: &[Source], account: Account) -> Suggestion {
        let source = if sources.contains(&Source::FriendsOfFriends) {
            "past_interactions"
        } else {
            "global"
        };
        Suggestion {
            source,
            sources: sources.iter().map(|s| s.as_str()).collect(),
            account,
        }
    }
}
