//! The one test fediverse peer: an axum server on a loopback address with its own key pair,
//! playing another server as our instance meets it.
//!
//! - WebFinger for any name (`acct:<name>@<peer>`): names starting with `missing` are unknown
//!   (404), `down` always answer 503, `flaky` answer 503 twice and then work; lookups can be
//!   slowed down and their concurrency is recorded.
//! - An actor document for any name (`/users/<name>`), open, or in authorized-fetch mode.
//! - Inboxes (`/users/<name>/inbox`, `/inbox`) that verify *our* HTTP Signature the way a real
//!   server does (our key fetched over HTTP from the `keyId`), draft-cavage or RFC 9421 — each
//!   can be refused with 401, as a server that reads only the other does — record what
//!   arrived, and answer as scripted (status codes, `Retry-After`, hanging).
//! - Any other GET serves the documents given to it (collections, pages, notes), scripted
//!   answers first, recording each request's time and whether it was signed by the key we
//!   expect.
//! - An open redirect and an upload area, as many real servers have, for the impersonation
//!   tests.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hollo_runtime::federation::crypto::keys;
use hollo_runtime::federation::crypto::proofs::{self, ProofKey};
use hollo_runtime::federation::outbound::delivery::Recipient;
use hollo_runtime::federation::transport::signature::{self, SigningKey};
use reqwest::Method;
use rsa::RsaPrivateKey;
use serde_json::{Value, json};
use uuid::Uuid;

const ACTIVITY_JSON: &str = "application/activity+json";

/// The peer's key pair (one per test binary: generating RSA keys is the slow part).
pub fn peer_key() -> &'static RsaPrivateKey {
    static KEY: OnceLock<RsaPrivateKey> = OnceLock::new();
    KEY.get_or_init(|| keys::generate().expect("peer key"))
}

/// An actor's Ed25519 proof key: derived from its IRI, so every peer actor has its own and
/// documents and signers agree without shared state.
fn proof_key_for(actor: &str) -> ProofKey {
    use sha2::Digest;
    let seed: [u8; 32] = sha2::Sha256::digest(actor.as_bytes()).into();
    ProofKey {
        id: format!("{actor}#ed25519-key"),
        key: ed25519_dalek::SigningKey::from_bytes(&seed),
    }
}

/// A scripted answer, used once, before the standing behaviour.
#[derive(Clone, Debug)]
pub enum Reply {
    Json(Value),
    Status(u16),
    /// A status (429, 503) with `Retry-After: secs`.
    RetryAfter(u16, u64),
    /// Record the request, then never answer (a worker killed meanwhile).
    Hang,
}

/// How the peer answers GETs of its actors (and so of its keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActorAccess {
    /// Anyone may fetch them, signed or not.
    Open,
    /// Authorized fetch (GoToSocial's default, Mastodon's `AUTHORIZED_FETCH`): unsigned GETs
    /// get 401; a signed one is served once its signature verifies against the signer's key,
    /// fetched over HTTP from the `keyId`.
    SignedOnly,
    /// Every GET gets 401, even a well-signed one (the peer does not trust our key).
    RefuseAll,
}

/// An activity that reached one of the peer's inboxes.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub body: Value,
    pub verified: Result<(), String>,
    /// `"rfc9421"` or `"cavage"`: how the request was signed.
    pub scheme: &'static str,
}

impl Received {
    pub fn id(&self) -> &str {
        self.body["id"].as_str().unwrap_or_default()
    }
    pub fn ty(&self) -> &str {
        self.body["type"].as_str().unwrap_or_default()
    }
}

/// A GET of an actor while access is not `Open`: who signed it and whether it verified.
#[derive(Clone, Debug)]
pub struct ActorGet {
    pub key_id: Option<String>,
    pub verified: Result<(), String>,
}

/// A GET of a served document.
#[derive(Clone, Debug)]
pub struct Hit {
    pub path: String,
    pub at: Instant,
    pub wall: chrono::DateTime<chrono::Utc>,
    /// Whether it was signed by the key given to `expect_key`.
    pub signed: Result<(), String>,
}

/// A file under `/uploads/`: its content type and bytes.
pub type Upload = (String, Vec<u8>);

#[derive(Clone, Default)]
pub struct PeerState {
    pub base: String,
    received: Arc<Mutex<Vec<Received>>>,
    inbox_script: Arc<Mutex<VecDeque<Reply>>>,
    access: Arc<Mutex<Option<ActorAccess>>>,
    actor_gets: Arc<Mutex<Vec<ActorGet>>>,
    /// Keys of ours the inbox already fetched, by key id.
    our_keys: Arc<Mutex<HashMap<String, String>>>,
    /// Served documents, and per path scripted answers that come first (one each).
    docs: Arc<Mutex<HashMap<String, Value>>>,
    doc_script: Arc<Mutex<HashMap<String, VecDeque<Reply>>>>,
    hits: Arc<Mutex<Vec<Hit>>>,
    /// Signature schemes the inboxes accept: (draft-cavage, RFC 9421); both by default.
    accepts: Arc<Mutex<Option<(bool, bool)>>>,
    /// PEM that signed GETs of documents must verify against.
    expected_key: Arc<Mutex<Option<String>>>,
    /// Files under `/uploads/`: (content type, body).
    pub uploads: Arc<Mutex<HashMap<String, Upload>>>,
    webfinger_delay_ms: Arc<AtomicU64>,
    webfinger_hits: Arc<Mutex<HashMap<String, u32>>>,
    lookups_now: Arc<AtomicUsize>,
    lookups_max: Arc<AtomicUsize>,
}

pub struct Peer {
    pub state: PeerState,
}

impl Peer {
    pub async fn start() -> Peer {
        Self::start_on("127.0.0.1").await
    }

    /// A peer on another loopback address (`127.0.0.2`: another host).
    pub async fn start_on(ip: &str) -> Peer {
        let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
            .await
            .expect("bind");
        let state = PeerState {
            base: format!("http://{}", listener.local_addr().expect("addr")),
            ..PeerState::default()
        };
        let app = Router::new()
            .route("/.well-known/webfinger", get(webfinger))
            .route("/users/{name}", get(actor))
            .route("/users/{name}/inbox", post(inbox))
            .route("/inbox", post(inbox))
            .route("/redirect", get(open_redirect))
            .route("/uploads/{name}", get(upload))
            .route(
                "/redirect-to-metadata",
                get(|| async {
                    (
                        StatusCode::FOUND,
                        [("location", "http://169.254.169.254/latest/meta-data/")],
                    )
                }),
            )
            .fallback(document)
            .with_state(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Peer { state }
    }

    pub fn base(&self) -> &str {
        &self.state.base
    }
    pub fn host(&self) -> &str {
        self.state.base.trim_start_matches("http://")
    }
    pub fn iri(&self, path: &str) -> String {
        format!("{}{path}", self.state.base)
    }
    /// `peer@<host>`: the account most tests talk to.
    pub fn handle(&self) -> String {
        self.handle_of("peer")
    }
    pub fn handle_of(&self, name: &str) -> String {
        format!("{name}@{}", self.host())
    }
    pub fn actor(&self) -> String {
        self.actor_of("peer")
    }
    pub fn actor_of(&self, name: &str) -> String {
        self.iri(&format!("/users/{name}"))
    }
    pub fn key(&self) -> SigningKey {
        SigningKey::new(format!("{}#main-key", self.actor()), peer_key()).expect("peer key")
    }
    /// The FEP-8b32 proof key of `/users/{name}`, which its actor document lists.
    pub fn proof_key_of(&self, name: &str) -> ProofKey {
        proof_key_for(&self.actor_of(name))
    }
    pub fn recipient(&self) -> Recipient {
        Recipient {
            actor_iri: self.actor(),
            inbox: format!("{}/inbox", self.actor()),
            shared_inbox: Some(format!("{}/inbox", self.state.base)),
        }
    }
    pub fn new_id(&self, what: &str) -> String {
        self.iri(&format!("/{what}/{}", Uuid::new_v4()))
    }

    // Inboxes.

    /// Answers for the next inbox POSTs, in order; then 202.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state
            .inbox_script
            .lock()
            .expect("script")
            .extend(replies);
    }
    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().expect("received").clone()
    }
    /// The peer's `Create` of its `object` (a Note with an `id`): the id `<object id>/activity`,
    /// addressed (`to`, `cc`) as the object is, as servers send a Create.
    pub fn create(&self, object: Value) -> Value {
        let mut create = json!({
            "id": format!("{}/activity", object["id"].as_str().expect("the object's id")),
            "type": "Create", "actor": self.actor(),
        });
        for key in ["to", "cc"] {
            if let Some(v) = object.get(key) {
                create[key] = v.clone();
            }
        }
        create["object"] = object;
        create
    }

    /// How many activities of type `ty` arrived.
    pub fn count_of(&self, ty: &str) -> usize {
        self.received().iter().filter(|r| r.ty() == ty).count()
    }
    /// The bodies of what arrived, in order.
    pub fn bodies(&self) -> Vec<Value> {
        self.received().into_iter().map(|r| r.body).collect()
    }
    /// Ids of the verified `Follow`s received, per followed actor.
    pub fn follows(&self) -> BTreeMap<String, Vec<String>> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in self
            .received()
            .iter()
            .filter(|r| r.ty() == "Follow" && r.verified.is_ok())
        {
            m.entry(r.body["object"].as_str().unwrap_or_default().to_string())
                .or_default()
                .push(r.id().to_string());
        }
        m
    }

    // Actors.

    /// Which signature schemes the inboxes accept (the other is answered with 401).
    pub fn accept_schemes(&self, cavage: bool, rfc9421: bool) {
        *self.state.accepts.lock().expect("accepts") = Some((cavage, rfc9421));
    }

    /// The RFC 9421 signature headers of a POST of `body` to `url` by the peer's key, now.
    pub fn rfc9421_headers(&self, url: &str, body: &[u8]) -> HeaderMap {
        let u = url::Url::parse(url).expect("url");
        let mut headers = HeaderMap::new();
        hollo_runtime::federation::transport::rfc9421::sign_at(
            &self.key(),
            &Method::POST,
            &u,
            Some(body),
            &mut headers,
            SystemTime::now(),
        )
        .expect("sign");
        headers
    }

    /// POSTs `activity` to `url` signed with RFC 9421 by the peer's key.
    pub async fn post_rfc9421(&self, url: &str, activity: &Value) -> (u16, Value) {
        let body = serde_json::to_vec(activity).expect("json");
        let mut headers = self.rfc9421_headers(url, &body);
        headers.insert("content-type", ACTIVITY_JSON.parse().expect("header"));
        post_headers(url, headers, &body).await
    }

    pub fn set_access(&self, access: ActorAccess) {
        *self.state.access.lock().expect("access") = Some(access);
    }
    pub fn actor_gets(&self) -> Vec<ActorGet> {
        self.state.actor_gets.lock().expect("actor gets").clone()
    }

    // WebFinger.

    pub fn set_webfinger_delay(&self, delay: Duration) {
        self.state
            .webfinger_delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }
    /// How often `name` was looked up.
    pub fn webfinger_hits(&self, name: &str) -> Option<u32> {
        self.state
            .webfinger_hits
            .lock()
            .expect("hits")
            .get(name)
            .copied()
    }
    /// The most WebFinger lookups answered at once.
    pub fn lookups_max(&self) -> usize {
        self.state.lookups_max.load(Ordering::SeqCst)
    }

    // Documents.

    pub fn doc(&self, path: &str, v: Value) {
        self.state
            .docs
            .lock()
            .expect("docs")
            .insert(path.to_string(), v);
    }
    /// Answers for the next GETs of `path`, before its standing document.
    pub fn script_doc(&self, path: &str, answers: impl IntoIterator<Item = Reply>) {
        self.state
            .doc_script
            .lock()
            .expect("script")
            .entry(path.to_string())
            .or_default()
            .extend(answers);
    }
    /// GETs of documents must be signed by this key (our account's or instance actor's).
    pub fn expect_key(&self, pem: &str) {
        *self.state.expected_key.lock().expect("key") = Some(pem.to_string());
    }
    pub fn hits(&self) -> Vec<Hit> {
        self.state.hits.lock().expect("hits").clone()
    }
    /// A public note by `/users/bob` at `path`, replying to `in_reply_to`.
    pub fn note(&self, path: &str, in_reply_to: &str, replies: Option<Value>) -> Value {
        let mut n = json!({
            "id": self.iri(path), "type": "Note", "attributedTo": self.iri("/users/bob"),
            "content": format!("<p>{path}</p>"), "inReplyTo": in_reply_to,
            "published": "2026-11-30T10:00:00Z",
            "to": ["https://www.w3.org/ns/activitystreams#Public"],
        });
        if let Some(r) = replies {
            n["replies"] = r;
        }
        n
    }

    // Sending.

    /// POSTs `body` to `url` signed with `key` at `at`; `tamper` may edit the headers after.
    pub async fn post_with(
        &self,
        url: &str,
        body: &[u8],
        key: &SigningKey,
        at: SystemTime,
        tamper: impl FnOnce(&mut HeaderMap),
    ) -> (u16, Value) {
        let u = url::Url::parse(url).expect("url");
        let mut headers = HeaderMap::new();
        signature::sign_request_at(key, &Method::POST, &u, Some(body), &mut headers, at)
            .expect("sign");
        headers.insert("content-type", ACTIVITY_JSON.parse().expect("header"));
        tamper(&mut headers);
        post_headers(url, headers, body).await
    }

    /// `post`, signed as `/users/{name}` (every actor of the peer has the peer's key).
    pub async fn post_as(&self, name: &str, url: &str, activity: &Value) -> u16 {
        let body = serde_json::to_vec(activity).expect("json");
        let key = SigningKey::new(format!("{}#main-key", self.actor_of(name)), peer_key())
            .expect("peer key");
        self.post_with(url, &body, &key, SystemTime::now(), |_| {})
            .await
            .0
    }

    pub async fn post(&self, url: &str, activity: &Value) -> u16 {
        let body = serde_json::to_vec(activity).expect("json");
        self.post_with(url, &body, &self.key(), SystemTime::now(), |_| {})
            .await
            .0
    }
}

fn activity_json(v: Value) -> Response {
    ([("content-type", ACTIVITY_JSON)], axum::Json(v)).into_response()
}

fn respond(reply: Reply) -> Response {
    match reply {
        Reply::Json(v) => activity_json(v),
        Reply::Status(code) => StatusCode::from_u16(code)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            .into_response(),
        Reply::RetryAfter(code, secs) => (
            StatusCode::from_u16(code).unwrap_or(StatusCode::TOO_MANY_REQUESTS),
            [("retry-after", secs.to_string())],
        )
            .into_response(),
        Reply::Hang => unreachable!("hangs are awaited by the caller"),
    }
}

async fn answer(reply: Reply) -> Response {
    if let Reply::Hang = reply {
        tokio::time::sleep(Duration::from_secs(600)).await;
        return StatusCode::ACCEPTED.into_response();
    }
    respond(reply)
}

#[derive(serde::Deserialize)]
struct WfQuery {
    resource: String,
}

/// Counts a lookup as running until dropped.
struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn webfinger(State(s): State<PeerState>, Query(q): Query<WfQuery>) -> Response {
    let now = s.lookups_now.fetch_add(1, Ordering::SeqCst) + 1;
    s.lookups_max.fetch_max(now, Ordering::SeqCst);
    let _running = Running(s.lookups_now.clone());
    let delay = s.webfinger_delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let Some(name) = q
        .resource
        .strip_prefix("acct:")
        .and_then(|r| r.split('@').next())
        .map(str::to_string)
    else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let hit = {
        let mut hits = s.webfinger_hits.lock().expect("hits");
        let n = hits.entry(name.clone()).or_default();
        *n += 1;
        *n
    };
    if name.starts_with("missing") {
        return StatusCode::NOT_FOUND.into_response();
    }
    if name.starts_with("down") || (name.starts_with("flaky") && hit <= 2) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let actor = format!("{}/users/{name}", s.base);
    (
        [("content-type", "application/jrd+json")],
        axum::Json(json!({
            "subject": q.resource,
            "links": [{ "rel": "self", "type": ACTIVITY_JSON, "href": actor }],
        })),
    )
        .into_response()
}

async fn actor(State(s): State<PeerState>, Path(name): Path<String>, req: Request) -> Response {
    let access = s
        .access
        .lock()
        .expect("access")
        .unwrap_or(ActorAccess::Open);
    if access != ActorAccess::Open {
        let key_id = signature::parse_signature_header(
            req.headers()
                .get("signature")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default(),
        )
        .ok()
        .map(|p| p.key_id);
        let verified = verify_ours(&s, "GET", req.uri().path(), req.headers(), None).await;
        s.actor_gets.lock().expect("actor gets").push(ActorGet {
            key_id,
            verified: verified.clone(),
        });
        if access == ActorAccess::RefuseAll || verified.is_err() {
            return StatusCode::UNAUTHORIZED.into_response();
        }
    }
    let actor = format!("{}/users/{name}", s.base);
    let pem = keys::public_key_pem(peer_key()).expect("pem");
    activity_json(json!({
        "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
        "id": actor, "type": "Person", "preferredUsername": name,
        "inbox": format!("{actor}/inbox"), "followers": format!("{actor}/followers"),
        "following": format!("{actor}/following"), "outbox": format!("{actor}/outbox"),
        "endpoints": { "sharedInbox": format!("{}/inbox", s.base) },
        "publicKey": { "id": format!("{actor}#main-key"), "owner": actor, "publicKeyPem": pem },
        "assertionMethod": proofs::assertion_method(&actor, &proof_key_for(&actor)),
    }))
}

/// Verifies our signature as a real server would: the key named by `keyId` fetched over
/// HTTP (once per key id), then the signing string, date window and digest.
async fn verify_ours(
    s: &PeerState,
    method: &str,
    path: &str,
    headers: &HeaderMap,
    body: Option<&[u8]>,
) -> Result<(), String> {
    use hollo_runtime::federation::transport::rfc9421;
    let (cavage_ok, rfc9421_ok) = s.accepts.lock().expect("accepts").unwrap_or((true, true));
    let pending = if rfc9421::is_signed(headers) {
        if !rfc9421_ok {
            return Err("RFC 9421 signatures are not accepted here".into());
        }
        let uri = format!("{}{path}", s.base);
        let target = rfc9421::Target { method, uri: &uri };
        rfc9421::prepare(&target, headers, body, SystemTime::now())
    } else {
        if !cavage_ok {
            return Err("draft-cavage signatures are not accepted here".into());
        }
        signature::prepare_verification(method, path, headers, body, SystemTime::now())
    }
    .map_err(|e| e.to_string())?;
    let cached = s
        .our_keys
        .lock()
        .expect("keys")
        .get(&pending.key_id)
        .cloned();
    let pem = match cached {
        Some(pem) => pem,
        None => {
            let key_url = pending.key_id.split('#').next().unwrap_or_default();
            let doc: Value = reqwest::Client::new()
                .get(key_url)
                .header("accept", ACTIVITY_JSON)
                .send()
                .await
                .map_err(|e| e.to_string())?
                .json()
                .await
                .map_err(|e| e.to_string())?;
            let pem = doc["publicKey"]["publicKeyPem"]
                .as_str()
                .ok_or("no publicKeyPem")?
                .to_string();
            s.our_keys
                .lock()
                .expect("keys")
                .insert(pending.key_id.clone(), pem.clone());
            pem
        }
    };
    pending.verify_pem(&pem).map_err(|e| e.to_string())
}

async fn inbox(State(s): State<PeerState>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let bytes: Bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let verified = verify_ours(&s, "POST", parts.uri.path(), &parts.headers, Some(&bytes)).await;
    let scheme = if parts.headers.contains_key("signature-input") {
        "rfc9421"
    } else {
        "cavage"
    };
    s.received.lock().expect("received").push(Received {
        path: parts.uri.path().to_string(),
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        verified: verified.clone(),
        scheme,
    });
    if verified.is_err() {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let reply = s.inbox_script.lock().expect("script").pop_front();
    match reply {
        None => StatusCode::ACCEPTED.into_response(),
        Some(r) => answer(r).await,
    }
}

async fn document(State(s): State<PeerState>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let signed = match s.expected_key.lock().expect("key").clone() {
        None => Err("no key to check against".to_string()),
        Some(pem) => {
            signature::prepare_verification("GET", &path, req.headers(), None, SystemTime::now())
                .and_then(|p| p.verify_pem(&pem))
                .map_err(|e| e.to_string())
        }
    };
    s.hits.lock().expect("hits").push(Hit {
        path: path.clone(),
        at: Instant::now(),
        wall: chrono::Utc::now(),
        signed,
    });
    let scripted = s
        .doc_script
        .lock()
        .expect("script")
        .get_mut(&path)
        .and_then(VecDeque::pop_front);
    let standing = || s.docs.lock().expect("docs").get(&path).cloned();
    match scripted.or_else(|| standing().map(Reply::Json)) {
        None => StatusCode::NOT_FOUND.into_response(),
        Some(Reply::Hang) => {
            tokio::time::sleep(Duration::from_secs(600)).await;
            StatusCode::NOT_FOUND.into_response()
        }
        Some(r) => respond(r),
    }
}

#[derive(serde::Deserialize)]
struct RedirectQuery {
    to: String,
}

async fn open_redirect(Query(q): Query<RedirectQuery>) -> Response {
    (StatusCode::FOUND, [("location", q.to)]).into_response()
}

async fn upload(State(s): State<PeerState>, Path(name): Path<String>) -> Response {
    // Counted like document fetches, so a test sees how often a file was fetched.
    s.hits.lock().expect("hits").push(Hit {
        path: format!("/uploads/{name}"),
        at: Instant::now(),
        wall: chrono::Utc::now(),
        signed: Err("an upload".into()),
    });
    match s.uploads.lock().expect("uploads").get(&name).cloned() {
        Some((ty, body)) => ([("content-type", ty)], body).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// POSTs `body` to `url` with exactly `headers` (a signature, a content type); the status and
/// the JSON body (null when there is none).
pub async fn post_headers(url: &str, headers: HeaderMap, body: &[u8]) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(url)
        .headers(headers)
        .body(body.to_vec())
        .send()
        .await
        .expect("post");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}
