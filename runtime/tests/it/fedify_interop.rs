//! Interop with an ActivityPub implementation we did not write (R-AP-1): a peer built
//! on Fedify (`tests/fedify/peer.mjs`, Fedify and Node 22 pinned by `tests/fedify/package.json`)
//! exchanges follows both ways, a note, a poll with a remote vote and its closing update, and a
//! note back, and each side checks what the other parsed — the peer reports what Fedify's own
//! vocabulary classes (JSON-LD processing included) made of our documents.
//!
//! The peer is installed under `target/fedify-peer` by `runtime/tests/fedify/install` (`.ci/run`
//! and `scripts/test` call it); without it the test fails and says what is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::Method;
use serde_json::{Value, json};
use support::api::Client;
use support::eventually;
use support::node::Instance;

const WAIT: Duration = Duration::from_secs(20);

/// Where `tests/fedify/install` put the peer: `HOLLO_FEDIFY_PEER_DIR`, else the workspace's
/// `target/fedify-peer`.
fn install_dir() -> PathBuf {
    std::env::var_os("HOLLO_FEDIFY_PEER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/fedify-peer"))
}

/// The running Fedify peer; killed when dropped so it never outlives the test.
struct FedifyPeer {
    child: Child,
    log: PathBuf,
    base: String,
    http: reqwest::Client,
}

impl FedifyPeer {
    async fn start() -> FedifyPeer {
        let dir = install_dir();
        let node = dir.join("node_modules/.bin/node");
        assert!(
            node.is_file()
                && dir
                    .join("node_modules/@fedify/fedify/package.json")
                    .is_file(),
            "the Fedify peer is not installed in {} (its pinned node binary or @fedify/fedify is \
             missing): install npm (Debian's nodejs and npm), then run \
             runtime/tests/fedify/install (.ci/run and scripts/test do)",
            dir.display()
        );
        // The script is copied beside its node_modules, where its imports resolve.
        let script = dir.join("peer.mjs");
        std::fs::copy(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fedify/peer.mjs"),
            &script,
        )
        .expect("copy peer.mjs into the install directory");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let log = std::env::temp_dir().join(format!(
            "hollo-fedify-peer-{}.log",
            uuid::Uuid::new_v4().simple()
        ));
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(&node)
            .arg(&script)
            .current_dir(&dir)
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", node.display()));
        let mut peer = FedifyPeer {
            child,
            log,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        };
        eventually(WAIT, "the Fedify peer prints `ready`", || {
            let exited = peer.child.try_wait().ok().flatten();
            let logs = peer.logs();
            async move {
                assert!(exited.is_none(), "the Fedify peer exited: {logs}");
                logs.contains("ready").then_some(())
            }
        })
        .await;
        peer
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn actor(&self) -> String {
        format!("{}/users/fedi", self.base)
    }

    fn handle(&self) -> String {
        format!("fedi@{}", self.base.trim_start_matches("http://"))
    }

    /// A control request; the peer has sent its activity (or failed) when it answers.
    async fn control(&self, path: &str, body: Value) -> Value {
        let resp = self
            .http
            .post(format!("{}/control/{path}", self.base))
            .json(&body)
            .send()
            .await
            .expect("control request");
        let status = resp.status();
        let out: Value = resp.json().await.expect("control answer");
        assert!(
            status.is_success(),
            "control/{path} failed ({status}): {}\npeer log:\n{}",
            out["error"].as_str().unwrap_or_default(),
            self.logs()
        );
        out
    }

    /// What the peer's inbox listeners parsed so far.
    async fn received(&self) -> Vec<Value> {
        let got: Value = self
            .http
            .get(format!("{}/control/received", self.base))
            .send()
            .await
            .expect("received")
            .json()
            .await
            .expect("json");
        let list = got.as_array().cloned().unwrap_or_default();
        if let Some(err) = list.iter().find(|r| r["type"] == "error") {
            panic!("the peer's inbox failed: {}", err["error"]);
        }
        list
    }

    async fn find(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        eventually(WAIT, what, || async {
            self.received().await.into_iter().find(|r| pred(r))
        })
        .await
    }
}

impl Drop for FedifyPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Why our inbox took or ignored each activity from `actor` (for failure messages).
async fn outcomes(inst: &Instance, actor: &str) -> Vec<(String, Option<String>)> {
    sqlx::query_as("SELECT id, outcome FROM inbox_activities WHERE actor = $1 ORDER BY received_at")
        .bind(actor)
        .fetch_all(&inst.pool)
        .await
        .unwrap_or_default()
}

fn instant(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|| panic!("not an RFC 3339 instant: {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fedify_peer_and_we_read_each_other() {
    let peer = FedifyPeer::start().await;
    // An `all` node: it serves and consumes the inbox, delivery and poll queues; with a drive
    // and an admin token, for a custom emoji.
    let drive = support::files::temp_dir("hollo-fedify");
    let inst = Instance::start(
        "all",
        &[
            ("FS_STORAGE_PATH", drive.to_str().expect("path")),
            ("ADMIN_TOKEN", "fedify-admin"),
        ],
    )
    .await;
    let (alice, token) = inst.account("alice").await;
    let alice_iri = inst.fed.actor_iri("alice");
    let api = Client::bearer(&inst, &token);

    // (1) The Fedify actor follows alice: we store the follower, the peer parses our Accept.
    let follow = peer.control("follow", json!({ "actor": alice_iri })).await;
    let accept = peer
        .find("the peer parses our Accept", |r| r["type"] == "Accept")
        .await;
    assert_eq!(accept["actor"], alice_iri.as_str(), "{accept}");
    assert_eq!(accept["object"]["type"], "Follow", "{accept}");
    assert_eq!(accept["object"]["id"], follow["id"], "{accept}");
    assert_eq!(accept["object"]["actor"], peer.actor(), "{accept}");
    let followers: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM followers WHERE account_id = $1 AND actor_iri = $2",
    )
    .bind(alice.id)
    .bind(peer.actor())
    .fetch_one(&inst.pool)
    .await
    .expect("followers");
    assert_eq!(
        followers, 1,
        "the Fedify actor is stored as alice's follower"
    );

    // (2) Alice follows the Fedify actor by handle: the peer accepts, our follow is accepted.
    let rel = api
        .call(
            Method::POST,
            "/api/v1/follows",
            &json!({ "account": peer.handle() }),
        )
        .await
        .body;
    assert_eq!(rel["actor"], peer.actor(), "{rel}");
    let ours = peer
        .find("the peer parses our Follow", |r| {
            r["type"] == "Follow" && r["actor"] == alice_iri.as_str()
        })
        .await;
    assert_eq!(ours["object"], peer.actor());
    support::api::until_follow_accepted(
        &inst,
        alice.id,
        &peer.actor(),
        "our follow of the Fedify actor is accepted",
    )
    .await;

    // (3) A status with HTML-significant text, a link, a tag and a custom emoji of ours
    // (R-MAPI-6): Fedify reads the same HTML our API shows, the Hashtag and the Emoji.
    let emoji = Client::bearer(&inst, "fedify-admin")
        .multipart(
            Method::POST,
            "/api/v1/admin/custom_emojis",
            &[
                ("shortcode", None, b"hollo_fish"),
                ("image", Some(("fish.png", "image/png")), FISH_PNG),
            ],
        )
        .await
        .body;
    let emoji_url = emoji["url"].as_str().expect("emoji url").to_string();
    let text =
        "Fish & chips <b>not bold</b> at https://example.com/menu?a=1&b=2 #Interop :hollo_fish:";
    let status = api.post(&json!({ "status": text })).await.body;
    let shown = status["content"].as_str().expect("content").to_string();
    assert!(
        shown.contains("&lt;b&gt;") && !shown.contains("<b>"),
        "{shown}"
    );
    let create = peer
        .find("the peer parses our Create(Note)", |r| {
            r["type"] == "Create" && r["object"]["id"] == status["uri"]
        })
        .await;
    let note = &create["object"];
    assert_eq!(note["type"], "Note", "{create}");
    assert_eq!(note["attributedTo"], alice_iri.as_str(), "{create}");
    assert_eq!(
        note["content"],
        shown.as_str(),
        "the same HTML on both sides"
    );
    let tags = note["tags"].as_array().cloned().unwrap_or_default();
    assert!(
        tags.iter().any(|t| t["type"] == "Hashtag"
            && t["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case("#interop"))
            && t["href"].is_string()),
        "the #Interop Hashtag: {tags:?}"
    );
    assert!(
        tags.iter().any(|t| t["type"] == "Emoji"
            && t["name"] == ":hollo_fish:"
            && t["icon"] == emoji_url.as_str()),
        "the :hollo_fish: Emoji: {tags:?}"
    );

    // (4) A poll: Fedify reads the Question; its vote counts here; the closing Update carries
    // the final counts.
    let created = api
        .post(&json!({ "status": "Tea or coffee?",
                     "poll": { "options": ["tea", "coffee"], "expires_in": 3600 } }))
        .await
        .body;
    let uri = created["uri"].as_str().expect("uri").to_string();
    let poll_id = created["poll"]["id"].as_str().expect("poll id").to_string();
    let question = peer
        .find("the peer parses our Create(Question)", |r| {
            r["type"] == "Create" && r["object"]["id"] == uri.as_str()
        })
        .await;
    let q = &question["object"];
    assert_eq!(q["type"], "Question", "{question}");
    let names: Vec<&str> = q["oneOf"]
        .as_array()
        .map(|o| o.iter().filter_map(|x| x["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["tea", "coffee"], "{question}");
    assert_eq!(q["votersCount"], 0, "{question}");
    let drift = instant(&q["endTime"]) - instant(&created["poll"]["expires_at"]);
    assert!(
        drift.num_milliseconds().abs() < 1000,
        "endTime {} vs expires_at {}",
        q["endTime"],
        created["poll"]["expires_at"]
    );

    peer.control("vote", json!({ "question": uri, "choice": "coffee" }))
        .await;
    eventually(WAIT, "our poll counts the Fedify vote", || async {
        let p = api.get(&format!("/api/v1/polls/{poll_id}")).await.body;
        (p["votes_count"] == 1 && p["options"][1]["votes_count"] == 1).then_some(())
    })
    .await;
    assert_eq!(
        outcomes(&inst, &peer.actor())
            .await
            .iter()
            .filter(|(_, o)| o.as_deref() == Some("poll vote stored"))
            .count(),
        1,
        "{:?}",
        outcomes(&inst, &peer.actor()).await
    );
    // End the poll soon (an edit, as a client would), then Fedify reads the closing Update.
    let edited = api
        .edit(
            created["id"].as_str().expect("id"),
            &json!({ "poll": { "expires_in": 1 } }),
        )
        .await;
    assert_eq!(edited.status, 200);
    let closing = peer
        .find("the peer parses the closing Update(Question)", |r| {
            r["type"] == "Update"
                && r["object"]["id"] == uri.as_str()
                && !r["object"]["closed"].is_null()
        })
        .await;
    let q = &closing["object"];
    assert_eq!(q["type"], "Question", "{closing}");
    assert_eq!(
        q["votersCount"], 1,
        "votersCount survives Fedify's parsing: {closing}"
    );
    assert_eq!(
        q["oneOf"],
        json!([{ "type": "Note", "name": "tea", "votes": 0 },
               { "type": "Note", "name": "coffee", "votes": 1 }]),
        "{closing}"
    );

    // (5) The Fedify actor sends alice a note with markup we must not keep: we store it
    // sanitized.
    let dirty = format!(
        "<p>Hi <a href=\"{alice_iri}\" class=\"u-url mention\">@alice</a> \
         <script>alert(1)</script><a href=\"https://example.com/\" onclick=\"steal()\">look</a></p>"
    );
    let sent = peer
        .control(
            "note",
            json!({ "to": alice_iri, "content": dirty, "mention": "@alice" }),
        )
        .await;
    let note_iri = sent["id"].as_str().expect("note id").to_string();
    let stored: String = eventually(WAIT, "we store the Fedify note", || async {
        sqlx::query_scalar::<_, Option<String>>("SELECT content FROM remote_posts WHERE iri = $1")
            .bind(&note_iri)
            .fetch_optional(&inst.pool)
            .await
            .ok()
            .flatten()
            .flatten()
    })
    .await;
    assert!(
        !stored.contains("<script") && !stored.contains("alert(1)") && !stored.contains("onclick"),
        "sanitized: {stored}"
    );
    assert!(
        stored.contains("Hi ") && stored.contains("href=\"https://example.com/\""),
        "the harmless markup is kept: {stored}"
    );

    // (6) R-MAPI-6: alice pins the #Interop status and features the tag. Fedify
    // (a follower) parses the Add to her `featured` collection, and reads both collections
    // through its own vocabulary: the pinned Note and the featured Hashtag.
    let status_id = status["id"].as_str().expect("status id");
    let pinned = api
        .bare(Method::POST, &format!("/api/v1/statuses/{status_id}/pin"))
        .await;
    assert_eq!(pinned.status, 200);
    let featured = api
        .call(
            Method::POST,
            "/api/v1/featured_tags",
            &json!({ "name": "Interop" }),
        )
        .await;
    assert_eq!(featured.status, 200);
    let featured_iri = format!("{alice_iri}/collections/featured");
    let add = peer
        .find("the peer parses our Add", |r| r["type"] == "Add")
        .await;
    assert_eq!(
        (add["object"].as_str(), add["target"].as_str()),
        (status["uri"].as_str(), Some(featured_iri.as_str())),
        "{add}"
    );
    let read = peer
        .control("featured", json!({ "actor": alice_iri }))
        .await;
    assert_eq!(read["featuredId"], featured_iri.as_str(), "{read}");
    assert_eq!(
        read["featured"],
        json!([{ "type": "Note", "id": status["uri"] }]),
        "{read}"
    );
    assert_eq!(
        read["tags"],
        json!([{ "type": "Hashtag", "name": "#interop" }]),
        "{read}"
    );

    // Every activity either side sent was taken: Fedify's inbox answered each of our signed
    // POSTs with 2xx, and ours applied each of Fedify's without ignoring it.
    let requests: Value = peer
        .http
        .get(format!("{}/control/inbox-requests", peer.base))
        .send()
        .await
        .expect("inbox requests")
        .json()
        .await
        .expect("json");
    let requests = requests.as_array().cloned().unwrap_or_default();
    assert!(
        requests.len() >= 7
            && requests.iter().all(|r| {
                r["status"]
                    .as_u64()
                    .is_some_and(|s| (200..300).contains(&s))
                    && r["scheme"] != "none"
            }),
        "Fedify accepted every delivery of ours: {requests:?}"
    );
    // FEP-8b32: Fedify's verifyObject accepts the proof on every activity we sent, with the
    // key it fetched from our actor's assertionMethod.
    assert!(
        requests.iter().all(|r| r["proof"] == "verified"),
        "Fedify verified the integrity proof of every activity of ours: {requests:?}"
    );
    let taken = outcomes(&inst, &peer.actor()).await;
    assert!(
        taken.len() == 4
            && taken
                .iter()
                .all(|(_, o)| o.as_deref().is_some_and(|o| !o.starts_with("ignored"))),
        "Follow, Accept, the vote and the note from Fedify were all applied: {taken:?}"
    );
    eprintln!("Fedify's inbox requests: {requests:?}\nour outcomes: {taken:?}");
    drop(peer);
    inst.shutdown().await;
    let _ = std::fs::remove_dir_all(drive);
}

/// A 1×1 PNG, the custom emoji's image.
const FISH_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// R-MAPI-6: a Fedify follower reads our avatar and header from the `Update` of the
/// actor that an upload sends (Fedify's own `Person.getIcon()`/`getImage()`), and reads them
/// gone after a removal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fedify_follower_reads_our_new_avatar_and_header() {
    let peer = FedifyPeer::start().await;
    let dir = support::files::temp_dir("hollo-fedify-images");
    let inst = Instance::on_disk(&dir, &[]).await;
    let (_, token) = inst.account("alice").await;
    let alice_iri = inst.fed.actor_iri("alice");
    let api = Client::bearer(&inst, &token);
    peer.control("follow", json!({ "actor": alice_iri })).await;
    peer.find("the peer parses our Accept", |r| r["type"] == "Accept")
        .await;

    let png = |w: u32, h: u32| {
        let img = image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 200])
        }));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png)
            .expect("png");
        out.into_inner()
    };
    let me = api
        .multipart(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            &[
                ("avatar", Some(("a.png", "image/png")), &png(120, 90)),
                ("header", Some(("h.png", "image/png")), &png(600, 200)),
            ],
        )
        .await
        .body;
    let avatar = me["avatar"].as_str().expect("avatar").to_string();
    let header = me["header"].as_str().expect("header").to_string();
    let update = peer
        .find("the peer parses our Update(Person) with the avatar", |r| {
            r["type"] == "Update" && r["object"]["icon"]["url"] == avatar.as_str()
        })
        .await;
    assert_eq!(update["actor"], alice_iri.as_str(), "{update}");
    assert_eq!(update["object"]["type"], "Person", "{update}");
    assert_eq!(update["object"]["id"], alice_iri.as_str(), "{update}");
    assert_eq!(
        update["object"]["icon"],
        json!({"type": "Image", "mediaType": "image/jpeg", "url": avatar}),
        "{update}"
    );
    assert_eq!(
        update["object"]["image"]["url"],
        header.as_str(),
        "{update}"
    );

    let removed = api.bare(Method::DELETE, "/api/v1/profile/avatar").await;
    assert_eq!(removed.status, 200);
    let update = peer
        .find(
            "the peer parses our Update(Person) without the avatar",
            |r| {
                r["type"] == "Update"
                    && r["object"]["type"] == "Person"
                    && r["object"]["icon"].is_null()
            },
        )
        .await;
    assert_eq!(
        update["object"]["image"]["url"],
        header.as_str(),
        "{update}"
    );
    inst.shutdown_removing(dir).await;
}

/// Emoji reactions both ways with Fedify's `EmojiReact` (issue 32 item 3): Fedify reacts to
/// our post and takes it back; we react to its note (a Unicode emoji and one of our custom
/// emojis) and Fedify's vocabulary reads the emoji, the custom emoji's `Emoji` tag and our
/// `Undo` of it.
/// An `all` node whose `alice` the Fedify peer follows (our Accept parsed): the peer, the
/// node, alice's actor IRI and her API client.
async fn alice_followed_by_fedify() -> (FedifyPeer, Instance, String, Client) {
    let peer = FedifyPeer::start().await;
    let inst = Instance::start("all", &[]).await;
    let (_, token) = inst.account("alice").await;
    let alice_iri = inst.fed.actor_iri("alice");
    let api = Client::new(&inst, Some(&token));
    peer.control("follow", json!({ "actor": alice_iri })).await;
    peer.find("the peer parses our Accept", |r| r["type"] == "Accept")
        .await;
    (peer, inst, alice_iri, api)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emoji_reactions_cross_both_ways_with_fedify() {
    let (peer, inst, alice_iri, api) = alice_followed_by_fedify().await;

    // Fedify reacts to our public post: it shows on the status, then goes with the Undo.
    let post = api.posted(&json!({"status": "react, Fedify"})).await;
    let (sid, uri) = (
        post["id"].as_str().expect("id").to_string(),
        post["uri"].as_str().expect("uri").to_string(),
    );
    let react = peer
        .control("react", json!({ "object": uri, "emoji": "🦊" }))
        .await;
    let shown = eventually(WAIT, "Fedify's reaction on our post", || async {
        let s = api.get(&format!("/api/v1/statuses/{sid}")).await.body;
        let r = s["emoji_reactions"].as_array()?.first()?.clone();
        (r["name"] == "🦊").then_some(r)
    })
    .await;
    assert_eq!(shown["count"], 1, "{shown}");
    peer.control("unreact", json!({ "object": uri, "id": react["id"] }))
        .await;
    eventually(WAIT, "Fedify's reaction undone", || async {
        let s = api.get(&format!("/api/v1/statuses/{sid}")).await.body;
        s["emoji_reactions"]
            .as_array()
            .is_some_and(Vec::is_empty)
            .then_some(())
    })
    .await;

    // We react to Fedify's note with a Unicode emoji and a custom one.
    let note = peer
        .control(
            "note",
            json!({ "to": alice_iri, "content": "<p>react to this</p>", "mention": "@alice" }),
        )
        .await;
    let note_iri = note["id"].as_str().expect("id").to_string();
    let theirs: uuid::Uuid =
        support::api::remote_post_id(&inst, &note_iri, "Fedify's note stored").await;
    inst.custom_emoji("hollo", "http://img.example/hollo.png")
        .await;
    for emoji in ["%F0%9F%8E%89", "hollo"] {
        api.act(
            reqwest::Method::POST,
            &format!("/api/v1/statuses/{theirs}/react/{emoji}"),
        )
        .await
        .assert_ok();
    }
    let party = peer
        .find("Fedify parses our EmojiReact 🎉", |r| {
            r["type"] == "EmojiReact" && r["content"] == "🎉"
        })
        .await;
    assert_eq!(party["actor"], alice_iri.as_str(), "{party}");
    assert_eq!(party["object"], note_iri.as_str(), "{party}");
    let custom = peer
        .find("Fedify parses our EmojiReact :hollo:", |r| {
            r["type"] == "EmojiReact" && r["content"] == ":hollo:"
        })
        .await;
    assert_eq!(
        custom["tags"],
        json!([{"type": "Emoji", "name": ":hollo:", "icon": "http://img.example/hollo.png"}]),
        "{custom}"
    );
    api.act(
        reqwest::Method::POST,
        &format!("/api/v1/statuses/{theirs}/unreact/hollo"),
    )
    .await
    .assert_ok();
    let undo = peer
        .find("Fedify parses our Undo of the EmojiReact", |r| {
            r["type"] == "Undo" && r["object"] == custom["id"]
        })
        .await;
    assert_eq!(undo["objectType"], "EmojiReact", "{undo}");
    let outcomes = outcomes(&inst, &peer.actor()).await;
    assert!(
        outcomes
            .iter()
            .any(|(_, o)| o.as_deref() == Some("reaction undone")),
        "{outcomes:?}"
    );
    inst.shutdown().await;
}

/// Quotes both ways with Fedify (issue 32 item 2): Fedify 1.8's `quoteUrl` (sent as
/// `quoteUrl`, `_misskey_quote` and `quoteUri`) shows as an accepted quote of our post with
/// the quoted status, and our quote of its note reaches Fedify as a `Note` whose `quoteUrl`
/// Fedify reads back (from our `_misskey_quote`/`quoteUri`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotes_cross_both_ways_with_fedify() {
    let (peer, inst, alice_iri, api) = alice_followed_by_fedify().await;

    // Fedify quotes our post.
    let post = api.posted(&json!({"status": "quote me, Fedify"})).await;
    let uri = post["uri"].as_str().expect("uri").to_string();
    let note = peer
        .control(
            "note",
            json!({ "to": alice_iri, "content": "<p>quoting you</p>", "mention": "@alice",
                    "quote": uri, "public": true }),
        )
        .await;
    let note_iri = note["id"].as_str().expect("id").to_string();
    let theirs: uuid::Uuid =
        support::api::remote_post_id(&inst, &note_iri, "Fedify's quoting note stored").await;
    let shown = api.get(&format!("/api/v1/statuses/{theirs}")).await.body;
    assert_eq!(shown["quote"]["state"], "accepted", "{shown}");
    assert_eq!(shown["quote"]["quoted_status"]["id"], post["id"], "{shown}");
    let n = api.get("/api/v1/notifications?types[]=quote").await.body;
    assert_eq!(n[0]["status"]["id"], theirs.to_string(), "{n}");

    // We quote Fedify's note: Fedify reads the quote from our Create.
    let mine = api
        .posted(&json!({"status": "and back", "quoted_status_id": theirs.to_string()}))
        .await;
    assert_eq!(mine["quote"]["state"], "accepted", "{mine}");
    let create = peer
        .find("Fedify parses our quoting Note", |r| {
            r["type"] == "Create" && r["object"]["id"] == mine["uri"]
        })
        .await;
    assert_eq!(create["object"]["quoteUrl"], note_iri.as_str(), "{create}");
    inst.shutdown().await;
}
