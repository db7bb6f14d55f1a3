//! OAuth scopes as Mastodon defines them (R-MAPI): the top-level `read`, `write`, `follow`,
//! `push`, `profile` and the granular `read:statuses`-style ones. A token holds a set; a route
//! needs one of a few. `read` grants every `read:…`, `write` every `write:…`, and the deprecated
//! `follow` the follow/block/mute ones, exactly as Mastodon's `Doorkeeper` scopes do, so apps
//! that ask for the coarse scopes keep working.

use std::collections::BTreeSet;
use std::fmt;

/// Every scope a token may hold. Anything else is refused when an app registers or asks for
/// a token (`invalid_scope`), never silently dropped.
pub const KNOWN: &[&str] = &[
    "read",
    "write",
    "follow",
    "push",
    "profile",
    "read:accounts",
    "read:blocks",
    "read:bookmarks",
    "read:favourites",
    "read:filters",
    "read:follows",
    "read:lists",
    "read:mutes",
    "read:notifications",
    "read:search",
    "read:statuses",
    "write:accounts",
    "write:blocks",
    "write:bookmarks",
    "write:conversations",
    "write:favourites",
    "write:filters",
    "write:follows",
    "write:lists",
    "write:media",
    "write:mutes",
    "write:notifications",
    "write:reports",
    "write:statuses",
];

/// What the deprecated `follow` scope grants.
const FOLLOW_GRANTS: &[&str] = &[
    "read:blocks",
    "read:follows",
    "read:mutes",
    "write:blocks",
    "write:follows",
    "write:mutes",
];

/// The scopes a token or an app holds.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Scopes(BTreeSet<String>);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown scope {0:?}")]
pub struct UnknownScope(pub String);

impl Scopes {
    /// Every top-level scope: what tokens made with `hollo token create` hold.
    pub fn all() -> Self {
        Scopes(
            ["read", "write", "follow", "push", "profile"]
                .into_iter()
                .map(String::from)
                .collect(),
        )
    }

    /// A space-separated list as OAuth sends it (RFC 6749 §3.3); an empty list is `read`,
    /// Mastodon's default.
    pub fn parse(list: &str) -> Result<Self, UnknownScope> {
        let mut set = BTreeSet::new();
        for scope in list.split_ascii_whitespace() {
            if !KNOWN.contains(&scope) {
                return Err(UnknownScope(scope.to_owned()));
            }
            set.insert(scope.to_owned());
        }
        if set.is_empty() {
            set.insert("read".to_owned());
        }
        Ok(Scopes(set))
    }

    /// Whether this set allows `needed` (a scope from [`KNOWN`]).
    pub fn grants(&self, needed: &str) -> bool {
        if self.0.contains(needed) {
            return true;
        }
        if let Some((top, _)) = needed.split_once(':')
            && self.0.contains(top)
        {
            return true;
        }
        self.0.contains("follow") && FOLLOW_GRANTS.contains(&needed)
    }

    /// Whether every scope of `other` is allowed by this set: an app's registered scopes
    /// bound what a token for it may ask.
    pub fn covers(&self, other: &Scopes) -> bool {
        other.0.iter().all(|s| self.grants(s))
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

impl fmt::Display for Scopes {
    /// Space-separated, as OAuth responses and the database carry them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<&str> = self.iter().collect();
        f.write_str(&list.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_scopes_grant_their_granular_ones() {
        let read = Scopes::parse("read").expect("read");
        assert!(read.grants("read:statuses"));
        assert!(!read.grants("write:statuses"));
        let follow = Scopes::parse("follow").expect("follow");
        assert!(follow.grants("write:follows") && follow.grants("read:blocks"));
        assert!(!follow.grants("write:statuses"));
        let granular = Scopes::parse("read:accounts write:media").expect("granular");
        assert!(granular.grants("read:accounts") && granular.grants("write:media"));
        assert!(!granular.grants("read:statuses") && !granular.grants("read"));
        assert!(Scopes::all().grants("profile"));
    }

    #[test]
    fn unknown_scopes_are_refused_and_empty_means_read() {
        assert_eq!(
            Scopes::parse("read admin:everything"),
            Err(UnknownScope("admin:everything".into()))
        );
        assert_eq!(Scopes::parse("  ").expect("empty").to_string(), "read");
        assert_eq!(
            Scopes::parse("write read read").expect("dup").to_string(),
            "read write"
        );
    }

    #[test]
    fn an_app_bounds_its_tokens() {
        let app = Scopes::parse("read write").expect("app");
        assert!(app.covers(&Scopes::parse("read:statuses write").expect("token")));
        assert!(!app.covers(&Scopes::parse("read follow").expect("token")));
    }
}
