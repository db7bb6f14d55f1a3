//! The one outbound HTTP client (R-AP, R-RPL-8): every remote fetch and delivery goes
//! through it. It refuses loopback, private, link-local and metadata addresses *after* DNS
//! resolution: URLs with IP literals are checked directly, host names are resolved by our own
//! resolver, which hands reqwest only vetted addresses (so the address we connect to is the
//! address we checked, and a DNS answer that changes between check and connect cannot slip
//! through). Redirects are followed by hand so every hop is checked again. Responses are capped
//! in size and every request has timeouts and our `User-Agent`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use url::Url;

use crate::federation::iri;
use crate::federation::transport::signature::{self, SigningKey};

/// Largest document we read from a remote server (actors, keys, WebFinger, collections).
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
const MAX_REDIRECTS: usize = 5;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// Idle keep-alive connections kept per host, and for how long. A fan-out to thousands of
/// hosts otherwise keeps one idle socket per host for reqwest's default 90 s — thousands of
/// open files on the worker (and on whatever serves those hosts), which is what made the
/// 10 000-host fan-out bench fall off a cliff at this machine's 20 000 open-file limit (issue
/// 20). A host that gets a stream of deliveries reuses its connections within seconds; with 64
/// deliveries in flight per worker, 15 s still meant up to 15 000 idle sockets after a fan-out
/// to 10 000 hosts (the bench's sink ran out of descriptors again), so idle connections live
/// 4 s, as Node's (undici's) do. Which POSTs are pooled at all is `reuse`'s decision.
const IDLE_PER_HOST: usize = 4;
const IDLE_TIMEOUT: Duration = Duration::from_secs(4);

pub const ACTIVITY_JSON: &str = "application/activity+json";
const ACCEPT_ACTIVITY: &str = "application/activity+json, application/ld+json; profile=\"https://www.w3.org/ns/activitystreams\"";
const ACCEPT_JRD: &str = "application/jrd+json, application/json";

/// What a GET expects back, which decides its `Accept`, the content types taken, and whether
/// a redirect may leave the requested origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Object,
    Jrd,
}

impl Want {
    fn accept(self) -> &'static str {
        match self {
            Want::Object => ACCEPT_ACTIVITY,
            Want::Jrd => ACCEPT_JRD,
        }
    }

    fn accepts(self, media_type: &str) -> bool {
        match self {
            Want::Object => matches!(media_type, ACTIVITY_JSON | "application/ld+json"),
            Want::Jrd => matches!(media_type, "application/jrd+json" | "application/json"),
        }
    }
}

/// A fetched document and the URL that finally served it (after same-origin redirects).
#[derive(Debug, Clone)]
pub struct Fetched {
    pub url: Url,
    pub doc: serde_json::Value,
}

impl Fetched {
    /// The document's `id`, empty when it has none (`get_object` has checked its origin).
    pub fn id(&self) -> &str {
        self.doc
            .get("id")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The SSRF guard said no (address class, scheme, or too many redirects).
    #[error("refused: {0}")]
    Refused(String),
    /// DNS, connect, TLS, timeout or reset.
    #[error("unreachable: {0}")]
    Network(String),
    #[error("HTTP {0}")]
    Status(u16),
    /// HTTP 429 from a GET, with its `Retry-After` when usable (reply collection backs off by it).
    #[error("HTTP 429")]
    TooManyRequests(Option<Duration>),
    #[error("response larger than allowed")]
    TooLarge,
    #[error("invalid response: {0}")]
    Invalid(String),
}

impl FetchError {
    /// What a client may learn of a failed fetch: the remote's HTTP status, or that it could
    /// not be reached — never why our guard refused an address, what a name resolved to or
    /// that it did not resolve, which would make the API an oracle for our internal DNS and
    /// network (R-API; the inbox's key fetches answer the same way, R-AP-1). A refusal and an
    /// unreachable host read the same. The detail goes to the log.
    pub fn public_reason(&self) -> String {
        match self {
            FetchError::Status(code) => format!("HTTP {code}"),
            FetchError::TooManyRequests(_) => "HTTP 429".into(),
            FetchError::TooLarge => "response too large".into(),
            FetchError::Invalid(_) => "response not accepted".into(),
            FetchError::Refused(_) | FetchError::Network(_) => {
                "server unreachable or refused".into()
            }
        }
    }
}

/// An address the guard refuses even with `ALLOW_PRIVATE_ADDRESS=true`: cloud metadata
/// endpoints and the unspecified address are never a federation peer, in development either.
fn always_refused(ip: IpAddr) -> bool {
    // `::ffff:169.254.169.254`, `::169.254.169.254`, `2002:a9fe:a9fe::` … are the same
    // endpoint as the IPv4 address they carry.
    let ip = match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => v4 == Ipv4Addr::new(169, 254, 169, 254) || v4.is_unspecified(),
        IpAddr::V6(v6) => {
            v6.is_unspecified() || v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
        }
    }
}

/// The IPv4 address an IPv6 address carries where the network will deliver to that IPv4
/// address: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`, deprecated but still
/// routed by some stacks), 6to4 (`2002:AABB:CCDD::/48`) and NAT64 (`64:ff9b::/96`).
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let v4 = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0; 6] && !(v6.is_unspecified() || v6.is_loopback()) {
        return Some(v4(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(v4(s[1], s[2]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(v4(s[6], s[7]));
    }
    None
}

/// Loopback, private, link-local, shared (CGNAT), multicast, reserved and the like: addresses
/// that are not on the public internet and so must never be fetched on a remote's say-so.
pub fn is_non_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
                || (a == 192 && b == 0) // IETF protocol assignments
                || (a == 198 && (18..20).contains(&b)) // benchmarking
                || a >= 240 // reserved
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if v6.to_ipv4_mapped().is_some() || s[0] == 0x2002 {
                // Reaches the IPv4 address it carries: judged as that address.
                return embedded_v4(v6).is_some_and(|v4| is_non_public(IpAddr::V4(v4)));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || s[..6] == [0; 6] // IPv4-compatible (deprecated): never a public peer
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
                || (s[0] == 0x2001 && s[1] == 0) // Teredo: tunnels to an IPv4 host we cannot vet
                || (s[0] == 0x2001 && s[1] == 0xdb8) // documentation
                || s[..4] == [0x100, 0, 0, 0] // discard-only
                // NAT64, the well-known 64:ff9b::/96 and local-use 64:ff9b:1::/48: a
                // translator can reach private IPv4 behind it.
                || (s[0] == 0x64 && s[1] == 0xff9b)
        }
    }
}

/// The guard's verdict for one resolved address.
pub fn address_allowed(ip: IpAddr, allow_private: bool) -> Result<(), String> {
    if always_refused(ip) {
        return Err(format!("{ip} is a metadata or unspecified address"));
    }
    if is_non_public(ip) && !allow_private {
        return Err(format!(
            "{ip} is a loopback, private or link-local address (set ALLOW_PRIVATE_ADDRESS=true only for development)"
        ));
    }
    Ok(())
}

/// Resolves host names for reqwest and drops every address the guard refuses.
struct GuardResolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for GuardResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = resolve_vetted(&host, 0, allow_private).await.map_err(
                |e| -> Box<dyn std::error::Error + Send + Sync> { e.to_string().into() },
            )?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

async fn resolve_vetted(
    host: &str,
    port: u16,
    allow_private: bool,
) -> Result<Vec<SocketAddr>, FetchError> {
    let found: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| FetchError::Network(format!("cannot resolve {host}: {e}")))?
        .collect();
    if found.is_empty() {
        return Err(FetchError::Network(format!("{host} has no address")));
    }
    let mut refusal = None;
    let ok: Vec<SocketAddr> = found
        .into_iter()
        .filter(|a| match address_allowed(a.ip(), allow_private) {
            Ok(()) => true,
            Err(e) => {
                refusal = Some(e);
                false
            }
        })
        .collect();
    match (ok.is_empty(), refusal) {
        (true, Some(e)) => Err(FetchError::Refused(format!("{host}: {e}"))),
        _ => Ok(ok),
    }
}

/// The response of a delivery POST: the status and, for 429/503, how long to wait.
#[derive(Debug, Clone)]
pub struct PostOutcome {
    pub status: StatusCode,
    pub retry_after: Option<Duration>,
}

#[derive(Clone)]
pub struct FetchClient {
    client: reqwest::Client,
    allow_private: bool,
    /// Which POSTs keep their connection for the next (see `reuse`).
    recent: Arc<crate::federation::transport::reuse::RecentHosts>,
}

/// The certificates of a PEM bundle (`EXTRA_CA_CERTS_FILE`); a file that cannot be read or
/// holds no certificate is an error, so a broken mount stops the node at start.
pub fn read_ca_bundle(path: &std::path::Path) -> Result<Vec<reqwest::Certificate>, FetchError> {
    let bad = |why: String| {
        FetchError::Network(format!(
            "{} {}: {why}",
            crate::config::vars::EXTRA_CA_CERTS_FILE.name,
            path.display()
        ))
    };
    let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    Ok(certs)
}

impl FetchClient {
    /// With the public roots and, when `EXTRA_CA_CERTS_FILE` is set, its certificates.
    pub fn new(allow_private: bool) -> Result<Self, FetchError> {
        let extra = match crate::config::extra_ca_certs_file() {
            Some(path) => read_ca_bundle(&path)?,
            None => vec![],
        };
        Self::with_roots(allow_private, extra)
    }

    /// With the public roots plus `extra` (R-OP-OPS).
    pub fn with_roots(
        allow_private: bool,
        extra: Vec<reqwest::Certificate>,
    ) -> Result<Self, FetchError> {
        let mut builder = reqwest::Client::builder();
        for cert in extra {
            builder = builder.add_root_certificate(cert);
        }
        let client = builder
            .user_agent(format!(
                "Hollo-on-Kubernetes/{} (+https://github.com/fedify-dev/hollo)",
                crate::VERSION
            ))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .pool_max_idle_per_host(IDLE_PER_HOST)
            .pool_idle_timeout(IDLE_TIMEOUT)
            .dns_resolver(Arc::new(GuardResolver { allow_private }))
            // A proxy would resolve names itself, around the guard.
            .no_proxy()
            .build()
            .map_err(|e| FetchError::Network(format!("building the HTTP client: {e}")))?;
        Ok(FetchClient {
            client,
            allow_private,
            recent: Default::default(),
        })
    }

    pub fn allows_private(&self) -> bool {
        self.allow_private
    }

    /// Checks a URL before any request: scheme, IP literals, and a resolution of host names so
    /// a refusal gets a clear message (the resolver checks again at connect time).
    pub async fn check_url(&self, url: &Url) -> Result<(), FetchError> {
        match url.scheme() {
            "https" => {}
            // Plain http only with ALLOW_PRIVATE_ADDRESS=true (development and test peers).
            "http" if self.allow_private => {}
            other => {
                return Err(FetchError::Refused(format!(
                    "scheme {other}: only https is fetched (http needs ALLOW_PRIVATE_ADDRESS=true)"
                )));
            }
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(FetchError::Refused("URLs with credentials".into()));
        }
        let port = url.port_or_known_default().unwrap_or(443);
        match url.host() {
            Some(url::Host::Ipv4(ip)) => {
                address_allowed(IpAddr::V4(ip), self.allow_private).map_err(FetchError::Refused)
            }
            Some(url::Host::Ipv6(ip)) => {
                address_allowed(IpAddr::V6(ip), self.allow_private).map_err(FetchError::Refused)
            }
            Some(url::Host::Domain(d)) => resolve_vetted(d, port, self.allow_private)
                .await
                .map(|_| ()),
            None => Err(FetchError::Refused("URL without a host".into())),
        }
    }

    /// GETs an ActivityPub document (actor, key, note, collection) and returns it with the URL
    /// that finally answered. What comes back may only speak for the origin that was asked
    /// (R-AP-1): redirects are followed only within that origin (every hop through the guard,
    /// signed when a key is given — authorized fetch, R-RPL-8), the response must be
    /// `application/activity+json` or `application/ld+json` (an upload served as `text/plain`
    /// or `application/json` is not a document of the server), and the document's `id`, when
    /// it has one, must be on the requested origin. The document comes back normalized and
    /// bounded (`normalize`), as the inbox's activities are: nothing fetched is read or stored
    /// in any other shape or size.
    pub async fn get_object(
        &self,
        url: &str,
        signer: Option<&SigningKey>,
    ) -> Result<Fetched, FetchError> {
        let mut fetched = self.get(url, Want::Object, signer).await?;
        fetched.doc = crate::federation::normalize::normalize(std::mem::take(&mut fetched.doc));
        // A document without id (an anonymous collection page) names nothing it could poison.
        if let Some(id) = fetched.doc.get("id")
            && !id.as_str().is_some_and(|id| iri::same_origin(id, url))
        {
            return Err(FetchError::Invalid(format!(
                "{url} served a document of another origin ({id})"
            )));
        }
        Ok(fetched)
    }

    /// GETs the document whose `id` is `url` itself. A server may answer an alias (a profile
    /// page, a key URL) with a document of another id on its own origin; that document is
    /// trusted only as served from its own id, so it is fetched once more from there and must
    /// name itself. Nothing is ever stored under an id its document was not fetched from.
    pub async fn get_canonical(
        &self,
        url: &str,
        signer: Option<&SigningKey>,
    ) -> Result<serde_json::Value, FetchError> {
        let first = self.get_object(url, signer).await?;
        let id = first.id().to_string();
        if id.is_empty() {
            return Err(FetchError::Invalid(format!(
                "{url} served a document without id"
            )));
        }
        if id == iri::without_fragment(url) {
            return Ok(first.doc);
        }
        let second = self.get_object(&id, signer).await?;
        if second.id() != id {
            return Err(FetchError::Invalid(format!(
                "{id} does not serve itself (it answered {})",
                second.id()
            )));
        }
        Ok(second.doc)
    }

    /// GETs a remote image (link previews' images, custom emojis): as [`Self::open_image`],
    /// read whole. Returns the bytes and the type the remote named.
    pub async fn get_image(&self, url: &str, max: usize) -> Result<(Vec<u8>, String), FetchError> {
        let (_, media_type, body) = self.open_image(url, max).await?;
        Ok((body.collect().await?, media_type))
    }

    /// Opens a remote image: unsigned (an image is public), redirects followed to any origin
    /// but each hop through the guard, the answer must call itself `image/*` (not SVG, a
    /// document that can carry scripts), and its body, read as it arrives, is at most `max`
    /// bytes. What the bytes really are is the caller's to check (`Format::sniff`): a type
    /// the remote names is only a first filter (`image/png, text/html` passes it). Returns
    /// the URL that answered, the type named, and the body.
    pub async fn open_image(
        &self,
        url: &str,
        max: usize,
    ) -> Result<(Url, String, CappedBody), FetchError> {
        self.open_public(url, "image/*", max, |media_type| {
            media_type.starts_with("image/") && !media_type.contains("svg")
        })
        .await
    }

    /// GETs a web page for a link preview (`cards`): as [`Self::open_image`], for `text/html`
    /// (or XHTML) of at most `max` bytes. Returns the URL that finally answered and the text
    /// (UTF-8; bytes that are not become U+FFFD).
    pub async fn get_page(&self, url: &str, max: usize) -> Result<(Url, String), FetchError> {
        let (at, _, body) = self
            .get_public(
                url,
                "text/html, application/xhtml+xml;q=0.9",
                max,
                |media_type| matches!(media_type, "text/html" | "application/xhtml+xml"),
            )
            .await?;
        Ok((at, String::from_utf8_lossy(&body).into_owned()))
    }

    /// GETs an oEmbed document (`application/json`) of at most `max` bytes, as
    /// [`Self::get_page`].
    pub async fn get_json(&self, url: &str, max: usize) -> Result<serde_json::Value, FetchError> {
        let (_, _, body) = self
            .get_public(url, "application/json", max, |media_type| {
                matches!(media_type, "application/json" | "application/json+oembed")
            })
            .await?;
        serde_json::from_slice(&body).map_err(|e| FetchError::Invalid(format!("not JSON: {e}")))
    }

    /// An unsigned GET of public content, read whole: [`Self::open_public`]'s body collected.
    async fn get_public(
        &self,
        url: &str,
        accept: &'static str,
        max: usize,
        takes: impl Fn(&str) -> bool,
    ) -> Result<(Url, String, Vec<u8>), FetchError> {
        let (at, media_type, body) = self.open_public(url, accept, max, takes).await?;
        Ok((at, media_type, body.collect().await?))
    }

    /// An unsigned GET of public content: redirects followed to any origin (the content is
    /// not attributed to the origin asked, unlike a document), each hop through the guard;
    /// the answer's content type must satisfy `takes` before its body is read, and the body is
    /// at most `max` bytes, checked as it streams. Returns the final URL, the content type and
    /// the body, not yet read.
    async fn open_public(
        &self,
        url: &str,
        accept: &'static str,
        max: usize,
        takes: impl Fn(&str) -> bool,
    ) -> Result<(Url, String, CappedBody), FetchError> {
        let mut current = parse_url(url)?;
        for _ in 0..=MAX_REDIRECTS {
            self.check_url(&current).await?;
            let resp = self
                .client
                .get(current.clone())
                .header(reqwest::header::ACCEPT, accept)
                .send()
                .await
                .map_err(network_error)?;
            let status = resp.status();
            if status.is_redirection() {
                current = redirect_target(&current, &resp)?;
                continue;
            }
            if !status.is_success() {
                return Err(FetchError::Status(status.as_u16()));
            }
            let media_type = media_type(&resp);
            if !takes(&media_type) {
                return Err(FetchError::Invalid(format!(
                    "{current} answered with content type {media_type:?}, not {accept}"
                )));
            }
            return Ok((current, media_type, CappedBody::new(resp, max)?));
        }
        Err(FetchError::Refused(format!(
            "more than {MAX_REDIRECTS} redirects"
        )))
    }

    /// GETs a WebFinger JRD. Redirects may leave the origin (a domain delegating WebFinger to
    /// the host that runs the server is normal): the JRD only names an actor IRI, which is then
    /// fetched and checked on its own origin.
    pub async fn get_jrd(&self, url: &str) -> Result<serde_json::Value, FetchError> {
        Ok(self.get(url, Want::Jrd, None).await?.doc)
    }

    async fn get(
        &self,
        url: &str,
        want: Want,
        signer: Option<&SigningKey>,
    ) -> Result<Fetched, FetchError> {
        let requested = parse_url(url)?;
        let mut current = requested.clone();
        for _ in 0..=MAX_REDIRECTS {
            self.check_url(&current).await?;
            let mut headers = HeaderMap::new();
            headers.insert(
                reqwest::header::ACCEPT,
                HeaderValue::from_static(want.accept()),
            );
            if let Some(key) = signer {
                signature::sign_request(key, &Method::GET, &current, None, &mut headers)
                    .map_err(|e| FetchError::Invalid(format!("signing: {e}")))?;
            }
            let resp = self
                .client
                .get(current.clone())
                .headers(headers)
                .send()
                .await
                .map_err(network_error)?;
            let status = resp.status();
            if status.is_redirection() {
                let next = redirect_target(&current, &resp)?;
                if want == Want::Object && next.origin() != requested.origin() {
                    return Err(FetchError::Invalid(format!(
                        "{requested} redirected to another origin ({})",
                        next.origin().ascii_serialization()
                    )));
                }
                current = next;
                continue;
            }
            if status == StatusCode::TOO_MANY_REQUESTS {
                let retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_retry_after);
                return Err(FetchError::TooManyRequests(retry_after));
            }
            if !status.is_success() {
                return Err(FetchError::Status(status.as_u16()));
            }
            let media_type = media_type(&resp);
            if !want.accepts(&media_type) {
                return Err(FetchError::Invalid(format!(
                    "{current} answered with content type {:?}, not {}",
                    media_type,
                    want.accept()
                )));
            }
            let body = read_capped(resp).await?;
            let doc = serde_json::from_slice(&body)
                .map_err(|e| FetchError::Invalid(format!("not JSON: {e}")))?;
            return Ok(Fetched { url: current, doc });
        }
        Err(FetchError::Refused(format!(
            "more than {MAX_REDIRECTS} redirects"
        )))
    }

    /// POSTs a signed activity to an inbox. Redirects are not followed: an inbox that moves
    /// answers 3xx, which the caller treats as a failure like any other non-2xx.
    pub async fn post_activity(
        &self,
        inbox: &str,
        body: &[u8],
        key: &SigningKey,
        scheme: crate::federation::transport::signature::Scheme,
    ) -> Result<PostOutcome, FetchError> {
        let url =
            Url::parse(inbox).map_err(|e| FetchError::Refused(format!("bad inbox URL: {e}")))?;
        self.check_url(&url).await?;
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static(ACTIVITY_JSON),
        );
        if !self.recent.keep_alive(&signature::host_header(&url)) {
            // No idle socket for a host that may not hear from us again soon (see `reuse`).
            headers.insert(
                reqwest::header::CONNECTION,
                HeaderValue::from_static("close"),
            );
        }
        match scheme {
            crate::federation::transport::signature::Scheme::Cavage => {
                signature::sign_request(key, &Method::POST, &url, Some(body), &mut headers)
            }
            crate::federation::transport::signature::Scheme::Rfc9421 => {
                crate::federation::transport::rfc9421::sign_at(
                    key,
                    &Method::POST,
                    &url,
                    Some(body),
                    &mut headers,
                    std::time::SystemTime::now(),
                )
            }
        }
        .map_err(|e| FetchError::Invalid(format!("signing: {e}")))?;
        let resp = self
            .client
            .post(url)
            .headers(headers)
            .body(body.to_vec())
            .send()
            .await
            .map_err(network_error)?;
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        // Drain a little of the body so the connection can be reused; ignore its content.
        let _ = read_capped(resp).await;
        Ok(PostOutcome {
            status,
            retry_after,
        })
    }
}

/// `url` parsed; one that does not parse is refused.
fn parse_url(url: &str) -> Result<Url, FetchError> {
    Url::parse(url).map_err(|e| FetchError::Refused(format!("bad URL {url:?}: {e}")))
}

/// Where a redirect from `current` points: its `Location`, resolved against `current`.
fn redirect_target(current: &Url, resp: &reqwest::Response) -> Result<Url, FetchError> {
    let location = resp
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| FetchError::Invalid("redirect without Location".into()))?;
    current
        .join(location)
        .map_err(|e| FetchError::Invalid(format!("bad redirect: {e}")))
}

/// The answer's media type, lower case, without parameters (empty when it names none).
fn media_type(resp: &reqwest::Response) -> String {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

fn network_error(e: reqwest::Error) -> FetchError {
    // reqwest wraps our resolver's refusal; keep its message visible to the caller.
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        msg = format!("{msg}: {s}");
        source = s.source();
    }
    if msg.contains("refused: ") || msg.contains("ALLOW_PRIVATE_ADDRESS") {
        FetchError::Refused(msg)
    } else {
        FetchError::Network(msg)
    }
}

async fn read_capped(resp: reqwest::Response) -> Result<Vec<u8>, FetchError> {
    CappedBody::new(resp, MAX_RESPONSE_BYTES)?.collect().await
}

/// A response body read as it arrives, at most its cap in all: a `Content-Length` over the
/// cap is refused before the first byte, and the bytes are counted as they come, so a remote
/// that says nothing of its length (or lies) is cut off at the cap too. Every remote body is
/// read through one, whole ([`Self::collect`]) or chunk by chunk ([`Self::chunk`], which the
/// media proxy streams through without holding the image).
pub struct CappedBody {
    resp: reqwest::Response,
    max: usize,
    read: usize,
    /// `Content-Length` as received (reqwest's own shrinks as the body is read).
    announced: Option<u64>,
}

impl std::fmt::Debug for CappedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CappedBody")
            .field("max", &self.max)
            .field("read", &self.read)
            .finish_non_exhaustive()
    }
}

impl CappedBody {
    fn new(resp: reqwest::Response, max: usize) -> Result<CappedBody, FetchError> {
        let announced = resp.content_length();
        if announced.is_some_and(|n| n > max as u64) {
            return Err(FetchError::TooLarge);
        }
        Ok(CappedBody {
            resp,
            max,
            read: 0,
            announced,
        })
    }

    /// The whole body's length as the remote announced it (`Content-Length`), if it did;
    /// within the cap, and the same however much has been read.
    pub fn content_length(&self) -> Option<u64> {
        self.announced
    }

    /// The next bytes, `None` at the end; [`FetchError::TooLarge`] once the cap is passed.
    pub async fn chunk(&mut self) -> Result<Option<axum::body::Bytes>, FetchError> {
        let Some(chunk) = self.resp.chunk().await.map_err(network_error)? else {
            return Ok(None);
        };
        self.read += chunk.len();
        if self.read > self.max {
            return Err(FetchError::TooLarge);
        }
        Ok(Some(chunk))
    }

    /// The whole body.
    pub async fn collect(mut self) -> Result<Vec<u8>, FetchError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// The longest `Retry-After` honoured. A remote's value is input like any other: an absurd
/// one (years, or beyond what an interval can hold) must not park work forever or overflow
/// the database's interval arithmetic, so it is clamped to what deliveries wait at most.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(12 * 3600);

/// `Retry-After`: delay-seconds or an HTTP date, clamped to [`MAX_RETRY_AFTER`].
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    let delay = if v.bytes().all(|b| b.is_ascii_digit()) && !v.is_empty() {
        // Digits beyond u64 are still "very long": clamp rather than ignore.
        v.parse::<u64>()
            .map_or(MAX_RETRY_AFTER, Duration::from_secs)
    } else {
        httpdate::parse_http_date(v)
            .ok()?
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default()
    };
    Some(delay.min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn private_and_special_addresses_are_refused_by_default() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "fd00:ec2::254",
            // IPv6 forms that carry or tunnel to non-public IPv4
            "::127.0.0.1",
            "::10.0.0.1",
            "::8.8.8.8",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "64:ff9b::7f00:1",
            "64:ff9b:1::a00:1",
            "fec0::1",
            "100::1",
        ] {
            assert!(address_allowed(ip(bad), false).is_err(), "{bad}");
        }
        for good in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "2002:5db8:d822::1", // 6to4 of a public address
        ] {
            assert!(address_allowed(ip(good), false).is_ok(), "{good}");
        }
    }

    #[test]
    fn allow_private_opens_loopback_but_never_metadata() {
        assert!(address_allowed(ip("127.0.0.1"), true).is_ok());
        assert!(address_allowed(ip("10.0.0.1"), true).is_ok());
        assert!(address_allowed(ip("169.254.169.254"), true).is_err());
        assert!(address_allowed(ip("::ffff:169.254.169.254"), true).is_err());
        assert!(address_allowed(ip("::169.254.169.254"), true).is_err());
        assert!(address_allowed(ip("2002:a9fe:a9fe::"), true).is_err());
        assert!(address_allowed(ip("64:ff9b::a9fe:a9fe"), true).is_err());
        assert!(address_allowed(ip("0.0.0.0"), true).is_err());
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        assert_eq!(parse_retry_after("120"), Some(Duration::from_secs(120)));
        let soon = std::time::SystemTime::now() + Duration::from_secs(600);
        let d = parse_retry_after(&httpdate::fmt_http_date(soon)).expect("date");
        assert!(
            d > Duration::from_secs(590) && d <= Duration::from_secs(600),
            "{d:?}"
        );
        assert_eq!(parse_retry_after("soon"), None);
        // An absurd value is clamped, not an overflow further down.
        assert_eq!(parse_retry_after("99999999999"), Some(MAX_RETRY_AFTER));
        assert_eq!(
            parse_retry_after("999999999999999999999999999"),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(
            parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT"),
            Some(MAX_RETRY_AFTER)
        );
    }

    /// R-OP-OPS: a PEM bundle adds roots; a file with none, or none at all, is an error.
    #[test]
    fn ca_bundles_are_read_or_refused() {
        let dir = std::env::temp_dir().join(format!("hollo-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").expect("write");
        assert!(read_ca_bundle(&empty).is_err(), "no certificate");
        assert!(read_ca_bundle(&dir.join("missing.pem")).is_err(), "no file");
        // The system's bundle, where the machine has one (Debian's ca-certificates).
        let system = std::path::Path::new("/etc/ssl/certs/ca-certificates.crt");
        if system.exists() {
            let certs = read_ca_bundle(system).expect("the system bundle");
            assert!(!certs.is_empty());
            FetchClient::with_roots(false, certs).expect("a client with extra roots");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn the_guard_refuses_loopback_and_metadata_urls() {
        let c = FetchClient::new(false).expect("client");
        for url in [
            "https://127.0.0.1/x",
            "https://169.254.169.254/latest/meta-data",
            "https://[::1]/",
            "https://localhost/",
            "http://93.184.216.34/",
        ] {
            let err = c
                .check_url(&Url::parse(url).expect("url"))
                .await
                .unwrap_err();
            assert!(matches!(err, FetchError::Refused(_)), "{url}: {err}");
        }
    }

    /// A body is capped as it streams: a `Content-Length` over the cap is refused before
    /// the first byte, and a body that announces nothing is cut off once past the cap.
    #[tokio::test]
    async fn bodies_are_capped_by_their_length_and_while_they_stream() {
        let chunked = || async {
            let chunks = futures::stream::iter(
                (0..3).map(|_| Ok::<_, std::io::Error>(axum::body::Bytes::from(vec![7u8; 1024]))),
            );
            (
                [("content-type", "image/png")],
                axum::body::Body::from_stream(chunks),
            )
        };
        let sized = || async { ([("content-type", "image/png")], vec![7u8; 3 * 1024]) };
        let app = axum::Router::new()
            .route("/chunked", axum::routing::get(chunked))
            .route("/sized", axum::routing::get(sized));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = FetchClient::new(true).expect("client");
        let err = client
            .open_image(&format!("{base}/sized"), 2048)
            .await
            .expect_err("too large by its length");
        assert!(matches!(err, FetchError::TooLarge), "{err}");
        let (_, _, mut body) = client
            .open_image(&format!("{base}/chunked"), 2048)
            .await
            .expect("no length announced");
        assert_eq!(body.content_length(), None);
        let mut read = 0;
        let err = loop {
            match body.chunk().await {
                Ok(Some(c)) => read += c.len(),
                Ok(None) => panic!("the whole body passed the cap"),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, FetchError::TooLarge), "{err}");
        assert!(read <= 2048, "{read} bytes handed out");
        let (_, _, body) = client
            .open_image(&format!("{base}/sized"), 4096)
            .await
            .expect("within the cap");
        assert_eq!(body.content_length(), Some(3 * 1024));
        assert_eq!(body.collect().await.expect("body").len(), 3 * 1024);
    }

    /// The first delivery to a host asks it to close the connection; the next within the
    /// window keeps it (R-AP-2: no idle socket per host of a fan-out).
    #[tokio::test]
    async fn only_a_repeat_host_gets_a_kept_alive_delivery() {
        use axum::http::HeaderMap as Headers;
        let seen: Arc<std::sync::Mutex<Vec<Option<String>>>> = Arc::default();
        let log = seen.clone();
        let app = axum::Router::new().route(
            "/inbox",
            axum::routing::post(move |h: Headers| {
                let log = log.clone();
                async move {
                    if let Ok(mut l) = log.lock() {
                        l.push(
                            h.get("connection")
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_string),
                        );
                    }
                    axum::http::StatusCode::ACCEPTED
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = FetchClient::new(true).expect("client");
        let key = SigningKey::new(
            "http://local.example/users/a#main-key",
            &crate::federation::crypto::keys::generate().expect("key"),
        )
        .expect("signing key");
        let inbox = format!("http://{addr}/inbox");
        for _ in 0..2 {
            let out = client
                .post_activity(&inbox, b"{}", &key, super::super::signature::Scheme::Cavage)
                .await
                .expect("delivered");
            assert_eq!(out.status.as_u16(), 202);
        }
        let seen = seen.lock().expect("log").clone();
        assert_eq!(seen, vec![Some("close".to_string()), None]);
    }
}
