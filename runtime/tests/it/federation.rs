//! Federation against a test fediverse peer (R-AP-1): an axum server on 127.0.0.1 with its own
//! key pair, WebFinger, an actor, and inboxes that verify *our* signatures (fetching our key
//! from our actor document over HTTP) and record what they got. Each test has its own
//! database and its own instance (web router + activity consumer in-process); the crash test
//! runs the real binary and kills it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use axum::http::HeaderMap;
use hollo_runtime::accounts::{self, Account};
use hollo_runtime::federation::outbound::delivery::queue_activity;
use hollo_runtime::federation::transport::fetch::{FetchClient, FetchError};
use hollo_runtime::federation::transport::signature::{self, SigningKey};
use hollo_runtime::federation::{Federation, actors::actor, crypto::keys};
use reqwest::Method;
use rsa::RsaPrivateKey;
use serde_json::{Value, json};
use sqlx::PgPool;
use support::api::{Answer, Client, header_text};
use support::eventually;
use support::node::Instance;
use support::peer::{ActorAccess, Peer, Reply};
use support::process::{self, Hollo};
use uuid::Uuid;

const SECRET: &str = "federation-test-secret-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(30);

fn forger_key() -> &'static RsaPrivateKey {
    static KEY: OnceLock<RsaPrivateKey> = OnceLock::new();
    KEY.get_or_init(|| keys::generate().expect("forger key"))
}

// ---------------------------------------------------------------------------------------------
// Our instance: nodes from `Node::builder` (tests/support/node.rs) — a web node, or an `all`
// node when the test needs the queues consumed.

async fn instance(consume: bool, allow_private: bool) -> Instance {
    instance_with(consume, allow_private, 4).await
}

async fn instance_with(consume: bool, allow_private: bool, per_host: usize) -> Instance {
    let per_host = per_host.to_string();
    Instance::start(
        if consume { "all" } else { "web" },
        &[
            ("SECRET_KEY", SECRET),
            (
                "ALLOW_PRIVATE_ADDRESS",
                if allow_private { "true" } else { "false" },
            ),
            ("DELIVERY_HOST_CONCURRENCY", per_host.as_str()),
        ],
    )
    .await
}

// The test peer is support::peer::Peer (shared with the other suites).

async fn delivery_state(pool: &PgPool, activity: &str) -> Option<(String, i32)> {
    sqlx::query_as("SELECT state, attempts FROM deliveries WHERE activity_id = $1")
        .bind(activity)
        .fetch_optional(pool)
        .await
        .expect("delivery row")
}

/// Stores an activity from `account` to the peer and queues its delivery, as the outbox does.
async fn send_to_peer(inst: &Instance, account: &Account, peer: &Peer) -> String {
    let id = inst.fed.new_activity_id();
    let activity = json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": id, "type": "Follow",
        "actor": inst.fed.actor_iri(&account.username), "object": peer.actor(),
    });
    let mut tx = inst.pool.begin().await.expect("tx");
    let n = queue_activity(
        &mut tx,
        &inst.fed,
        account.id,
        &activity,
        &[peer.recipient()],
    )
    .await
    .expect("queue");
    tx.commit().await.expect("commit");
    assert_eq!(n, 1);
    id
}

// ---------------------------------------------------------------------------------------------

/// An `all` node that may reach private addresses, a peer, and alice with her token.
async fn alice_and_peer() -> (Instance, Peer, Account, String) {
    let inst = instance(true, true).await;
    let peer = Peer::start().await;
    let (alice, token) = inst.account("alice").await;
    (inst, peer, alice, token)
}

/// `POST /api/v1/follows` of `handle`, as `token`.
async fn follow_handle(inst: &Instance, token: &str, handle: &str) -> Answer {
    Client::bearer(inst, token)
        .call(
            Method::POST,
            "/api/v1/follows",
            &json!({ "account": handle }),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn we_follow_the_peer_and_receive_its_accept() {
    let (inst, peer, alice, token) = alice_and_peer().await;

    let resp = follow_handle(&inst, &token, &peer.handle()).await;
    assert_eq!(resp.status, 200);
    let rel = resp.body;
    assert_eq!(rel["state"], "pending");
    assert_eq!(rel["actor"], peer.actor());
    let follow_id = rel["id"].as_str().expect("id").to_string();

    let got = eventually(WAIT, "the peer receives our Follow", || async {
        peer.received().into_iter().find(|r| r.ty() == "Follow")
    })
    .await;
    assert_eq!(got.verified, Ok(()), "our signature verifies at the peer");
    assert_eq!(got.id(), follow_id);
    assert_eq!(got.body["actor"], inst.fed.actor_iri("alice"));
    assert_eq!(got.path, "/inbox", "shared inbox preferred");

    // An account the peer does not know, or a server that is not there: 422 with the reason.
    for (handle, reason) in [
        (peer.handle_of("missing"), "404"),
        ("ghost@127.0.0.1:1".to_string(), "unreachable"),
    ] {
        let resp = follow_handle(&inst, &token, &handle).await;
        assert_eq!(resp.status, 422, "{handle}");
        let err = resp.body;
        assert!(
            err["error"].as_str().unwrap_or_default().contains(reason),
            "{handle}: {err}"
        );
    }

    // Following again while pending sends nothing new.
    let again = follow_handle(&inst, &token, &peer.handle()).await.body;
    assert_eq!(again["id"], follow_id);

    let accept = json!({
        "id": peer.new_id("accepts"), "type": "Accept", "actor": peer.actor(),
        "object": { "id": follow_id, "type": "Follow", "actor": inst.fed.actor_iri("alice"), "object": peer.actor() },
    });
    assert_eq!(
        peer.post(&inst.fed.inbox(&alice.username), &accept).await,
        202
    );
    support::api::until_follow_accepted(&inst, alice.id, &peer.actor(), "our follow is accepted")
        .await;
    assert_eq!(peer.count_of("Follow"), 1);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_peer_follows_us_and_gets_an_accept() {
    let inst = instance(true, true).await;
    let peer = Peer::start().await;
    inst.account("bob").await;
    let follow_id = peer.new_id("follows");
    let follow = json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": follow_id, "type": "Follow", "actor": peer.actor(), "object": inst.fed.actor_iri("bob"),
    });
    assert_eq!(peer.post(&inst.fed.inbox("bob"), &follow).await, 202);

    let accept = eventually(WAIT, "the peer receives an Accept", || async {
        peer.received().into_iter().find(|r| r.ty() == "Accept")
    })
    .await;
    assert_eq!(accept.verified, Ok(()));
    assert_eq!(accept.body["object"]["id"], follow_id);
    assert_eq!(accept.body["actor"], inst.fed.actor_iri("bob"));
    assert_eq!(
        inst.count("SELECT count(*) FROM followers").await,
        1,
        "the follower is stored"
    );

    // Undo Follow removes the follower.
    let undo = json!({
        "id": peer.new_id("undos"), "type": "Undo", "actor": peer.actor(),
        "object": { "id": follow_id, "type": "Follow", "actor": peer.actor(), "object": inst.fed.actor_iri("bob") },
    });
    assert_eq!(peer.post(&format!("{}/inbox", inst.base), &undo).await, 202);
    inst.until_count(
        "the follower is removed",
        "SELECT count(*) FROM followers",
        |c| c == 0,
    )
    .await;
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_signed_create_posted_twice_is_stored_once_and_later_activities_apply() {
    let inst = instance(true, true).await;
    let peer = Peer::start().await;
    inst.account("carol").await;
    let note_id = peer.new_id("notes");
    let create = peer.create(json!({
        "id": note_id, "type": "Note", "attributedTo": peer.actor(), "content": "<p>hello</p>",
        "published": "2026-11-30T10:00:00Z",
        "replies": { "id": format!("{note_id}/replies"), "type": "Collection" },
    }));
    let inbox = inst.fed.inbox("carol");
    assert_eq!(peer.post(&inbox, &create).await, 202);
    assert_eq!(
        peer.post(&inbox, &create).await,
        202,
        "a duplicate is accepted"
    );
    inst.until_count(
        "the Create is processed",
        "SELECT count(*) FROM inbox_activities WHERE processed_at IS NOT NULL",
        |c| c == 1,
    )
    .await;
    let (n, replies): (i64, Option<String>) =
        sqlx::query_as("SELECT count(*), max(replies_iri) FROM remote_posts")
            .fetch_one(&inst.pool)
            .await
            .expect("posts");
    assert_eq!(n, 1);
    assert_eq!(replies, Some(format!("{note_id}/replies")));
    assert_eq!(inst.count("SELECT count(*) FROM inbox_activities").await, 1);

    // Update, Like, Announce, Block and Delete each apply once.
    let update = json!({
        "id": peer.new_id("updates"), "type": "Update", "actor": peer.actor(),
        "object": { "id": note_id, "type": "Note", "attributedTo": peer.actor(), "content": "<p>edited</p>" },
    });
    let like = json!({ "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(), "object": note_id });
    let announce = json!({ "id": peer.new_id("announces"), "type": "Announce", "actor": peer.actor(), "object": note_id });
    let block = json!({ "id": peer.new_id("blocks"), "type": "Block", "actor": peer.actor(), "object": inst.fed.actor_iri("carol") });
    for a in [&update, &like, &announce, &block] {
        assert_eq!(peer.post(&inbox, a).await, 202);
    }
    eventually(WAIT, "all processed", || async {
        (inst
            .count("SELECT count(*) FROM inbox_activities WHERE processed_at IS NULL")
            .await
            == 0
            && inst.count("SELECT count(*) FROM inbox_activities").await == 5)
            .then_some(())
    })
    .await;
    let content: Option<String> = sqlx::query_scalar("SELECT content FROM remote_posts")
        .fetch_one(&inst.pool)
        .await
        .expect("content");
    assert_eq!(content.as_deref(), Some("<p>edited</p>"));
    assert_eq!(
        inst.count("SELECT count(*) FROM remote_interactions").await,
        3
    );
    let delete = json!({
        "id": peer.new_id("deletes"), "type": "Delete", "actor": peer.actor(),
        "object": { "id": note_id, "type": "Tombstone" },
    });
    assert_eq!(peer.post(&inbox, &delete).await, 202);
    inst.until_count(
        "the note is deleted",
        "SELECT count(*) FROM remote_posts WHERE deleted_at IS NOT NULL",
        |c| c == 1,
    )
    .await;
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_stale_or_undigested_requests_get_401() {
    let inst = instance(false, true).await;
    let peer = Peer::start().await;
    inst.account("dave").await;
    let inbox = inst.fed.inbox("dave");
    let activity = json!({ "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(), "object": "https://x.example/1" });
    let body = serde_json::to_vec(&activity).expect("json");

    // Right key id, wrong key: a forgery.
    let forged = SigningKey::new(peer.key().key_id, forger_key()).expect("forger key");
    let (status, err) = peer
        .post_with(&inbox, &body, &forged, SystemTime::now(), |_| {})
        .await;
    assert_eq!(status, 401, "{err}");
    assert!(err["error"].is_string());

    let stale = SystemTime::now() - Duration::from_secs(13 * 3600);
    let (status, _) = peer
        .post_with(&inbox, &body, &peer.key(), stale, |_| {})
        .await;
    assert_eq!(status, 401, "stale Date");

    let (status, _) = peer
        .post_with(&inbox, &body, &peer.key(), SystemTime::now(), |h| {
            h.insert(
                "digest",
                signature::digest_header(b"other").parse().expect("header"),
            );
        })
        .await;
    assert_eq!(status, 401, "wrong Digest");

    let (status, _) = peer
        .post_with(&inbox, &body, &peer.key(), SystemTime::now(), |h| {
            h.remove("signature");
        })
        .await;
    assert_eq!(status, 401, "no signature");

    // Signed by the peer but claiming another actor.
    let impostor = json!({ "id": peer.new_id("likes"), "type": "Like", "actor": format!("{}/users/other", peer.state.base), "object": "https://x.example/1" });
    assert_eq!(peer.post(&inbox, &impostor).await, 401);

    assert_eq!(inst.count("SELECT count(*) FROM inbox_activities").await, 0);
    // The genuine request passes.
    assert_eq!(peer.post(&inbox, &activity).await, 202);

    // Now the peer's key is held verified in memory (keys::VerifiedKeys): a forgery under the
    // same key id must still fail, and so must a replay of a genuine signature on another body.
    let again = json!({ "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(), "object": "https://x.example/2" });
    let again_body = serde_json::to_vec(&again).expect("json");
    let (status, err) = peer
        .post_with(&inbox, &again_body, &forged, SystemTime::now(), |_| {})
        .await;
    assert_eq!(status, 401, "forged after a cached key: {err}");
    let (status, _) = peer
        .post_with(&inbox, &again_body, &peer.key(), SystemTime::now(), |h| {
            h.insert(
                "digest",
                signature::digest_header(&body).parse().expect("header"),
            );
        })
        .await;
    assert_eq!(status, 401, "a digest of another body after a cached key");
    assert_eq!(inst.count("SELECT count(*) FROM inbox_activities").await, 1);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotated_keys_are_refetched_and_updates_rotate_them() {
    let inst = instance(true, true).await;
    let peer = Peer::start().await;
    inst.account("hank").await;
    let inbox = inst.fed.inbox("hank");
    let like = |p: &Peer| json!({ "id": p.new_id("likes"), "type": "Like", "actor": p.actor(), "object": "https://x.example/1" });
    let wrong = keys::public_key_pem(forger_key()).expect("pem");
    let cache_wrong_key = |age: &'static str| {
        let pool = inst.pool.clone();
        let (key_id, owner, wrong) = (peer.key().key_id, peer.actor(), wrong.clone());
        async move {
            sqlx::query(
                "INSERT INTO remote_keys (key_id, owner, public_key_pem, fetched_at)
                 VALUES ($1, $2, $3, now() - $4::interval)
                 ON CONFLICT (key_id) DO UPDATE SET public_key_pem = EXCLUDED.public_key_pem,
                    fetched_at = EXCLUDED.fetched_at",
            )
            .bind(key_id)
            .bind(owner)
            .bind(wrong)
            .bind(age)
            .execute(&pool)
            .await
            .expect("cache key");
        }
    };
    // A freshly cached key that does not verify is not refetched: 401.
    cache_wrong_key("0 seconds").await;
    assert_eq!(peer.post(&inbox, &like(&peer)).await, 401);
    // An older one is refetched once (the remote rotated its key): accepted.
    cache_wrong_key("2 minutes").await;
    assert_eq!(peer.post(&inbox, &like(&peer)).await, 202);

    // The peer announces a new key with Update Person, signed with its current key.
    let new_pem = keys::public_key_pem(forger_key()).expect("pem");
    let update = json!({
        "id": peer.new_id("updates"), "type": "Update", "actor": peer.actor(),
        "object": {
            "id": peer.actor(), "type": "Person", "inbox": format!("{}/inbox", peer.actor()),
            "publicKey": { "id": peer.key().key_id, "owner": peer.actor(), "publicKeyPem": new_pem },
        },
    });
    assert_eq!(peer.post(&inbox, &update).await, 202);
    eventually(WAIT, "the key is rotated", || async {
        let pem: Option<String> =
            sqlx::query_scalar("SELECT public_key_pem FROM remote_keys WHERE key_id = $1")
                .bind(peer.key().key_id)
                .fetch_optional(&inst.pool)
                .await
                .ok()
                .flatten();
        (pem.as_deref() == Some(new_pem.as_str())).then_some(())
    })
    .await;
    let rotated = SigningKey::new(peer.key().key_id, forger_key()).expect("rotated key");
    let body = serde_json::to_vec(&like(&peer)).expect("json");
    let (status, _) = peer
        .post_with(&inbox, &body, &rotated, SystemTime::now(), |_| {})
        .await;
    assert_eq!(status, 202, "signed with the rotated key");
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn oversize_malformed_and_unknown_account_requests_get_4xx() {
    let inst = instance(false, true).await;
    let peer = Peer::start().await;
    let (_, erin_token) = inst.account("erin").await;
    let inbox = inst.fed.inbox("erin");

    let big = vec![b' '; 2 * 1024 * 1024];
    let (status, err) = peer
        .post_with(&inbox, &big, &peer.key(), SystemTime::now(), |_| {})
        .await;
    assert_eq!(status, 413, "{err}");
    assert!(err["error"].is_string());

    let (status, err) = peer
        .post_with(&inbox, b"{not json", &peer.key(), SystemTime::now(), |_| {})
        .await;
    assert_eq!(status, 400, "{err}");
    assert!(err["error"].as_str().unwrap_or_default().contains("JSON"));

    let like =
        json!({ "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(), "object": "x" });
    assert_eq!(peer.post(&inst.fed.inbox("nobody"), &like).await, 404);

    let wf = reqwest::get(format!(
        "{}/.well-known/webfinger?resource=acct:nobody@{}",
        inst.base, inst.fed.domain
    ))
    .await
    .expect("webfinger");
    assert_eq!(wf.status().as_u16(), 404);
    let wf: Value = reqwest::get(format!(
        "{}/.well-known/webfinger?resource=acct:erin@{}",
        inst.base, inst.fed.domain
    ))
    .await
    .expect("webfinger")
    .json()
    .await
    .expect("jrd");
    assert_eq!(wf["links"][0]["href"], inst.fed.actor_iri("erin"));
    let doc: Value = reqwest::get(inst.fed.actor_iri("erin"))
        .await
        .expect("actor")
        .json()
        .await
        .expect("actor json");
    assert_eq!(doc["inbox"], inst.fed.inbox("erin"));
    assert_eq!(
        doc["endpoints"]["sharedInbox"],
        format!("{}/inbox", inst.base)
    );
    assert!(
        doc["publicKey"]["publicKeyPem"]
            .as_str()
            .unwrap_or_default()
            .contains("BEGIN PUBLIC KEY")
    );

    let unauth = Client::new(&inst, None)
        .call(
            Method::POST,
            "/api/v1/follows",
            &json!({ "account": peer.handle() }),
        )
        .await;
    assert_eq!(unauth.status, 401);
    let erin = Client::bearer(&inst, &erin_token);
    let me = erin.get("/api/v1/accounts/verify_credentials").await;
    assert_eq!(me.status, 200);
    assert_eq!(me.body["username"], "erin");
    // Account tokens are not admin tokens; with ADMIN_TOKEN unset admin endpoints answer 403.
    let admin = erin.get("/api/v1/admin/accounts").await;
    assert_eq!(admin.status, 403);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_500_then_200_retries_one_stored_delivery() {
    let (inst, peer, alice, _) = alice_and_peer().await;
    peer.script([Reply::Status(500)]);
    let id = send_to_peer(&inst, &alice, &peer).await;
    eventually(WAIT, "delivered after a retry", || async {
        (delivery_state(&inst.pool, &id).await == Some(("delivered".into(), 2))).then_some(())
    })
    .await;
    let got = peer.received();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|r| r.id() == id && r.verified.is_ok()));
    assert_eq!(
        inst.count("SELECT count(*) FROM outbox_activities").await,
        1
    );
    assert_eq!(inst.count("SELECT count(*) FROM deliveries").await, 1);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_429_waits_for_retry_after_and_then_delivers() {
    let (inst, peer, alice, _) = alice_and_peer().await;
    peer.script([Reply::RetryAfter(429, 1)]);
    let id = send_to_peer(&inst, &alice, &peer).await;
    eventually(WAIT, "delivered after the 429", || async {
        delivery_state(&inst.pool, &id)
            .await
            .filter(|(s, _)| s == "delivered")
    })
    .await;
    assert_eq!(peer.received().len(), 2);
    assert_eq!(
        inst.count("SELECT count(*) FROM hollo_failed_message")
            .await,
        0
    );
    inst.shutdown().await;
}

/// The retry budget belongs to the delivery, not to the queue message: a 429 put-back enqueues
/// a fresh message, and the failures before it still count. Nine recorded failures, a 429, a
/// 500: that 500 is the tenth failure, and the delivery fails for good instead of starting over.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_put_back_does_not_restart_the_retry_budget() {
    let (inst, peer, alice, _) = alice_and_peer().await;
    peer.script([Reply::RetryAfter(429, 1), Reply::Status(500)]);
    let id = inst.fed.new_activity_id();
    let activity = json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": id, "type": "Follow",
        "actor": inst.fed.actor_iri(&alice.username), "object": peer.actor(),
    });
    let mut tx = inst.pool.begin().await.expect("tx");
    queue_activity(&mut tx, &inst.fed, alice.id, &activity, &[peer.recipient()])
        .await
        .expect("queue");
    // As if nine attempts had failed already (their retries take minutes to play out).
    sqlx::query("UPDATE deliveries SET attempts = 9 WHERE activity_id = $1")
        .bind(&id)
        .execute(&mut *tx)
        .await
        .expect("prior failures");
    tx.commit().await.expect("commit");
    eventually(WAIT, "the delivery failed for good", || async {
        delivery_state(&inst.pool, &id)
            .await
            .filter(|(s, _)| s == "failed")
    })
    .await;
    assert_eq!(
        delivery_state(&inst.pool, &id).await,
        Some(("failed".into(), 10))
    );
    inst.until_count(
        "the message given up",
        "SELECT count(*) FROM hollo_failed_message",
        |c| c == 1,
    )
    .await;
    // Nothing is left to retry it: no message in the queue, two requests in all.
    assert_eq!(
        inst.count("SELECT count(*) FROM hollo_activity_message_v1")
            .await,
        0
    );
    assert_eq!(peer.received().len(), 2, "the 429 and the tenth failure");
    inst.shutdown().await;
}

/// The peer follows `account`, as an accepted incoming Follow stores it.
async fn peer_follows(inst: &Instance, peer: &Peer, account: &Account) {
    actor::fetch_actor(&inst.pool, &inst.fed, &peer.actor(), None, None)
        .await
        .expect("actor");
    sqlx::query(
        "INSERT INTO followers (account_id, actor_iri, follow_activity_id) VALUES ($1, $2, $3)",
    )
    .bind(account.id)
    .bind(peer.actor())
    .bind(peer.new_id("follows"))
    .execute(&inst.pool)
    .await
    .expect("follower");
}

/// A new status reaches the author's followers: a poll as a signed `Create` of a `Question`
/// (options, current counts, end time), committed with the status; its URI serves the same
/// object to anyone who fetches it; a status without a poll is a `Note`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_poll_reaches_followers_as_a_question_and_its_uri_serves_it() {
    let (inst, peer, alice, token) = alice_and_peer().await;
    peer_follows(&inst, &peer, &alice).await;
    let client = reqwest::Client::new();
    let created = Client::bearer(&inst, &token)
        .post(&json!({ "status": "Tea or coffee?",
                       "poll": { "options": ["tea", "coffee"], "expires_in": 3600 } }))
        .await
        .body;
    let uri = created["uri"].as_str().expect("uri").to_string();
    let create = eventually(WAIT, "the Create at the follower's inbox", || async {
        peer.received().into_iter().find(|r| r.ty() == "Create")
    })
    .await;
    assert!(create.verified.is_ok(), "{:?}", create.verified);
    let q = &create.body["object"];
    assert_eq!(q["type"], "Question", "{q}");
    assert_eq!(q["id"], uri.as_str());
    assert_eq!(q["attributedTo"], inst.fed.actor_iri(&alice.username));
    let names: Vec<&str> = q["oneOf"]
        .as_array()
        .expect("oneOf")
        .iter()
        .filter_map(|o| o["name"].as_str())
        .collect();
    assert_eq!(names, ["tea", "coffee"]);
    assert_eq!(q["oneOf"][0]["replies"]["totalItems"], 0);
    assert!(q["endTime"].is_string() && q["closed"].is_null(), "{q}");
    assert_eq!(create.body["actor"], inst.fed.actor_iri(&alice.username));

    // The URI serves the object (as ActivityPub JSON) to a remote fetch.
    let served = support::api::ap_doc(&uri).await;
    assert_eq!(served["type"], "Question");
    assert_eq!(served["oneOf"], q["oneOf"]);
    // Moving the end: followers get an Update with the new endTime.
    let moved = Client::bearer(&inst, &token)
        .edit(
            created["id"].as_str().expect("id"),
            &json!({ "poll": { "expires_in": 7200 } }),
        )
        .await;
    assert_eq!(moved.status, 200);
    let update = eventually(WAIT, "the Update after the edit", || async {
        peer.received().into_iter().find(|r| r.ty() == "Update")
    })
    .await;
    assert!(update.verified.is_ok(), "{:?}", update.verified);
    let later = update.body["object"]["endTime"]
        .as_str()
        .unwrap_or_default();
    assert!(
        later > q["endTime"].as_str().unwrap_or_default(),
        "{later} after {}",
        q["endTime"]
    );
    // An id that is not a status, or under another account's path, is 404.
    let wrong = uri.replace("/users/alice/", "/users/bob/");
    assert_eq!(
        client
            .get(&wrong)
            .send()
            .await
            .expect("get")
            .status()
            .as_u16(),
        404
    );

    // A status without a poll is a Note.
    let plain = Client::bearer(&inst, &token)
        .post(&json!({ "status": "hello" }))
        .await
        .body;
    let note = eventually(WAIT, "the Create of the note", || async {
        peer.received()
            .into_iter()
            .find(|r| r.ty() == "Create" && r.body["object"]["id"] == plain["uri"])
    })
    .await;
    assert_eq!(note.body["object"]["type"], "Note");
    assert_eq!(
        inst.count("SELECT count(*) FROM outbox_activities WHERE body->>'type' = 'Create'")
            .await,
        2
    );
    inst.shutdown().await;
}

/// When a poll ends, the worker that writes its notifications also queues the closing `Update`
/// of the `Question` (final counts, `closed`) to the followers and remote voters, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ended_poll_sends_its_closing_update_once() {
    let (inst, peer, alice, token) = alice_and_peer().await;
    peer_follows(&inst, &peer, &alice).await;
    // The `all` node consumes the task queue too: the poll's wakeup runs there.
    let created = Client::bearer(&inst, &token)
        .post(&json!({ "status": "Quick one",
                       "poll": { "options": ["yes", "no"], "expires_in": 2 } }))
        .await
        .body;
    let poll: Uuid = created["poll"]["id"]
        .as_str()
        .and_then(|p| p.parse().ok())
        .expect("poll id");
    // The follower voted "no" (as an inbox vote records it).
    sqlx::query("INSERT INTO poll_votes (poll_id, actor_iri, choice) VALUES ($1, $2, 1)")
        .bind(poll)
        .bind(peer.actor())
        .execute(&inst.pool)
        .await
        .expect("vote");
    let update = eventually(Duration::from_secs(30), "the closing Update", || async {
        peer.received().into_iter().find(|r| r.ty() == "Update")
    })
    .await;
    assert!(update.verified.is_ok(), "{:?}", update.verified);
    let q = &update.body["object"];
    assert_eq!(q["type"], "Question");
    assert_eq!(q["id"], created["uri"]);
    assert!(q["closed"].is_string() && q["endTime"].is_null(), "{q}");
    assert_eq!(q["oneOf"][1]["replies"]["totalItems"], 1, "{q}");
    assert_eq!(q["votersCount"], 1);
    assert_eq!(
        inst.count("SELECT count(*) FROM outbox_activities WHERE body->>'type' = 'Update'")
            .await,
        1,
        "one closing Update, to the follower who also voted"
    );
    assert_eq!(
        inst.count("SELECT count(*) FROM deliveries WHERE activity_id LIKE '%/updates/closed'")
            .await,
        1
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_410_marks_the_actor_gone_without_retrying() {
    let (inst, peer, alice, _) = alice_and_peer().await;
    actor::fetch_actor(&inst.pool, &inst.fed, &peer.actor(), None, None)
        .await
        .expect("actor");
    peer.script([Reply::Status(410)]);
    let id = send_to_peer(&inst, &alice, &peer).await;
    eventually(WAIT, "the delivery is gone", || async {
        delivery_state(&inst.pool, &id)
            .await
            .filter(|(s, _)| s == "gone")
    })
    .await;
    let gone: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT gone_at FROM remote_actors WHERE iri = $1")
            .bind(peer.actor())
            .fetch_one(&inst.pool)
            .await
            .expect("actor row");
    assert!(gone.is_some());
    assert_eq!(peer.received().len(), 1);
    // A gone actor gets no further deliveries.
    let later = json!({ "id": inst.fed.new_activity_id(), "type": "Like", "actor": inst.fed.actor_iri("alice"), "object": "x" });
    let mut tx = inst.pool.begin().await.expect("tx");
    let n = queue_activity(&mut tx, &inst.fed, alice.id, &later, &[peer.recipient()])
        .await
        .expect("queue");
    tx.commit().await.expect("commit");
    assert_eq!(n, 0);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_ssrf_guard_refuses_loopback_and_metadata_without_allow_private() {
    let peer = Peer::start().await;
    let guard = FetchClient::new(false).expect("client");
    for url in [
        peer.actor(),
        "https://127.0.0.1/users/x".to_string(),
        "https://169.254.169.254/latest/meta-data/".to_string(),
        format!(
            "https://localhost:{}/users/peer",
            peer.host().rsplit(':').next().unwrap_or("1")
        ),
    ] {
        let err = guard.get_object(&url, None).await.unwrap_err();
        assert!(matches!(err, FetchError::Refused(_)), "{url}: {err}");
    }
    // Even with private addresses allowed, the metadata address stays refused.
    let dev = FetchClient::new(true).expect("client");
    let err = dev
        .get_object("http://169.254.169.254/latest/meta-data/", None)
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Refused(_)), "{err}");
    assert!(dev.get_object(&peer.actor(), None).await.is_ok());
    // Every redirect hop goes through the guard again (WebFinger may leave its origin).
    let redirect = format!("{}/redirect-to-metadata", peer.state.base);
    let err = dev.get_jrd(&redirect).await.unwrap_err();
    assert!(matches!(err, FetchError::Refused(_)), "{err}");
    // An ActivityPub document may not leave its origin at all (R-AP-1).
    let err = dev.get_object(&redirect, None).await.unwrap_err();
    assert!(
        err.to_string().contains("redirected to another origin"),
        "{err}"
    );

    // The follow API reports the refusal as 422 with the reason.
    let inst = instance(false, false).await;
    let (_, token) = inst.account("frank").await;
    let resp = follow_handle(&inst, &token, &peer.handle()).await;
    assert_eq!(resp.status, 422);
    let err = resp.body;
    assert!(
        err["error"]
            .as_str()
            .unwrap_or_default()
            .contains("refused"),
        "{err}"
    );
    assert!(peer.received().is_empty());
    assert_eq!(inst.count("SELECT count(*) FROM follows").await, 0);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hanging_host_gets_at_most_its_bound_and_other_hosts_keep_flowing() {
    // One delivery at a time per host: the slow peer holds one, the rest are put back
    // (no slot held while waiting) and the other peer is served meanwhile.
    let inst = instance_with(true, true, 1).await;
    let slow = Peer::start().await;
    let fast = Peer::start().await;
    let (alice, _) = inst.account("alice").await;
    slow.script([Reply::Hang]);
    for _ in 0..3 {
        send_to_peer(&inst, &alice, &slow).await;
    }
    eventually(WAIT, "the slow peer holds one delivery", || async {
        (!slow.received().is_empty()).then_some(())
    })
    .await;
    let id = send_to_peer(&inst, &alice, &fast).await;
    eventually(WAIT, "the other host is delivered", || async {
        delivery_state(&inst.pool, &id)
            .await
            .filter(|(s, _)| s == "delivered")
    })
    .await;
    assert_eq!(
        slow.received().len(),
        1,
        "the slow host never had two deliveries at once"
    );
    // Waiting ones give up their slot after a short wait and are put back for later.
    inst.until_count(
        "busy-host deliveries put back",
        "SELECT count(*) FROM deliveries WHERE last_error LIKE 'host busy%'",
        |c| c >= 1,
    )
    .await;
    assert_eq!(slow.received().len(), 1);
    inst.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// The real binary: a worker killed mid-delivery.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_killed_mid_delivery_redelivers_the_same_activity_id() {
    let inst = instance(false, true).await;
    let peer = Peer::start().await;
    let env = inst.process_env(
        "worker",
        &[
            ("ALLOW_PRIVATE_ADDRESS", "true"),
            ("QUEUE_LEASE_SECONDS", "3"),
            ("QUEUE_POLL_MS", "200"),
            ("WORKER_POOL_MAX", "4"),
            ("ITEM_LOCK_POOL_SIZE", "1"),
        ],
    );
    // The account comes from the CLI, as an operator would make it.
    let out = process::run(&["account", "create", "gina"], &env);
    assert!(out.status.success());
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(token.len(), 43, "one bearer token on stdout");
    let (gina, scopes) = accounts::by_token(&inst.pool, &token)
        .await
        .expect("db")
        .expect("the token names the account");
    assert_eq!(
        scopes.to_string(),
        "follow profile push read write",
        "a CLI token holds every top-level scope"
    );
    assert_eq!(gina.username, "gina");

    peer.script([Reply::Hang]);
    let id = send_to_peer(&inst, &gina, &peer).await;
    let first = Hollo::serve(&env);
    eventually(WAIT, "the first delivery reaches the peer", || async {
        (!peer.received().is_empty()).then_some(())
    })
    .await;
    drop(first); // SIGKILL while the peer holds the request open
    let _second = Hollo::serve(&env);
    eventually(Duration::from_secs(60), "the redelivery", || async {
        delivery_state(&inst.pool, &id)
            .await
            .filter(|(s, _)| s == "delivered")
    })
    .await;
    let got = peer.received();
    assert!(got.len() >= 2, "{got:?}");
    assert!(
        got.iter().all(|r| r.id() == id && r.verified.is_ok()),
        "{got:?}"
    );
    assert_eq!(inst.count("SELECT count(*) FROM deliveries").await, 1);
    inst.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// The instance actor: the shared inbox has no account to sign its key fetches with.

fn like_from(peer: &Peer) -> Value {
    json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(),
        "object": "https://x.example/1",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_authorized_fetch_peer_is_verified_at_the_shared_inbox_via_the_instance_actor() {
    let inst = instance(false, true).await;
    let peer = Peer::start().await;
    peer.set_access(ActorAccess::SignedOnly);

    // The peer really is in authorized-fetch mode: an unsigned GET of its actor is refused.
    let unsigned = reqwest::Client::new()
        .get(peer.actor())
        .header("accept", "application/activity+json")
        .send()
        .await
        .expect("unsigned get");
    assert_eq!(unsigned.status().as_u16(), 401);
    assert_eq!(peer.actor_gets()[0].key_id, None);

    let like = like_from(&peer);
    let body = serde_json::to_vec(&like).expect("json");
    let (status, resp) = peer
        .post_with(
            &format!("{}/inbox", inst.base),
            &body,
            &peer.key(),
            SystemTime::now(),
            |_| {},
        )
        .await;
    assert_eq!(status, 202, "{resp}");

    // Our key fetch was signed as the instance actor, and the peer checked that signature
    // against the publicKeyPem of the /actor document it fetched from us over HTTP.
    let gets = peer.actor_gets();
    assert_eq!(
        gets.len(),
        2,
        "the unsigned probe and our one key fetch: {gets:?}"
    );
    let ours = &gets[1];
    assert_eq!(
        ours.key_id.as_deref(),
        Some(format!("{}/actor#main-key", inst.base).as_str())
    );
    assert_eq!(ours.verified, Ok(()), "{gets:?}");
    assert_eq!(
        inst.count("SELECT count(*) FROM inbox_activities WHERE account_id IS NULL")
            .await,
        1
    );
    assert_eq!(inst.count("SELECT count(*) FROM remote_keys").await, 1);

    // The instance actor's own inbox takes activities like the shared inbox; the key is cached
    // now, so no second fetch.
    assert_eq!(
        peer.post(&format!("{}/actor/inbox", inst.base), &like_from(&peer))
            .await,
        202
    );
    assert_eq!(peer.actor_gets().len(), 2);
    assert_eq!(inst.count("SELECT count(*) FROM inbox_activities").await, 2);

    // A personal inbox still signs its key fetches with the account's own key.
    inst.account("gina").await;
    sqlx::query("DELETE FROM remote_keys")
        .execute(&inst.pool)
        .await
        .expect("forget the key");
    inst.fed.verified_keys.clear();
    assert_eq!(
        peer.post(&inst.fed.inbox("gina"), &like_from(&peer)).await,
        202
    );
    let gets = peer.actor_gets();
    assert_eq!(gets.len(), 3, "{gets:?}");
    assert_eq!(
        gets[2].key_id.as_deref(),
        Some(inst.fed.key_id("gina").as_str())
    );
    assert_eq!(gets[2].verified, Ok(()));
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_instance_actor_is_an_application_with_one_key_pair_however_many_processes_start() {
    let inst = instance(false, true).await;
    // Two more "processes": their own Federation (own in-memory cache) and their own pool.
    let mut others = Vec::new();
    for _ in 0..2 {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(&inst.url)
            .await
            .expect("second pool");
        let fed = Federation::new(&inst.base, SECRET, true, 4).expect("federation");
        others.push((fed, pool));
    }

    // All first uses at once: the HTTP document (this process) and the other two processes.
    let get_actor = async {
        let resp = reqwest::Client::new()
            .get(format!("{}/actor", inst.base))
            .header("accept", "application/activity+json")
            .send()
            .await
            .expect("GET /actor");
        let ct = header_text(resp.headers(), "content-type");
        let status = resp.status().as_u16();
        let doc: Value = resp.json().await.expect("actor json");
        (status, ct, doc)
    };
    let ((status, ct, doc), k1, k2) = tokio::join!(
        get_actor,
        others[0].0.instance_key(&others[0].1),
        others[1].0.instance_key(&others[1].1),
    );
    assert_eq!(status, 200, "{doc}");
    assert!(ct.starts_with("application/activity+json"), "{ct}");
    let (k1, k2) = (k1.expect("first process"), k2.expect("second process"));

    let iri = format!("{}/actor", inst.base);
    assert_eq!(doc["id"], iri);
    assert_eq!(doc["type"], "Application");
    assert_eq!(doc["preferredUsername"], inst.fed.domain);
    assert_eq!(doc["inbox"], format!("{iri}/inbox"));
    assert_eq!(doc["manuallyApprovesFollowers"], true);
    assert_eq!(
        doc["endpoints"]["sharedInbox"],
        format!("{}/inbox", inst.base)
    );
    assert_eq!(doc["publicKey"]["id"], format!("{iri}#main-key"));
    assert_eq!(doc["publicKey"]["owner"], iri);
    let pem = doc["publicKey"]["publicKeyPem"]
        .as_str()
        .expect("publicKeyPem");
    assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----"), "{pem}");
    keys::public_key_from_pem(pem).expect("a parsable RSA public key");

    // One key pair, and every process signs with it.
    assert_eq!(inst.count("SELECT count(*) FROM instance_actor").await, 1);
    for k in [k1, k2] {
        assert_eq!(k.public_key_pem, pem);
        assert_eq!(k.signing.key_id, format!("{iri}#main-key"));
        let u = url::Url::parse("http://peer.example/users/peer").expect("url");
        let mut headers = HeaderMap::new();
        signature::sign_request(&k.signing, &Method::GET, &u, None, &mut headers).expect("sign");
        // The HTTP client adds Host on the wire; the signature covers it.
        headers.insert("host", signature::host_header(&u).parse().expect("header"));
        signature::prepare_verification("GET", u.path(), &headers, None, SystemTime::now())
            .expect("well-formed")
            .verify_pem(pem)
            .expect("signed with the published key");
    }

    // Stored encrypted as account keys are: not plain PKCS#8, and it decrypts under SECRET_KEY.
    let (id, enc): (Uuid, Vec<u8>) =
        sqlx::query_as("SELECT id, private_key_enc FROM instance_actor")
            .fetch_one(&inst.pool)
            .await
            .expect("row");
    use rsa::pkcs8::DecodePrivateKey;
    assert!(RsaPrivateKey::from_pkcs8_der(&enc).is_err());
    let key = inst.fed.cipher().decrypt(id, &enc).expect("decrypts");
    assert_eq!(keys::public_key_pem(&key).expect("pem"), pem);

    // WebFinger names it acct:<domain>@<domain>, as Mastodon names its instance actor.
    let wf: Value = reqwest::get(format!(
        "{}/.well-known/webfinger?resource=acct:{}@{}",
        inst.base, inst.fed.domain, inst.fed.domain
    ))
    .await
    .expect("webfinger")
    .json()
    .await
    .expect("jrd");
    assert_eq!(wf["links"][0]["href"], iri, "{wf}");

    // Served again from the process's cache, unchanged.
    let again: Value = reqwest::get(&iri)
        .await
        .expect("GET /actor")
        .json()
        .await
        .expect("json");
    assert_eq!(again, doc);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_peer_that_refuses_our_signed_key_fetch_gets_a_clear_401_and_nothing_is_stored() {
    let inst = instance(false, true).await;
    let peer = Peer::start().await;
    peer.set_access(ActorAccess::RefuseAll);

    let body = serde_json::to_vec(&like_from(&peer)).expect("json");
    let (status, err) = peer
        .post_with(
            &format!("{}/inbox", inst.base),
            &body,
            &peer.key(),
            SystemTime::now(),
            |_| {},
        )
        .await;
    assert_eq!(status, 401, "{err}");
    let msg = err["error"].as_str().unwrap_or_default();
    assert!(
        msg.contains(&format!("cannot fetch key {}", peer.key().key_id)),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("signed as {}/actor#main-key", inst.base)),
        "{msg}"
    );
    assert!(msg.contains("HTTP 401"), "{msg}");
    assert!(msg.contains("refused our signed fetch"), "{msg}");

    // The peer saw a well-signed fetch from our instance actor and refused it anyway.
    let gets = peer.actor_gets();
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert_eq!(
        gets[0].key_id.as_deref(),
        Some(format!("{}/actor#main-key", inst.base).as_str())
    );
    assert_eq!(gets[0].verified, Ok(()));

    for table in ["inbox_activities", "remote_keys", "remote_actors"] {
        assert_eq!(
            inst.count(&format!("SELECT count(*) FROM {table}")).await,
            0,
            "{table}"
        );
    }
    inst.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Impersonation (R-AP-1): a hostile server tries to post in the peer's name.

/// The attacker is another `Peer` (its own address or port), serving the documents it is
/// given: `serve` places one and returns its URL.
trait Serve {
    fn serve(&self, path: &str, doc: Value) -> String;
}

impl Serve for Peer {
    fn serve(&self, path: &str, doc: Value) -> String {
        self.doc(path, doc);
        self.iri(path)
    }
}

fn forger_pem() -> String {
    keys::public_key_pem(forger_key()).expect("pem")
}

/// A `Create(Note)` in the peer's name, as the attacker would like us to store it.
fn forged_create(peer: &Peer) -> (String, Value) {
    let note = peer.new_id("notes");
    let create = json!({
        "id": peer.new_id("creates"), "type": "Create", "actor": peer.actor(),
        "object": { "id": note, "type": "Note", "attributedTo": peer.actor(), "content": "forged" },
    });
    (note, create)
}

/// Posts `activity` signed by the forger's key named `key_id`; expects 401 and nothing stored
/// in the peer's name.
async fn assert_forgery_refused(inst: &Instance, peer: &Peer, key_id: &str, activity: &Value) {
    let forged = SigningKey::new(key_id.to_string(), forger_key()).expect("key");
    let body = serde_json::to_vec(activity).expect("json");
    let (status, err) = peer
        .post_with(
            &format!("{}/inbox", inst.base),
            &body,
            &forged,
            SystemTime::now(),
            |_| {},
        )
        .await;
    assert_eq!(status, 401, "{key_id}: {err}");
    assert_eq!(inst.count("SELECT count(*) FROM inbox_activities").await, 0);
    assert_eq!(inst.count("SELECT count(*) FROM remote_posts").await, 0);
    let forged_keys: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM remote_keys WHERE key_id = $1 OR public_key_pem = $2",
    )
    .bind(key_id)
    .bind(forger_pem())
    .fetch_one(&inst.pool)
    .await
    .expect("keys");
    assert_eq!(forged_keys, 0, "no forged key is cached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_on_another_port_of_the_victims_host_cannot_speak_for_it() {
    let inst = instance(false, true).await;
    let peer = Peer::start().await;
    // Same host name (127.0.0.1), another port: another server.
    let attacker = Peer::start().await;
    let key_id = format!("{}/key.json", attacker.base());
    attacker.serve(
        "/key.json",
        json!({ "id": key_id, "owner": peer.actor(), "publicKeyPem": forger_pem() }),
    );
    let (_, create) = forged_create(&peer);
    assert_forgery_refused(&inst, &peer, &key_id, &create).await;

    // An actor document there claiming the victim's id is no better.
    let actor_url = attacker.serve(
        "/actors/peer",
        json!({
            "id": peer.actor(), "type": "Person", "inbox": format!("{}/inbox", attacker.base()),
            "publicKey": { "id": format!("{}/actors/peer#main-key", attacker.base()),
                           "owner": peer.actor(), "publicKeyPem": forger_pem() },
        }),
    );
    assert_forgery_refused(&inst, &peer, &format!("{actor_url}#main-key"), &create).await;
    assert_eq!(inst.count("SELECT count(*) FROM remote_actors").await, 0);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_open_redirect_on_the_victims_host_neither_verifies_nor_poisons_the_caches() {
    let inst = instance(false, true).await;
    let peer = Peer::start().await;
    // The victim is known first: its real actor and key are cached.
    assert_eq!(
        peer.post(&format!("{}/inbox", inst.base), &like_from(&peer))
            .await,
        202
    );
    let cached = || async {
        sqlx::query_as::<_, (String, String)>(
            "SELECT a.inbox, k.public_key_pem FROM remote_actors a
               JOIN remote_keys k ON k.owner = a.iri WHERE a.iri = $1",
        )
        .bind(peer.actor())
        .fetch_one(&inst.pool)
        .await
        .expect("victim cached")
    };
    let before = cached().await;
    sqlx::query("DELETE FROM inbox_activities")
        .execute(&inst.pool)
        .await
        .expect("reset");

    // Another host answers through the victim's open redirect, claiming the victim's ids.
    let attacker = Peer::start_on("127.0.0.2").await;
    let poisoned = attacker.serve(
        "/actor.json",
        json!({
            "id": peer.actor(), "type": "Person", "inbox": format!("{}/users/peer/inbox", peer.state.base),
            "endpoints": { "sharedInbox": format!("{}/inbox", attacker.base()) },
            "publicKey": { "id": format!("{}#main-key", peer.actor()), "owner": peer.actor(),
                           "publicKeyPem": forger_pem() },
        }),
    );
    let mut key_id = url::Url::parse(&format!("{}/redirect", peer.state.base)).expect("url");
    key_id.query_pairs_mut().append_pair("to", &poisoned);
    let (_, create) = forged_create(&peer);
    assert_forgery_refused(&inst, &peer, key_id.as_str(), &create).await;
    assert_eq!(
        cached().await,
        before,
        "the victim's cached actor and key are untouched"
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_document_counts_only_when_its_owner_lists_it_and_it_is_activitypub() {
    let inst = instance(false, true).await;
    let peer = Peer::start().await;
    let key_id = format!("{}/uploads/key.json", peer.state.base);
    let upload =
        json!({ "id": key_id, "owner": peer.actor(), "publicKeyPem": forger_pem() }).to_string();
    let (_, create) = forged_create(&peer);

    // An upload on the victim's own origin, served as text/plain (CVE-2024-23832's class).
    peer.state.uploads.lock().expect("uploads").insert(
        "key.json".into(),
        ("text/plain".into(), upload.clone().into_bytes()),
    );
    assert_forgery_refused(&inst, &peer, &key_id, &create).await;

    // Served as ActivityPub, but the owner's actor does not list that key.
    peer.state.uploads.lock().expect("uploads").insert(
        "key.json".into(),
        ("application/activity+json".into(), upload.into_bytes()),
    );
    assert_forgery_refused(&inst, &peer, &key_id, &create).await;
    inst.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Content (R-AP-1): remote HTML is sanitized before it is stored or served; our users'
// text is published escaped.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn remote_html_is_sanitized_and_local_text_is_published_escaped() {
    let (inst, peer, alice, token) = alice_and_peer().await;
    let inbox = format!("{}/inbox", inst.base);
    let parent = peer.new_id("notes");
    let reply = peer.new_id("notes");
    for (id, in_reply_to, content, url) in [
        (&parent, Value::Null, json!("<p>root</p>"), json!(parent)),
        (
            &reply,
            json!(parent),
            json!(
                r#"<p>hi<script>alert(1)</script><img src=x onerror="alert(2)"> <a href="javascript:alert(3)" onclick="x()">link</a></p>"#
            ),
            json!("javascript:alert(4)"),
        ),
    ] {
        let create = json!({
            "id": peer.new_id("creates"), "type": "Create", "actor": peer.actor(),
            "object": { "id": id, "type": "Note", "attributedTo": peer.actor(),
                        "inReplyTo": in_reply_to, "content": content, "url": url,
                        "summary": "<b onmouseover=x()>cw</b>" },
        });
        assert_eq!(peer.post(&inbox, &create).await, 202);
    }
    inst.until_count(
        "both notes stored",
        "SELECT count(*) FROM remote_posts",
        |c| c == 2,
    )
    .await;
    let (content, summary, url): (Option<String>, Option<String>, Option<String>) =
        sqlx::query_as("SELECT content, summary, url FROM remote_posts WHERE iri = $1")
            .bind(&reply)
            .fetch_one(&inst.pool)
            .await
            .expect("reply");
    let content = content.expect("content");
    assert_eq!(
        content,
        r#"<p>hi <a rel="nofollow noopener noreferrer">link</a></p>"#
    );
    assert_eq!(summary.as_deref(), Some("<b>cw</b>"));
    assert_eq!(url, None, "a javascript: url is not kept");

    // What the client API serves is the sanitized form.
    let parent_id: Uuid = sqlx::query_scalar("SELECT id FROM remote_posts WHERE iri = $1")
        .bind(&parent)
        .fetch_one(&inst.pool)
        .await
        .expect("parent id");
    let ctx = Client::bearer(&inst, &token)
        .get(&format!("/api/v1/statuses/{parent_id}/context"))
        .await
        .body;
    let served = ctx["descendants"][0].to_string();
    for bad in ["script", "onerror", "onclick", "javascript:", "<img"] {
        assert!(!served.contains(bad), "{bad} in {served}");
    }

    // Our user's text goes out escaped: what they typed is shown, never markup.
    peer_follows(&inst, &peer, &alice).await;
    Client::bearer(&inst, &token)
        .post(&json!({ "status": "<b>bold</b> & <script>alert(1)</script>\nline two" }))
        .await
        .assert_ok();
    let create = eventually(WAIT, "the Create at the follower's inbox", || async {
        peer.received().into_iter().find(|r| r.ty() == "Create")
    })
    .await;
    assert_eq!(
        create.body["object"]["content"],
        "<p>&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;alert(1)&lt;/script&gt;<br>line two</p>"
    );
    inst.shutdown().await;
}

/// R-AP-1: the inbox is no oracle for what names resolve to on our side. A key id on a
/// host our guard refuses (here `localhost`, which resolves to loopback) gets the same bare
/// "key fetch refused" as one that does not resolve at all; the detail is only in our log.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_key_fetch_reveals_nothing_about_our_network() {
    let inst = instance(false, false).await;
    let peer = Peer::start().await;
    let body = serde_json::to_vec(&like_from(&peer)).expect("json");
    let mut answers = Vec::new();
    for key_id in [
        "https://localhost:1/users/x#main-key",
        "https://127.0.0.1/users/x#main-key",
        "https://no-such-host.invalid/users/x#main-key",
    ] {
        let key = SigningKey::new(key_id.to_string(), forger_key()).expect("key");
        let (status, err) = peer
            .post_with(
                &format!("{}/inbox", inst.base),
                &body,
                &key,
                SystemTime::now(),
                |_| {},
            )
            .await;
        assert_eq!(status, 401, "{key_id}: {err}");
        let msg = err["error"].as_str().unwrap_or_default().to_string();
        assert!(msg.ends_with("key fetch refused"), "{key_id}: {msg}");
        // What the client itself sent (the key id) and our public URL (the signer) aside.
        let rest = msg.replace(key_id, "").replace(&inst.base, "");
        for leak in [
            "loopback",
            "127.0.0.1",
            "resolve",
            "private",
            "ALLOW_PRIVATE_ADDRESS",
        ] {
            assert!(!rest.contains(leak), "{key_id}: {leak} in {msg}");
        }
        answers.push(msg.replace(key_id, "KEY"));
    }
    assert!(
        answers.windows(2).all(|w| w[0] == w[1]),
        "every refusal reads the same: {answers:?}"
    );
    inst.shutdown().await;
}

/// R-API: `POST /api/v1/follows` is no oracle for what names resolve to on our
/// side either. Handles on a loopback name, a loopback address and a name that does not
/// resolve get the same 422 (less the handle the client sent), naming no address and no
/// guard rule; the detail is only in our log.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_follow_reveals_nothing_about_our_network() {
    let inst = instance(false, false).await;
    let (_, token) = inst.account("grace").await;
    let mut answers = Vec::new();
    for host in [
        "localhost:1",
        "127.0.0.1",
        "10.0.0.1",
        "no-such-host.invalid",
    ] {
        let handle = format!("x@{host}");
        let resp = follow_handle(&inst, &token, &handle).await;
        assert_eq!(resp.status, 422, "{handle}");
        let err = resp.body;
        let msg = err["error"].as_str().unwrap_or_default().to_string();
        let rest = msg.replace(&handle, "");
        for leak in [
            "loopback",
            "127.0.0.1",
            "10.0.0.1",
            "::1",
            "private",
            "address",
            "dns",
            "ALLOW_PRIVATE_ADDRESS",
            "failed to lookup",
        ] {
            assert!(!rest.contains(leak), "{handle}: {leak} in {msg}");
        }
        answers.push(rest);
    }
    assert!(
        answers.windows(2).all(|w| w[0] == w[1]),
        "every refusal reads the same: {answers:?}"
    );
    assert_eq!(inst.count("SELECT count(*) FROM follows").await, 0);
    inst.shutdown().await;
}
