//! Every kind of document we serve or send is read right by a JSON-LD processor (R-AP-1):
//! each is expanded with jsonld.js (`tests/jsonld/check.mjs`, pinned in
//! `tests/jsonld/package.json`), offline — its document loader serves the ActivityStreams and
//! security v1 contexts from `tests/jsonld/contexts/` and refuses every other URL — and a term
//! that expansion drops or leaves undefined fails the test.
//!
//! The processor is installed under `target/jsonld-check` by `runtime/tests/jsonld/install`
//! (`.ci/run` calls it); without node or the install the test fails and says what is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{Client, ap_doc, call_2xx, import_csv, remote_post_id};
use support::eventually;
use support::node::Instance;
use support::peer::Peer;

const WAIT: Duration = Duration::from_secs(60);

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/jsonld")
}

/// Where `tests/jsonld/install` put jsonld.js: `HOLLO_JSONLD_DIR`, else the workspace's
/// `target/jsonld-check`.
fn install_dir() -> PathBuf {
    std::env::var_os("HOLLO_JSONLD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/jsonld-check"))
}

/// Runs the checker over `docs` (label, document); returns each label's problems.
fn check(docs: &[(String, Value)]) -> Vec<(String, Vec<String>)> {
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|o| o.status.success()),
        "node is missing: install Debian's nodejs and npm packages, then run \
         runtime/tests/jsonld/install (.ci/run does both): {node:?}"
    );
    let dir = install_dir();
    assert!(
        dir.join("node_modules/jsonld/package.json").is_file(),
        "jsonld.js is not installed in {}: run runtime/tests/jsonld/install (.ci/run does)",
        dir.display()
    );
    let input: Vec<Value> = docs
        .iter()
        .map(|(label, doc)| json!({ "label": label, "doc": doc }))
        .collect();
    let file = tempfile_path();
    std::fs::write(&file, serde_json::to_vec(&input).expect("json")).expect("write documents");
    let out = Command::new("node")
        .arg(here().join("check.mjs"))
        .arg(&file)
        .env("HOLLO_JSONLD_DIR", &dir)
        .output()
        .expect("run node");
    let _ = std::fs::remove_file(&file);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "the checker could not run ({:?}): {}{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Vec<Value> = serde_json::from_str(&stdout).expect("the checker's report");
    report
        .iter()
        .map(|r| {
            let problems = r["problems"]
                .as_array()
                .map(|p| {
                    p.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            (
                r["label"].as_str().unwrap_or_default().to_string(),
                problems,
            )
        })
        .collect()
}

fn tempfile_path() -> PathBuf {
    std::env::temp_dir().join(format!("hollo-jsonld-{}.json", uuid::Uuid::new_v4()))
}

fn failures(report: &[(String, Vec<String>)]) -> Vec<String> {
    report
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(label, p)| format!("{label}: {}", p.join("; ")))
        .collect()
}

/// The checker can fail: an undefined term, a term the context nulls out, an unknown remote
/// context and a document without context are each reported; a complete document is not.
#[test]
fn the_checker_reports_dropped_and_undefined_terms() {
    let as_only = "https://www.w3.org/ns/activitystreams";
    let report = check(&[
        (
            "undefined".into(),
            json!({"@context": as_only, "id": "https://x.example/1", "type": "Question",
                   "votersCount": 3}),
        ),
        (
            "dropped".into(),
            json!({"@context": [as_only, {"@vocab": null}], "id": "https://x.example/2",
                   "type": "Note", "misskey": 1}),
        ),
        (
            "foreign context".into(),
            json!({"@context": "https://x.example/ctx", "id": "https://x.example/3"}),
        ),
        ("no context".into(), json!({"id": "https://x.example/4"})),
        (
            "complete".into(),
            json!({"@context": [as_only, "https://w3id.org/security/v1",
                                {"toot": "http://joinmastodon.org/ns#",
                                 "votersCount": "toot:votersCount"}],
                   "id": "https://x.example/5", "type": "Question", "votersCount": 3,
                   "publicKey": {"id": "https://x.example/5#k", "owner": "https://x.example/5",
                                 "publicKeyPem": "PEM"}}),
        ),
    ]);
    let by_label = |l: &str| {
        report
            .iter()
            .find(|(label, _)| label == l)
            .map(|(_, p)| p.join("; "))
            .expect("label")
    };
    assert!(by_label("undefined").contains("votersCount"), "{report:?}");
    assert!(by_label("dropped").contains("misskey"), "{report:?}");
    assert!(
        by_label("foreign context").contains("x.example/ctx"),
        "{report:?}"
    );
    assert!(by_label("no context").contains("no @context"), "{report:?}");
    assert_eq!(by_label("complete"), "", "{report:?}");
}

async fn import_blocks(api: &Client, mode: &str, handles: &[String]) {
    let body: String = handles.iter().map(|h| format!("{h}\n")).collect();
    import_csv(api, &format!("type=blocks&mode={mode}"), &body).await;
}

/// The kind of a document: its type, and the type of the object an activity carries.
fn kind(doc: &Value) -> String {
    let ty = doc["type"].as_str().unwrap_or("?");
    match doc["object"]["type"].as_str() {
        Some(inner) => format!("{ty}({inner})"),
        None => ty.to_string(),
    }
}

/// Drives every path that serves or sends a document — follows both ways, a note, two polls
/// (one choice and several), an end moved and a poll closed, a block and its undo by an
/// overwrite import — then expands what was served and everything stored to be sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_document_we_serve_or_send_expands_without_losing_a_term() {
    let media = support::files::temp_dir("hollo-jsonld");
    let inst = Instance::on_disk(&media, &[]).await;
    let peer = Peer::start().await;
    let (alice, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);
    let fed = inst.fed.clone();

    // The peer follows alice (we answer with an Accept); alice follows the peer.
    let follow = json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": peer.new_id("follows"), "type": "Follow",
        "actor": peer.actor(), "object": fed.actor_iri(&alice.username),
    });
    assert_eq!(peer.post(&fed.inbox(&alice.username), &follow).await, 202);
    eventually(WAIT, "the Accept at the peer", || async {
        peer.received().into_iter().find(|r| r.ty() == "Accept")
    })
    .await;
    call_2xx(
        &api,
        Method::POST,
        "/api/v1/follows",
        json!({"account": peer.handle()}),
    )
    .await;
    // A profile with fields: the actor serves `PropertyValue`s and its `Update` goes out.
    call_2xx(
        &api,
        Method::PATCH,
        "/api/v1/accounts/update_credentials",
        json!({"display_name": "Alice", "note": "hi #tea https://a.example", "locked": true,
               "fields_attributes": [{"name": "Site", "value": "https://a.example"}]}),
    )
    .await;
    // An avatar and a header: the actor's `icon` and `image` (R-MAPI-6), and another
    // `Update`.
    let png = {
        let mut out = std::io::Cursor::new(Vec::new());
        image::DynamicImage::ImageRgb8(image::RgbImage::new(8, 8))
            .write_to(&mut out, image::ImageFormat::Png)
            .expect("png");
        out.into_inner()
    };
    let resp = api
        .multipart(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            &[
                ("avatar", Some(("a.png", "image/png")), &png),
                ("header", Some(("h.png", "image/png")), &png),
            ],
        )
        .await;
    assert_eq!(resp.status, 200, "avatar and header");

    // A note, a poll with one choice, a poll with several that ends in two seconds.
    let note = call_2xx(
        &api,
        Method::POST,
        "/api/v1/statuses",
        json!({"status": format!("<b>hi</b> @{} #Tea https://x.example/", peer.handle_of("bob"))}),
    )
    .await;
    let one = call_2xx(&api, Method::POST, "/api/v1/statuses", json!({"status": "Tea or coffee?", "poll": {"options": ["tea", "coffee"], "expires_in": 3600}})).await;
    let many = call_2xx(
        &api,
        Method::POST,
        "/api/v1/statuses",
        json!({"status": "Which ones?",
               "poll": {"options": ["a", "b", "c"], "expires_in": 2, "multiple": true}}),
    )
    .await;
    // Moving an end sends an Update with the new endTime.
    let id = one["id"].as_str().expect("id");
    call_2xx(
        &api,
        Method::PUT,
        &format!("/api/v1/statuses/{id}"),
        json!({"poll": {"expires_in": 7200}}),
    )
    .await;

    // A pin and its unpin (Add, Remove to `featured`), then a pin that stays, and a featured
    // tag, so the two collections have items (R-MAPI-6).
    let note_id = note["id"].as_str().expect("id");
    for action in ["pin", "unpin", "pin"] {
        call_2xx(
            &api,
            Method::POST,
            &format!("/api/v1/statuses/{note_id}/{action}"),
            json!({}),
        )
        .await;
    }
    call_2xx(
        &api,
        Method::POST,
        "/api/v1/featured_tags",
        json!({"name": "jsonld"}),
    )
    .await;

    // An emoji reaction to the peer's post, with a custom emoji (its `Emoji` tag), and its
    // `Undo` (R-MAPI-6).
    let theirs = peer.new_id("notes");
    let create = peer.create(json!({
        "id": theirs, "type": "Note", "attributedTo": peer.actor(),
        "to": ["https://www.w3.org/ns/activitystreams#Public"], "content": "<p>hi</p>"
    }));
    assert_eq!(peer.post(&fed.inbox(&alice.username), &create).await, 202);
    let theirs_id: uuid::Uuid = remote_post_id(&inst, &theirs, "the peer's note stored").await;
    inst.custom_emoji("tea", "http://img.example/tea.png").await;
    for action in ["react", "unreact"] {
        call_2xx(
            &api,
            Method::POST,
            &format!("/api/v1/statuses/{theirs_id}/{action}/tea"),
            json!({}),
        )
        .await;
    }

    // A vote on the peer's poll: a `Create` of a `Note` named as the option.
    let question = peer.new_id("questions");
    let create = peer.create(json!({
        "id": question, "type": "Question", "attributedTo": peer.actor(),
        "to": ["https://www.w3.org/ns/activitystreams#Public"], "content": "<p>which?</p>",
        "oneOf": [{"type": "Note", "name": "this", "replies": {"type": "Collection", "totalItems": 0}},
                  {"type": "Note", "name": "that", "replies": {"type": "Collection", "totalItems": 0}}],
        "endTime": "2099-01-01T00:00:00Z",
    }));
    assert_eq!(peer.post(&fed.inbox(&alice.username), &create).await, 202);
    let question_id = remote_post_id(&inst, &question, "the peer's question stored").await;
    let st = api
        .get(&format!("/api/v1/statuses/{question_id}"))
        .await
        .body;
    let poll = st["poll"]["id"].as_str().expect("a poll").to_string();
    call_2xx(
        &api,
        Method::POST,
        &format!("/api/v1/polls/{poll}/votes"),
        json!({"choices": [1]}),
    )
    .await;

    // Quotes (R-MAPI-6): our quote of a remote post that asks for consent (a `QuoteRequest`,
    // a `Create(Note)` with `quote`), and our `Accept` of the peer's `QuoteRequest`, whose
    // `result` is the `QuoteAuthorization` we serve.
    let guarded = peer.iri("/notes/jsonld-guarded");
    let guarded_note = json!({
        "id": guarded, "type": "Note", "attributedTo": peer.actor(), "content": "<p>ask first</p>",
        "to": ["https://www.w3.org/ns/activitystreams#Public"],
        "interactionPolicy": { "canQuote": {
            "automaticApproval": ["https://www.w3.org/ns/activitystreams#Public"] } },
    });
    let create = json!({
        "id": format!("{guarded}/activity"), "type": "Create", "actor": peer.actor(),
        "to": ["https://www.w3.org/ns/activitystreams#Public"], "object": guarded_note,
    });
    assert_eq!(peer.post(&fed.inbox(&alice.username), &create).await, 202);
    let guarded_id: uuid::Uuid = remote_post_id(&inst, &guarded, "the guarded note stored").await;
    call_2xx(
        &api,
        Method::POST,
        "/api/v1/statuses",
        json!({"status": "quoting", "quoted_status_id": guarded_id}),
    )
    .await;
    let asking = peer.iri("/notes/jsonld-asking");
    peer.doc(
        "/notes/jsonld-asking",
        json!({
            "id": asking, "type": "Note", "attributedTo": peer.actor(), "content": "<p>may I?</p>",
            "to": ["https://www.w3.org/ns/activitystreams#Public"], "quote": note["uri"],
        }),
    );
    let request = json!({
        "id": peer.new_id("requests"), "type": "QuoteRequest", "actor": peer.actor(),
        "object": note["uri"], "instrument": asking,
    });
    assert_eq!(peer.post(&fed.inbox(&alice.username), &request).await, 202);
    let authorization: String = eventually(WAIT, "our Accept of the QuoteRequest", || async {
        sqlx::query_scalar(
            "SELECT body->>'result' FROM outbox_activities
              WHERE body->>'type' = 'Accept' AND body->'object'->>'type' = 'QuoteRequest'",
        )
        .fetch_optional(&inst.pool)
        .await
        .expect("query")
    })
    .await;

    // A reply and a boost of a remote post whose author must approve them (GoToSocial's
    // interaction policies): once the author accepts, both go out again carrying
    // `approvedBy`, and the reply serves it.
    let asks = peer.iri("/notes/jsonld-asks");
    let asks_note = json!({
        "id": asks, "type": "Note", "attributedTo": peer.actor(), "content": "<p>ask me</p>",
        "to": ["https://www.w3.org/ns/activitystreams#Public"],
        "interactionPolicy": {
            "canReply": { "approvalRequired": ["https://www.w3.org/ns/activitystreams#Public"] },
            "canAnnounce": { "manualApproval": ["https://www.w3.org/ns/activitystreams#Public"] },
        },
    });
    let create = json!({
        "id": format!("{asks}/activity"), "type": "Create", "actor": peer.actor(),
        "to": ["https://www.w3.org/ns/activitystreams#Public"], "object": asks_note,
    });
    assert_eq!(peer.post(&fed.inbox(&alice.username), &create).await, 202);
    let asks_id: uuid::Uuid = remote_post_id(&inst, &asks, "the asking note stored").await;
    let reply = call_2xx(
        &api,
        Method::POST,
        "/api/v1/statuses",
        json!({"status": "may I answer?", "in_reply_to_id": asks_id}),
    )
    .await;
    let boost = call_2xx(
        &api,
        Method::POST,
        &format!("/api/v1/statuses/{asks_id}/reblog"),
        json!({}),
    )
    .await;
    let announce_id: String = sqlx::query_scalar("SELECT activity_id FROM reblogs WHERE id = $1")
        .bind(uuid::Uuid::parse_str(boost["id"].as_str().expect("id")).expect("uuid"))
        .fetch_one(&inst.pool)
        .await
        .expect("announce id");
    for object in [reply["uri"].clone(), json!(announce_id)] {
        let accept = json!({
            "id": peer.new_id("accepts"), "type": "Accept", "actor": peer.actor(),
            "object": object, "target": asks,
        });
        assert_eq!(peer.post(&fed.inbox(&alice.username), &accept).await, 202);
    }
    eventually(WAIT, "the approved reply and boost sent again", || async {
        let n = inst
            .count(
                "SELECT count(*) FROM outbox_activities WHERE body ? 'approvedBy'
                    OR body->'object' ? 'approvedBy'",
            )
            .await;
        (n == 2).then_some(())
    })
    .await;
    let approved_reply = reply["uri"].as_str().expect("uri").to_string();

    // The peer, a follower, likes alice's followers-only post: our Accept names the
    // `LikeApproval` we serve (`approvals::granted`).
    let private = call_2xx(
        &api,
        Method::POST,
        "/api/v1/statuses",
        json!({"status": "for my followers", "visibility": "private"}),
    )
    .await;
    let like = json!({
        "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(),
        "object": private["uri"],
    });
    assert_eq!(peer.post(&fed.inbox(&alice.username), &like).await, 202);
    let approval: String = eventually(WAIT, "our Accept of the like", || async {
        sqlx::query_scalar(
            "SELECT body->>'result' FROM outbox_activities
              WHERE body->>'type' = 'Accept' AND body->'object'->>'type' = 'Like'",
        )
        .fetch_optional(&inst.pool)
        .await
        .expect("query")
    })
    .await;

    // A block, then an overwrite import that undoes it (and blocks another).
    import_blocks(&api, "merge", &[peer.handle_of("b1")]).await;
    import_blocks(&api, "overwrite", &[peer.handle_of("b2")]).await;

    // The closing Update of the ended poll.
    eventually(Duration::from_secs(30), "the closing Update", || async {
        (inst
            .count("SELECT count(*) FROM outbox_activities WHERE id LIKE '%/updates/closed'")
            .await
            == 1)
            .then_some(())
    })
    .await;

    // Served documents.
    let mut docs: Vec<(String, Value)> = Vec::new();
    for url in [
        fed.actor_iri(&alice.username),
        fed.instance_actor_iri(),
        fed.outbox(&alice.username),
        fed.followers(&alice.username),
        fed.following(&alice.username),
        fed.featured(&alice.username),
        fed.featured_tags(&alice.username),
        fed.instance_outbox(),
        authorization.clone(),
        approval.clone(),
        format!("{approval}/accept"),
    ] {
        let doc = ap_doc(&url).await;
        docs.push((format!("GET {url} ({})", kind(&doc)), doc));
    }
    assert!(
        docs[0].1["icon"]["url"].is_string() && docs[0].1["image"]["url"].is_string(),
        "the actor carries its avatar and header: {}",
        docs[0].1
    );
    for status in [&note, &one, &many] {
        let url = status["uri"].as_str().expect("uri");
        let doc = ap_doc(url).await;
        docs.push((format!("GET {url} ({})", kind(&doc)), doc));
    }
    let doc = ap_doc(&approved_reply).await;
    assert!(doc["approvedBy"].is_string(), "{doc}");
    docs.push((format!("GET {approved_reply} (approved reply)"), doc));
    // Everything stored to be sent (each delivery sends exactly the stored body).
    let sent: Vec<(String, Value)> =
        sqlx::query_as("SELECT id, body FROM outbox_activities ORDER BY created_at")
            .fetch_all(&inst.pool)
            .await
            .expect("outbox");
    for (id, body) in sent {
        docs.push((format!("sent {id} ({})", kind(&body)), body));
    }

    // A note with a media attachment, as `media::documents_for` makes its `Document`s
    // (statuses put them in `attachment`).
    let media_row = hollo_runtime::media::MediaRow {
        id: uuid::Uuid::now_v7(),
        account_id: alice.id,
        status_id: None,
        kind: "image".into(),
        content_type: "image/png".into(),
        file_key: format!("media/{}/original.png", uuid::Uuid::now_v7()),
        thumbnail_key: None,
        size: 1,
        width: Some(640),
        height: Some(480),
        thumbnail_width: None,
        thumbnail_height: None,
        blurhash: Some("LEHV6nWB2yk8pyo0adR*.7kCMdnj".into()),
        description: Some("a cup of tea".into()),
        focus_x: 0.25,
        focus_y: -0.5,
        state: "ready".into(),
        error: None,
    };
    let drive = hollo_runtime::media::Drive::disabled(inst.base.clone());
    let mut with_media = ap_doc(note["uri"].as_str().expect("uri")).await;
    with_media["attachment"] = json!([hollo_runtime::media::document(&drive, &media_row)]);
    docs.push(("a Note with a media Document".into(), with_media));

    let kinds: BTreeSet<String> = docs.iter().map(|(_, d)| kind(d)).collect();
    for expected in [
        "Person",
        "Application",
        "OrderedCollection",
        "Note",
        "Question",
        "Accept(Follow)",
        "Follow",
        "Create(Note)",
        "Create(Question)",
        "Update(Question)",
        "Block",
        "Undo(Block)",
        "EmojiReact",
        "Undo(EmojiReact)",
        "QuoteRequest",
        "Accept(QuoteRequest)",
        "QuoteAuthorization",
        "Accept(Like)",
        "LikeApproval",
        "Add",
        "Remove",
        "Collection",
    ] {
        assert!(kinds.contains(expected), "no {expected} among {kinds:?}");
    }
    let report = check(&docs);
    assert_eq!(report.len(), docs.len());
    let failed = failures(&report);
    assert!(
        failed.is_empty(),
        "{} of {} documents lose terms:\n{}",
        failed.len(),
        docs.len(),
        failed.join("\n")
    );
    inst.shutdown().await;
    let _ = std::fs::remove_dir_all(media);
}
