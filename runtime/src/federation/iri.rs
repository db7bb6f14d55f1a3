//! Comparing IRIs by origin — scheme, host and port, as RFC 6454 defines it (`url::Origin`,
//! default ports made explicit). A remote document may only speak for its own origin: two
//! servers on one host name but different ports, or http and https of one host, are different
//! servers, so a host-name comparison would let one impersonate the other.

use url::{Origin, Url};

/// The origin of an http(s) IRI; `None` for anything that has no tuple origin (`urn:`, `data:`,
/// unparsable text), which therefore matches nothing.
pub fn origin_of(iri: &str) -> Option<Origin> {
    let url = Url::parse(iri).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    Some(url.origin())
}

/// Both IRIs are http(s) and share scheme, host and port.
pub fn same_origin(a: &str, b: &str) -> bool {
    matches!((origin_of(a), origin_of(b)), (Some(x), Some(y)) if x == y)
}

/// The IRI without its fragment: what a GET of it actually requests (`…/users/a#main-key` is
/// served by `…/users/a`).
pub fn without_fragment(iri: &str) -> &str {
    iri.split_once('#').map_or(iri, |(base, _)| base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_scheme_host_and_port() {
        assert!(same_origin(
            "https://m.example/users/a",
            "https://M.EXAMPLE:443/inbox"
        ));
        assert!(same_origin(
            "http://127.0.0.1:8080/a",
            "http://127.0.0.1:8080/b#k"
        ));
        // R-AP-1: same host name, other port or scheme: another server.
        assert!(!same_origin(
            "http://127.0.0.1:8080/a",
            "http://127.0.0.1:8081/a"
        ));
        assert!(!same_origin("https://m.example/a", "http://m.example/a"));
        assert!(!same_origin(
            "https://m.example/a",
            "https://evil.example/a"
        ));
        assert!(!same_origin("urn:x:1", "urn:x:1"));
        assert!(!same_origin("not a url", "not a url"));
    }

    #[test]
    fn fragments_are_not_requested() {
        assert_eq!(without_fragment("https://m/u/a#main-key"), "https://m/u/a");
        assert_eq!(without_fragment("https://m/u/a"), "https://m/u/a");
    }
}
