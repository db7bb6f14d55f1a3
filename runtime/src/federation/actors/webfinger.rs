//! WebFinger (RFC 7033) both ways: the JRD we serve for `acct:name@<our domain>`, and resolving
//! `name@host` to an actor IRI through the guarded client.

use serde_json::{Value, json};

use crate::accounts::Account;
use crate::federation::Federation;
use crate::federation::transport::fetch::{ACTIVITY_JSON, FetchError, is_non_public};

pub const JRD_JSON: &str = "application/jrd+json";

/// `acct:name@host`, `name@host` or `@name@host` → `(name, host)`.
pub fn parse_acct(resource: &str) -> Option<(&str, &str)> {
    let s = resource.trim();
    let s = s.strip_prefix("acct:").unwrap_or(s);
    let s = s.strip_prefix('@').unwrap_or(s);
    let (name, host) = s.split_once('@')?;
    let valid_host = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    (!name.is_empty() && !name.contains('/') && valid_host).then_some((name, host))
}

pub fn jrd(fed: &Federation, account: &Account) -> Value {
    let actor = fed.actor_iri(&account.username);
    json!({
        "subject": format!("acct:{}@{}", account.username, fed.domain),
        "aliases": [actor],
        "links": [
            { "rel": "self", "type": ACTIVITY_JSON, "href": actor },
            { "rel": "http://webfinger.net/rel/profile-page", "type": "text/html", "href": actor },
        ],
    })
}

/// The instance actor's JRD: `acct:<domain>@<domain>`, as Mastodon names its own.
pub fn instance_jrd(fed: &Federation) -> Value {
    let actor = fed.instance_actor_iri();
    json!({
        "subject": format!("acct:{}@{}", fed.domain, fed.domain),
        "aliases": [actor],
        "links": [{ "rel": "self", "type": ACTIVITY_JSON, "href": actor }],
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("not an account handle (expected name@host): {0}")]
    BadHandle(String),
    #[error("{0}")]
    Fetch(#[from] FetchError),
    #[error("WebFinger of {0} has no ActivityPub actor link")]
    NoActor(String),
}

/// The scheme to reach `host` with: https, except that development peers on loopback or
/// private addresses are reached over plain http when `ALLOW_PRIVATE_ADDRESS=true`.
pub fn scheme_for(fed: &Federation, host: &str) -> &'static str {
    if !fed.fetch.allows_private() {
        return "https";
    }
    let bare = match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) && !h.ends_with(':') => h,
        _ => host,
    };
    let bare = bare.trim_start_matches('[').trim_end_matches(']');
    let private = bare == "localhost" || bare.parse::<std::net::IpAddr>().is_ok_and(is_non_public);
    if private { "http" } else { "https" }
}

/// `name@host` → the actor IRI its WebFinger `self` link names.
pub async fn resolve(fed: &Federation, handle: &str) -> Result<String, ResolveError> {
    let (name, host) = parse_acct(handle).ok_or_else(|| ResolveError::BadHandle(handle.into()))?;
    let resource = format!("acct:{name}@{host}");
    let mut url = url::Url::parse(&format!(
        "{}://{host}/.well-known/webfinger",
        scheme_for(fed, host)
    ))
    .map_err(|_| ResolveError::BadHandle(handle.into()))?;
    url.query_pairs_mut().append_pair("resource", &resource);
    let doc = fed.fetch.get_jrd(url.as_str()).await?;
    self_link(&doc).ok_or(ResolveError::NoActor(resource))
}

fn self_link(jrd: &Value) -> Option<String> {
    jrd.get("links")?.as_array()?.iter().find_map(|l| {
        let rel = l.get("rel")?.as_str()?;
        let ty = l.get("type").and_then(Value::as_str).unwrap_or_default();
        (rel == "self" && (ty == ACTIVITY_JSON || ty.starts_with("application/ld+json")))
            .then(|| l.get("href")?.as_str().map(str::to_string))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acct_forms_parse() {
        assert_eq!(
            parse_acct("acct:alice@hollo.example"),
            Some(("alice", "hollo.example"))
        );
        assert_eq!(
            parse_acct("@bob@127.0.0.1:8080"),
            Some(("bob", "127.0.0.1:8080"))
        );
        for bad in ["alice", "@alice", "acct:@x", "a@", "a@b/c", "a@b c"] {
            assert_eq!(parse_acct(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_self_link_is_the_activitypub_one() {
        let doc = json!({"links": [
            {"rel": "http://webfinger.net/rel/profile-page", "type": "text/html", "href": "https://x/@a"},
            {"rel": "self", "type": "application/activity+json", "href": "https://x/users/a"}
        ]});
        assert_eq!(self_link(&doc).as_deref(), Some("https://x/users/a"));
        assert_eq!(self_link(&json!({"links": []})), None);
    }
}
