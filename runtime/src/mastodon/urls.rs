//! The URLs a Mastodon entity shows for local things, minted from `PUBLIC_URL` (no federation
//! state): actors, statuses, tags and the default images — and, on a node with `SECRET_KEY`,
//! remote images through this server's media proxy (`media::proxy`).

use uuid::Uuid;

/// The images shown for an account without avatar or header (served by `web::mastodon::instance`).
pub const MISSING_AVATAR: &str = "/avatars/original/missing.png";
pub const MISSING_HEADER: &str = "/headers/original/missing.png";

/// `PUBLIC_URL` without its trailing slash, and what is minted from it.
#[derive(Clone, Copy, Debug)]
pub struct Urls<'a> {
    origin: &'a str,
    proxy: Option<&'a crate::media::proxy::MediaProxy>,
}

impl<'a> Urls<'a> {
    /// `origin` is `PUBLIC_URL`; a trailing slash is ignored.
    pub fn new(origin: &'a str) -> Self {
        Urls {
            origin: origin.trim_end_matches('/'),
            proxy: None,
        }
    }
    /// The same, with remote images shown through `proxy`.
    pub fn with_proxy(origin: &'a str, proxy: Option<&'a crate::media::proxy::MediaProxy>) -> Self {
        Urls {
            proxy,
            ..Urls::new(origin)
        }
    }
    /// A remote image as clients are given it: through the media proxy when this node has
    /// one, else its own URL.
    pub fn remote_image(&self, url: &str) -> String {
        match self.proxy {
            Some(p) => p.url(self.origin, url),
            None => url.to_string(),
        }
    }
    pub fn origin(&self) -> &'a str {
        self.origin
    }
    /// A local account's actor IRI, which is also its profile URL.
    pub fn actor(&self, username: &str) -> String {
        format!("{}/users/{username}", self.origin)
    }
    /// A local status's ActivityPub id (as `statuses::write` mints it).
    pub fn status(&self, username: &str, id: Uuid) -> String {
        format!("{}/statuses/{id}", self.actor(username))
    }
    /// The local account an IRI names, if it is one of ours (`<origin>/users/<name>`).
    pub fn local_username<'i>(&self, iri: &'i str) -> Option<&'i str> {
        let rest = iri.strip_prefix(self.origin)?.strip_prefix("/users/")?;
        (!rest.is_empty() && !rest.contains('/') && !rest.contains('#')).then_some(rest)
    }
    /// A hashtag's page (`None` only for an origin that is not a URL).
    pub fn tag(&self, name: &str) -> Option<String> {
        crate::content::tag_url(self.origin, name)
    }
    pub fn missing_avatar(&self) -> String {
        format!("{}{MISSING_AVATAR}", self.origin)
    }
    pub fn missing_header(&self) -> String {
        format!("{}{MISSING_HEADER}", self.origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_iris_are_recognised_and_nothing_else() {
        let u = Urls::new("https://h.example/");
        assert_eq!(u.actor("alice"), "https://h.example/users/alice");
        assert_eq!(
            u.local_username("https://h.example/users/alice"),
            Some("alice")
        );
        for other in [
            "https://h.example/users/",
            "https://h.example/users/alice/statuses/1",
            "https://h.example/users/alice#main-key",
            "https://other.example/users/alice",
        ] {
            assert_eq!(u.local_username(other), None, "{other}");
        }
        assert_eq!(
            u.tag("rust").as_deref(),
            Some("https://h.example/tags/rust")
        );
    }
}
