//! Interop with GoToSocial (R-INTEROP): GoToSocial v0.18.3 and `hollo serve`, two real servers
//! on loopback host names, each behind TLS and driven only through its own client API, exchange
//! what their users do: follows both ways (GoToSocial's accounts are locked: its user accepts),
//! profile updates, posts with HTML-significant text, replies, favourites and boosts and their
//! undo both ways, followers-only posts, edits, deletes, mentions, media, polls both ways (our
//! poll voted from GoToSocial, a GoToSocial user's poll voted from hollo) with their closing
//! totals, and quotes (which GoToSocial 0.18 shows as the quoting post's link).
//!
//! The interaction steps pin issue 61: our notes carried an `interactionPolicy` with only
//! `canQuote`, which GoToSocial reads as "only the author may reply, like or boost", so its
//! users got 403 for every post of ours. And a follower's reply to or favourite of our
//! followers-only post stays pending on GoToSocial until our `Accept` names an approval it
//! can fetch (`approvals::granted`).
//!
//! GoToSocial is built by `runtime/tests/gotosocial/install` (`scripts/test` runs it); without
//! it the test fails and says so. It runs as root: the names go into `/etc/hosts` while it runs
//! (`support::hosts`), and both servers listen on port 443 of their own loopback address.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use support::api::Client;
use support::gotosocial::{self, GoToSocial};
use support::hosts::HostNames;
use support::process::Hollo;
use support::tls_front::TlsFront;

/// This process's host names and loopback addresses. They differ from process to process, so
/// test runs of several work trees on one machine never meet (each binds port 443 of its own
/// addresses); the test certificate covers every `*.gts-interop.test` name.
struct Names {
    hollo_host: String,
    hollo_addr: String,
    gts_host: String,
    gts_addr: String,
}

impl Names {
    fn of_this_process() -> Names {
        let n = std::process::id() % 65536;
        let (hi, lo) = (n / 256, n % 256);
        Names {
            hollo_host: format!("hollo-{n}.gts-interop.test"),
            hollo_addr: format!("127.61.{hi}.{lo}"),
            gts_host: format!("gts-{n}.gts-interop.test"),
            gts_addr: format!("127.62.{hi}.{lo}"),
        }
    }
}

/// How long one federated step may take to show on the other side.
const WAIT: Duration = Duration::from_secs(30);

/// `hollo serve` (an `all` node) as `https://hollo-<n>.gts-interop.test`: plain HTTP on a free port
/// of its loopback address, TLS on 443 in front.
struct HolloServer {
    process: Hollo,
    _front: TlsFront,
    drive: std::path::PathBuf,
    base: String,
}

impl HolloServer {
    async fn start(names: &Names) -> (HolloServer, String) {
        let db = support::fresh_db().await;
        let addr = names.hollo_addr.as_str();
        let port = std::net::TcpListener::bind((addr, 0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port().to_string())
            .expect("a free port");
        let base = format!("https://{}", names.hollo_host);
        let drive = support::files::temp_dir("hollo-gts-interop");
        let ca = gotosocial::tls_fixture("ca.pem");
        let env = [
            ("DATABASE_URL", db.url.as_str()),
            ("NODE_TYPE", "all"),
            ("PUBLIC_URL", base.as_str()),
            ("SECRET_KEY", support::node::SECRET),
            ("BIND", addr),
            ("PORT", port.as_str()),
            // GoToSocial lives on 127.0.0.0/8, and its certificate comes from the test CA.
            ("ALLOW_PRIVATE_ADDRESS", "true"),
            ("EXTRA_CA_CERTS_FILE", ca.to_str().expect("path")),
            ("FS_STORAGE_PATH", drive.to_str().expect("path")),
            ("QUEUE_POLL_MS", "100"),
        ];
        let out = support::process::run(&["account", "create", "alice"], &env);
        assert!(out.status.success(), "hollo account create: {out:?}");
        let token = String::from_utf8(out.stdout).expect("UTF-8");
        let token = token
            .trim()
            .rsplit(char::is_whitespace)
            .next()
            .expect("a token")
            .to_string();
        let process = Hollo::serve(&env);
        let backend: SocketAddr = format!("{addr}:{port}").parse().expect("address");
        let front = TlsFront::start(
            format!("{addr}:443").parse().expect("address"),
            backend,
            &gotosocial::tls_fixture("server.pem"),
            &gotosocial::tls_fixture("server.key"),
        )
        .await;
        let http = gotosocial::http_client();
        support::eventually(Duration::from_secs(60), "hollo serving", || {
            let probe = http.get(format!("{base}/api/v1/instance")).send();
            async move { probe.await.ok()?.status().is_success().then_some(()) }
        })
        .await;
        let server = HolloServer {
            process,
            _front: front,
            drive,
            base,
        };
        (server, token)
    }
}

impl Drop for HolloServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.drive);
    }
}

/// Both servers and their users: alice on hollo; bob (who follows her and whom she follows)
/// and carol (who follows nobody) on GoToSocial.
struct World {
    names: Names,
    hollo: HolloServer,
    gts: GoToSocial,
    alice: Client,
    bob: Client,
    carol: Client,
    /// alice's account id on GoToSocial, bob's on hollo.
    alice_at_gts: String,
    bob_at_hollo: String,
}

fn tail(logs: &str, n: usize) -> String {
    let lines: Vec<&str> = logs.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl World {
    /// Polls `check` until it gives `Some`, failing with both servers' recent logs after `WAIT`.
    async fn until<T, F, Fut>(&self, what: &str, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let start = Instant::now();
        loop {
            if let Some(v) = check().await {
                return v;
            }
            if start.elapsed() > WAIT {
                panic!(
                    "timed out after {WAIT:?} waiting for {what}\n--- hollo log (tail) ---\n{}\n\
                     --- GoToSocial log (tail) ---\n{}",
                    tail(&self.hollo.process.logs(), 40),
                    self.gts.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The status whose ActivityPub id is `uri` as `who` sees it in their home timeline.
    async fn in_home(&self, who: &Client, uri: &str, what: &str) -> Value {
        self.until(what, || async {
            let home = who.get("/api/v1/timelines/home?limit=40").await.body;
            home.as_array()?.iter().find(|s| s["uri"] == uri).cloned()
        })
        .await
    }

    /// `GET path` as `who`, asserting a 200.
    async fn get(&self, who: &Client, path: &str) -> Value {
        let a = who.get(path).await;
        assert_eq!(a.status, 200, "GET {}{path}: {}", who.base, a.body);
        a.body
    }

    /// `method path` of `body` as `who`, asserting a 200.
    async fn ok(&self, who: &Client, method: Method, path: &str, body: Value) -> Value {
        let a = who.call(method.clone(), path, &body).await;
        assert_eq!(
            a.status,
            200,
            "{method} {}{path} {body}: {}\n--- GoToSocial log (tail) ---\n{}",
            who.base,
            a.body,
            self.gts.log_tail(20)
        );
        a.body
    }

    async fn post(&self, who: &Client, body: Value) -> Value {
        self.ok(who, Method::POST, "/api/v1/statuses", body).await
    }

    /// The notification of `kind` on the status `uri` for `who`, once it exists.
    async fn notified(&self, who: &Client, kind: &str, uri: &str) -> Value {
        self.until(
            &format!("a {kind} notification on {uri} at {}", who.base),
            || async {
                let list = who.get("/api/v1/notifications?limit=40").await.body;
                list.as_array()?
                    .iter()
                    .find(|n| n["type"] == kind && n["status"]["uri"] == uri)
                    .cloned()
            },
        )
        .await
    }
}

/// The text a browser shows for `html` (each side escapes differently: GoToSocial writes `&`
/// and `>` bare, which is valid HTML).
fn shown(html: &str) -> String {
    hollo_runtime::html::to_text(html).trim().to_string()
}

/// The one account `q` names, found through the search API with `resolve=true` (WebFinger).
async fn resolve_account(who: &Client, q: &str) -> Value {
    let path = format!(
        "/api/v2/search?{}",
        serde_urlencoded::to_string([("q", q), ("resolve", "true"), ("type", "accounts")])
            .expect("query")
    );
    let a = who.get(&path).await;
    assert_eq!(a.status, 200, "search {q} at {}: {}", who.base, a.body);
    a.body["accounts"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gotosocial_and_we_interact_both_ways() {
    let names = Names::of_this_process();
    let _hosts = HostNames::add(
        "gts-interop",
        &[
            (&names.hollo_addr, &names.hollo_host),
            (&names.gts_addr, &names.gts_host),
        ],
    );
    let gts = GoToSocial::start(&names.gts_host, &names.gts_addr, &["bob", "carol"]).await;
    let (hollo, alice_token) = HolloServer::start(&names).await;
    let alice = Client {
        base: hollo.base.clone(),
        token: Some(alice_token),
        http: gotosocial::http_client(),
    };
    let (bob, carol) = (gts.client("bob").await, gts.client("carol").await);
    let mut w = World {
        names,
        hollo,
        gts,
        alice,
        bob,
        carol,
        alice_at_gts: String::new(),
        bob_at_hollo: String::new(),
    };
    follows_both_ways(&mut w).await;
    profile_updates(&w).await;
    html_significant_text_both_ways(&w).await;
    reply_favourite_boost_from_gotosocial(&w).await;
    reply_favourite_boost_from_hollo(&w).await;
    followers_only_both_ways(&w).await;
    followers_only_reply_and_favourite_approved(&w).await;
    edits_and_deletes_both_ways(&w).await;
    mentions_both_ways(&w).await;
    media_both_ways(&w).await;
    hollo_poll_voted_from_gotosocial(&w).await;
    let gts_poll = gotosocial_poll_voted_from_hollo(&w).await;
    gotosocial_poll_closes(&w, &gts_poll).await;
    quotes_show_their_link(&w).await;
}

/// bob follows alice (hollo accepts at once); alice follows bob (a request: bob accepts).
async fn follows_both_ways(w: &mut World) {
    let alice = resolve_account(&w.bob, &format!("@alice@{}", w.names.hollo_host)).await;
    w.alice_at_gts = alice["id"]
        .as_str()
        .expect("alice found from GoToSocial")
        .to_string();
    let path = format!("/api/v1/accounts/{}/follow", w.alice_at_gts);
    w.ok(&w.bob, Method::POST, &path, json!({})).await;
    let rel = format!("/api/v1/accounts/relationships?id[]={}", w.alice_at_gts);
    w.until(
        "bob follows alice (hollo's Accept reached GoToSocial)",
        || async {
            let r = w.bob.get(&rel).await.body;
            (r[0]["following"] == true).then_some(())
        },
    )
    .await;

    let bob = resolve_account(&w.alice, &format!("@bob@{}", w.names.gts_host)).await;
    w.bob_at_hollo = bob["id"]
        .as_str()
        .expect("bob found from hollo")
        .to_string();
    assert_eq!(bob["locked"], true, "GoToSocial accounts are locked: {bob}");
    let path = format!("/api/v1/accounts/{}/follow", w.bob_at_hollo);
    let r = w.ok(&w.alice, Method::POST, &path, json!({})).await;
    assert_eq!(r["requested"], true, "a request to a locked account: {r}");
    let request = w
        .until("alice's follow request at GoToSocial", || async {
            let list = w.bob.get("/api/v1/follow_requests").await.body;
            list.as_array()?
                .iter()
                .find(|a| a["acct"] == format!("alice@{}", w.names.hollo_host))
                .cloned()
        })
        .await;
    let path = format!(
        "/api/v1/follow_requests/{}/authorize",
        request["id"].as_str().unwrap()
    );
    w.ok(&w.bob, Method::POST, &path, json!({})).await;
    let rel = format!("/api/v1/accounts/relationships?id[]={}", w.bob_at_hollo);
    w.until(
        "alice follows bob (GoToSocial's Accept reached hollo)",
        || async {
            let r = w.alice.get(&rel).await.body;
            (r[0]["following"] == true).then_some(())
        },
    )
    .await;
}

/// Each side's profile change (display name, bio) reaches the other.
async fn profile_updates(w: &World) {
    let path = "/api/v1/accounts/update_credentials";
    w.ok(
        &w.alice,
        Method::PATCH,
        path,
        json!({ "display_name": "Alice Interop", "note": "Fish & chips, 1 < 2" }),
    )
    .await;
    let acct = format!("/api/v1/accounts/{}", w.alice_at_gts);
    let seen = w
        .until("alice's new profile at GoToSocial", || async {
            let a = w.bob.get(&acct).await.body;
            (a["display_name"] == "Alice Interop").then_some(a)
        })
        .await;
    let note = seen["note"].as_str().unwrap_or_default();
    assert_eq!(
        shown(note),
        "Fish & chips, 1 < 2",
        "alice's bio at GoToSocial: {note}"
    );

    w.ok(
        &w.bob,
        Method::PATCH,
        path,
        json!({ "display_name": "Bob Builder", "note": "Can we fix it?" }),
    )
    .await;
    let acct = format!("/api/v1/accounts/{}", w.bob_at_hollo);
    w.until("bob's new profile at hollo", || async {
        let a = w.alice.get(&acct).await.body;
        (a["display_name"] == "Bob Builder" && a["note"].as_str()?.contains("Can we fix it?"))
            .then_some(())
    })
    .await;
}

/// A post typed with `<b>`, `&` and `<` shows that text, escaped, on the other side — both ways.
async fn html_significant_text_both_ways(w: &World) {
    let typed = "Fish & chips <b>not bold</b> 1 < 2";
    let ours = w.post(&w.alice, json!({ "status": typed })).await;
    let seen = w
        .in_home(
            &w.bob,
            ours["uri"].as_str().unwrap(),
            "alice's post in bob's home",
        )
        .await;
    let content = seen["content"].as_str().unwrap();
    assert!(
        shown(content) == typed && !content.contains("<b>"),
        "at GoToSocial: {content}"
    );

    let theirs = w.post(&w.bob, json!({ "status": typed })).await;
    let seen = w
        .in_home(
            &w.alice,
            theirs["uri"].as_str().unwrap(),
            "bob's post in alice's home",
        )
        .await;
    let content = seen["content"].as_str().unwrap();
    assert!(
        shown(content) == typed && !content.contains("<b>"),
        "at hollo: {content}"
    );
}

/// Issue 61: bob replies to, favourites and boosts alice's post (GoToSocial answered 403 while
/// our notes' interaction policy named only quotes); alice sees each, then each undo.
async fn reply_favourite_boost_from_gotosocial(w: &World) {
    let ours = w
        .post(&w.alice, json!({ "status": "Reply, like and boost me" }))
        .await;
    let (uri, our_id) = (ours["uri"].as_str().unwrap(), ours["id"].as_str().unwrap());
    let seen = w.in_home(&w.bob, uri, "alice's post in bob's home").await;
    let at_gts = seen["id"].as_str().unwrap();
    let fav = format!("/api/v1/statuses/{at_gts}/favourite");
    w.ok(&w.bob, Method::POST, &fav, json!({})).await;
    let boost = format!("/api/v1/statuses/{at_gts}/reblog");
    w.ok(&w.bob, Method::POST, &boost, json!({})).await;
    let reply = w
        .post(
            &w.bob,
            json!({ "status": "A reply from GoToSocial", "in_reply_to_id": at_gts }),
        )
        .await;
    w.notified(&w.alice, "favourite", uri).await;
    w.notified(&w.alice, "reblog", uri).await;
    let ours_path = format!("/api/v1/statuses/{our_id}");
    w.until(
        "bob's favourite, boost and reply counted at hollo",
        || async {
            let s = w.alice.get(&ours_path).await.body;
            (s["favourites_count"] == 1 && s["reblogs_count"] == 1 && s["replies_count"] == 1)
                .then_some(())
        },
    )
    .await;
    let context = w.get(&w.alice, &format!("{ours_path}/context")).await;
    let reply_uri = &reply["uri"];
    assert!(
        context["descendants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| &s["uri"] == reply_uri),
        "bob's reply in the thread at hollo: {context}"
    );

    // What GoToSocial made of our interactionPolicy: anyone may like, reply and boost.
    let policy = &seen["interaction_policy"];
    for key in ["can_favourite", "can_reply", "can_reblog"] {
        let always = policy[key]["always"].as_array();
        assert!(
            always.is_some_and(|a| a.contains(&json!("public"))),
            "{key} at GoToSocial: {policy}"
        );
    }

    w.ok(
        &w.bob,
        Method::POST,
        &format!("/api/v1/statuses/{at_gts}/unfavourite"),
        json!({}),
    )
    .await;
    w.ok(
        &w.bob,
        Method::POST,
        &format!("/api/v1/statuses/{at_gts}/unreblog"),
        json!({}),
    )
    .await;
    w.until("bob's favourite and boost undone at hollo", || async {
        let s = w.alice.get(&ours_path).await.body;
        (s["favourites_count"] == 0 && s["reblogs_count"] == 0).then_some(())
    })
    .await;
}

/// alice replies to, favourites and boosts bob's post; bob sees each, then each undo.
async fn reply_favourite_boost_from_hollo(w: &World) {
    let theirs = w
        .post(&w.bob, json!({ "status": "Reply, like and boost me too" }))
        .await;
    let (uri, their_id) = (
        theirs["uri"].as_str().unwrap(),
        theirs["id"].as_str().unwrap(),
    );
    let seen = w.in_home(&w.alice, uri, "bob's post in alice's home").await;
    let at_hollo = seen["id"].as_str().unwrap();
    w.ok(
        &w.alice,
        Method::POST,
        &format!("/api/v1/statuses/{at_hollo}/favourite"),
        json!({}),
    )
    .await;
    w.ok(
        &w.alice,
        Method::POST,
        &format!("/api/v1/statuses/{at_hollo}/reblog"),
        json!({}),
    )
    .await;
    let reply = w
        .post(
            &w.alice,
            json!({ "status": "A reply from hollo", "in_reply_to_id": at_hollo }),
        )
        .await;
    w.notified(&w.bob, "favourite", uri).await;
    w.notified(&w.bob, "reblog", uri).await;
    let theirs_path = format!("/api/v1/statuses/{their_id}");
    w.until("alice's reply in the thread at GoToSocial", || async {
        let c = w.bob.get(&format!("{theirs_path}/context")).await.body;
        c["descendants"]
            .as_array()?
            .iter()
            .any(|s| s["uri"] == reply["uri"])
            .then_some(())
    })
    .await;
    w.until(
        "alice's favourite and boost counted at GoToSocial",
        || async {
            let s = w.bob.get(&theirs_path).await.body;
            (s["favourites_count"] == 1 && s["reblogs_count"] == 1).then_some(())
        },
    )
    .await;

    w.ok(
        &w.alice,
        Method::POST,
        &format!("/api/v1/statuses/{at_hollo}/unfavourite"),
        json!({}),
    )
    .await;
    w.ok(
        &w.alice,
        Method::POST,
        &format!("/api/v1/statuses/{at_hollo}/unreblog"),
        json!({}),
    )
    .await;
    w.until(
        "alice's favourite and boost undone at GoToSocial",
        || async {
            let s = w.bob.get(&theirs_path).await.body;
            (s["favourites_count"] == 0 && s["reblogs_count"] == 0).then_some(())
        },
    )
    .await;
}

/// A followers-only post reaches the follower as followers-only, and not someone who does not
/// follow — both ways.
async fn followers_only_both_ways(w: &World) {
    let ours = w
        .post(
            &w.alice,
            json!({ "status": "For my followers", "visibility": "private" }),
        )
        .await;
    let uri = ours["uri"].as_str().unwrap();
    let seen = w
        .in_home(&w.bob, uri, "alice's followers-only post at GoToSocial")
        .await;
    assert_eq!(seen["visibility"], "private", "{seen}");
    // carol follows nobody: looking the post up by its URL finds nothing.
    let found = w
        .carol
        .get(&format!(
            "/api/v2/search?{}",
            serde_urlencoded::to_string([("q", uri), ("resolve", "true")]).unwrap()
        ))
        .await;
    assert!(
        found.body["statuses"]
            .as_array()
            .is_none_or(|s| s.is_empty()),
        "carol, no follower, found alice's followers-only post: {}",
        found.body
    );

    let theirs = w
        .post(
            &w.bob,
            json!({ "status": "For my followers too", "visibility": "private" }),
        )
        .await;
    let seen = w
        .in_home(
            &w.alice,
            theirs["uri"].as_str().unwrap(),
            "bob's followers-only post at hollo",
        )
        .await;
    assert_eq!(seen["visibility"], "private", "{seen}");
    let public = w.get(&w.alice, "/api/v1/timelines/public?limit=40").await;
    assert!(
        !public
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["uri"] == theirs["uri"]),
        "bob's followers-only post on hollo's public timeline"
    );
}

/// bob, a follower, replies to and favourites alice's followers-only post. Our policy lets
/// alice's followers do both; GoToSocial cannot check a followers collection of ours, so it
/// sends each to alice alone and keeps it pending until our `Accept` names an approval it can
/// fetch. alice sees both at once; GoToSocial then shows the reply to its other users (a
/// reply pending approval is its author's and the answered author's alone there) and records
/// both approved by our approval objects.
async fn followers_only_reply_and_favourite_approved(w: &World) {
    let ours = w
        .post(
            &w.alice,
            json!({ "status": "Followers, answer me", "visibility": "private" }),
        )
        .await;
    let (uri, our_id) = (ours["uri"].as_str().unwrap(), ours["id"].as_str().unwrap());
    let seen = w
        .in_home(&w.bob, uri, "alice's followers-only post at GoToSocial")
        .await;
    let at_gts = seen["id"].as_str().unwrap();
    w.ok(
        &w.bob,
        Method::POST,
        &format!("/api/v1/statuses/{at_gts}/favourite"),
        json!({}),
    )
    .await;
    let reply = w
        .post(
            &w.bob,
            json!({ "status": "A follower's answer", "in_reply_to_id": at_gts,
                    "visibility": "unlisted" }),
        )
        .await;
    let reply_uri = reply["uri"].as_str().unwrap();

    w.notified(&w.alice, "favourite", uri).await;
    let context = format!("/api/v1/statuses/{our_id}/context");
    w.until("bob's reply in alice's thread at hollo", || async {
        let c = w.alice.get(&context).await.body;
        c["descendants"]
            .as_array()?
            .iter()
            .any(|s| s["uri"] == reply_uri)
            .then_some(())
    })
    .await;

    let reply_path = format!("/api/v1/statuses/{}", reply["id"].as_str().unwrap());
    w.until(
        "bob's reply approved at GoToSocial (carol, who follows no one, reads it)",
        || async { (w.carol.get(&reply_path).await.status == 200).then_some(()) },
    )
    .await;
    let approvals = format!("{}/users/alice/approvals/", w.hollo.base);
    let faves = w
        .until("bob's favourite approved at GoToSocial", || async {
            let faves = w.gts.fave_approvals(uri);
            (!faves.is_empty() && faves.iter().all(|(pending, _)| !pending)).then_some(faves)
        })
        .await;
    assert!(
        faves.len() == 1 && faves[0].1.starts_with(&approvals),
        "bob's favourite at GoToSocial, approved by one of alice's approvals: {faves:?}"
    );
}

/// An edit shows the new text on the other side, a delete removes the post — both ways.
async fn edits_and_deletes_both_ways(w: &World) {
    for (author, reader, side) in [
        (&w.alice, &w.bob, "GoToSocial"),
        (&w.bob, &w.alice, "hollo"),
    ] {
        let post = w.post(author, json!({ "status": "First draft" })).await;
        let (uri, id) = (post["uri"].as_str().unwrap(), post["id"].as_str().unwrap());
        let seen = w
            .in_home(reader, uri, &format!("a post to edit at {side}"))
            .await;
        let remote = format!("/api/v1/statuses/{}", seen["id"].as_str().unwrap());
        w.ok(
            author,
            Method::PUT,
            &format!("/api/v1/statuses/{id}"),
            json!({ "status": "Second draft" }),
        )
        .await;
        let edited = w
            .until(&format!("the edit at {side}"), || async {
                let s = reader.get(&remote).await.body;
                s["content"].as_str()?.contains("Second draft").then_some(s)
            })
            .await;
        assert!(
            edited["edited_at"].is_string(),
            "edited_at at {side}: {edited}"
        );

        let a = author
            .call(
                Method::DELETE,
                &format!("/api/v1/statuses/{id}"),
                &json!({}),
            )
            .await;
        assert_eq!(a.status, 200, "delete: {}", a.body);
        w.until(&format!("the delete at {side}"), || async {
            (reader.get(&remote).await.status == 404).then_some(())
        })
        .await;
    }
}

/// A mention notifies the mentioned user on the other side — both ways.
async fn mentions_both_ways(w: &World) {
    let theirs = w
        .post(
            &w.bob,
            json!({ "status": format!("Hello @alice@{}!", w.names.hollo_host) }),
        )
        .await;
    let n = w
        .notified(&w.alice, "mention", theirs["uri"].as_str().unwrap())
        .await;
    let mentions = n["status"]["mentions"].as_array().unwrap();
    assert!(mentions.iter().any(|m| m["username"] == "alice"), "{n}");

    let ours = w
        .post(
            &w.alice,
            json!({ "status": format!("Hi @bob@{}", w.names.gts_host) }),
        )
        .await;
    let n = w
        .notified(&w.bob, "mention", ours["uri"].as_str().unwrap())
        .await;
    // GoToSocial resolved our mention tag to its own account.
    let mentions = n["status"]["mentions"].as_array().unwrap();
    assert!(
        mentions
            .iter()
            .any(|m| m["acct"] == "bob" && m["username"] == "bob"),
        "{n}"
    );
}

/// An uploaded image with its description reaches the other side — both ways.
async fn media_both_ways(w: &World) {
    let png = support::multipart::png(64, 48);
    for (author, reader, side) in [
        (&w.alice, &w.bob, "GoToSocial"),
        (&w.bob, &w.alice, "hollo"),
    ] {
        let up = author
            .multipart(
                Method::POST,
                "/api/v2/media",
                &[
                    ("file", Some(("gradient.png", "image/png")), &png),
                    ("description", None, b"A gradient"),
                ],
            )
            .await;
        assert!(
            up.status == 200 || up.status == 202,
            "upload at {}: {}",
            author.base,
            up.body
        );
        let media_id = up.body["id"].as_str().unwrap().to_string();
        let post = w
            .until(
                &format!("a post with the upload at {}", author.base),
                || async {
                    let a = author
                        .call(
                            Method::POST,
                            "/api/v1/statuses",
                            &json!({ "status": "A picture", "media_ids": [media_id] }),
                        )
                        .await;
                    // A 422 while the upload is still being processed: try again.
                    (a.status == 200).then_some(a.body)
                },
            )
            .await;
        let seen = w
            .in_home(
                reader,
                post["uri"].as_str().unwrap(),
                &format!("the picture at {side}"),
            )
            .await;
        let media = &seen["media_attachments"][0];
        assert_eq!(media["type"], "image", "at {side}: {seen}");
        assert_eq!(media["description"], "A gradient", "at {side}: {seen}");
        let url = media["url"].as_str().unwrap();
        let fetched = reader.http.get(url).send().await.expect("fetch the image");
        assert!(
            fetched.status().is_success(),
            "{url} at {side}: {}",
            fetched.status()
        );
    }
}

/// alice's poll: bob votes from GoToSocial, alice's poll counts it; when it closes, GoToSocial
/// shows the closing totals.
async fn hollo_poll_voted_from_gotosocial(w: &World) {
    let ours = w
        .post(
            &w.alice,
            json!({ "status": "Tea or coffee?", "poll": { "options": ["tea", "coffee"], "expires_in": 3600 } }),
        )
        .await;
    let poll_id = ours["poll"]["id"].as_str().unwrap();
    let seen = w
        .in_home(
            &w.bob,
            ours["uri"].as_str().unwrap(),
            "alice's poll at GoToSocial",
        )
        .await;
    let remote_poll = seen["poll"]["id"].as_str().expect("a poll at GoToSocial");
    // GoToSocial replaces its copy of a poll whose end changes: read it through its status.
    let remote_status = format!("/api/v1/statuses/{}", seen["id"].as_str().unwrap());
    w.ok(
        &w.bob,
        Method::POST,
        &format!("/api/v1/polls/{remote_poll}/votes"),
        json!({ "choices": [1] }),
    )
    .await;
    w.until("bob's vote counted at hollo", || async {
        let p = w.alice.get(&format!("/api/v1/polls/{poll_id}")).await.body;
        (p["votes_count"] == 1 && p["options"][1]["votes_count"] == 1).then_some(())
    })
    .await;
    // End the poll soon (an edit of its expiry, as a client would); GoToSocial reads the
    // closing Update.
    w.ok(
        &w.alice,
        Method::PUT,
        &format!("/api/v1/statuses/{}", ours["id"].as_str().unwrap()),
        json!({ "poll": { "expires_in": 1 } }),
    )
    .await;
    w.until(
        "alice's poll closed with its totals at GoToSocial",
        || async {
            let s = w.bob.get(&remote_status).await.body;
            let p = &s["poll"];
            (p["expired"] == true && p["votes_count"] == 1 && p["options"][1]["votes_count"] == 1)
                .then_some(())
        },
    )
    .await;
}

/// bob's poll at GoToSocial, as hollo shows it: its status there, its id here.
struct GtsPoll {
    uri: String,
    poll_id: String,
}

/// bob's poll (closing in 25 s): alice sees it at hollo and votes, and GoToSocial counts her
/// vote; carol votes at GoToSocial, which hollo only learns from GoToSocial's closing `Update`.
async fn gotosocial_poll_voted_from_hollo(w: &World) -> GtsPoll {
    let theirs = w
        .post(
            &w.bob,
            json!({ "status": "Cats or dogs?", "poll": { "options": ["cats", "dogs"], "expires_in": 25 } }),
        )
        .await;
    let uri = theirs["uri"].as_str().unwrap().to_string();
    let seen = w.in_home(&w.alice, &uri, "bob's poll at hollo").await;
    let poll_id = seen["poll"]["id"].as_str().unwrap_or_else(|| {
        panic!(
            "no poll at hollo: {seen}\n--- hollo log (tail) ---\n{}",
            tail(&w.hollo.process.logs(), 30)
        )
    });
    let titles: Vec<&str> = seen["poll"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["cats", "dogs"], "{seen}");
    let voted = w
        .ok(
            &w.alice,
            Method::POST,
            &format!("/api/v1/polls/{poll_id}/votes"),
            json!({ "choices": [0] }),
        )
        .await;
    assert_eq!(voted["own_votes"], json!([0]), "{voted}");
    let theirs_path = format!("/api/v1/statuses/{}", theirs["id"].as_str().unwrap());
    w.until("alice's vote counted at GoToSocial", || async {
        let s = w.bob.get(&theirs_path).await.body;
        (s["poll"]["votes_count"] == 1 && s["poll"]["options"][0]["votes_count"] == 1).then_some(())
    })
    .await;
    let gts_poll = theirs["poll"]["id"].as_str().unwrap();
    w.ok(
        &w.carol,
        Method::POST,
        &format!("/api/v1/polls/{gts_poll}/votes"),
        json!({ "choices": [1] }),
    )
    .await;
    GtsPoll {
        uri,
        poll_id: poll_id.to_string(),
    }
}

/// bob's poll has closed: hollo shows it expired with GoToSocial's totals (carol's vote too),
/// and tells alice, who voted, that it ended.
async fn gotosocial_poll_closes(w: &World, poll: &GtsPoll) {
    let path = format!("/api/v1/polls/{}", poll.poll_id);
    w.until("bob's poll closed with its totals at hollo", || async {
        let p = w.alice.get(&path).await.body;
        (p["expired"] == true
            && p["votes_count"] == 2
            && p["options"][0]["votes_count"] == 1
            && p["options"][1]["votes_count"] == 1)
            .then_some(())
    })
    .await;
    let n = w.notified(&w.alice, "poll", &poll.uri).await;
    assert_eq!(n["status"]["poll"]["expired"], true, "{n}");
}

/// alice quotes bob's post: GoToSocial 0.18 has no quotes, so bob sees alice's post with the
/// link to his own that it carries for such servers.
async fn quotes_show_their_link(w: &World) {
    let theirs = w.post(&w.bob, json!({ "status": "Quote me" })).await;
    let seen = w
        .in_home(
            &w.alice,
            theirs["uri"].as_str().unwrap(),
            "bob's post at hollo",
        )
        .await;
    let quote = w
        .post(
            &w.alice,
            json!({ "status": "Well said", "quoted_status_id": seen["id"] }),
        )
        .await;
    let at_gts = w
        .in_home(
            &w.bob,
            quote["uri"].as_str().unwrap(),
            "alice's quote at GoToSocial",
        )
        .await;
    let content = at_gts["content"].as_str().unwrap();
    let link = theirs["url"].as_str().unwrap();
    let uri = theirs["uri"].as_str().unwrap();
    assert!(
        content.contains("Well said") && (content.contains(link) || content.contains(uri)),
        "the quote at GoToSocial links bob's post ({link}): {content}"
    );
}
