//! Quote posts (R-MAPI-6, issue 32 item 2) over HTTP: `quoted_status_id` on create under the
//! quoted author's policy, the Status `quote` and `quote_approval` rendered through the one
//! visibility rule, revoking, `quote` and `quoted_update` notifications; and with a remote
//! server, every inbound form (`quote`, `quoteUrl`, `_misskey_quote`, `quoteUri`), FEP-044f's
//! `QuoteRequest` / `Accept` + `QuoteAuthorization` both ways and the authorization's `Delete`.
//! Hostile cases first: quotes the policy refuses, a post the quoter may not read, a forged
//! authorization (it names another note) that must leave the quote unshown.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Answer, Client, WAIT, alice_and_peer, follow, follow_each_other, id, notifications_of,
    received, users,
};
use support::eventually;
use support::node::Instance;

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

/// The outcome of the inbox activity `id`, once it was processed.
async fn outcome_of(inst: &Instance, id: &Value) -> String {
    eventually(WAIT, &format!("{id} processed"), || async {
        sqlx::query_scalar::<_, Option<String>>(
            "SELECT outcome FROM inbox_activities WHERE id = $1",
        )
        .bind(id.as_str())
        .fetch_optional(&inst.pool)
        .await
        .expect("outcome")
        .flatten()
    })
    .await
}

async fn status(api: &Client, id: &str) -> Value {
    api.get(&format!("/api/v1/statuses/{id}")).await.body
}

/// `api` revokes the quote `quoting` of its status `quoted`.
async fn revoke(api: &Client, quoted: &Value, quoting: &Value) -> Answer {
    api.act(
        Method::POST,
        &format!(
            "/api/v1/statuses/{}/quotes/{}/revoke",
            id(quoted),
            id(quoting)
        ),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_quotes_follow_the_policy_and_the_visibility_rule() {
    let inst = Instance::start("all", &[]).await;
    let [(alice_account, _, alice), (_, _, bob), (_, _, carol)] =
        users(&inst, ["alice", "bob", "carol"]).await;

    let open = alice.posted(&json!({"status": "quote me"})).await;
    let closed = alice
        .posted(&json!({"status": "do not quote me", "quote_approval_policy": "nobody"}))
        .await;
    let fans = alice
        .posted(&json!({"status": "followers may quote", "quote_approval_policy": "followers"}))
        .await;
    let private = alice
        .posted(&json!({"status": "followers only", "visibility": "private"}))
        .await;
    assert_eq!(open["quote_approval"]["automatic"], json!(["public"]));
    assert_eq!(closed["quote_approval"]["automatic"], json!([]));
    assert_eq!(open["quote_approval"]["current_user"], "automatic");

    // Refused first: an unknown policy, the author's "nobody", "followers" to a non-follower
    // (422); a post bob may not read is the same 404 as no post.
    let bad = bob
        .post(&json!({"status": "x", "quoted_status_id": id(&open), "quote_approval_policy": "friends"}))
        .await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    for refused in [&closed, &fans] {
        let a = bob
            .post(&json!({"status": "quoting", "quoted_status_id": id(refused)}))
            .await;
        assert_eq!(a.status, 422, "{}", a.body);
    }
    let a = bob
        .post(&json!({"status": "quoting", "quoted_status_id": id(&private)}))
        .await;
    assert_eq!(a.status, 404, "{}", a.body);
    assert_eq!(
        status(&bob, &id(&closed)).await["quote_approval"]["current_user"],
        "denied"
    );
    assert_eq!(
        status(&bob, &id(&fans)).await["quote_approval"]["current_user"],
        "denied"
    );
    // A follower may quote a "followers" post.
    follow(&carol, &alice_account.id.to_string()).await;
    assert_eq!(
        status(&carol, &id(&fans)).await["quote_approval"]["current_user"],
        "automatic"
    );
    let by_follower = carol
        .posted(&json!({"status": "a fan's quote", "quoted_status_id": id(&fans)}))
        .await;
    assert_eq!(by_follower["quote"]["state"], "accepted", "{by_follower}");

    // Allowed: the quote shows the quoted status; Hollo's `quote_id` works too.
    let quoting = bob
        .posted(&json!({"status": "look at this", "quoted_status_id": id(&open)}))
        .await;
    assert_eq!(quoting["quote"]["state"], "accepted", "{quoting}");
    assert_eq!(quoting["quote"]["quoted_status"]["id"], open["id"]);
    assert_eq!(
        quoting["quote"]["quoted_status"]["content"],
        open["content"]
    );
    let second = carol
        .posted(&json!({"status": "me too", "quote_id": id(&open)}))
        .await;
    assert_eq!(second["quote"]["quoted_status"]["id"], open["id"]);
    // Carol's quote of the followers-only-quotable post, bob's and carol's of the open one.
    let n = eventually(WAIT, "alice's quote notifications", || async {
        let n = notifications_of(&alice, "quote").await;
        (n.len() == 3).then_some(n)
    })
    .await;
    assert!(
        n.iter().any(|x| x["status"]["id"] == quoting["id"]),
        "{n:?}"
    );
    let listed = alice
        .get(&format!("/api/v1/statuses/{}/quotes", id(&open)))
        .await;
    assert_eq!(listed.status, 200);
    assert_eq!(
        listed.body.as_array().map(Vec::len),
        Some(2),
        "{}",
        listed.body
    );
    // Only the author lists who quoted them.
    assert_eq!(
        bob.get(&format!("/api/v1/statuses/{}/quotes", id(&open)))
            .await
            .status,
        404
    );

    // A quote inside a quote is shallow.
    let nested = carol
        .posted(&json!({"status": "deeper", "quoted_status_id": id(&quoting)}))
        .await;
    let inner = &nested["quote"]["quoted_status"];
    assert_eq!(inner["id"], quoting["id"]);
    assert_eq!(inner["quote"]["state"], "accepted");
    assert_eq!(inner["quote"]["quoted_status_id"], open["id"]);
    assert!(inner["quote"].get("quoted_status").is_none(), "{inner}");

    // The author may quote their own followers-only post; who may not read it sees the
    // quote as `unauthorized`, without the post.
    let own = alice
        .posted(&json!({"status": "my own", "quoted_status_id": id(&private)}))
        .await;
    assert_eq!(own["quote"]["quoted_status"]["id"], private["id"]);
    let seen_by_bob = status(&bob, &id(&own)).await;
    assert_eq!(
        seen_by_bob["quote"]["state"], "unauthorized",
        "{seen_by_bob}"
    );
    assert!(seen_by_bob["quote"]["quoted_status"].is_null());
    let anonymous = Client::new(&inst, None);
    let seen = status(&anonymous, &id(&own)).await;
    assert!(seen["quote"]["quoted_status"].is_null(), "{seen}");

    // An edit of the quoted post tells those who quote it.
    alice
        .edit(&id(&open), &json!({"status": "quote me, edited"}))
        .await
        .assert_ok();
    eventually(WAIT, "bob's quoted_update", || async {
        let n = notifications_of(&bob, "quoted_update").await;
        (n.len() == 1).then_some(())
    })
    .await;

    // Revoking: only the quoted author, and then the quote shows no post.
    let not_his = revoke(&carol, &open, &quoting).await;
    assert_eq!(not_his.status, 404, "{}", not_his.body);
    assert_eq!(
        status(&bob, &id(&quoting)).await["quote"]["state"],
        "accepted"
    );
    let revoked = revoke(&alice, &open, &quoting).await.assert_ok();
    assert_eq!(revoked.body["quote"]["state"], "revoked");
    let now = status(&bob, &id(&quoting)).await;
    assert_eq!(now["quote"]["state"], "revoked");
    assert!(now["quote"]["quoted_status"].is_null());

    // The quoted post deleted: its quotes say so, without it.
    alice
        .act(Method::DELETE, &format!("/api/v1/statuses/{}", id(&open)))
        .await
        .assert_ok();
    let carols = status(&carol, &id(&second)).await;
    assert_eq!(carols["quote"]["state"], "deleted", "{carols}");
    assert!(carols["quote"]["quoted_status"].is_null());
}

/// The status at `uri` on the home timeline, once it is there.
async fn by_uri(api: &Client, uri: &str) -> Value {
    eventually(WAIT, &format!("{uri} at home"), || async {
        let home = api.get("/api/v1/timelines/home?limit=40").await.body;
        home.as_array()?.iter().find(|s| s["uri"] == uri).cloned()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quotes_cross_with_a_remote_server_and_forged_authorizations_do_not_hold() {
    let (inst, peer, _, api) = alice_and_peer().await;
    follow_each_other(&inst, &api, &peer, "alice").await;
    let inbox = inst.fed.inbox("alice");

    // A remote post without a quote policy (software before FEP-044f), and one with one.
    let legacy = peer.iri("/notes/legacy");
    peer.doc(
        "/notes/legacy",
        json!({
            "id": legacy, "type": "Note", "attributedTo": peer.actor_of("bob"), "to": [PUBLIC],
            "content": "<p>legacy</p>", "published": "2026-12-01T09:00:00Z",
        }),
    );
    let guarded = peer.iri("/notes/guarded");
    peer.doc(
        "/notes/guarded",
        json!({
            "id": guarded, "type": "Note", "attributedTo": peer.actor_of("bob"), "to": [PUBLIC],
            "content": "<p>guarded</p>", "published": "2026-12-01T09:00:00Z",
            "interactionPolicy": { "canQuote": { "automaticApproval": [PUBLIC] } },
        }),
    );
    let post = api.posted(&json!({"status": "ours to quote"})).await;
    let our_uri = post["uri"].as_str().expect("uri").to_string();

    // Notes quoting them, in each form the fediverse sends.
    let quoting = |key: &str, quoted: &str, extra: Value| {
        let note = peer.new_id("notes");
        let mut object = json!({
            "id": note, "type": "Note", "attributedTo": peer.actor(), "to": [PUBLIC],
            "content": format!("<p>{key}</p>"), "published": "2026-12-01T10:00:00Z",
            key: quoted,
        });
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            object[k] = v;
        }
        let create = json!({
            "id": format!("{note}/activity"), "type": "Create", "actor": peer.actor(),
            "to": [PUBLIC], "object": object,
        });
        (note, create)
    };
    // Forged: the authorization is served by the quoted author's server but names another note.
    let forged_auth = peer.iri("/authorizations/forged");
    peer.doc(
        "/authorizations/forged",
        json!({
            "id": forged_auth, "type": "QuoteAuthorization", "attributedTo": peer.actor_of("bob"),
            "interactingObject": peer.iri("/notes/some-other"), "interactionTarget": guarded,
        }),
    );
    let (forged_note, forged) = quoting(
        "quote",
        &guarded,
        json!({ "quoteAuthorization": forged_auth }),
    );
    let (unasked_note, unasked) = quoting("quote", &guarded, json!({}));
    let (misskey_note, misskey) = quoting("_misskey_quote", &legacy, json!({ "quoteUrl": legacy }));
    let (akkoma_note, akkoma) = quoting("quoteUrl", &legacy, json!({}));
    let (ours_note, ours) = quoting("quote", &our_uri, json!({}));
    let good_auth = peer.iri("/authorizations/good");
    let (good_note, good) = quoting(
        "quote",
        &guarded,
        json!({ "quoteAuthorization": good_auth,
                "content": format!("<p>quote</p><p class=\"quote-inline\">RE: <a href=\"{guarded}\">{guarded}</a></p>") }),
    );
    peer.doc(
        "/authorizations/good",
        json!({
            "id": good_auth, "type": "QuoteAuthorization", "attributedTo": peer.actor_of("bob"),
            "interactingObject": good_note, "interactionTarget": guarded,
        }),
    );
    for a in [&forged, &unasked, &misskey, &akkoma, &ours, &good] {
        assert_eq!(peer.post(&inbox, a).await, 202);
    }
    for (note, state, shown) in [
        (&forged_note, "pending", None),
        (&unasked_note, "pending", None),
        (&misskey_note, "accepted", Some(&legacy)),
        (&akkoma_note, "accepted", Some(&legacy)),
        (&ours_note, "accepted", Some(&our_uri)),
        (&good_note, "accepted", Some(&guarded)),
    ] {
        let s = by_uri(&api, note).await;
        assert_eq!(s["quote"]["state"], state, "{note}: {s}");
        match shown {
            Some(uri) => assert_eq!(s["quote"]["quoted_status"]["uri"], uri.as_str(), "{s}"),
            None => assert!(s["quote"]["quoted_status"].is_null(), "{s}"),
        }
    }
    // The quoting note's fallback line is not shown beside its quote.
    let good_shown = by_uri(&api, &good_note).await;
    assert_eq!(good_shown["content"], "<p>quote</p>", "{good_shown}");
    // Our post quoted by them: alice is told, and we granted an authorization we serve.
    eventually(WAIT, "alice's quote notification", || async {
        (notifications_of(&api, "quote").await.len() == 1).then_some(())
    })
    .await;

    // Their `QuoteRequest` for our post: an `Accept` whose result we serve; for a post whose
    // policy is "nobody", a `Reject`.
    let closed = api
        .posted(&json!({"status": "closed", "quote_approval_policy": "nobody"}))
        .await;
    let asking = peer.iri("/notes/asking");
    peer.doc(
        "/notes/asking",
        json!({
            "id": asking, "type": "Note", "attributedTo": peer.actor(), "to": [PUBLIC],
            "content": "<p>may I?</p>", "quote": our_uri,
        }),
    );
    // Hostile first: a request naming a note of someone else on the requester's server
    // (whatever its embedded copy claims) is not answered.
    let bobs = peer.iri("/notes/bobs");
    peer.doc(
        "/notes/bobs",
        json!({
            "id": bobs, "type": "Note", "attributedTo": peer.actor_of("bob"), "to": [PUBLIC],
            "content": "<p>not the requester's</p>", "quote": our_uri,
        }),
    );
    let not_theirs = json!({
        "id": peer.new_id("requests"), "type": "QuoteRequest", "actor": peer.actor(),
        "object": our_uri, "instrument": { "id": bobs, "type": "Note", "attributedTo": peer.actor() },
    });
    assert_eq!(peer.post(&inbox, &not_theirs).await, 202);
    let outcome = outcome_of(&inst, &not_theirs["id"]).await;
    assert!(outcome.contains("not by its actor"), "{outcome}");
    for (target, req) in [
        (&our_uri, peer.new_id("requests")),
        (
            &closed["uri"].as_str().expect("uri").to_string(),
            peer.new_id("requests"),
        ),
    ] {
        let request = json!({
            "id": req, "type": "QuoteRequest", "actor": peer.actor(),
            "object": target, "instrument": { "id": asking, "type": "Note", "attributedTo": peer.actor() },
        });
        assert_eq!(peer.post(&inbox, &request).await, 202);
    }
    let accept = received(&peer, "Accept", |b| b["object"]["type"] == "QuoteRequest").await;
    assert_eq!(accept["object"]["object"], our_uri.as_str());
    let authorization = accept["result"].as_str().expect("result").to_string();
    let doc = reqwest::Client::new()
        .get(&authorization)
        .header("accept", "application/activity+json")
        .send()
        .await
        .expect("get authorization");
    assert_eq!(doc.status(), 200);
    let doc: Value = doc.json().await.expect("json");
    assert_eq!(doc["type"], "QuoteAuthorization");
    assert_eq!(doc["interactingObject"], asking.as_str());
    assert_eq!(doc["interactionTarget"], our_uri.as_str());
    assert_eq!(doc["attributedTo"], inst.fed.actor_iri("alice"));
    let reject = received(&peer, "Reject", |b| b["object"]["type"] == "QuoteRequest").await;
    assert_eq!(reject["object"]["object"], closed["uri"]);

    // Ours quoting their guarded post: pending until they accept, then the note goes out
    // again carrying their authorization.
    let theirs = by_uri(&api, &unasked_note).await["quote"].clone();
    assert_eq!(theirs["state"], "pending");
    let guarded_id = eventually(WAIT, "the guarded post stored", || async {
        let s = by_uri(&api, &good_note).await;
        s["quote"]["quoted_status"]["id"]
            .as_str()
            .map(str::to_string)
    })
    .await;
    let mine = api
        .posted(&json!({"status": "quoting bob", "quoted_status_id": guarded_id}))
        .await;
    assert_eq!(mine["quote"]["state"], "pending", "{mine}");
    assert!(mine["quote"]["quoted_status"].is_null());
    let request = received(&peer, "QuoteRequest", |b| b["object"] == guarded.as_str()).await;
    assert_eq!(request["instrument"]["id"], mine["uri"]);
    let create = received(&peer, "Create", |b| b["object"]["id"] == mine["uri"]).await;
    assert_eq!(create["object"]["quote"], guarded.as_str());
    assert_eq!(create["object"]["_misskey_quote"], guarded.as_str());
    let content = create["object"]["content"].as_str().expect("content");
    assert!(
        content.ends_with(&format!(
            "<p class=\"quote-inline\">RE: <a href=\"{guarded}\">{guarded}</a></p>"
        )),
        "the fallback link: {content}"
    );
    let granted = peer.iri("/authorizations/for-alice");
    let accept = json!({
        "id": peer.new_id("accepts"), "type": "Accept", "actor": peer.actor_of("bob"),
        "object": request["id"], "result": granted,
    });
    // Only the quoted author answers: the same Accept from someone else changes nothing.
    let by_peer = json!({
        "id": peer.new_id("accepts"), "type": "Accept", "actor": peer.actor(),
        "object": request["id"], "result": granted,
    });
    assert_eq!(peer.post(&inbox, &by_peer).await, 202);
    assert_eq!(peer.post_as("bob", &inbox, &accept).await, 202);
    let update = received(&peer, "Update", |b| b["object"]["id"] == mine["uri"]).await;
    assert_eq!(update["object"]["quoteAuthorization"], granted.as_str());
    let now = status(&api, &id(&mine)).await;
    assert_eq!(now["quote"]["state"], "accepted", "{now}");
    assert_eq!(now["quote"]["quoted_status"]["uri"], guarded.as_str());

    // Their `Delete` of the authorization revokes the quote — only from the quoted author:
    // another actor of the same server revokes nothing.
    let by_other = json!({
        "id": peer.new_id("deletes"), "type": "Delete", "actor": peer.actor(),
        "object": granted,
    });
    assert_eq!(peer.post(&inbox, &by_other).await, 202);
    let outcome = outcome_of(&inst, &by_other["id"]).await;
    assert!(!outcome.contains("revoked"), "{outcome}");
    assert_eq!(status(&api, &id(&mine)).await["quote"]["state"], "accepted");
    let delete = json!({
        "id": peer.new_id("deletes"), "type": "Delete", "actor": peer.actor_of("bob"),
        "object": granted,
    });
    assert_eq!(peer.post_as("bob", &inbox, &delete).await, 202);
    eventually(WAIT, "our quote revoked", || async {
        let s = status(&api, &id(&mine)).await;
        (s["quote"]["state"] == "revoked").then_some(())
    })
    .await;
}
