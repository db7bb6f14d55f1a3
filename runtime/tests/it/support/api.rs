//! The Mastodon client API as a test talks to it: a bearer-token client with Mastodon's
//! bodies, error and id helpers, scoped tokens, and waiting for what a peer receives.

use std::time::Duration;

use hollo_runtime::accounts::{Account, hash_token};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;
use uuid::Uuid;

use super::eventually;
use super::node::Instance;
use super::peer::Peer;

pub const WAIT: Duration = Duration::from_secs(30);

pub struct Client {
    pub base: String,
    pub token: Option<String>,
    pub http: reqwest::Client,
}

pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub headers: HeaderMap,
}

impl Client {
    pub fn new(inst: &Instance, token: Option<&str>) -> Client {
        Client::at(&inst.base, token)
    }

    /// A client of the node at `base` (one not started as an `Instance`).
    pub fn at(base: &str, token: Option<&str>) -> Client {
        Client {
            base: base.to_string(),
            token: token.map(str::to_owned),
            http: reqwest::Client::new(),
        }
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Answer {
        let req = match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        };
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.json().await.unwrap_or(Value::Null);
        Answer {
            status,
            body,
            headers,
        }
    }

    /// A client holding `token`.
    pub fn bearer(inst: &Instance, token: &str) -> Client {
        Client::new(inst, Some(token))
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `method` on `path` with no body.
    pub async fn bare(&self, method: Method, path: &str) -> Answer {
        self.send(self.http.request(method, self.url(path))).await
    }

    /// `method` on `path` with `body` sent as `content_type`.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: impl Into<Vec<u8>>,
    ) -> Answer {
        self.send(
            self.http
                .request(method, self.url(path))
                .header("content-type", content_type)
                .body(body.into()),
        )
        .await
    }

    /// `method` on `path` with a multipart body made by `multipart::form`.
    pub async fn multipart(
        &self,
        method: Method,
        path: &str,
        parts: &[super::multipart::Part<'_>],
    ) -> Answer {
        let (ct, body) = super::multipart::form(parts);
        self.raw(method, path, &ct, body).await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(self.http.get(self.url(path))).await
    }

    pub async fn call(&self, method: Method, path: &str, json: &Value) -> Answer {
        self.send(self.http.request(method, self.url(path)).json(json))
            .await
    }

    /// `method` on `path` with an empty JSON object as the body (an action with no
    /// parameters: favourite, mute, read, dismiss …).
    pub async fn act(&self, method: Method, path: &str) -> Answer {
        self.call(method, path, &serde_json::json!({})).await
    }

    pub async fn post(&self, json: &Value) -> Answer {
        self.call(Method::POST, "/api/v1/statuses", json).await
    }

    /// `PUT /api/v1/statuses/<status>` of `json` (an edit).
    pub async fn edit(&self, status: &str, json: &Value) -> Answer {
        self.call(Method::PUT, &format!("/api/v1/statuses/{status}"), json)
            .await
    }

    /// Posts and returns the new status, asserting success.
    pub async fn posted(&self, json: &Value) -> Value {
        let a = self.post(json).await;
        assert_eq!(a.status, 200, "{json}: {}", a.body);
        a.body
    }

    pub async fn form(&self, method: Method, path: &str, body: &str) -> Answer {
        self.send(
            self.http
                .request(method, format!("{}{path}", self.base))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body.to_string()),
        )
        .await
    }
}

/// The body of a JSON call, asserting a 200.
pub async fn call_ok(api: &Client, method: Method, path: &str, body: Value) -> Value {
    let a = api.call(method, path, &body).await;
    assert_eq!(a.status, 200, "{path} {body}: {}", a.body);
    a.body
}

/// The body of an action with no parameters (`Client::act`), asserting a 200.
pub async fn act_ok(api: &Client, method: Method, path: &str) -> Value {
    call_ok(api, method, path, serde_json::json!({})).await
}

/// The body of a JSON call, asserting a 2xx.
pub async fn call_2xx(api: &Client, method: Method, path: &str, body: Value) -> Value {
    let a = api.call(method, path, &body).await;
    assert!(
        (200..300).contains(&a.status),
        "{path}: {} {}",
        a.status,
        a.body
    );
    a.body
}

/// Registers an OAuth app at the node at `base` (`POST /api/v1/apps` of `body`); the app.
pub async fn register_app(base: &str, body: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{base}/api/v1/apps"))
        .json(&body)
        .send()
        .await
        .expect("register")
        .json()
        .await
        .expect("app")
}

/// An ActivityPub document at `url` as a peer fetches it, asserting a 200.
pub async fn ap_doc(url: &str) -> Value {
    let resp = reqwest::Client::new()
        .get(url)
        .header("accept", "application/activity+json")
        .send()
        .await
        .expect("get");
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 200, "GET {url}: {v}");
    v
}

/// The body of a GET, asserting a 200.
pub async fn get_ok(api: &Client, path: &str) -> Value {
    let a = api.get(path).await;
    assert_eq!(a.status, 200, "{path}: {}", a.body);
    a.body
}

impl Answer {
    /// The answer, asserting a 200 (the body is the message otherwise).
    #[track_caller]
    pub fn assert_ok(self) -> Answer {
        assert_eq!(self.status, 200, "{}", self.body);
        self
    }

    /// The status and the body, for a test that names them apart.
    pub fn parts(self) -> (u16, Value) {
        (self.status, self.body)
    }
}

/// The text of header `name`, or "" when it is missing (or not text).
pub fn header_text(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// How long a test waits for a background job (an import, a cleanup) to end.
pub const JOB_WAIT: Duration = Duration::from_secs(60);

/// Polls `GET path` until its body satisfies `done` (within `JOB_WAIT`); returns that body.
pub async fn until_get(
    api: &Client,
    path: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    eventually(JOB_WAIT, what, || async {
        let v = api.get(path).await.body;
        done(&v).then_some(v)
    })
    .await
}

/// `POST /api/v1/imports?<query>` of `csv` (asserting a 202), then waits until the job is
/// completed; returns the job.
pub async fn import_csv(api: &Client, query: &str, csv: &str) -> Value {
    let job = api
        .raw(
            Method::POST,
            &format!("/api/v1/imports?{query}"),
            "text/csv",
            csv,
        )
        .await;
    assert_eq!(job.status, 202, "{query}: {}", job.body);
    let path = format!("/api/v1/imports/{}", job.body["id"].as_str().expect("id"));
    until_get(api, &path, &format!("the {query} import"), |v| {
        v["status"] == "completed"
    })
    .await
}

/// Runs a media cleanup through the admin API (as `admin`) and waits for its end.
pub async fn run_media_cleanup(inst: &Instance, admin: &str) -> Value {
    let api = Client::bearer(inst, admin);
    let job = api
        .call(
            Method::POST,
            "/api/v1/admin/cleanups",
            &serde_json::json!({"kind": "media"}),
        )
        .await;
    assert_eq!(job.status, 202);
    let path = format!(
        "/api/v1/admin/cleanups/{}",
        job.body["id"].as_str().unwrap()
    );
    until_get(&api, &path, "the cleanup finishes", |v| {
        matches!(
            v["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        )
    })
    .await
}

/// Waits until the remote post `iri` is stored; returns its id.
pub async fn remote_post_id(inst: &Instance, iri: &str, what: &str) -> Uuid {
    eventually(WAIT, what, || async {
        sqlx::query_scalar("SELECT id FROM remote_posts WHERE iri = $1")
            .bind(iri)
            .fetch_optional(&inst.pool)
            .await
            .expect("query")
    })
    .await
}

/// `api`'s account follows the account `whom` (an id), asserting a 200.
pub async fn follow(api: &Client, whom: &str) {
    call_ok(
        api,
        Method::POST,
        &format!("/api/v1/accounts/{whom}/follow"),
        serde_json::json!({}),
    )
    .await;
}

/// A new list of `api`'s account; its id.
pub async fn new_list(api: &Client, body: Value) -> String {
    id(&call_ok(api, Method::POST, "/api/v1/lists", body).await)
}

/// Adds `accounts` (ids) to `list`, asserting a 200.
pub async fn add_to_list(api: &Client, list: &str, accounts: &[&str]) {
    call_ok(
        api,
        Method::POST,
        &format!("/api/v1/lists/{list}/accounts"),
        serde_json::json!({ "account_ids": accounts }),
    )
    .await;
}

/// A page: the entity ids and the `Link` header's `next` and `prev` paths.
pub struct Listed {
    pub ids: Vec<String>,
    pub body: Value,
    pub next: Option<String>,
    pub prev: Option<String>,
}

/// `GET path` (as `token`, or anonymously), asserting a 200.
pub async fn list(inst: &Instance, token: Option<&str>, path: &str) -> Listed {
    let req = reqwest::Client::new().get(format!("{}{path}", inst.base));
    let req = match token {
        Some(t) => req.bearer_auth(t),
        None => req,
    };
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    let link = header_text(resp.headers(), "link");
    let rel = |name: &str| {
        link.split(',')
            .find(|p| p.contains(&format!("rel=\"{name}\"")))
            .and_then(|p| p.split(['<', '>']).nth(1))
            .map(|u| u.trim_start_matches(&inst.base).to_string())
    };
    let (next, prev) = (rel("next"), rel("prev"));
    let body: Value = resp.json().await.unwrap();
    let ids = body.as_array().expect("a list").iter().map(id).collect();
    Listed {
        ids,
        body,
        next,
        prev,
    }
}

/// An `all` node, a peer, and the local account alice with a client holding her token.
pub async fn alice_and_peer() -> (Instance, Peer, Account, Client) {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let (alice, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);
    (inst, peer, alice, api)
}

/// The peer's person follows `username` (its `Follow` taken with a 202); returns the `Follow`.
pub async fn peer_follows(inst: &Instance, peer: &Peer, username: &str) -> Value {
    let follow = serde_json::json!({
        "id": peer.new_id("follows"), "type": "Follow", "actor": peer.actor(),
        "object": inst.fed.actor_iri(username),
    });
    assert_eq!(peer.post(&inst.fed.inbox(username), &follow).await, 202);
    follow
}

/// `peer_follows`, then waits until the peer receives the `Accept`.
pub async fn peer_follows_accepted(inst: &Instance, peer: &Peer, username: &str) -> Value {
    let follow = peer_follows(inst, peer, username).await;
    received(peer, "Accept", |_| true).await;
    follow
}

/// The Account id of the peer's person `handle` (`user@host`), resolved through search.
pub async fn resolve_id(api: &Client, handle: &str) -> String {
    let found = api
        .get(&format!(
            "/api/v2/search?q=%40{handle}&resolve=true&type=accounts"
        ))
        .await;
    found.body["accounts"][0]["id"]
        .as_str()
        .expect("resolved")
        .to_string()
}

/// Local accounts of `inst` named `names`, each with a token of its own and a client holding it.
pub async fn users<const N: usize>(
    inst: &Instance,
    names: [&str; N],
) -> [(Account, String, Client); N] {
    let mut out = Vec::with_capacity(N);
    for name in names {
        let (account, token) = inst.account(name).await;
        let api = Client::bearer(inst, &token);
        out.push((account, token, api));
    }
    out.try_into()
        .unwrap_or_else(|_| unreachable!("one per name"))
}

/// Waits until `account`'s follow of `target` (an actor IRI) is `accepted`.
pub async fn until_follow_accepted(inst: &Instance, account: Uuid, target: &str, what: &str) {
    eventually(WAIT, what, || async {
        let state: Option<String> = sqlx::query_scalar(
            "SELECT state FROM follows WHERE account_id = $1 AND target_iri = $2",
        )
        .bind(account)
        .bind(target)
        .fetch_optional(&inst.pool)
        .await
        .ok()
        .flatten();
        (state.as_deref() == Some("accepted")).then_some(())
    })
    .await;
}

pub fn id(v: &Value) -> String {
    v["id"].as_str().expect("an id").to_string()
}

pub fn assert_error(a: &Answer, status: u16, what: &str) {
    assert_eq!(a.status, status, "{what}: {}", a.body);
    assert!(a.body["error"].is_string(), "{what}: {}", a.body);
}

pub async fn scalar(inst: &Instance, sql: &str, bind: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
        .bind(bind)
        .fetch_one(&inst.pool)
        .await
        .expect(sql)
}

/// The caller's notifications of type `kind` (v1, newest first).
pub async fn notifications_of(api: &Client, kind: &str) -> Vec<Value> {
    let n = api
        .get(&format!("/api/v1/notifications?types[]={kind}"))
        .await
        .body;
    n.as_array().cloned().unwrap_or_default()
}

/// Waits until the peer received a verified activity of `ty` matching `pred`.
pub async fn received(peer: &Peer, ty: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let got = eventually(WAIT, &format!("the peer receives a {ty}"), || async {
        peer.received()
            .into_iter()
            .find(|r| r.ty() == ty && pred(&r.body))
    })
    .await;
    assert_eq!(got.verified, Ok(()), "our {ty} verifies at the peer");
    got.body
}

pub fn has(v: &Value, iri: &str) -> bool {
    v.as_array()
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(iri)))
}

/// A token of `account` holding only `scopes`.
pub async fn token_with_scopes(inst: &Instance, account: Uuid, scopes: &str) -> String {
    let token = format!("scoped-{}", Uuid::new_v4().simple());
    sqlx::query("INSERT INTO account_tokens (token_hash, account_id, scopes) VALUES ($1, $2, $3)")
        .bind(hash_token(&token))
        .bind(account)
        .bind(scopes)
        .execute(&inst.pool)
        .await
        .expect("token");
    token
}

/// The local account `username` (whose client is `api`) and the peer's person follow each
/// other: the account resolves and follows the peer, which accepts, and the peer follows back
/// (accepted at once). Returns the peer's Account id here and the id of the peer's `Follow`.
pub async fn follow_each_other(
    inst: &Instance,
    api: &Client,
    peer: &Peer,
    username: &str,
) -> (String, String) {
    let inbox = inst.fed.inbox(username);
    let me = inst.fed.actor_iri(username);
    let peer_id = resolve_id(api, &peer.handle()).await;
    let followed = api
        .call(
            Method::POST,
            &format!("/api/v1/accounts/{peer_id}/follow"),
            &serde_json::json!({}),
        )
        .await;
    assert_eq!(followed.status, 200, "{}", followed.body);
    let f = received(peer, "Follow", |b| b["actor"] == me.as_str()).await;
    let accept = serde_json::json!({
        "id": peer.new_id("accepts"), "type": "Accept", "actor": peer.actor(),
        "object": { "id": f["id"], "type": "Follow", "actor": me, "object": peer.actor() },
    });
    assert_eq!(peer.post(&inbox, &accept).await, 202);
    let follow_id = peer.new_id("follows");
    let follow_back = serde_json::json!({
        "id": follow_id, "type": "Follow", "actor": peer.actor(), "object": me,
    });
    assert_eq!(peer.post(&inbox, &follow_back).await, 202);
    received(peer, "Accept", |b| b["object"]["id"] == follow_id.as_str()).await;
    (peer_id, follow_id)
}

/// A preview card for `url` fetched a moment ago (`title`, `provider_name`): the workers reuse
/// a card under 14 days old rather than fetch the page, so posts linking `url` get this one.
pub async fn card_fetched_earlier(inst: &Instance, url: &str, title: &str, provider: &str) {
    sqlx::query(
        "INSERT INTO preview_cards (id, url, title, provider_name, fetched_at)
         VALUES (gen_random_uuid(), $1, $2, $3, now())",
    )
    .bind(url)
    .bind(title)
    .bind(provider)
    .execute(&inst.pool)
    .await
    .expect("insert a card");
}

/// Waits until `n` posts show the card of `url`.
pub async fn until_posts_show_card(inst: &Instance, url: &str, n: i64) {
    eventually(WAIT, "the posts show the card", || async {
        let shown: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM post_preview_cards l JOIN preview_cards c ON c.id = l.card_id
              WHERE c.url = $1",
        )
        .bind(url)
        .fetch_one(&inst.pool)
        .await
        .expect("count");
        (shown == n).then_some(())
    })
    .await;
}

/// `id[]=…` of `n` ids that name nothing: one more than a request may name is a 422.
pub fn unknown_ids_query(n: usize) -> String {
    (0..n)
        .map(|_| format!("id[]={}", Uuid::now_v7()))
        .collect::<Vec<_>>()
        .join("&")
}
