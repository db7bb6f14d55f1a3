//! The Mastodon streaming API (SPEC §11, R-MAPI-5) over real WebSockets
//! against real nodes on a real PostgreSQL: who may connect and how the token travels, what
//! each stream receives (and never receives), fan-out from any web node or worker to a client
//! on another web node when each is its own `hollo` process, and a client that stops reading
//! being dropped without hurting anyone else.
//!
//! "Never receives" is shown with a barrier: the status that must not arrive is posted first,
//! then one that must; events reach a connection in commit order, so once the second has
//! arrived the first would have arrived before it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use support::api::{Client, call_2xx, register_app, users};
use support::eventually;
use support::node::{Instance, SECRET};
use support::process::{Hollo, run};
use support::stream::{Socket, Token, connect, open};
use tokio::net::TcpStream;
use tokio_tungstenite::MaybeTlsStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

const WAIT: Duration = Duration::from_secs(30);

/// The HTTP status a refused handshake got.
async fn refused(base: &str, query: &str, token: Token<'_>) -> u16 {
    refusal(base, query, token).await.0
}

/// The refusal of an upgrade: its status and its `Retry-After` header, if any.
async fn refusal(base: &str, query: &str, token: Token<'_>) -> (u16, Option<String>) {
    match open(base, query, token).await {
        Err(tungstenite::Error::Http(resp)) => (
            resp.status().as_u16(),
            resp.headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        ),
        Err(e) => panic!("expected an HTTP refusal, got {e}"),
        Ok(_) => panic!("expected a refusal, the upgrade succeeded"),
    }
}

/// A server message: `stream`, `event`, and `payload` parsed (a JSON entity, or the id string).
#[derive(Debug)]
struct Event {
    stream: Vec<String>,
    event: String,
    payload: Value,
}

impl Event {
    fn is(&self, stream: &[&str], event: &str) -> bool {
        self.stream == stream && self.event == event
    }

    fn id(&self) -> &str {
        self.payload["id"]
            .as_str()
            .or(self.payload.as_str())
            .unwrap_or_default()
    }
}

/// Reads until an event matches `want`, returning it with every event read before it; fails
/// after the deadline or when the stream ends.
async fn until(
    ws: &mut Socket,
    what: &str,
    mut want: impl FnMut(&Event) -> bool,
) -> (Event, Vec<Event>) {
    let start = Instant::now();
    let mut before = Vec::new();
    loop {
        let left = WAIT
            .checked_sub(start.elapsed())
            .unwrap_or_else(|| panic!("timed out waiting for {what}; got {before:#?}"));
        let m = tokio::time::timeout(left, ws.next())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}; got {before:#?}"));
        let m = match m {
            Some(Ok(m)) => m,
            other => panic!("stream ended waiting for {what}: {other:?}; got {before:#?}"),
        };
        let Message::Text(text) = m else { continue };
        let v: Value = serde_json::from_str(text.as_str()).expect("JSON message");
        assert!(
            v.get("error").is_none(),
            "error while waiting for {what}: {v}"
        );
        let payload = match v["payload"].as_str() {
            Some(p) => serde_json::from_str(p).unwrap_or_else(|_| json!(p)),
            None => v["payload"].clone(),
        };
        let e = Event {
            stream: serde_json::from_value(v["stream"].clone()).expect("stream names"),
            event: v["event"].as_str().expect("event").to_string(),
            payload,
        };
        if want(&e) {
            return (e, before);
        }
        before.push(e);
    }
}

async fn send(ws: &mut Socket, v: Value) {
    ws.send(Message::Text(v.to_string().into()))
        .await
        .expect("send");
}

/// Posts `status` with `visibility`; returns its id.
async fn post(api: &Client, status: &str, visibility: &str) -> String {
    let v = call_2xx(
        api,
        Method::POST,
        "/api/v1/statuses",
        json!({"status": status, "visibility": visibility}),
    )
    .await;
    v["id"].as_str().expect("status id").to_string()
}

async fn follow(api: &Client, account: &str) {
    call_2xx(
        api,
        Method::POST,
        &format!("/api/v1/accounts/{account}/follow"),
        json!({}),
    )
    .await;
}

async fn me(api: &Client) -> String {
    let v = call_2xx(
        api,
        Method::GET,
        "/api/v1/accounts/verify_credentials",
        json!({}),
    )
    .await;
    v["id"].as_str().expect("account id").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_health_and_refusals() {
    let inst = Instance::start("all", &[]).await;
    let (_, token) = inst.account("alice").await;
    let base = inst.base.as_str();
    let http = reqwest::Client::new();

    let health = http
        .get(format!("{base}/api/v1/streaming/health"))
        .send()
        .await
        .expect("health");
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.expect("body"), "OK");

    // Without a valid token: 401, whether or not the request asks for an upgrade.
    let plain = http
        .get(format!("{base}/api/v1/streaming?stream=public"))
        .send()
        .await
        .expect("plain GET");
    assert_eq!(plain.status(), 401);
    assert!(plain.json::<Value>().await.expect("JSON")["error"].is_string());
    assert_eq!(refused(base, "stream=public", Token::None).await, 401);
    assert_eq!(
        refused(base, "stream=public", Token::Header("not-a-token")).await,
        401
    );
    assert_eq!(
        refused(base, "stream=user", Token::Query("not-a-token")).await,
        401
    );
    assert_eq!(
        refused(base, "stream=user", Token::Protocol("not-a-token")).await,
        401
    );
    // A valid token naming a stream that does not exist.
    assert_eq!(
        refused(base, "stream=nonsense", Token::Header(&token)).await,
        400
    );

    // The token as the subprotocol: accepted and echoed as the chosen protocol.
    let (mut by_protocol, resp) = open(base, "stream=public:local", Token::Protocol(&token))
        .await
        .expect("handshake with the token as the protocol");
    assert_eq!(
        resp.headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok()),
        Some(token.as_str())
    );
    let (mut by_query, _) = open(base, "stream=public:local", Token::Query(&token))
        .await
        .expect("handshake with the token in the query");
    let api = Client::at(base, Some(&token));
    let id = post(&api, "through every door", "public").await;
    for ws in [&mut by_protocol, &mut by_query] {
        let (e, _) = until(ws, "the post", |e| e.id() == id).await;
        assert!(e.is(&["public:local"], "update"), "{e:?}");
        let content = e.payload["content"].as_str().unwrap_or_default();
        assert!(content.contains("through every door"), "{e:?}");
    }

    // A bad subscription is answered in Mastodon's error shape, and the stream goes on.
    send(
        &mut by_query,
        json!({"type": "subscribe", "stream": "lists"}),
    )
    .await;
    let err = tokio::time::timeout(WAIT, by_query.next())
        .await
        .expect("an answer")
        .expect("open")
        .expect("a message");
    let err: Value = serde_json::from_str(err.to_text().expect("text")).expect("JSON");
    assert_eq!(err["status"], 400, "{err}");
    assert_eq!(err["error"], "Unknown stream type");
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_stream_gets_what_it_should_and_nothing_private() {
    let inst = Instance::start("all", &[]).await;
    let [
        (alice, alice_token, _),
        (bob, bob_token, _),
        (_, carol_token, _),
    ] = users(&inst, ["alice", "bob", "carol"]).await;
    let base = inst.base.as_str();
    let alice_api = Client::at(base, Some(&alice_token));
    let bob_api = Client::at(base, Some(&bob_token));
    let carol_api = Client::at(base, Some(&carol_token));
    follow(&bob_api, &alice.id.to_string()).await;

    let mut bob_user = connect(base, "stream=user", &bob_token).await;
    let mut bob_notes = connect(base, "stream=user:notification", &bob_token).await;
    let mut local = connect(base, "stream=public:local", &carol_token).await;
    let mut rust = connect(base, "stream=hashtag&tag=Rust", &carol_token).await;
    // carol follows nobody and subscribes over the socket to everything she may see.
    let mut carol = connect(base, "stream=user", &carol_token).await;
    for (stream, tag) in [
        ("public", None),
        ("public:local", None),
        ("hashtag", Some("secret")),
    ] {
        let mut m = json!({"type": "subscribe", "stream": stream});
        if let Some(t) = tag {
            m["tag"] = json!(t);
        }
        send(&mut carol, m).await;
    }
    // Commands and events travel apart, so a subscription is known to be in place once an
    // event of it arrives: carol posts a tagged primer, then an untagged one that her `user`
    // stream (subscribed at connect) surely gets, until the first arrived on the hashtag.
    for attempt in 0.. {
        assert!(attempt < 20, "the hashtag subscription never took");
        let tagged = post(&carol_api, "primer #secret", "public").await;
        let untagged = post(&carol_api, "primer", "public").await;
        let (_, before) = until(&mut carol, "carol's own primer", |e| {
            e.id() == untagged && e.is(&["user"], "update")
        })
        .await;
        if before
            .iter()
            .any(|e| e.id() == tagged && e.is(&["hashtag", "secret"], "update"))
        {
            break;
        }
    }

    // bob's home: alice's post, as the Status entity he would read.
    let hello = post(&alice_api, "hello #Rust", "public").await;
    let (e, _) = until(&mut bob_user, "alice's post on bob's user stream", |e| {
        e.id() == hello
    })
    .await;
    assert!(e.is(&["user"], "update"), "{e:?}");
    assert_eq!(e.payload["account"]["username"], "alice");

    // The visibilities on public:local: only public arrives.
    let unlisted = post(&alice_api, "unlisted", "unlisted").await;
    let private = post(&alice_api, "private #secret #rust", "private").await;
    let direct = post(&alice_api, "direct @bob", "direct").await;
    let barrier = post(&alice_api, "public #secret #rust", "public").await;
    let (_, before) = until(&mut local, "the public barrier", |e| e.id() == barrier).await;
    let seen: Vec<&str> = before.iter().map(Event::id).collect();
    assert!(seen.contains(&hello.as_str()), "{seen:?}");
    for hidden in [&unlisted, &private, &direct] {
        assert!(
            !seen.contains(&hidden.as_str()),
            "{hidden} on public:local: {seen:?}"
        );
    }
    // The hashtag stream: only #rust, public.
    let (_, before) = until(&mut rust, "the #rust barrier", |e| e.id() == barrier).await;
    let seen: Vec<&str> = before.iter().map(Event::id).collect();
    assert_eq!(seen, [hello.as_str()], "only the public #rust posts");
    // carol, no follower, sees neither the private nor the direct post on any stream.
    let (_, before) = until(&mut carol, "the barrier on carol's hashtag stream", |e| {
        e.id() == barrier && e.is(&["hashtag", "secret"], "update")
    })
    .await;
    for e in &before {
        for hidden in [&private, &direct, &unlisted] {
            assert_ne!(e.id(), hidden.as_str(), "{e:?}");
        }
    }

    // bob follows alice: her followers-only post is his to see; the direct one mentions him.
    let (_, before) = until(&mut bob_user, "the barrier on bob's home", |e| {
        e.id() == barrier
    })
    .await;
    let seen: Vec<&str> = before.iter().map(Event::id).collect();
    assert!(seen.contains(&private.as_str()), "{seen:?}");
    let (n, _) = until(&mut bob_notes, "the mention", |e| e.event == "notification").await;
    assert!(n.is(&["user:notification"], "notification"), "{n:?}");
    assert_eq!(n.payload["type"], "mention");
    assert_eq!(n.payload["status"]["id"], json!(direct));
    assert_eq!(n.payload["account"]["username"], "alice");
    let mention_on_user = before
        .iter()
        .any(|e| e.is(&["user"], "notification") && e.payload["status"]["id"] == json!(direct));
    assert!(mention_on_user, "the user stream carries notifications too");

    // A mention by someone bob does not follow: a notification, not a home entry.
    let from_carol = post(&carol_api, "hi @bob", "public").await;
    let (n, _) = until(&mut bob_notes, "carol's mention", |e| {
        e.event == "notification" && e.payload["status"]["id"] == json!(from_carol)
    })
    .await;
    assert_eq!(n.payload["account"]["username"], "carol");

    // An edit and a deletion reach the streams that showed the status.
    call_2xx(
        &alice_api,
        Method::PUT,
        &format!("/api/v1/statuses/{hello}"),
        json!({"status": "hello again #Rust"}),
    )
    .await;
    let (e, _) = until(&mut bob_user, "the edit", |e| e.event == "status.update").await;
    assert_eq!(e.id(), hello);
    assert_eq!(
        e.payload["content"].as_str().map(|c| c.contains("again")),
        Some(true)
    );
    let (e, _) = until(&mut rust, "the edit on #rust", |e| {
        e.event == "status.update"
    })
    .await;
    assert_eq!(e.id(), hello);
    call_2xx(
        &alice_api,
        Method::DELETE,
        &format!("/api/v1/statuses/{hello}"),
        json!({}),
    )
    .await;
    for ws in [&mut bob_user, &mut local, &mut rust] {
        let (e, _) = until(ws, "the deletion", |e| e.event == "delete").await;
        assert_eq!(e.payload, json!(hello), "{e:?}");
    }
    // A direct message's deletion goes to its readers only (R-MAPI-VIS, R-API):
    // bob hears of it; carol, on every stream she has, hears of the public barrier's deletion
    // and of nothing before it.
    for gone in [&direct, &barrier] {
        call_2xx(
            &alice_api,
            Method::DELETE,
            &format!("/api/v1/statuses/{gone}"),
            json!({}),
        )
        .await;
    }
    let (_, before) = until(&mut bob_user, "the barrier's deletion on bob's home", |e| {
        e.event == "delete" && e.id() == barrier
    })
    .await;
    assert!(
        before
            .iter()
            .any(|e| e.event == "delete" && e.id() == direct),
        "bob, its recipient, hears the DM went: {before:?}"
    );
    let (_, before) = until(
        &mut carol,
        "the barrier's deletion on carol's streams",
        |e| e.event == "delete" && e.id() == barrier,
    )
    .await;
    for e in &before {
        assert_ne!(e.id(), direct.as_str(), "carol heard of the DM: {e:?}");
    }
    assert!(bob.id != alice.id);
    inst.shutdown().await;
}

/// `/metrics` of a node, as text.
async fn metrics(base: &str) -> String {
    reqwest::get(format!("{base}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text")
}

fn counter(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_stops_reading_is_dropped_and_nobody_else_notices() {
    // Long idle timeouts: the slow client must be dropped for its full buffer, not for
    // being quiet.
    // It posts up to 3000 statuses from one account: past the default write limit (300).
    let inst = Instance::start(
        "all",
        &[
            ("HTTP_IDLE_TIMEOUT_SECONDS", "600"),
            ("STATUS_RATE_LIMIT", "1000000"),
        ],
    )
    .await;
    let [(_, alice_token, _), (_, bob_token, _)] = users(&inst, ["alice", "bob"]).await;
    let base = inst.base.clone();
    let alice_api = Client::at(&base, Some(&alice_token));

    // The slow client: a small receive buffer, many subscriptions, and it never reads.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    let tcp = socket.connect(inst.addr()).await.expect("connect");
    let ws_url = format!(
        "{}/api/v1/streaming?stream=public",
        base.replacen("http://", "ws://", 1)
    );
    let mut req = ws_url.into_client_request().expect("request");
    req.headers_mut().insert(
        "authorization",
        format!("Bearer {bob_token}").parse().unwrap(),
    );
    let (mut slow, _) = tokio_tungstenite::client_async(req, MaybeTlsStream::Plain(tcp))
        .await
        .expect("slow client handshake");
    for (stream, tag) in [
        ("public:local", None),
        ("hashtag", Some("a")),
        ("hashtag", Some("b")),
        ("hashtag:local", Some("a")),
        ("hashtag:local", Some("b")),
    ] {
        let mut m = json!({"type": "subscribe", "stream": stream});
        if let Some(t) = tag {
            m["tag"] = json!(t);
        }
        send(&mut slow, m).await;
    }

    // Another client reads everything, all along.
    let mut fast = connect(&base, "stream=public:local", &bob_token).await;
    let reader = tokio::spawn(async move {
        let mut n = 0u64;
        while let Some(Ok(m)) = fast.next().await {
            if let Message::Text(t) = m
                && t.as_str().contains("\"update\"")
            {
                n += 1;
                if t.as_str().contains("after the drop") {
                    return (n, fast);
                }
            }
        }
        panic!("the reading client's stream ended after {n} updates");
    });

    // Long posts until the node gives up on the slow client (never more than a bound).
    let filler = format!("#a #b {}", "x".repeat(450));
    let mut posted = 0;
    while counter(
        &metrics(&inst.health_base()).await,
        "hollo_streaming_dropped_clients_total",
    ) < 1.0
    {
        assert!(posted < 3000, "the slow client was never dropped");
        let batch: Vec<_> = (0..8)
            .map(|_| post(&alice_api, &filler, "public"))
            .collect();
        futures::future::join_all(batch).await;
        posted += 8;
    }

    // The reader still gets what follows; the slow client's socket is closed (it reads what
    // was buffered, then the end).
    post(&alice_api, "after the drop", "public").await;
    let (updates, _fast) = tokio::time::timeout(WAIT, reader)
        .await
        .expect("the reading client got the post after the drop")
        .expect("reader task");
    assert!(
        updates > posted as u64,
        "{updates} updates for {posted} posts"
    );
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match slow.next().await {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the slow client's stream was not closed");
    let m = metrics(&inst.health_base()).await;
    assert_eq!(counter(&m, "hollo_streaming_dropped_clients_total"), 1.0);
    eventually(WAIT, "one open stream left", || async {
        (counter(
            &metrics(&inst.health_base()).await,
            "hollo_streaming_connections",
        ) == 1.0)
            .then_some(())
    })
    .await;
    inst.shutdown().await;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_reach_clients_on_other_processes() {
    let db = support::fresh_db().await;
    let (port_a, port_b) = (free_port(), free_port());
    let (a, b) = (
        format!("http://127.0.0.1:{port_a}"),
        format!("http://127.0.0.1:{port_b}"),
    );
    let (pa, pb) = (port_a.to_string(), port_b.to_string());
    // Both web nodes are one instance behind one public URL, as behind a load balancer.
    let shared = [
        ("DATABASE_URL", db.url.as_str()),
        ("PUBLIC_URL", a.as_str()),
        ("SECRET_KEY", SECRET),
        ("ALLOW_PRIVATE_ADDRESS", "true"),
        ("QUEUE_POLL_MS", "100"),
        ("HEALTH_PORT", "0"),
    ];
    let with = |extra: &[(&'static str, &str)]| {
        let mut env: Vec<(&str, String)> =
            shared.iter().map(|(k, v)| (*k, v.to_string())).collect();
        env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        env
    };
    let start = |env: Vec<(&str, String)>| {
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Hollo::serve(&pairs)
    };
    let web_a = start(with(&[("NODE_TYPE", "web"), ("PORT", &pa)]));
    let web_b = start(with(&[("NODE_TYPE", "web"), ("PORT", &pb)]));
    let worker = start(with(&[("NODE_TYPE", "worker")]));
    for (base, node) in [(&a, &web_a), (&b, &web_b)] {
        eventually(WAIT, "a web node to be ready", || async {
            match reqwest::get(format!("{base}/readyz")).await {
                Ok(r) if r.status() == 200 => Some(()),
                _ => None,
            }
        })
        .await;
        assert!(node.logs().contains("listening for HTTP"));
    }
    worker
        .wait_log(hollo_runtime::node::WORKER_STARTED, WAIT)
        .await;

    let token_of = |name: &str| {
        let env = with(&[]);
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let out = run(&["account", "create", name], &pairs);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .expect("token")
            .trim()
            .to_string()
    };
    let (alice_token, bob_token) = (token_of("alice"), token_of("bob"));
    // Requests go to node B; the streams listen on node A.
    let alice_b = Client::at(&b, Some(&alice_token));
    let bob_b = Client::at(&b, Some(&bob_token));
    follow(&bob_b, &me(&alice_b).await).await;
    let mut bob_on_a = connect(&a, "stream=user", &bob_token).await;
    let mut alice_on_a = connect(&a, "stream=user:notification", &alice_token).await;
    let mut local_on_a = connect(&a, "stream=public:local", &bob_token).await;

    let id = post(&alice_b, "from node B", "public").await;
    let (e, _) = until(&mut bob_on_a, "node B's post on node A", |e| e.id() == id).await;
    assert!(e.is(&["user"], "update"), "{e:?}");
    until(
        &mut local_on_a,
        "node B's post on node A's public:local",
        |e| e.id() == id,
    )
    .await;

    // The worker's event: a poll ends there (web nodes only schedule it), and its author is
    // notified on node A.
    let poll = call_2xx(
        &alice_b,
        Method::POST,
        "/api/v1/statuses",
        json!({"status": "Tea?", "poll": {"options": ["yes", "no"], "expires_in": 1}}),
    )
    .await;
    let (n, _) = until(&mut alice_on_a, "the worker's poll notification", |e| {
        e.event == "notification"
    })
    .await;
    assert_eq!(n.payload["type"], "poll", "{n:?}");
    assert_eq!(n.payload["status"]["id"], poll["id"]);
    assert!(
        n.payload["status"]["poll"]["expired"] == json!(true),
        "{:?}",
        n.payload
    );
    drop((web_a, web_b, worker));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_committed_is_lost_when_the_listen_connection_drops() {
    let inst = Instance::start("all", &[]).await;
    let (_, token) = inst.account("alice").await;
    let base = inst.base.as_str();
    let api = Client::at(base, Some(&token));
    let mut local = connect(base, "stream=public:local", &token).await;
    let first = post(&api, "before", "public").await;
    until(&mut local, "the first post", |e| e.id() == first).await;

    // The node's streaming LISTEN connection is killed; posts keep coming meanwhile, some
    // before it is back (caught up from the table), some after (notified).
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
          WHERE datname = current_database() AND query LIKE '%hollo_stream%'
            AND query ILIKE 'LISTEN%'",
    )
    .fetch_one(&inst.pool)
    .await
    .expect("terminate");
    assert_eq!(killed, 1, "one streaming LISTEN connection");
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(post(&api, &format!("during {i}"), "public").await);
    }
    let last = ids.last().cloned().expect("posts");
    let (_, before) = until(&mut local, "the last post", |e| e.id() == last).await;
    let mut seen: Vec<&str> = before.iter().map(Event::id).collect();
    seen.push(&last);
    assert_eq!(seen, ids, "every post once, in order");
    eventually(WAIT, "the listener to be back", || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND query ILIKE 'LISTEN%hollo_stream%'",
        )
        .fetch_one(&inst.pool)
        .await
        .expect("count");
        (n == 1).then_some(())
    })
    .await;
    // One LISTEN connection serves the streams and the queues alike (`db::listen`): the
    // `all` node holds no second one, and the queues' wake-ups came back with it.
    let listening: Vec<String> = sqlx::query_scalar(
        "SELECT query FROM pg_stat_activity
          WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
    )
    .fetch_all(&inst.pool)
    .await
    .expect("listeners");
    assert_eq!(listening.len(), 1, "{listening:?}");
    for channel in [
        "hollo_stream",
        "hollo_activity_channel_v1",
        "hollo_task_channel_v1",
    ] {
        assert!(listening[0].contains(channel), "{channel} in {listening:?}");
    }
    inst.shutdown().await;
}

/// What the inbox stores reaches the public streams: a remote public note (`update`, on the
/// hashtag stream too), its edit (`status.update`) and its deletion (`delete`); a
/// followers-only note never does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inbox_notes_reach_the_public_streams() {
    const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";
    let inst = Instance::start("all", &[]).await;
    let peer = support::peer::Peer::start().await;
    let (_, token) = inst.account("alice").await;
    let inbox = inst.fed.inbox("alice");
    let mut public = connect(&inst.base, "stream=public", &token).await;
    let mut tagged = connect(&inst.base, "stream=hashtag&tag=Rust", &token).await;
    let followers = format!("{}/followers", peer.actor());
    let note = |content: &str, to: &str| {
        json!({ "id": peer.new_id("notes"), "type": "Note", "attributedTo": peer.actor(),
                "content": content, "published": "2026-12-01T10:00:00Z", "to": [to],
                "tag": [{ "type": "Hashtag", "name": "#rust",
                          "href": format!("{}/tags/rust", peer.iri("")) }] })
    };
    let activity = |ty: &str, object: &Value| {
        json!({ "id": peer.new_id("activities"), "type": ty, "actor": peer.actor(),
                "to": object["to"], "object": object })
    };

    let private = note("<p>followers only #rust</p>", &followers);
    assert_eq!(peer.post(&inbox, &activity("Create", &private)).await, 202);
    let mut public_note = note("<p>hello #rust</p>", PUBLIC);
    assert_eq!(
        peer.post(&inbox, &activity("Create", &public_note)).await,
        202
    );
    let (e, before) = until(&mut public, "the public remote note", |e| {
        e.payload["uri"] == public_note["id"]
    })
    .await;
    assert!(e.is(&["public"], "update"), "{e:?}");
    assert_eq!(e.payload["account"]["acct"], json!(peer.handle()));
    let (t, _) = until(&mut tagged, "the note on the hashtag stream", |e| {
        e.payload["uri"] == public_note["id"]
    })
    .await;
    assert!(t.is(&["hashtag", "rust"], "update"), "{t:?}");
    let id = e.id().to_string();

    public_note["content"] = json!("<p>hello again #rust</p>");
    assert_eq!(
        peer.post(&inbox, &activity("Update", &public_note)).await,
        202
    );
    let (edit, between) = until(&mut public, "the edit", |e| {
        e.id() == id && e.event == "status.update"
    })
    .await;
    assert!(
        edit.payload["content"]
            .as_str()
            .unwrap_or_default()
            .contains("again")
    );
    let tombstone = json!({ "id": public_note["id"], "type": "Tombstone" });
    let delete = json!({ "id": peer.new_id("deletes"), "type": "Delete", "actor": peer.actor(),
                         "object": tombstone });
    assert_eq!(peer.post(&inbox, &delete).await, 202);
    let (gone, after) = until(&mut public, "the deletion", |e| e.event == "delete").await;
    assert_eq!(gone.id(), id);
    for e in before.iter().chain(&between).chain(&after) {
        assert_ne!(
            e.payload["uri"], private["id"],
            "a followers-only note on public: {e:?}"
        );
    }
    inst.shutdown().await;
}

/// R-API: past `STREAMS_PER_TOKEN` streams of one token, or `STREAMS_MAX` of the
/// node, a new stream is refused 429 before the upgrade; a closed stream gives its place back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streams_are_capped_per_token_and_per_node() {
    let inst = Instance::start("all", &[("STREAMS_PER_TOKEN", "2"), ("STREAMS_MAX", "3")]).await;
    let [(_, alice, _), (_, bob, _)] = users(&inst, ["alice", "bob"]).await;
    let base = inst.base.as_str();
    let a1 = connect(base, "stream=public", &alice).await;
    let _a2 = connect(base, "stream=user", &alice).await;
    assert_eq!(
        refused(base, "stream=public:local", Token::Query(&alice)).await,
        429,
        "a third stream of one token"
    );
    let _b1 = connect(base, "stream=public", &bob).await;
    let (status, retry_after) = refusal(base, "stream=public", Token::Header(&bob)).await;
    assert_eq!(status, 429, "a fourth stream of the node");
    assert_eq!(
        retry_after.as_deref(),
        Some("10"),
        "a refused stream says when to try again"
    );
    drop(a1);
    eventually(
        WAIT,
        "the closed stream's place for another token",
        || async {
            open(base, "stream=public", Token::Header(&bob))
                .await
                .ok()
                .map(|_| ())
        },
    )
    .await;
    let m = metrics(&inst.health_base()).await;
    assert!(counter(&m, "hollo_streaming_refused_total") >= 2.0, "{m}");
    inst.shutdown().await;
}

/// `GET /healthz` on a new connection, as raw HTTP/1.1 (the cap's refusal is written and
/// the socket shut at once, which HTTP clients may report as an error instead): the status,
/// or 0 when nothing parseable came back.
async fn fresh_get(addr: std::net::SocketAddr) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf).await;
        let head = String::from_utf8_lossy(&buf);
        head.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// R-API: an upgraded stream keeps its connection's place under
/// `HTTP_MAX_CONNECTIONS` (385 streams used to exhaust a node's descriptors with `/healthz`
/// unanswered): with every place held by a stream a new connection gets the cap's 503, and
/// a closed stream gives its place back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn open_streams_count_against_the_connection_cap() {
    let inst = Instance::start(
        "all",
        &[("HTTP_MAX_CONNECTIONS", "3"), ("STREAMS_MAX", "3")],
    )
    .await;
    let (_, token) = inst.account("alice").await;
    let base = inst.base.as_str();
    assert_eq!(fresh_get(inst.addr()).await, 200);
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(connect(base, "stream=public", &token).await);
    }
    // The handshakes' connections are the streams now: nothing else holds a place.
    assert_eq!(
        fresh_get(inst.addr()).await,
        503,
        "three open streams hold all three connection places"
    );
    streams.pop();
    eventually(WAIT, "the closed stream's connection place", || async {
        (fresh_get(inst.addr()).await == 200).then_some(())
    })
    .await;
    drop(streams);
    inst.shutdown().await;
}

/// Reads until the server closes the stream; the close frame's code, or `None` for a close
/// without one. Events before it are skipped.
async fn closed(ws: &mut Socket, what: &str) -> Option<u16> {
    read_until(ws, what, |m| match m {
        Message::Close(frame) => Some(frame.map(|f| u16::from(f.code))),
        _ => None,
    })
    .await
}

/// Reads messages until `pick` takes one; fails after the deadline or when the stream ends.
async fn read_until<T>(
    ws: &mut Socket,
    what: &str,
    mut pick: impl FnMut(Message) -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        let left = WAIT
            .checked_sub(start.elapsed())
            .unwrap_or_else(|| panic!("timed out waiting for {what}"));
        match tokio::time::timeout(left, ws.next()).await {
            Err(_) => panic!("timed out waiting for {what}"),
            Ok(Some(Ok(m))) => {
                if let Some(t) = pick(m) {
                    return t;
                }
            }
            Ok(end) => panic!("{what}: the stream ended first: {end:?}"),
        }
    }
}

/// R-API: a token revoked through one web node closes its streams on another (each
/// its own `hollo` process, as in production): a policy close (1008) soon after the
/// revocation, on every stream of the token, while another token's stream on the same node
/// goes on receiving.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_revoked_tokens_streams_close_on_every_node() {
    let db = support::fresh_db().await;
    let (port_a, port_b) = (free_port(), free_port());
    let (a, b) = (
        format!("http://127.0.0.1:{port_a}"),
        format!("http://127.0.0.1:{port_b}"),
    );
    let (pa, pb) = (port_a.to_string(), port_b.to_string());
    let shared = [
        ("DATABASE_URL", db.url.as_str()),
        ("PUBLIC_URL", a.as_str()),
        ("SECRET_KEY", SECRET),
        ("ALLOW_PRIVATE_ADDRESS", "true"),
        ("HEALTH_PORT", "0"),
    ];
    let start = |extra: &[(&'static str, &str)]| {
        let mut pairs: Vec<(&str, &str)> = shared.to_vec();
        pairs.extend_from_slice(extra);
        Hollo::serve(&pairs)
    };
    let web_a = start(&[("NODE_TYPE", "web"), ("PORT", &pa)]);
    let web_b = start(&[("NODE_TYPE", "web"), ("PORT", &pb)]);
    for base in [&a, &b] {
        eventually(WAIT, "a web node to be ready", || async {
            match reqwest::get(format!("{base}/readyz")).await {
                Ok(r) if r.status() == 200 => Some(()),
                _ => None,
            }
        })
        .await;
    }
    let out = run(&["account", "create", "alice"], &shared);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli_token = String::from_utf8(out.stdout)
        .expect("token")
        .trim()
        .to_string();

    // An app registered through node B, and a token it holds for alice (as its OAuth flow
    // would have issued it).
    let app = register_app(
        &b,
        json!({"client_name": "Streamer", "redirect_uris": "urn:ietf:wg:oauth:2.0:oob", "scopes": "read"}),
    )
    .await;
    let client_id = app["client_id"].as_str().expect("client_id").to_string();
    let client_secret = app["client_secret"].as_str().expect("secret").to_string();
    let app_token = format!("app-token-{}", uuid::Uuid::new_v4().simple());
    sqlx::query(
        "INSERT INTO account_tokens (token_hash, account_id, app_id, scopes)
         SELECT $1, (SELECT id FROM accounts WHERE username = 'alice'), id, 'read'
           FROM oauth_apps WHERE client_id = $2",
    )
    .bind(hollo_runtime::accounts::hash_token(&app_token))
    .bind(&client_id)
    .execute(&db.pool)
    .await
    .expect("app token");

    let mut revoked_public = connect(&a, "stream=public", &app_token).await;
    let mut revoked_user = connect(&a, "stream=user", &app_token).await;
    let mut other = connect(&a, "stream=public", &cli_token).await;
    let alice_b = Client::at(&b, Some(&cli_token));
    let first = post(&alice_b, "before the revocation", "public").await;
    for ws in [&mut revoked_public, &mut other] {
        until(ws, "the first post", |e| e.id() == first).await;
    }

    let revoked_at = Instant::now();
    let status = reqwest::Client::new()
        .post(format!("{b}/oauth/revoke"))
        .form(&[
            ("client_id", client_id.as_str()),
            ("client_secret", client_secret.as_str()),
            ("token", app_token.as_str()),
        ])
        .send()
        .await
        .expect("revoke")
        .status();
    assert_eq!(status, 200);
    for (ws, what) in [
        (&mut revoked_public, "the revoked public stream's close"),
        (&mut revoked_user, "the revoked user stream's close"),
    ] {
        assert_eq!(closed(ws, what).await, Some(1008), "{what}");
    }
    assert!(
        revoked_at.elapsed() < Duration::from_secs(10),
        "closed {:?} after the revocation",
        revoked_at.elapsed()
    );
    let after = post(&alice_b, "after the revocation", "public").await;
    until(
        &mut other,
        "the post after, on the other token's stream",
        |e| e.id() == after,
    )
    .await;
    assert_eq!(
        refused(&a, "stream=public", Token::Header(&app_token)).await,
        401,
        "the revoked token opens no new stream"
    );
    let m = metrics(&format!(
        "http://{}",
        health_addr_of(&web_a).expect("node A's health address in its log")
    ))
    .await;
    assert_eq!(counter(&m, "hollo_streaming_revoked_total"), 2.0, "{m}");
    drop((web_a, web_b));
}

/// The health address a `hollo serve` process logged (`health=<addr>`, colours or not).
fn health_addr_of(node: &Hollo) -> Option<String> {
    let mut logs = String::new();
    let mut escaped = false;
    for c in node.logs().chars() {
        match (escaped, c) {
            (false, '\u{1b}') => escaped = true,
            (true, 'm') => escaped = false,
            (true, _) => {}
            (false, c) => logs.push(c),
        }
    }
    let at = logs.find("health=")? + "health=".len();
    let rest = &logs[at..];
    let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
    Some(rest[..end].to_string())
}

/// R-SHUT-1, R-API: a node that stops tells each of its streams to go away (1001), after what
/// was queued for it, so clients reconnect through the load balancer to a node that stays;
/// the node's stop does not wait on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopping_node_tells_every_stream_to_go_away() {
    let inst = Instance::start("all", &[]).await;
    let (_, token) = inst.account("leaver").await;
    let base = inst.base.clone();
    let mut public = connect(&base, "stream=public", &token).await;
    let mut user = connect(&base, "stream=user", &token).await;
    let stopping = tokio::spawn(inst.shutdown());
    assert_eq!(
        closed(&mut public, "the public stream's close").await,
        Some(1001)
    );
    assert_eq!(
        closed(&mut user, "the user stream's close").await,
        Some(1001)
    );
    tokio::time::timeout(WAIT, stopping)
        .await
        .expect("the node stopped in time")
        .expect("shutdown task");
}

/// Reads until the server pings (tungstenite queues the pong, sent as it reads on).
async fn next_ping(ws: &mut Socket, what: &str) {
    read_until(ws, what, |m| matches!(m, Message::Ping(_)).then_some(())).await
}

/// R-API: the server pings each stream at a third of the idle timeout (here 3 s, so every
/// second): a stream whose client answers stays open past the timeout however quiet it is,
/// and events sent between pings do not stop them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_stream_is_pinged_and_outlives_the_idle_timeout() {
    let idle = Duration::from_secs(3);
    let inst = Instance::start("all", &[("HTTP_IDLE_TIMEOUT_SECONDS", "3")]).await;
    let (_, token) = inst.account("pinged").await;
    let base = inst.base.as_str();
    let api = Client::at(base, Some(&token));
    let mut ws = connect(base, "stream=public", &token).await;
    let opened = Instant::now();
    next_ping(&mut ws, "the first ping").await;
    post(&api, "between pings", "public").await;
    until(&mut ws, "the post between pings", |e| {
        e.is(&["public"], "update")
    })
    .await;
    let mut pings = 0;
    while pings < 2 || opened.elapsed() <= idle + Duration::from_secs(1) {
        next_ping(&mut ws, "a ping after an event").await;
        pings += 1;
    }
    post(&api, "after the idle timeout", "public").await;
    let (e, _) = until(&mut ws, "a post after the idle timeout", |e| {
        e.is(&["public"], "update")
    })
    .await;
    assert!(
        e.payload["content"]
            .as_str()
            .is_some_and(|c| c.contains("after the idle timeout")),
        "the stream outlived the idle timeout: {:?}",
        e.payload["content"]
    );
    drop(ws);
    inst.shutdown().await;
}
