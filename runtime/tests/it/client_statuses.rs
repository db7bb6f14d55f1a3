//! Statuses in the Mastodon client API (SPEC §11, R-MAPI-3): posting with
//! every parameter, single reads honouring visibility, edits with history, deletion with its
//! `Delete`, threads, idempotency, and what reaches a remote follower — over HTTP against a
//! real node on a real PostgreSQL, with the shared `Peer` as the remote server.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use hollo_runtime::polls::MAX_STATUS_CHARS;
use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Client, WAIT, assert_error, follow, has, id, peer_follows_accepted, received, scalar,
    unknown_ids_query, users,
};
use support::eventually;
use support::multipart::{form, png};
use support::node::Instance;
use support::peer::Peer;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn posting_reading_and_visibility() {
    let inst = Instance::start("all", &[]).await;
    let [(alice, _, api), (bob, _, bob_api), (_, _, carol_api)] =
        users(&inst, ["alice", "bob", "carol"]).await;
    let anon = Client::new(&inst, None);

    // bob follows alice (local: accepted at once).
    follow(&bob_api, &alice.id.to_string()).await;

    // Every parameter is stored and shown.
    let st = api
        .posted(&json!({"status": "Hello #Rust", "visibility": "unlisted",
                        "spoiler_text": "cw", "language": "en"}))
        .await;
    assert_eq!(st["visibility"], "unlisted");
    assert_eq!(st["spoiler_text"], "cw");
    assert_eq!(
        st["sensitive"], true,
        "a content warning makes it sensitive"
    );
    assert_eq!(st["language"], "en");
    assert_eq!(st["account"]["id"], json!(alice.id.to_string()));
    assert!(st["content"].as_str().unwrap().contains("Hello"));
    assert_eq!(st["tags"][0]["name"], "rust");
    let public_id = id(&st);
    let shown = anon.get(&format!("/api/v1/statuses/{public_id}")).await;
    assert_eq!(shown.status, 200, "anyone reads an unlisted status");
    assert_eq!(shown.body["id"], json!(public_id));
    // It is in alice's and her follower bob's home timelines.
    let homes = scalar(
        &inst,
        "SELECT count(*) FROM home_feed WHERE entry_id = $1::uuid",
        &public_id,
    )
    .await;
    assert_eq!(homes, 2);

    // Bad input is 422 with Mastodon's error body, and nothing is stored.
    let before = inst.count("SELECT count(*) FROM statuses").await;
    for (body, what) in [
        (
            json!({"status": "x", "visibility": "limited"}),
            "visibility",
        ),
        (
            json!({"status": "x".repeat(MAX_STATUS_CHARS + 1)}),
            "too long",
        ),
        (
            json!({"status": "x".repeat(MAX_STATUS_CHARS - 1), "spoiler_text": "ab"}),
            "text and warning together too long",
        ),
        (json!({"status": "  "}), "blank"),
        (
            json!({"status": "x", "media_ids": ["nope"]}),
            "bad media id",
        ),
        (
            json!({"status": "x", "media_ids": [Uuid::now_v7().to_string()]}),
            "unknown media",
        ),
        (json!({"status": "x", "sensitive": "perhaps"}), "sensitive"),
    ] {
        assert_error(&api.post(&body).await, 422, what);
    }
    assert_eq!(
        inst.count("SELECT count(*) FROM statuses").await,
        before,
        "nothing stored"
    );
    let exactly = api
        .post(&json!({"status": "y".repeat(MAX_STATUS_CHARS)}))
        .await;
    assert_eq!(exactly.status, 200, "the limit itself is allowed");

    // Followers-only: bob (a follower) and alice read it; carol and anonymous get 404.
    let private = api
        .posted(&json!({"status": "for followers", "visibility": "private"}))
        .await;
    let path = format!("/api/v1/statuses/{}", id(&private));
    assert_eq!(bob_api.get(&path).await.status, 200);
    assert_eq!(api.get(&path).await.status, 200);
    assert_error(&carol_api.get(&path).await, 404, "carol reads private");
    assert_error(&anon.get(&path).await, 404, "anonymous reads private");

    // Direct: only the mentioned; they are notified (once); it reaches bob's home because he
    // follows alice and is mentioned.
    let direct = api
        .posted(&json!({"status": "psst @bob", "visibility": "direct"}))
        .await;
    assert_eq!(direct["mentions"][0]["id"], json!(bob.id.to_string()));
    let dpath = format!("/api/v1/statuses/{}", id(&direct));
    assert_eq!(bob_api.get(&dpath).await.status, 200);
    assert_error(&carol_api.get(&dpath).await, 404, "carol reads direct");
    let mention = scalar(
        &inst,
        "SELECT count(*) FROM notifications WHERE type = 'mention' AND post_id = $1::uuid",
        &id(&direct),
    )
    .await;
    assert_eq!(mention, 1);
    let in_bobs_home = scalar(
        &inst,
        "SELECT count(*) FROM home_feed WHERE entry_id = $1::uuid",
        &id(&direct),
    )
    .await;
    assert_eq!(in_bobs_home, 2, "alice's and bob's homes");

    // Replies: to what the author can see (else 404), shown with its parent.
    let unknown = api
        .post(&json!({"status": "re", "in_reply_to_id": Uuid::now_v7().to_string()}))
        .await;
    assert_error(&unknown, 404, "reply to an unknown status");
    let hidden = carol_api
        .post(&json!({"status": "re", "in_reply_to_id": id(&private)}))
        .await;
    assert_error(&hidden, 404, "reply to a status carol cannot see");
    let reply = bob_api
        .posted(&json!({"status": "re: hello", "in_reply_to_id": public_id}))
        .await;
    assert_eq!(reply["in_reply_to_id"], json!(public_id));
    assert_eq!(reply["in_reply_to_account_id"], json!(alice.id.to_string()));
    let private_reply = api
        .posted(
            &json!({"status": "secret reply", "in_reply_to_id": id(&reply),
                        "visibility": "private"}),
        )
        .await;

    // Context: ancestors and descendants, filtered for each viewer.
    let ctx = bob_api
        .get(&format!("/api/v1/statuses/{}/context", id(&reply)))
        .await
        .assert_ok();
    assert_eq!(ctx.body["ancestors"][0]["id"], json!(public_id));
    assert_eq!(ctx.body["descendants"][0]["id"], json!(id(&private_reply)));
    let ctx = carol_api
        .get(&format!("/api/v1/statuses/{public_id}/context"))
        .await;
    let shown: Vec<&Value> = ctx.body["descendants"].as_array().unwrap().iter().collect();
    assert_eq!(
        shown.len(),
        1,
        "carol sees the public reply only: {shown:?}"
    );
    assert_eq!(shown[0]["id"], json!(id(&reply)));
    assert_error(
        &carol_api
            .get(&format!("/api/v1/statuses/{}/context", id(&private)))
            .await,
        404,
        "context of a hidden status",
    );

    // Form bodies read like JSON.
    let f = api
        .form(
            Method::POST,
            "/api/v1/statuses",
            "status=from+a+form&visibility=private&sensitive=1&poll[options][]=a&poll[options][]=b&poll[expires_in]=600",
        )
        .await.assert_ok();
    assert_eq!(f.body["visibility"], "private");
    assert_eq!(f.body["sensitive"], true);
    assert_eq!(f.body["poll"]["options"][1]["title"], "b");

    // Unknown ids and malformed ones are 404.
    for p in [
        format!("/api/v1/statuses/{}", Uuid::now_v7()),
        "/api/v1/statuses/nope".to_string(),
    ] {
        assert_error(&api.get(&p).await, 404, &p);
    }
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idempotency_keys_answer_the_first_status() {
    let inst = Instance::start("all", &[]).await;
    let (_, token) = inst.account("alice").await;
    let http = reqwest::Client::new();
    let post = |key: &'static str, text: &'static str| {
        http.post(format!("{}/api/v1/statuses", inst.base))
            .bearer_auth(&token)
            .header("Idempotency-Key", key)
            .json(&json!({ "status": text }))
            .send()
    };
    let first: Value = post("k1", "once").await.unwrap().json().await.unwrap();
    let again: Value = post("k1", "once, retried")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(first["id"], again["id"]);
    assert!(again["content"].as_str().unwrap().contains("once"));
    assert_eq!(inst.count("SELECT count(*) FROM statuses").await, 1);
    let other: Value = post("k2", "twice").await.unwrap().json().await.unwrap();
    assert_ne!(other["id"], first["id"]);
    // Concurrent retries store one status.
    let (a, b) = tokio::join!(post("k3", "race"), post("k3", "race"));
    let (a, b): (Value, Value) = (
        a.unwrap().json().await.unwrap(),
        b.unwrap().json().await.unwrap(),
    );
    assert_eq!(a["id"], b["id"]);
    assert_eq!(inst.count("SELECT count(*) FROM statuses").await, 3);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edits_history_source_and_deletion() {
    let inst = Instance::start("all", &[]).await;
    let [(_, _, api), (bob, _, bob_api)] = users(&inst, ["alice", "bob"]).await;

    let st = api.posted(&json!({"status": "first @bob"})).await;
    let sid = id(&st);
    let path = format!("/api/v1/statuses/{sid}");
    let edited = api
        .call(
            Method::PUT,
            &path,
            &json!({"status": "second @bob", "spoiler_text": "now with cw"}),
        )
        .await
        .assert_ok();
    assert!(edited.body["content"].as_str().unwrap().contains("second"));
    assert_eq!(edited.body["spoiler_text"], "now with cw");
    assert!(edited.body["edited_at"].is_string());
    // Others cannot edit: 403 for what they can see (as the polls API answered).
    let theirs = bob_api
        .call(Method::PUT, &path, &json!({"status": "mine now"}))
        .await;
    assert_error(&theirs, 403, "bob edits alice's status");
    let too_long = api
        .call(
            Method::PUT,
            &path,
            &json!({"status": "z".repeat(MAX_STATUS_CHARS + 1)}),
        )
        .await;
    assert_error(&too_long, 422, "an edit over the limit");

    let history = api.get(&format!("{path}/history")).await.assert_ok();
    let versions = history.body.as_array().unwrap();
    assert_eq!(versions.len(), 2, "{versions:?}");
    assert!(versions[0]["content"].as_str().unwrap().contains("first"));
    assert_eq!(versions[0]["spoiler_text"], "");
    assert!(versions[1]["content"].as_str().unwrap().contains("second"));
    let source = api.get(&format!("{path}/source")).await;
    assert_eq!(
        source.body,
        json!({"id": sid, "text": "second @bob", "spoiler_text": "now with cw"})
    );
    assert_error(
        &bob_api.get(&format!("{path}/source")).await,
        404,
        "someone else's source",
    );
    // The mention notified bob once, edits included.
    let mentions = scalar(
        &inst,
        "SELECT count(*) FROM notifications WHERE type = 'mention' AND post_id = $1::uuid",
        &sid,
    )
    .await;
    assert_eq!(mentions, 1);

    // Deletion: only the author; the answer carries the text; everything about it goes.
    assert_error(
        &bob_api.act(Method::DELETE, &path).await,
        404,
        "bob deletes alice's status",
    );
    let gone = api.act(Method::DELETE, &path).await.assert_ok();
    assert_eq!(gone.body["id"], json!(sid));
    assert_eq!(gone.body["text"], "second @bob");
    assert_error(&api.get(&path).await, 404, "a deleted status");
    assert_error(&api.act(Method::DELETE, &path).await, 404, "deleting twice");
    for sql in [
        "SELECT count(*) FROM home_feed WHERE post_id = $1::uuid",
        "SELECT count(*) FROM notifications WHERE post_id = $1::uuid",
        "SELECT count(*) FROM status_edits WHERE status_id = $1::uuid",
    ] {
        assert_eq!(scalar(&inst, sql, &sid).await, 0, "{sql}");
    }
    let uri = st["uri"].as_str().unwrap();
    assert_eq!(
        scalar(
            &inst,
            "SELECT count(*) FROM status_tombstones WHERE uri = $1",
            uri
        )
        .await,
        1
    );
    let fetched = reqwest::Client::new()
        .get(uri)
        .header("accept", "application/activity+json")
        .send()
        .await
        .unwrap();
    assert_eq!(fetched.status(), 410);
    let _ = bob;
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn followers_receive_creates_updates_and_deletes_addressed_by_visibility() {
    let dir = support::files::temp_dir("hollo-statuses");
    let inst = Instance::on_disk(&dir, &[]).await;
    let peer = Peer::start().await;
    let (_, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));
    let public = "https://www.w3.org/ns/activitystreams#Public";
    let followers = inst.fed.followers("alice");

    peer_follows_accepted(&inst, &peer, "alice").await;

    // A public status with media: to Public, cc followers, the Documents attached.
    let (content_type, body) = form(&[("file", Some(("a.png", "image/png")), &png(32, 16))]);
    let upload = reqwest::Client::new()
        .post(format!("{}/api/v1/media", inst.base))
        .bearer_auth(&token)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 200);
    let media: Value = upload.json().await.unwrap();
    let st = api
        .posted(&json!({"status": "with a picture", "media_ids": [media["id"]]}))
        .await;
    assert_eq!(st["media_attachments"][0]["id"], media["id"]);
    let uri = st["uri"].as_str().unwrap().to_string();
    let create = received(&peer, "Create", |b| b["object"]["id"] == json!(uri)).await;
    assert!(has(&create["to"], public), "{create}");
    assert!(has(&create["cc"], &followers), "{create}");
    let doc = &create["object"]["attachment"][0];
    assert_eq!(doc["type"], "Document", "{create}");
    assert_eq!(doc["mediaType"], "image/png");
    // The same upload cannot go on a second status.
    assert_error(
        &api.post(&json!({"status": "again", "media_ids": [media["id"]]}))
            .await,
        422,
        "media attached elsewhere",
    );

    // Unlisted: to followers, cc Public. Private: followers only, and its URI is not served.
    let unlisted = api
        .posted(&json!({"status": "quiet", "visibility": "unlisted"}))
        .await;
    let c = received(&peer, "Create", |b| b["object"]["id"] == unlisted["uri"]).await;
    assert!(has(&c["to"], &followers) && has(&c["cc"], public), "{c}");
    let private = api
        .posted(&json!({"status": "friends", "visibility": "private"}))
        .await;
    let c = received(&peer, "Create", |b| b["object"]["id"] == private["uri"]).await;
    assert!(has(&c["to"], &followers), "{c}");
    assert!(!has(&c["to"], public) && !has(&c["cc"], public), "{c}");
    let http = reqwest::Client::new();
    let fetch = |u: String| {
        http.get(u)
            .header("accept", "application/activity+json")
            .send()
    };
    assert_eq!(
        fetch(private["uri"].as_str().unwrap().into())
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(fetch(uri.clone()).await.unwrap().status(), 200);

    // Direct, mentioning the peer: addressed to it alone.
    let direct = api
        .posted(&json!({"status": format!("hi @{}", peer.handle()), "visibility": "direct"}))
        .await;
    let c = received(&peer, "Create", |b| b["object"]["id"] == direct["uri"]).await;
    assert_eq!(c["to"], json!([peer.actor()]), "{c}");
    assert!(!has(&c["cc"], &followers), "{c}");

    // Edit → Update; delete → Delete of a Tombstone.
    api.edit(&id(&st), &json!({"status": "with a better caption"}))
        .await
        .assert_ok();
    let update = received(&peer, "Update", |b| b["object"]["id"] == json!(uri)).await;
    assert!(
        update["object"]["content"]
            .as_str()
            .unwrap()
            .contains("better caption")
    );
    assert_eq!(update["object"]["attachment"][0]["type"], "Document");
    api.act(Method::DELETE, &format!("/api/v1/statuses/{}", id(&st)))
        .await
        .assert_ok();
    let delete = received(&peer, "Delete", |b| b["object"]["id"] == json!(uri)).await;
    assert_eq!(delete["object"]["type"], "Tombstone");
    assert!(has(&delete["to"], public), "{delete}");

    // A remote reply shows in the thread.
    let note = json!({
        "id": peer.iri("/notes/r1"), "type": "Note", "attributedTo": peer.actor(),
        "content": "<p>remote reply</p>", "inReplyTo": unlisted["uri"],
        "to": [public], "published": "2026-12-01T10:00:00Z",
    });
    let create = json!({
        "id": peer.new_id("creates"), "type": "Create", "actor": peer.actor(),
        "object": note, "to": [public],
    });
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &create).await, 202);
    let ctx = eventually(WAIT, "the remote reply is in the context", || async {
        let ctx = api
            .get(&format!("/api/v1/statuses/{}/context", id(&unlisted)))
            .await;
        (ctx.body["descendants"].as_array().map(Vec::len) == Some(1)).then_some(ctx.body)
    })
    .await;
    assert_eq!(ctx["descendants"][0]["uri"], json!(peer.iri("/notes/r1")));
    let remote_id = id(&ctx["descendants"][0]);
    let up = api
        .get(&format!("/api/v1/statuses/{remote_id}/context"))
        .await;
    assert_eq!(up.body["ancestors"][0]["id"], json!(id(&unlisted)));
    let _ = std::fs::remove_dir_all(&dir);
    inst.shutdown().await;
}

/// Mastodon 4.3's `GET /api/v1/statuses?id[]=…`: the statuses the reader may read, in the
/// order asked, each once; a followers-only post of someone the reader does not follow, a
/// direct message to someone else, an unknown and a malformed id are left out (R-MAPI-VIS),
/// for an account and anonymously alike; more than 80 ids is a 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_statuses_at_once_only_those_the_reader_may_read() {
    let inst = Instance::start("all", &[]).await;
    let [(_, _, alice_api), (_, _, bob_api), (carol, _, _)] =
        users(&inst, ["alice", "bob", "carol"]).await;
    let public = id(&alice_api.posted(&json!({"status": "for all"})).await);
    let private = id(&alice_api
        .posted(&json!({"status": "followers", "visibility": "private"}))
        .await);
    let direct = id(&alice_api
        .posted(&json!({"status": "@carol just you", "visibility": "direct"}))
        .await);
    let unlisted = id(&alice_api
        .posted(&json!({"status": "quiet", "visibility": "unlisted"}))
        .await);
    let query = [
        &direct,
        &unlisted,
        &private,
        &public,
        &unlisted,
        &Uuid::now_v7().to_string(),
        &"not-an-id".to_string(),
    ]
    .iter()
    .map(|i| format!("id[]={i}"))
    .collect::<Vec<_>>()
    .join("&");
    let path = format!("/api/v1/statuses?{query}");
    let ids = |a: &support::api::Answer| -> Vec<String> {
        a.body.as_array().expect("a list").iter().map(id).collect()
    };

    let mine = alice_api.get(&path).await.assert_ok();
    assert_eq!(ids(&mine), [&*direct, &unlisted, &private, &public]);
    assert_eq!(mine.body[0]["visibility"], "direct");
    let bobs = bob_api.get(&path).await.assert_ok();
    assert_eq!(ids(&bobs), [&*unlisted, &public], "{}", bobs.body);
    let anon = Client::new(&inst, None).get(&path).await.assert_ok();
    assert_eq!(ids(&anon), [&*unlisted, &public], "{}", anon.body);
    let _ = carol;

    let many = unknown_ids_query(81);
    let a = alice_api.get(&format!("/api/v1/statuses?{many}")).await;
    assert_error(&a, 422, "81 ids");
}
