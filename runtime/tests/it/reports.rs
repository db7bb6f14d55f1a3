//! Reports (R-MAPI-6, issue 32 item 4): `POST /api/v1/reports` refuses what Mastodon refuses
//! and stores nothing then; a report about a remote account is forwarded as a `Flag` from the
//! instance actor (the reporter unnamed), one about a local account is not; the admin lists,
//! shows, resolves and reopens them; a `Flag` another server sends about one of ours becomes a
//! report, once.

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Client, WAIT, assert_error, follow_each_other, received, token_with_scopes, users,
};
use support::eventually;
use support::node::Instance;
use support::peer::Peer;

const ADMIN: &str = "reports-admin-token-0123456789";
const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

fn admin(inst: &Instance) -> Client {
    Client::new(inst, Some(ADMIN))
}

async fn report(api: &Client, body: &Value) -> support::api::Answer {
    api.call(Method::POST, "/api/v1/reports", body).await
}

async fn reports_count(inst: &Instance) -> i64 {
    inst.count("SELECT count(*) FROM reports").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reports_are_checked_forwarded_listed_and_received() {
    let inst = Instance::start("all", &[("ADMIN_TOKEN", ADMIN)]).await;
    let peer = Peer::start_on("127.0.0.2").await;
    let [(alice, _, api), (bob, _, bobs)] = users(&inst, ["alice", "bob"]).await;
    let me = inst.fed.actor_iri("alice");

    // The peer's person and alice follow each other; the peer posts publicly to alice.
    let (peer_id, _) = follow_each_other(&inst, &api, &peer, "alice").await;
    let note = peer.new_id("notes");
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(),
        "content": "<p>buy now</p>", "published": "2026-12-01T10:00:00Z",
        "to": [PUBLIC], "cc": [me]
    }));
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &create).await, 202);
    let note_id: String = eventually(WAIT, "the peer's note at alice's home", || async {
        api.get("/api/v1/timelines/home").await.body[0]["id"]
            .as_str()
            .map(str::to_string)
    })
    .await;
    let mine = api.posted(&json!({ "status": "mine" })).await;
    let bobs_public = bobs.posted(&json!({ "status": "bob, public" })).await;
    let bobs_private = bobs
        .posted(&json!({ "status": "bob, followers only", "visibility": "private" }))
        .await;

    // Refused first, and nothing stored or sent.
    let anonymous = Client::new(&inst, None);
    assert_eq!(
        report(&anonymous, &json!({ "account_id": peer_id }))
            .await
            .status,
        401
    );
    let read_only = Client::new(
        &inst,
        Some(&token_with_scopes(&inst, alice.id, "read").await),
    );
    assert_error(
        &report(&read_only, &json!({ "account_id": peer_id })).await,
        403,
        "a token without write:reports",
    );
    let long = "x".repeat(1001);
    for (body, status, what) in [
        (json!({}), 422, "no account"),
        (json!({ "account_id": "not-an-id" }), 404, "a malformed id"),
        (
            json!({ "account_id": uuid::Uuid::now_v7().to_string() }),
            404,
            "an unknown account",
        ),
        (
            json!({ "account_id": alice.id.to_string() }),
            422,
            "oneself",
        ),
        (
            json!({ "account_id": peer_id, "comment": long }),
            422,
            "a comment over 1000 characters",
        ),
        (
            json!({ "account_id": peer_id, "category": "rude" }),
            422,
            "an unknown category",
        ),
        (
            json!({ "account_id": peer_id, "rule_ids": ["1"] }),
            422,
            "a rule this server does not have",
        ),
        (
            json!({ "account_id": peer_id, "forward": "maybe" }),
            422,
            "forward that is no boolean",
        ),
        (
            json!({ "account_id": peer_id, "status_ids": [mine["id"]] }),
            404,
            "a status that is not the target's",
        ),
        (
            json!({ "account_id": bob.id.to_string(), "status_ids": [bobs_private["id"]] }),
            404,
            "a status the reporter cannot read",
        ),
        (
            json!({ "account_id": peer_id, "status_ids": ["nope"] }),
            404,
            "a malformed status id",
        ),
    ] {
        assert_error(&report(&api, &body).await, status, what);
    }
    assert_eq!(reports_count(&inst).await, 0, "refusals store nothing");

    // A report about the remote account, as a form: forwarded as the instance actor's `Flag`.
    let made = api
        .form(
            Method::POST,
            "/api/v1/reports",
            &format!(
                "account_id={peer_id}&status_ids[]={note_id}&comment=spam+here&category=spam&forward=true"
            ),
        )
        .await.assert_ok();
    let r = &made.body;
    assert_eq!(r["category"], "spam");
    assert_eq!(r["comment"], "spam here");
    assert_eq!(r["forwarded"], true);
    assert_eq!(r["action_taken"], false);
    assert_eq!(r["status_ids"], json!([note_id]));
    assert_eq!(r["target_account"]["id"], peer_id.as_str());
    let flag = received(&peer, "Flag", |b| b["content"] == "spam here").await;
    assert_eq!(flag["actor"], format!("{}/actor", inst.base));
    assert_eq!(flag["object"], json!([peer.actor(), note]));
    assert!(
        !flag.to_string().contains("alice"),
        "the reporter is not named: {flag}"
    );

    // About a local account: stored, never sent anywhere (there is no other server).
    let local = report(
        &api,
        &json!({ "account_id": bob.id.to_string(), "status_ids": [bobs_public["id"]],
                 "comment": "bob again", "forward": true }),
    )
    .await
    .assert_ok();
    assert_eq!(local.body["forwarded"], false);
    assert_eq!(local.body["category"], "other");

    // The admin's list: only with ADMIN_TOKEN; open ones, newest first.
    assert_eq!(api.get("/api/v1/admin/reports").await.status, 401);
    let listed = admin(&inst).get("/api/v1/admin/reports").await.assert_ok();
    let list = listed.body.as_array().expect("a list").clone();
    assert_eq!(list.len(), 2, "{}", listed.body);
    assert_eq!(list[0]["id"], local.body["id"]);
    assert_eq!(list[0]["account"]["username"], "alice");
    assert_eq!(list[0]["target_account"]["username"], "bob");
    assert_eq!(list[0]["statuses"][0]["id"], bobs_public["id"]);
    assert_eq!(list[1]["target_account"]["domain"], json!(peer.host()));
    assert_eq!(list[1]["target_account"]["account"]["id"], peer_id.as_str());
    assert_eq!(list[1]["statuses"][0]["id"], note_id.as_str());

    // A `Flag` from the peer about alice and her post: a report of the peer's, once.
    let flag_id = peer.new_id("flags");
    let their_flag = json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": flag_id, "type": "Flag", "actor": peer.actor(),
        "content": "they spam", "object": [me, mine["uri"]],
    });
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &their_flag).await, 202);
    let theirs = eventually(WAIT, "the received Flag listed", || async {
        let all = admin(&inst).get("/api/v1/admin/reports").await.body;
        all.as_array()?
            .iter()
            .find(|r| r["comment"] == "they spam")
            .cloned()
    })
    .await;
    assert_eq!(theirs["target_account"]["username"], "alice");
    assert_eq!(theirs["account"]["account"]["id"], peer_id.as_str());
    assert_eq!(theirs["statuses"][0]["id"], mine["id"]);
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &their_flag).await, 202);
    inst.until_count(
        "the redelivery processed",
        "SELECT count(*) FROM inbox_activities WHERE processed_at IS NULL",
        |c| c == 0,
    )
    .await;
    assert_eq!(reports_count(&inst).await, 3, "one report per Flag");

    // Resolve and reopen; unknown and malformed ids are 404, a bad filter 422.
    let id = theirs["id"].as_str().expect("id");
    let path = |what: &str| format!("/api/v1/admin/reports/{id}/{what}");
    let resolved = admin(&inst)
        .act(Method::POST, &path("resolve"))
        .await
        .assert_ok();
    assert_eq!(resolved.body["action_taken"], true);
    let open = admin(&inst).get("/api/v1/admin/reports").await.body;
    assert_eq!(open.as_array().map(Vec::len), Some(2));
    let done = admin(&inst)
        .get("/api/v1/admin/reports?resolved=true")
        .await
        .body;
    assert_eq!(done[0]["id"], id);
    let reopened = admin(&inst).act(Method::POST, &path("reopen")).await;
    assert_eq!(reopened.body["action_taken"], false);
    assert_eq!(
        admin(&inst)
            .get(&format!("/api/v1/admin/reports/{id}"))
            .await
            .body["comment"],
        "they spam"
    );
    for bad in ["nope", &uuid::Uuid::now_v7().to_string()] {
        let a = admin(&inst)
            .get(&format!("/api/v1/admin/reports/{bad}"))
            .await;
        assert_error(&a, 404, bad);
    }
    assert_error(
        &admin(&inst)
            .get("/api/v1/admin/reports?resolved=maybe")
            .await,
        422,
        "resolved that is no boolean",
    );
    inst.shutdown().await;
}
