//! Remote images shown through this server (R-MAPI-6): a remote custom emoji's image is
//! served from `/media/proxy/<mac>?url=<remote URL>`, so an app showing it asks only its own
//! server — the remote server never sees who reads a post, nor their IP address. The URL is
//! authenticated (HMAC-SHA256 under a key derived from `SECRET_KEY`), so the proxy serves only
//! what this server itself put in an entity: it is not an open relay. Avatars, headers, custom
//! emojis and the images of remote posts all go this way.
//!
//! - [`relay`]: one image, fetched through the guarded fetcher (the SSRF rules, redirects
//!   checked hop by hop), its bytes sniffed (only JPEG, PNG, GIF and WebP are relayed, under
//!   the type sniffed, never the remote's), streamed through or kept, at most [`MAX_BYTES`].
//! - [`cache`]: what a node relayed (bounded in bytes, an hour each; readers asking for one
//!   image at once share one fetch) and what failed (a few minutes each).
//! - [`slots`]: the node's fetches at once, bounded per node and per remote host.

pub mod cache;
mod relay;
pub mod slots;

pub use cache::Source;
pub use relay::{Refusal, Relay, Served};

use ring::hmac;

/// The largest remote image relayed (a remote post's photo included).
pub const MAX_BYTES: usize = 8 * 1024 * 1024;

/// The path the proxy answers under.
pub const PATH: &str = "/media/proxy";

/// The key of the proxy's URLs.
pub struct MediaProxy {
    key: hmac::Key,
}

impl std::fmt::Debug for MediaProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MediaProxy")
    }
}

impl MediaProxy {
    /// The proxy of a node whose `SECRET_KEY` is `secret` (a key of its own, derived under a
    /// label, so no other use of the secret can mint or check a proxy URL).
    pub fn new(secret: &str) -> MediaProxy {
        let root = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
        let derived = hmac::sign(&root, b"hollo media proxy v1");
        MediaProxy {
            key: hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()),
        }
    }

    fn mac(&self, url: &str) -> String {
        hex(hmac::sign(&self.key, url.as_bytes()).as_ref())
    }

    /// The proxied URL of `remote` on `origin`.
    pub fn url(&self, origin: &str, remote: &str) -> String {
        let q: String = url::form_urlencoded::byte_serialize(remote.as_bytes()).collect();
        format!("{origin}{PATH}/{}?url={q}", self.mac(remote))
    }

    /// Whether `mac` is the one this proxy gave `remote` (in constant time).
    pub fn verify(&self, mac: &str, remote: &str) -> bool {
        let Some(given) = unhex(mac) else {
            return false;
        };
        hmac::verify(&self.key, remote.as_bytes(), &given).is_ok()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_urls_it_minted_verify() {
        let p = MediaProxy::new("a-secret-key-of-at-least-32-characters");
        let u = p.url("https://h.example", "https://r.example/e/a.png?x=1&y=2");
        assert!(u.starts_with("https://h.example/media/proxy/"));
        assert!(
            u.ends_with("?url=https%3A%2F%2Fr.example%2Fe%2Fa.png%3Fx%3D1%26y%3D2"),
            "{u}"
        );
        let mac = u
            .split('/')
            .nth(5)
            .and_then(|m| m.split('?').next())
            .unwrap();
        assert!(p.verify(mac, "https://r.example/e/a.png?x=1&y=2"));
        assert!(!p.verify(mac, "https://r.example/e/b.png"), "another URL");
        assert!(
            !p.verify("zz", "https://r.example/e/a.png?x=1&y=2"),
            "not hex"
        );
        let other = MediaProxy::new("another-secret-key-of-32-characters!!");
        assert!(
            !other.verify(mac, "https://r.example/e/a.png?x=1&y=2"),
            "another key"
        );
    }
}
