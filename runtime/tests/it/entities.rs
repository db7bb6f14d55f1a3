//! Mastodon entities as clients receive them, pinned by snapshots (R-MAPI-3: "Mastodon JSON
//! byte-compatible where clients depend on it — a snapshot test of each entity"). One scene
//! builds every shape — a local status with media, mention, tag, spoiler and language; a
//! reply; a poll; a direct message; a boost; a remote note with an attachment, a mention and
//! a hashtag; local and remote accounts; the credential account; a relationship; a report and
//! the admin's view of it; every notification kind we send — and each answer is compared,
//! after naming its volatile parts (ids, times, ports), with `tests/snapshots/<name>.json`.
//!
//! A second scene pins the discovery routes' entities: familiar followers, a v2 suggestion, a
//! trending tag and a trending link.
//!
//! `UPDATE_SNAPSHOTS=1 cargo test -p hollo-runtime --test it entities::` rewrites the files; review the diff.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::collections::BTreeMap;
use std::path::PathBuf;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Client, WAIT, act_ok, card_fetched_earlier, id, received, until_posts_show_card, users,
};
use support::eventually;
use support::multipart::png;
use support::node::Instance;
use support::peer::Peer;

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";
const ADMIN: &str = "entities-admin-token-0123456789";

/// Volatile parts of an answer, named: known ids and origins by what they are, any other UUID
/// as `<uuid>`, and times (keys ending in `_at`) as `<time>`.
struct Names {
    known: BTreeMap<String, String>,
    uuid: regex::Regex,
}

impl Names {
    fn new() -> Names {
        Names {
            known: BTreeMap::new(),
            uuid: regex::Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
                .unwrap(),
        }
    }
    fn name(&mut self, value: &str, name: &str) {
        self.known.insert(value.to_string(), format!("<{name}>"));
    }
    fn text(&self, s: &str) -> String {
        // A proxied remote image: its MAC varies with the run's URLs, the remote URL is named.
        if let Some((head, remote)) = s.split_once("/media/proxy/")
            && let Some((_, q)) = remote.split_once("?url=")
        {
            let remote: String = url::form_urlencoded::parse(format!("u={q}").as_bytes())
                .map(|(_, v)| v.into_owned())
                .collect();
            return format!(
                "{}/media/proxy/<mac>?url={}",
                self.text(head),
                self.text(&remote)
            );
        }
        // Longest first, so an origin is not replaced inside a longer known value.
        let mut keys: Vec<&String> = self.known.keys().collect();
        keys.sort_by_key(|k| std::cmp::Reverse(k.len()));
        let mut out = s.to_string();
        for k in keys {
            out = out.replace(k.as_str(), &self.known[k]);
        }
        self.uuid.replace_all(&out, "<uuid>").into_owned()
    }
    fn value(&self, key: Option<&str>, v: &Value) -> Value {
        match v {
            Value::String(_) if key.is_some_and(|k| k.ends_with("_at")) => json!("<time>"),
            // A `history` entry's day: midnight UTC as a UNIX time.
            Value::String(_) if key == Some("day") => json!("<day>"),
            // Notification ids are sequence numbers.
            Value::String(s)
                if matches!(
                    key,
                    Some("id" | "most_recent_notification_id" | "page_max_id" | "page_min_id")
                ) && s.bytes().all(|b| b.is_ascii_digit()) =>
            {
                json!("<sequence>")
            }
            // `ungrouped-<notification id>`, or a stored group: `<type>-<post>-<hour>`.
            Value::String(s) if key == Some("group_key") => {
                let head = s.trim_end_matches(|c: char| c.is_ascii_digit());
                if head == "ungrouped-" {
                    json!("ungrouped-<sequence>")
                } else {
                    json!(self.text(head) + "<hour>")
                }
            }
            Value::String(s) => json!(self.text(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.value(None, x)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (k.clone(), self.value(Some(k), x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// Compares `answer` (named) with the snapshot `name`, or writes it under `UPDATE_SNAPSHOTS`.
/// Returns the mismatch, so every entity is checked before the test fails.
fn check(names: &Names, name: &str, answer: &Value) -> Option<String> {
    let got = names.value(None, answer);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.json"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
        return None;
    }
    let want: Value = match std::fs::read_to_string(&path) {
        Ok(s) => serde_json::from_str(&s).unwrap(),
        Err(e) => return Some(format!("{name}: {e} (UPDATE_SNAPSHOTS=1 writes it)")),
    };
    (got != want).then(|| {
        format!(
            "{name} differs from {}:\n{}",
            path.display(),
            serde_json::to_string_pretty(&got).unwrap()
        )
    })
}

async fn ok(api: &Client, method: Method, path: &str, body: &Value) -> Value {
    let a = api.call(method, path, body).await;
    assert_eq!(a.status, 200, "{path}: {}", a.body);
    a.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_entity_keeps_its_shape() {
    let dir = support::files::temp_dir("hollo-entities");
    let inst = Instance::on_disk(&dir, &[("ADMIN_TOKEN", ADMIN)]).await;
    let peer = Peer::start().await;
    let [(alice, _, alice_api), (bob, _, bob_api)] = users(&inst, ["alice", "bob"]).await;
    let mut names = Names::new();
    names.name(&inst.base, "origin");
    names.name(peer.base(), "peer");
    names.name(peer.host(), "peer_host");
    names.name(&inst.base.replace("http://", ""), "host");
    names.name(&alice.id.to_string(), "alice");
    names.name(&bob.id.to_string(), "bob");

    // alice's profile, and bob following her.
    ok(
        &alice_api,
        Method::PATCH,
        "/api/v1/accounts/update_credentials",
        &json!({ "display_name": "Alice <A>", "note": "tea & cake",
                 "fields_attributes": [{ "name": "Site", "value": "https://a.example" }],
                 "source": { "privacy": "public", "language": "en" } }),
    )
    .await;
    act_ok(
        &bob_api,
        Method::POST,
        &format!("/api/v1/accounts/{}/follow", alice.id),
    )
    .await;

    // A local status with media, a mention, a tag, a content warning and a language.
    let media = alice_api
        .multipart(
            Method::POST,
            "/api/v2/media",
            &[
                ("file", Some(("a.png", "image/png")), &png(8, 6)),
                ("description", None, b"a gradient"),
            ],
        )
        .await
        .body;
    let media_id = id(&media);
    names.name(&media_id, "media");
    let media = eventually(WAIT, "the upload processed", || async {
        let m = alice_api.get(&format!("/api/v1/media/{media_id}")).await;
        (m.status == 200).then_some(m.body)
    })
    .await;
    let post = alice_api
        .posted(
            &json!({ "status": "hello @bob #Rust", "media_ids": [media_id],
                         "spoiler_text": "greeting", "language": "en" }),
        )
        .await;
    let post_id = id(&post);
    names.name(&post_id, "post");
    let reply = bob_api
        .posted(&json!({ "status": "@alice hi", "in_reply_to_id": post_id }))
        .await;
    names.name(&id(&reply), "reply");
    let poll = alice_api
        .posted(&json!({ "status": "tea or cake?", "visibility": "private",
                         "poll": { "options": ["tea", "cake"], "expires_in": 3600 } }))
        .await;
    names.name(&id(&poll), "poll_status");
    let poll_id = poll["poll"]["id"].as_str().unwrap().to_string();
    names.name(&poll_id, "poll");
    ok(
        &bob_api,
        Method::POST,
        &format!("/api/v1/polls/{poll_id}/votes"),
        &json!({ "choices": [1] }),
    )
    .await;
    let direct = alice_api
        .posted(&json!({ "status": "@bob psst", "visibility": "direct" }))
        .await;
    names.name(&id(&direct), "direct");

    // bob favourites, bookmarks and boosts her post.
    for action in ["favourite", "bookmark"] {
        act_ok(
            &bob_api,
            Method::POST,
            &format!("/api/v1/statuses/{post_id}/{action}"),
        )
        .await;
    }
    let boost = act_ok(
        &bob_api,
        Method::POST,
        &format!("/api/v1/statuses/{post_id}/reblog"),
    )
    .await;
    names.name(&id(&boost), "boost");

    // The peer follows alice and sends a note with an attachment, a mention and a hashtag.
    let me = inst.fed.actor_iri("alice");
    let inbox = inst.fed.inbox("alice");
    let follow = json!({ "id": peer.new_id("follows"), "type": "Follow",
                         "actor": peer.actor(), "object": me });
    assert_eq!(peer.post(&inbox, &follow).await, 202);
    received(&peer, "Accept", |_| true).await;
    let note_iri = peer.iri("/notes/with-everything");
    let note = json!({
        "id": note_iri, "type": "Note", "attributedTo": peer.actor(),
        "content": "<p>@alice look #Fedi</p>", "published": "2026-12-01T10:00:00Z",
        "summary": "a photo", "url": peer.iri("/@peer/1"),
        "to": [PUBLIC], "cc": [me],
        "tag": [{ "type": "Mention", "href": me, "name": "@alice" },
                { "type": "Hashtag", "href": peer.iri("/tags/fedi"), "name": "#Fedi" }],
        "attachment": [{ "type": "Document", "mediaType": "image/jpeg",
                         "url": peer.iri("/files/a.jpg"), "name": "a photo",
                         "width": 640, "height": 480, "blurhash": "LEHV6nWB2yk8pyo0adR*.7kCMdnj" }],
    });
    let create = json!({ "id": format!("{note_iri}/activity"), "type": "Create",
                         "actor": peer.actor(), "to": [PUBLIC], "cc": [me], "object": note });
    // The inbox runs activities in parallel: the note is sent once the Like's favourite is
    // stored, so the snapshot's order (by notification id) is the same on every run.
    let like = json!({ "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(),
                       "object": inst.fed.status_iri("alice", post_id.parse().unwrap()) });
    assert_eq!(peer.post(&inbox, &like).await, 202);
    eventually(WAIT, "the peer's favourite", || async {
        let n = alice_api
            .get("/api/v1/notifications?types[]=favourite")
            .await;
        n.body
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n["account"]["acct"] != json!("bob")))
            .then_some(())
    })
    .await;
    assert_eq!(peer.post(&inbox, &create).await, 202);

    // bob's follow, mention (the reply), favourite and boost; the peer's follow, mention and
    // like.
    let notifications = eventually(WAIT, "every notification", || async {
        let n = alice_api.get("/api/v1/notifications").await;
        (n.body.as_array().map(Vec::len) == Some(7)).then_some(n.body)
    })
    .await;
    let remote_status = notifications
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["type"] == "mention" && n["status"]["uri"] == json!(note_iri))
        .map(|n| n["status"].clone())
        .unwrap();
    names.name(&id(&remote_status), "remote_status");
    let peer_id = id(&remote_status["account"]);
    names.name(&peer_id, "peer_account");

    // bob reports alice's post: the reporter's entity, and the admin's view of it.
    let report = ok(
        &bob_api,
        Method::POST,
        "/api/v1/reports",
        &json!({ "account_id": alice.id.to_string(), "status_ids": [post_id],
                 "comment": "too much cake", "category": "other" }),
    )
    .await;
    let report_id = id(&report);
    names.name(&report_id, "report");
    let admin_report = Client::new(&inst, Some(ADMIN))
        .get(&format!("/api/v1/admin/reports/{report_id}"))
        .await
        .body;

    let answers: Vec<(&str, Value)> = vec![
        ("media_attachment", media),
        ("report", report),
        ("admin_report", admin_report),
        (
            "status_local_as_booster",
            bob_api
                .get(&format!("/api/v1/statuses/{post_id}"))
                .await
                .body,
        ),
        (
            "status_local_anonymous",
            Client::new(&inst, None)
                .get(&format!("/api/v1/statuses/{post_id}"))
                .await
                .body,
        ),
        ("status_reply", reply),
        (
            "status_poll_as_author",
            alice_api
                .get(&format!("/api/v1/statuses/{}", id(&poll)))
                .await
                .body,
        ),
        (
            "poll_as_voter",
            bob_api.get(&format!("/api/v1/polls/{poll_id}")).await.body,
        ),
        ("status_boost", boost),
        ("status_remote", remote_status),
        ("notifications", notifications),
        // The same notifications in Mastodon 4.3's groups (R-MAPI-6).
        (
            "grouped_notifications",
            alice_api.get("/api/v2/notifications").await.body,
        ),
        (
            "conversations",
            bob_api.get("/api/v1/conversations").await.body,
        ),
        (
            "credential_account",
            alice_api
                .get("/api/v1/accounts/verify_credentials")
                .await
                .body,
        ),
        (
            "account_local",
            bob_api
                .get(&format!("/api/v1/accounts/{}", alice.id))
                .await
                .body,
        ),
        (
            "account_remote",
            alice_api
                .get(&format!("/api/v1/accounts/{peer_id}"))
                .await
                .body,
        ),
        (
            "relationships",
            bob_api
                .get(&format!(
                    "/api/v1/accounts/relationships?id[]={}&id[]={peer_id}",
                    alice.id
                ))
                .await
                .body,
        ),
        (
            "context",
            alice_api
                .get(&format!("/api/v1/statuses/{post_id}/context"))
                .await
                .body,
        ),
    ];
    let failures: Vec<String> = answers
        .iter()
        .filter_map(|(name, answer)| check(&names, name, answer))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    inst.shutdown_removing(dir).await;
}

/// What the discovery routes answer (R-MAPI-2, R-MAPI-6): familiar followers, a v2 follow
/// suggestion, a trending tag and a trending link. Alice follows bob and carol, who follow
/// dave and share a tagged link in public.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn discovery_entities_keep_their_shape() {
    let inst = Instance::start("all", &[]).await;
    let [
        (_, _, alice_api),
        (bob, _, bob_api),
        (carol, _, carol_api),
        (dave, _, _),
    ] = users(&inst, ["alice", "bob", "carol", "dave"]).await;
    let mut names = Names::new();
    names.name(&inst.base, "origin");
    names.name(&inst.base.replace("http://", ""), "host");
    for (a, name) in [(&bob, "bob"), (&carol, "carol"), (&dave, "dave")] {
        names.name(&a.id.to_string(), name);
    }
    for (api, whom) in [
        (&alice_api, &bob),
        (&alice_api, &carol),
        (&bob_api, &dave),
        (&carol_api, &dave),
    ] {
        act_ok(
            api,
            Method::POST,
            &format!("/api/v1/accounts/{}/follow", whom.id),
        )
        .await;
    }
    // A card fetched earlier for the link they share (the workers reuse it).
    let url = "https://tea.example/brew";
    card_fetched_earlier(&inst, url, "Brewing", "Tea").await;
    for api in [&bob_api, &carol_api] {
        ok(
            api,
            Method::POST,
            "/api/v1/statuses",
            &json!({ "status": format!("#tea {url}") }),
        )
        .await;
    }
    until_posts_show_card(&inst, url, 2).await;

    let anon = Client::new(&inst, None);
    let answers: Vec<(&str, Value)> = vec![
        (
            "familiar_followers",
            alice_api
                .get(&format!(
                    "/api/v1/accounts/familiar_followers?id[]={}",
                    dave.id
                ))
                .await
                .body,
        ),
        (
            "suggestions_v2",
            alice_api.get("/api/v2/suggestions").await.body,
        ),
        ("trends_tags", anon.get("/api/v1/trends/tags").await.body),
        ("trends_links", anon.get("/api/v1/trends/links").await.body),
    ];
    let failures: Vec<String> = answers
        .iter()
        .filter_map(|(name, answer)| check(&names, name, answer))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
