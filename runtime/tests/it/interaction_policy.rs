//! Remote posts' interaction policies (GoToSocial's `interactionPolicy`, issue 61): what a
//! remote author's policy refuses our users is refused here (403, GoToSocial's words) and never
//! sent; what it lets them do only with the author's approval is sent to the author alone,
//! shown to our user as done but to no one else and counted nowhere, until the author's
//! `Accept` (then it goes out to its whole audience, carrying `approvedBy`) or `Reject` (then it
//! is undone here). Hostile answers first: an `Accept` by anyone but the post's author, or
//! naming an approval on another server, approves nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Answer, Client, WAIT, alice_and_peer, ap_doc, assert_error, follow, has, id, received,
    remote_post_id, resolve_id, until_follow_accepted, users,
};
use support::eventually;
use support::node::Instance;
use support::peer::Peer;

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

/// Bob's public note `name` on the peer, with `extra` merged in (its `interactionPolicy`,
/// mentions), delivered to alice's inbox; its IRI and its status id here.
async fn bobs_note(inst: &Instance, peer: &Peer, name: &str, extra: Value) -> (String, String) {
    let bob = peer.actor_of("bob");
    let iri = peer.iri(&format!("/users/bob/statuses/{name}"));
    let mut note = json!({
        "id": iri, "type": "Note", "attributedTo": bob, "to": [PUBLIC],
        "cc": [format!("{bob}/followers")], "content": format!("<p>{name}</p>"),
        "published": "2026-12-14T10:00:00Z",
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        note[k] = v;
    }
    let mut create = peer.create(note);
    create["actor"] = json!(bob);
    assert_eq!(
        peer.post_as("bob", &inst.fed.inbox("alice"), &create).await,
        202
    );
    let id = remote_post_id(inst, &iri, &format!("bob's note {name} stored")).await;
    (iri, id.to_string())
}

async fn status(api: &Client, id: &str) -> Answer {
    api.get(&format!("/api/v1/statuses/{id}")).await
}

async fn act(api: &Client, id: &str, action: &str) -> Answer {
    api.act(Method::POST, &format!("/api/v1/statuses/{id}/{action}"))
        .await
}

/// The types of the activities alice stored to send, oldest first.
async fn alice_sent(inst: &Instance) -> Vec<(String, Value)> {
    sqlx::query_as(
        "SELECT o.type, o.body FROM outbox_activities o JOIN accounts a ON a.id = o.account_id
          WHERE a.username = 'alice' ORDER BY o.created_at",
    )
    .fetch_all(&inst.pool)
    .await
    .expect("outbox")
}

/// The inboxes the activity `id` is delivered to.
async fn inboxes_of(inst: &Instance, activity: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT inbox FROM deliveries WHERE activity_id = $1 ORDER BY inbox")
        .bind(activity)
        .fetch_all(&inst.pool)
        .await
        .expect("deliveries")
}

/// The outcome of the inbox activity `id`, once it was processed.
async fn outcome_of(inst: &Instance, id: &str) -> String {
    eventually(WAIT, &format!("{id} processed"), || async {
        sqlx::query_scalar::<_, Option<String>>(
            "SELECT outcome FROM inbox_activities WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&inst.pool)
        .await
        .expect("outcome")
        .flatten()
    })
    .await
}

/// Bob's answer (`Accept` or `Reject`) to the interaction `object`, as GoToSocial sends it:
/// by bob, to alice, naming the post it was about; `result` when given (the newer form).
fn answer(peer: &Peer, ty: &str, object: &Value, target: &str, result: Option<&str>) -> Value {
    let kind = ty.to_lowercase();
    let mut a = json!({
        "id": peer.iri(&format!("/users/bob/{kind}s/{}", uuid::Uuid::new_v4())),
        "type": ty, "actor": peer.actor_of("bob"), "object": object, "target": target,
    });
    if let Some(r) = result {
        a["result"] = json!(r);
    }
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn what_a_remote_policy_refuses_is_refused_and_never_sent() {
    let (inst, peer, alice_account, alice) = alice_and_peer().await;
    let bob = peer.actor_of("bob");
    let followers = format!("{bob}/followers");
    // GoToSocial 0.18's terms: only bob's followers may reply, only bob may like or boost.
    let (_, closed) = bobs_note(
        &inst,
        &peer,
        "closed",
        json!({ "interactionPolicy": {
            "canLike": { "always": [bob] },
            "canReply": { "always": [bob, followers] },
            "canAnnounce": { "always": bob, "approvalRequired": [] },
        }}),
    )
    .await;
    // The same under the newer terms.
    let (_, newer) = bobs_note(
        &inst,
        &peer,
        "closed-newer",
        json!({ "interactionPolicy": {
            "canLike": { "automaticApproval": [bob], "manualApproval": [] },
            "canReply": { "automaticApproval": [followers] },
            "canAnnounce": { "automaticApproval": [bob] },
        }}),
    )
    .await;
    for target in [&closed, &newer] {
        let reply = alice
            .post(&json!({"status": "may I?", "in_reply_to_id": target}))
            .await;
        assert_error(&reply, 403, "a reply the policy refuses");
        assert_eq!(
            reply.body["error"], "you do not have permission to reply to this status",
            "{}",
            reply.body
        );
        for (action, words) in [("favourite", "fave"), ("reblog", "boost")] {
            let a = act(&alice, target, action).await;
            assert_error(&a, 403, action);
            assert_eq!(
                a.body["error"],
                format!("you do not have permission to {words} this status")
            );
        }
        let s = status(&alice, target).await.assert_ok().body;
        assert_eq!(s["favourited"], false, "{s}");
        assert_eq!(s["reblogged"], false, "{s}");
        assert_eq!(s["replies_count"], 0, "{s}");
    }
    // Nothing was stored to send.
    assert_eq!(alice_sent(&inst).await, Vec::new());

    // What the policy allows goes as before: a like of a post without a policy, and a reply
    // to a post that mentions alice (the mentioned may always reply, whatever the policy).
    let (open_iri, open) = bobs_note(&inst, &peer, "open", json!({})).await;
    act(&alice, &open, "favourite").await.assert_ok();
    let alice_iri = inst.fed.actor_iri("alice");
    let (mentions_iri, mentions_her) = bobs_note(
        &inst,
        &peer,
        "mentions-alice",
        json!({
            "tag": [{ "type": "Mention", "href": alice_iri, "name": "@alice" }],
            "interactionPolicy": { "canReply": { "always": [bob] } },
        }),
    )
    .await;
    let answered = alice
        .posted(&json!({"status": "hello bob", "in_reply_to_id": mentions_her}))
        .await;
    received(&peer, "Like", |b| b["object"] == open_iri.as_str()).await;
    received(&peer, "Create", |b| b["object"]["id"] == answered["uri"]).await;
    let sent: Vec<String> = alice_sent(&inst)
        .await
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(sent, ["Like", "Create"]);
    // Nor can bob reject her answer to a post of his that mentions her.
    let reject = answer(&peer, "Reject", &answered["uri"], &mentions_iri, None);
    assert_eq!(
        peer.post_as("bob", &inst.fed.inbox("alice"), &reject).await,
        202
    );
    let outcome = outcome_of(&inst, reject["id"].as_str().expect("id")).await;
    assert!(outcome.contains("mentions"), "{outcome}");
    status(&alice, &id(&answered)).await.assert_ok();

    // Once alice follows bob, she is among the followers his policy lets reply: at once, as
    // any reply, shown to everyone.
    let bob_id = resolve_id(&alice, &peer.handle_of("bob")).await;
    follow(&alice, &bob_id).await;
    let f = received(&peer, "Follow", |b| b["object"] == bob.as_str()).await;
    let accept = json!({
        "id": peer.new_id("accepts"), "type": "Accept", "actor": bob, "object": f["id"],
    });
    assert_eq!(
        peer.post_as("bob", &inst.fed.inbox("alice"), &accept).await,
        202
    );
    until_follow_accepted(&inst, alice_account.id, &bob, "alice follows bob").await;
    let reply = alice
        .posted(&json!({"status": "now I may", "in_reply_to_id": closed}))
        .await;
    let anonymous = Client::new(&inst, None);
    status(&anonymous, &id(&reply)).await.assert_ok();
    assert_eq!(status(&alice, &closed).await.body["replies_count"], 1);
    // Liking is still bob's alone.
    assert_error(
        &act(&alice, &closed, "favourite").await,
        403,
        "still refused",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn what_needs_approval_waits_for_the_authors_answer() {
    let (inst, peer, alice_account, alice) = alice_and_peer().await;
    let inbox = inst.fed.inbox("alice");
    // dave, here, and someone on another server follow alice: they are who would hear of her
    // replies and boosts.
    let [(_, _, dave)] = users(&inst, ["dave"]).await;
    follow(&dave, &alice_account.id.to_string()).await;
    let elsewhere = Peer::start_on("127.0.0.2").await;
    support::api::peer_follows_accepted(&inst, &elsewhere, "alice").await;
    let anonymous = Client::new(&inst, None);

    // Bob lets anyone ask: himself automatically, everyone else with his approval (both
    // term generations, and a single IRI as JSON-LD allows).
    let bob = peer.actor_of("bob");
    let asks = json!({ "interactionPolicy": {
        "canLike": { "always": [bob], "approvalRequired": [PUBLIC] },
        "canReply": { "automaticApproval": [bob], "manualApproval": [PUBLIC] },
        "canAnnounce": { "always": bob, "approvalRequired": PUBLIC },
    }});
    let (note_iri, note) = bobs_note(&inst, &peer, "asks", asks.clone()).await;
    let (other_iri, other) = bobs_note(&inst, &peer, "asks-too", asks).await;

    // A reply: written, sent to bob alone, addressed as any public reply.
    let reply = alice
        .posted(&json!({"status": "a word, if I may", "in_reply_to_id": note}))
        .await;
    let reply_uri = reply["uri"].as_str().expect("uri").to_string();
    let create = received(&peer, "Create", |b| b["object"]["id"] == reply_uri.as_str()).await;
    assert_eq!(create["object"]["inReplyTo"], note_iri.as_str());
    assert!(has(&create["to"], PUBLIC), "{create}");
    assert!(create["object"].get("approvedBy").is_none(), "{create}");
    let create_id = create["id"].as_str().expect("id").to_string();
    assert_eq!(
        inboxes_of(&inst, &create_id).await,
        [format!("{}/inbox", peer.base())]
    );
    // Pending: alice reads it, nobody else does, and bob's note counts no reply but for her.
    status(&alice, &id(&reply)).await.assert_ok();
    assert_eq!(status(&dave, &id(&reply)).await.status, 404);
    assert_eq!(status(&anonymous, &id(&reply)).await.status, 404);
    assert_eq!(status(&dave, &note).await.body["replies_count"], 0);
    assert_eq!(status(&alice, &note).await.body["replies_count"], 1);
    let context = alice
        .get(&format!("/api/v1/statuses/{note}/context"))
        .await
        .body;
    let shown_to_dave = dave
        .get(&format!("/api/v1/statuses/{note}/context"))
        .await
        .body;
    assert_eq!(context["descendants"][0]["id"], reply["id"], "{context}");
    assert_eq!(shown_to_dave["descendants"], json!([]), "{shown_to_dave}");

    // A favourite and a boost: done for alice, sent to bob alone, counted nowhere.
    let faved = act(&alice, &note, "favourite").await.assert_ok().body;
    assert_eq!(faved["favourited"], true);
    assert_eq!(faved["favourites_count"], 0, "{faved}");
    let like = received(&peer, "Like", |b| b["object"] == note_iri.as_str()).await;
    let boost = act(&alice, &note, "reblog").await.assert_ok().body;
    assert_eq!(boost["reblog"]["reblogged"], true, "{boost}");
    assert_eq!(boost["reblog"]["reblogs_count"], 0, "{boost}");
    let announce = received(&peer, "Announce", |b| b["object"] == note_iri.as_str()).await;
    assert!(announce.get("approvedBy").is_none(), "{announce}");
    let announce_id = announce["id"].as_str().expect("id").to_string();
    assert_eq!(
        inboxes_of(&inst, &announce_id).await,
        [format!("{}/inbox", peer.base())]
    );
    assert_eq!(status(&dave, &id(&boost)).await.status, 404);
    let home = dave.get("/api/v1/timelines/home").await.body;
    assert_eq!(home, json!([]), "dave's home shows nothing pending: {home}");

    // Hostile first: the same Accept by another actor of bob's server, and one by bob whose
    // approval lives on another server, approve nothing.
    let mut by_other = answer(&peer, "Accept", &json!(reply_uri), &note_iri, None);
    by_other["actor"] = json!(peer.actor());
    by_other["id"] = json!(peer.new_id("accepts"));
    assert_eq!(peer.post(&inbox, &by_other).await, 202);
    let elsewhere_approval = elsewhere.iri("/approvals/1");
    let foreign = answer(
        &peer,
        "Accept",
        &json!(reply_uri),
        &note_iri,
        Some(&elsewhere_approval),
    );
    assert_eq!(peer.post_as("bob", &inbox, &foreign).await, 202);
    for a in [&by_other, &foreign] {
        let outcome = outcome_of(&inst, a["id"].as_str().expect("id")).await;
        assert!(!outcome.contains("approved"), "{outcome}");
    }
    assert_eq!(status(&dave, &id(&reply)).await.status, 404);

    // Bob accepts the reply as GoToSocial 0.18 does: the Accept is the approval.
    let accept = answer(&peer, "Accept", &json!(reply_uri), &note_iri, None);
    let accept_id = accept["id"].as_str().expect("id").to_string();
    assert_eq!(peer.post_as("bob", &inbox, &accept).await, 202);
    eventually(WAIT, "the reply shown to dave", || async {
        (status(&dave, &id(&reply)).await.status == 200).then_some(())
    })
    .await;
    status(&anonymous, &id(&reply)).await.assert_ok();
    assert_eq!(status(&dave, &note).await.body["replies_count"], 1);
    let served = ap_doc(&reply_uri).await;
    assert_eq!(served["approvedBy"], accept_id.as_str(), "{served}");
    // Now it goes to alice's followers too, carrying the approval.
    let resent = received(&elsewhere, "Create", |b| {
        b["object"]["id"] == reply_uri.as_str()
    })
    .await;
    assert_eq!(
        resent["object"]["approvedBy"],
        accept_id.as_str(),
        "{resent}"
    );

    // Bob approves the like with an approval object (the newer form: `result`), and
    // rejects the boost: the like is counted, the boost is gone.
    let approval = peer.iri("/users/bob/approvals/like-1");
    let liked = answer(&peer, "Accept", &like["id"], &note_iri, Some(&approval));
    assert_eq!(peer.post_as("bob", &inbox, &liked).await, 202);
    // The answer may name the interaction embedded, by its id and type (a type hint).
    let hint = json!({ "id": announce_id, "type": "Announce" });
    let rejected = answer(&peer, "Reject", &hint, &note_iri, None);
    assert_eq!(peer.post_as("bob", &inbox, &rejected).await, 202);
    eventually(WAIT, "the like counted, the boost gone", || async {
        let s = status(&alice, &note).await.body;
        (s["favourites_count"] == 1 && s["reblogged"] == false && s["favourited"] == true)
            .then_some(())
    })
    .await;
    assert_eq!(status(&alice, &id(&boost)).await.status, 404);
    let stored: Option<String> =
        sqlx::query_scalar("SELECT approved_by FROM favourites WHERE activity_id = $1")
            .bind(like["id"].as_str())
            .fetch_one(&inst.pool)
            .await
            .expect("approval");
    assert_eq!(stored.as_deref(), Some(approval.as_str()));

    // On the other note: a reply and a like, both rejected — the reply is deleted, as
    // GoToSocial deletes a rejected reply, and the like undone.
    let second = alice
        .posted(&json!({"status": "and another", "in_reply_to_id": other}))
        .await;
    let second_uri = second["uri"].as_str().expect("uri").to_string();
    act(&alice, &other, "favourite").await.assert_ok();
    let like2 = received(&peer, "Like", |b| b["object"] == other_iri.as_str()).await;
    for object in [json!(second_uri), like2["id"].clone()] {
        let r = answer(&peer, "Reject", &object, &other_iri, None);
        assert_eq!(peer.post_as("bob", &inbox, &r).await, 202);
    }
    eventually(WAIT, "the rejected reply and like undone", || async {
        let gone = status(&alice, &id(&second)).await.status == 404;
        let s = status(&alice, &other).await.body;
        (gone && s["favourited"] == false).then_some(())
    })
    .await;
    // Nothing of the rejected reply was ever meant for alice's followers elsewhere.
    let leaked: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM deliveries WHERE starts_with(activity_id, $1) AND starts_with(inbox, $2)",
    )
    .bind(&second_uri)
    .bind(elsewhere.base())
    .fetch_one(&inst.pool)
    .await
    .expect("deliveries");
    assert_eq!(leaked, 0, "the rejected reply stayed between alice and bob");
}

/// `GET url` as the peer's person `name` would fetch it (signed with its key when `signed`):
/// the status and the document.
async fn fetch_as(peer: &Peer, name: &str, url: &str, signed: bool) -> (u16, Value) {
    use hollo_runtime::federation::transport::signature::{self, SigningKey};
    let mut headers = reqwest::header::HeaderMap::new();
    if signed {
        let key = SigningKey::new(
            format!("{}#main-key", peer.actor_of(name)),
            support::peer::peer_key(),
        )
        .unwrap();
        let u = url::Url::parse(url).unwrap();
        signature::sign_request(&key, &Method::GET, &u, None, &mut headers).unwrap();
    }
    let resp = reqwest::Client::new()
        .get(url)
        .headers(headers)
        .header("accept", "application/activity+json")
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Our followers-only post lets alice's followers like and reply to it; a remote server
/// cannot check that collection, so GoToSocial waits for our `Accept` naming an approval it
/// can fetch. Each permitted like and reply gets one (`object` type-hinted, `result` the
/// approval on our host), and the approval is served — a `LikeApproval` or `ReplyApproval`
/// attributed to alice, naming the interaction and the post — while the interaction stands.
/// Nothing else gets one: no approval exists for what we did not approve (404), a public post
/// needs none, someone who does not follow gets none, a redelivery no second one, and an
/// undone like or a deleted reply loses its approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn our_followers_only_posts_approve_their_followers_likes_and_replies() {
    let (inst, peer, _, alice) = alice_and_peer().await;
    let inbox = inst.fed.inbox("alice");
    support::api::peer_follows_accepted(&inst, &peer, "alice").await;
    let private = alice
        .posted(&json!({ "status": "followers, answer me", "visibility": "private" }))
        .await;
    let public = alice
        .posted(&json!({ "status": "everyone, answer me" }))
        .await;
    let private_uri = private["uri"].as_str().unwrap().to_string();
    let public_uri = public["uri"].as_str().unwrap().to_string();
    let approvals = format!("{}/approvals/", inst.fed.actor_iri("alice"));

    // The follower likes and replies to the followers-only post, likes the public one; the
    // peer's mallory, who does not follow, likes the followers-only one.
    let like = json!({ "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(),
                       "object": private_uri });
    let reply_iri = peer.iri("/users/peer/statuses/answer");
    let reply = peer.create(json!({
        "id": reply_iri, "type": "Note", "attributedTo": peer.actor(),
        "content": "<p>an answer</p>", "inReplyTo": private_uri,
        "to": [peer.iri("/users/peer/followers")], "cc": [inst.fed.actor_iri("alice")],
    }));
    let public_like = json!({ "id": peer.new_id("likes"), "type": "Like",
                              "actor": peer.actor(), "object": public_uri });
    let strangers_like = json!({ "id": peer.new_id("likes"), "type": "Like",
                                 "actor": peer.actor_of("mallory"), "object": private_uri });
    for a in [&like, &reply, &public_like] {
        assert_eq!(peer.post(&inbox, a).await, 202, "{a}");
    }
    assert_eq!(peer.post_as("mallory", &inbox, &strangers_like).await, 202);

    let liked = received(&peer, "Accept", |b| b["object"]["id"] == like["id"]).await;
    assert_eq!(liked["object"]["type"], "Like", "{liked}");
    assert_eq!(liked["actor"], inst.fed.actor_iri("alice"), "{liked}");
    assert_eq!(liked["target"], private_uri.as_str(), "{liked}");
    let approval = liked["result"].as_str().unwrap().to_string();
    assert!(approval.starts_with(&approvals), "{liked}");
    assert_eq!(liked["id"], json!(format!("{approval}/accept")), "{liked}");
    let answered = received(&peer, "Accept", |b| b["object"]["id"] == reply_iri.as_str()).await;
    assert_eq!(answered["object"]["type"], "Note", "{answered}");
    let reply_approval = answered["result"].as_str().unwrap().to_string();

    // Each approval is what GoToSocial checks, fetched signed as its servers fetch.
    for (url, ty, object) in [
        (&approval, "LikeApproval", like["id"].clone()),
        (&reply_approval, "ReplyApproval", json!(reply_iri)),
    ] {
        let (code, doc) = fetch_as(&peer, "peer", url, true).await;
        assert_eq!(code, 200, "{url}: {doc}");
        assert_eq!(doc["id"], url.as_str(), "{doc}");
        assert_eq!(doc["type"], ty, "{doc}");
        assert_eq!(doc["attributedTo"], inst.fed.actor_iri("alice"), "{doc}");
        assert_eq!(doc["object"], object, "{doc}");
        assert_eq!(doc["target"], private_uri.as_str(), "{doc}");
    }
    let (code, accept) = fetch_as(&peer, "peer", &format!("{approval}/accept"), true).await;
    assert_eq!((code, &accept["type"]), (200, &json!("Accept")), "{accept}");
    assert_eq!(accept["result"], approval.as_str(), "{accept}");

    // What we never approved is found nowhere: an unknown id, alice's approval under another
    // account's path, and no Accept for the public like or the stranger's.
    let unknown = format!("{approvals}{}", uuid::Uuid::now_v7());
    let elsewhere = approval.replace("/users/alice/", "/users/bob/");
    for url in [&unknown, &elsewhere, &format!("{unknown}/accept")] {
        assert_eq!(fetch_as(&peer, "peer", url, true).await.0, 404, "{url}");
    }
    let ids: Vec<&str> = [&public_like, &strangers_like]
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    for id in &ids {
        outcome_of(&inst, id).await;
    }
    // The reply again (GoToSocial sends it once more when approved, under another activity
    // id): no second approval, no second Accept.
    let mut again = reply.clone();
    again["id"] = json!(peer.new_id("creates"));
    assert_eq!(peer.post(&inbox, &again).await, 202);
    outcome_of(&inst, again["id"].as_str().unwrap()).await;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM interaction_grants")
        .fetch_one(&inst.pool)
        .await
        .unwrap();
    assert_eq!(
        n, 2,
        "one approval for the follower's like, one for its reply"
    );
    let accepts: Vec<Value> = alice_sent(&inst)
        .await
        .into_iter()
        .filter(|(ty, body)| ty == "Accept" && body.get("result").is_some())
        .map(|(_, body)| body)
        .collect();
    assert_eq!(accepts.len(), 2, "{accepts:?}");

    // The like undone and the reply deleted: their approvals no longer stand.
    let undo = json!({ "id": peer.new_id("undos"), "type": "Undo", "actor": peer.actor(),
                       "object": like });
    let delete = json!({ "id": peer.new_id("deletes"), "type": "Delete", "actor": peer.actor(),
                         "object": reply_iri });
    for a in [&undo, &delete] {
        assert_eq!(peer.post(&inbox, a).await, 202, "{a}");
    }
    for url in [&approval, &reply_approval] {
        eventually(WAIT, &format!("{url} withdrawn"), || async {
            (fetch_as(&peer, "peer", url, false).await.0 == 404).then_some(())
        })
        .await;
    }
    inst.shutdown().await;
}
