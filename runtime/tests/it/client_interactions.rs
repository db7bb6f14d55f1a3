//! Favourites, boosts and bookmarks in the Mastodon client API (SPEC §11, R-MAPI-3
//! item 1): each action's entity, counts and flags, idempotency, the lists they make with
//! Mastodon's pagination, the local author's notifications taken back with the action, who
//! may boost what, and the `Like`/`Announce`/`Undo` a remote server receives — over HTTP
//! against a real node on a real PostgreSQL, with the shared `Peer` as the remote server.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Client, WAIT, alice_and_peer, assert_error, has, id, list, peer_follows_accepted, received,
    scalar, token_with_scopes, users,
};
use support::eventually;
use support::node::Instance;

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

async fn act(api: &Client, status: &str, action: &str) -> Value {
    let a = api
        .act(Method::POST, &format!("/api/v1/statuses/{status}/{action}"))
        .await;
    assert_eq!(a.status, 200, "{action} {status}: {}", a.body);
    a.body
}

async fn notifications(inst: &Instance, account: uuid::Uuid, kind: &str) -> i64 {
    scalar(
        inst,
        &format!(
            "SELECT count(*) FROM notifications WHERE account_id = $1::uuid AND type = '{kind}'"
        ),
        &account.to_string(),
    )
    .await
}

/// The ids of a page of entities, and the `Link` header's `next` path.
async fn page(inst: &Instance, token: &str, path: &str) -> (Vec<String>, Option<String>) {
    let listed = list(inst, Some(token), path).await;
    (listed.ids, listed.next)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn favourites_and_bookmarks_are_idempotent_listed_and_taken_back() {
    let inst = Instance::start("all", &[]).await;
    let [
        (alice, _, alice_api),
        (bob, bob_token, bob_api),
        (_, carol_token, carol_api),
    ] = users(&inst, ["alice", "bob", "carol"]).await;
    let anon = Client::new(&inst, None);

    let posts: Vec<String> = {
        let mut v = Vec::new();
        for n in 0..3 {
            v.push(id(&alice_api
                .posted(&json!({ "status": format!("post {n}") }))
                .await));
        }
        v
    };
    let p = &posts[0];

    // A favourite shows in the entity and counts once however often it is sent; the author
    // is notified once.
    let st = act(&bob_api, p, "favourite").await;
    assert_eq!(st["id"], json!(p));
    assert_eq!(st["favourited"], true, "{st}");
    assert_eq!(st["favourites_count"], 1, "{st}");
    let again = act(&bob_api, p, "favourite").await;
    assert_eq!(
        again["favourites_count"], 1,
        "a second favourite changes nothing"
    );
    assert_eq!(notifications(&inst, alice.id, "favourite").await, 1);
    let seen_by_alice = alice_api.get(&format!("/api/v1/statuses/{p}")).await;
    assert_eq!(seen_by_alice.body["favourites_count"], 1);
    assert_eq!(seen_by_alice.body["favourited"], false, "alice did not");

    // favourited_by: anyone may read it; a bad token is 401, a token without read 403.
    let by = anon
        .get(&format!("/api/v1/statuses/{p}/favourited_by"))
        .await
        .assert_ok();
    assert_eq!(by.body[0]["id"], json!(bob.id.to_string()));
    assert_eq!(by.body.as_array().map(Vec::len), Some(1));
    let bad = Client::new(&inst, Some("not-a-token"));
    assert_error(
        &bad.get(&format!("/api/v1/statuses/{p}/favourited_by"))
            .await,
        401,
        "bad token",
    );
    let write_only = token_with_scopes(&inst, bob.id, "write").await;
    assert_error(
        &Client::new(&inst, Some(&write_only))
            .get(&format!("/api/v1/statuses/{p}/favourited_by"))
            .await,
        403,
        "a token without read",
    );

    // GET /api/v1/favourites: newest first, paginated with Link headers.
    act(&bob_api, &posts[1], "favourite").await;
    act(&bob_api, &posts[2], "favourite").await;
    let (first, next) = page(&inst, &bob_token, "/api/v1/favourites?limit=2").await;
    assert_eq!(first, [posts[2].clone(), posts[1].clone()]);
    let next = next.expect("a next page");
    let (second, _) = page(&inst, &bob_token, &next).await;
    assert_eq!(second, [posts[0].clone()]);

    // Unfavourite: the flag, the count and the notification go; repeating it is harmless.
    let st = act(&bob_api, p, "unfavourite").await;
    assert_eq!(st["favourited"], false, "{st}");
    assert_eq!(st["favourites_count"], 0, "{st}");
    assert_eq!(notifications(&inst, alice.id, "favourite").await, 2);
    act(&bob_api, p, "unfavourite").await;
    let (left, _) = page(&inst, &bob_token, "/api/v1/favourites").await;
    assert_eq!(left, [posts[2].clone(), posts[1].clone()]);

    // Bookmarks: private to the account, listed, removed.
    let st = act(&bob_api, p, "bookmark").await;
    assert_eq!(st["bookmarked"], true, "{st}");
    act(&bob_api, p, "bookmark").await;
    let (marks, _) = page(&inst, &bob_token, "/api/v1/bookmarks").await;
    assert_eq!(marks, std::slice::from_ref(p));
    let (none, _) = page(&inst, &carol_token, "/api/v1/bookmarks").await;
    assert!(none.is_empty(), "bookmarks are the account's own");
    let st = act(&bob_api, p, "unbookmark").await;
    assert_eq!(st["bookmarked"], false, "{st}");
    let (marks, _) = page(&inst, &bob_token, "/api/v1/bookmarks").await;
    assert!(marks.is_empty());

    // Unknown, malformed and invisible statuses are the same 404; nothing is stored.
    let private = id(&alice_api
        .posted(&json!({ "status": "followers only", "visibility": "private" }))
        .await);
    for target in [uuid::Uuid::new_v4().to_string(), "nope".into(), private] {
        for action in ["favourite", "reblog", "bookmark"] {
            let a = carol_api
                .act(Method::POST, &format!("/api/v1/statuses/{target}/{action}"))
                .await;
            assert_error(&a, 404, &format!("{action} {target}"));
        }
    }
    assert_eq!(
        scalar(
            &inst,
            "SELECT count(*) FROM favourites WHERE account_id = (SELECT id FROM accounts WHERE username = $1)",
            "carol"
        )
        .await,
        0
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn boosts_reach_the_boosters_followers_and_only_what_may_be_boosted() {
    let inst = Instance::start("all", &[]).await;
    let [(alice, _, alice_api), (bob, _, bob_api), (_, _, carol_api)] =
        users(&inst, ["alice", "bob", "carol"]).await;
    let anon = Client::new(&inst, None);
    // carol follows bob, bob follows alice (local follows are accepted at once).
    for (api, whom) in [(&carol_api, bob.id), (&bob_api, alice.id)] {
        api.act(Method::POST, &format!("/api/v1/accounts/{whom}/follow"))
            .await
            .assert_ok();
    }
    let p = id(&alice_api.posted(&json!({ "status": "boost me" })).await);

    // The boost is a status of its own whose `reblog` is the post.
    let boost = act(&bob_api, &p, "reblog").await;
    assert_eq!(boost["reblog"]["id"], json!(p), "{boost}");
    assert_eq!(boost["account"]["id"], json!(bob.id.to_string()));
    assert_eq!(boost["reblogged"], true, "{boost}");
    let boost_id = id(&boost);
    assert_ne!(boost_id, p);
    let again = act(&bob_api, &p, "reblog").await;
    assert_eq!(id(&again), boost_id, "one boost per account and post");
    let shown = anon.get(&format!("/api/v1/statuses/{p}")).await;
    assert_eq!(shown.body["reblogs_count"], 1, "{}", shown.body);
    let shown = anon.get(&format!("/api/v1/statuses/{boost_id}")).await;
    assert_eq!(shown.status, 200, "a boost reads like a status");
    assert_eq!(shown.body["reblog"]["id"], json!(p));
    let by = anon
        .get(&format!("/api/v1/statuses/{p}/reblogged_by"))
        .await;
    assert_eq!(by.body[0]["id"], json!(bob.id.to_string()), "{}", by.body);
    // The booster's follower has it at home; the author is notified once.
    let in_carols_home = "SELECT count(*) FROM home_feed h JOIN accounts a ON a.id = h.account_id
                           WHERE a.username = 'carol' AND h.entry_id = $1::uuid";
    assert_eq!(scalar(&inst, in_carols_home, &boost_id).await, 1);
    assert_eq!(notifications(&inst, alice.id, "reblog").await, 1);
    // Acting on the boost acts on the post.
    let fav = act(&carol_api, &boost_id, "favourite").await;
    assert_eq!(fav["id"], json!(p));

    // Unreblog takes back the entry, the count and the notification.
    let st = act(&bob_api, &p, "unreblog").await;
    assert_eq!(st["id"], json!(p));
    assert_eq!(st["reblogged"], false, "{st}");
    assert_eq!(st["reblogs_count"], 0, "{st}");
    assert_eq!(scalar(&inst, in_carols_home, &boost_id).await, 0);
    assert_eq!(notifications(&inst, alice.id, "reblog").await, 0);
    assert_eq!(
        anon.get(&format!("/api/v1/statuses/{boost_id}"))
            .await
            .status,
        404
    );
    act(&bob_api, &p, "unreblog").await;

    // Followers-only: bob (a follower) may read it but not boost it; alice may, and her boost
    // stays followers-only. Direct: nobody. A boost cannot be made direct.
    let private = id(&alice_api
        .posted(&json!({ "status": "followers", "visibility": "private" }))
        .await);
    let refused = bob_api
        .act(Method::POST, &format!("/api/v1/statuses/{private}/reblog"))
        .await;
    assert_error(&refused, 403, "boosting someone else's followers-only post");
    let own = act(&alice_api, &private, "reblog").await;
    assert_eq!(own["visibility"], "private", "{own}");
    let direct = id(&alice_api
        .posted(&json!({ "status": "@bob hi", "visibility": "direct" }))
        .await);
    let refused = bob_api
        .act(Method::POST, &format!("/api/v1/statuses/{direct}/reblog"))
        .await;
    assert_error(&refused, 403, "boosting a direct post");
    let asked_direct = bob_api
        .call(
            Method::POST,
            &format!("/api/v1/statuses/{p}/reblog"),
            &json!({ "visibility": "direct" }),
        )
        .await;
    assert_error(&asked_direct, 422, "a direct boost");
    let unlisted = act(
        &bob_api,
        &p,
        "reblog?visibility=unlisted", // the query form some apps send
    )
    .await;
    assert_eq!(unlisted["visibility"], "unlisted", "{unlisted}");
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_remote_server_receives_likes_announces_and_their_undos() {
    let (inst, peer, _, api) = alice_and_peer().await;

    // The peer follows alice and posts a note she sees.
    peer_follows_accepted(&inst, &peer, "alice").await;
    let note = peer.new_id("notes");
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(), "content": "<p>hi</p>",
        "published": "2026-12-01T10:00:00Z", "to": [PUBLIC],
    }));
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &create).await, 202);
    let remote: String = eventually(WAIT, "the note is stored", || async {
        sqlx::query_scalar::<_, uuid::Uuid>("SELECT id FROM remote_posts WHERE iri = $1")
            .bind(&note)
            .fetch_optional(&inst.pool)
            .await
            .expect("query")
            .map(|u| u.to_string())
    })
    .await;

    // Favourite → Like to the author; unfavourite → Undo of that Like.
    let st = act(&api, &remote, "favourite").await;
    assert_eq!(st["favourited"], true, "{st}");
    let like = received(&peer, "Like", |b| b["object"] == json!(note)).await;
    assert_eq!(like["actor"], json!(inst.fed.actor_iri("alice")));
    act(&api, &remote, "favourite").await;
    act(&api, &remote, "unfavourite").await;
    let undo = received(&peer, "Undo", |b| b["object"]["type"] == "Like").await;
    assert_eq!(undo["object"]["id"], like["id"], "the Undo names our Like");
    assert_eq!(
        peer.count_of("Like"),
        1,
        "a repeated favourite sends nothing"
    );

    // Boost → Announce, public, to the followers with the author in cc; unreblog → Undo.
    act(&api, &remote, "reblog").await;
    let announce = received(&peer, "Announce", |b| b["object"] == json!(note)).await;
    assert!(has(&announce["to"], PUBLIC), "{announce}");
    assert!(
        has(&announce["cc"], &inst.fed.followers("alice")),
        "{announce}"
    );
    assert!(has(&announce["cc"], &peer.actor()), "{announce}");
    act(&api, &remote, "unreblog").await;
    let undo = received(&peer, "Undo", |b| b["object"]["type"] == "Announce").await;
    assert_eq!(undo["object"]["id"], announce["id"]);

    // A boost of her own post reaches her remote follower too.
    let own = id(&api.posted(&json!({ "status": "mine" })).await);
    act(&api, &own, "reblog").await;
    let own_uri = inst.fed.status_iri("alice", own.parse().unwrap());
    received(&peer, "Announce", |b| b["object"] == json!(own_uri)).await;
    inst.shutdown().await;
}
