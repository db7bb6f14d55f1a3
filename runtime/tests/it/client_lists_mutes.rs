//! Lists, mutes and domain blocks in the Mastodon client API (R-MAPI-6), over
//! HTTP and real
//! WebSockets against a real node on a real PostgreSQL: list CRUD and members with
//! Mastodon's errors and another account's attempts, list timelines written as posts arrive
//! (replies policy, exclusive lists, members added and removed), and mutes and blocks keeping
//! an account's posts, boosts and notifications out of every timeline, notification list and
//! stream until they are lifted or expire.
//!
//! "Never arrives" on a stream is shown with a barrier, as in `streaming.rs`: the status that
//! must not arrive is posted first, then one that must; events reach a connection in commit
//! order, so once the second has arrived the first would have arrived before it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Client, WAIT, act_ok, add_to_list, assert_error, call_ok, follow, follow_each_other, id,
    new_list, received, token_with_scopes, users,
};
use support::eventually;
use support::node::Instance;
use support::peer::Peer;
use support::stream::{Socket, Token, connect, open};
use tokio_tungstenite::tungstenite::Message;

/// The ids of a timeline page (asserting a 200).
async fn ids(api: &Client, path: &str) -> Vec<String> {
    let a = api.get(path).await;
    assert_eq!(a.status, 200, "{path}: {}", a.body);
    a.body.as_array().expect("a list").iter().map(id).collect()
}

/// A reply to `parent` (a status id), public.
fn reply(text: &str, parent: &str) -> Value {
    json!({ "status": text, "in_reply_to_id": parent })
}

#[tokio::test]
async fn lists_are_created_changed_and_refused_as_mastodon_does() {
    let inst = Instance::start("all", &[]).await;
    let [(alice, _, api), (bob, _, _), (_, _, carol)] =
        users(&inst, ["alice", "bob", "carol"]).await;
    let bob_id = bob.id.to_string();

    // Bad input first: a blank title, an unknown policy, a non-boolean `exclusive`.
    for (body, what) in [
        (json!({ "title": "  " }), "blank title"),
        (json!({}), "no title"),
        (
            json!({ "title": "x", "replies_policy": "everyone" }),
            "policy",
        ),
        (json!({ "title": "x", "exclusive": "perhaps" }), "exclusive"),
    ] {
        let a = api.call(Method::POST, "/api/v1/lists", &body).await;
        assert_error(&a, 422, what);
    }
    let long = "t".repeat(257);
    assert_error(
        &api.call(Method::POST, "/api/v1/lists", &json!({ "title": long }))
            .await,
        422,
        "a title over 256 characters",
    );

    // Created with Mastodon's defaults, or what a form says.
    let made = call_ok(
        &api,
        Method::POST,
        "/api/v1/lists",
        json!({ "title": " Friends " }),
    )
    .await;
    assert_eq!(made["title"], "Friends");
    assert_eq!(made["replies_policy"], "list");
    assert_eq!(made["exclusive"], false);
    let friends = id(&made);
    let form = api
        .form(
            Method::POST,
            "/api/v1/lists",
            "title=Work&replies_policy=none&exclusive=true",
        )
        .await
        .assert_ok();
    assert_eq!(form.body["replies_policy"], "none");
    assert_eq!(form.body["exclusive"], true);
    let work = id(&form.body);
    assert_error(
        &api.call(
            Method::POST,
            "/api/v1/lists",
            &json!({ "title": "Friends" }),
        )
        .await,
        422,
        "a second list of one title",
    );

    // Changed: only what is given.
    let changed = call_ok(
        &api,
        Method::PUT,
        &format!("/api/v1/lists/{friends}"),
        json!({ "replies_policy": "followed" }),
    )
    .await;
    assert_eq!(
        (
            changed["title"].as_str(),
            changed["replies_policy"].as_str()
        ),
        (Some("Friends"), Some("followed"))
    );
    let all = api.get("/api/v1/lists").await;
    assert_eq!(
        all.body
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["title"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["Friends", "Work"],
        "in creation order"
    );

    // Members: followed accounts only, once each; an unknown account is 404.
    let path = format!("/api/v1/lists/{friends}/accounts");
    assert_error(
        &api.call(Method::POST, &path, &json!({ "account_ids": [bob_id] }))
            .await,
        422,
        "an account alice does not follow",
    );
    assert_error(&api.act(Method::POST, &path).await, 422, "no account_ids");
    assert_error(
        &api.call(
            Method::POST,
            &path,
            &json!({ "account_ids": [uuid::Uuid::now_v7()] }),
        )
        .await,
        404,
        "an unknown account",
    );
    follow(&api, &bob_id).await;
    add_to_list(&api, &friends, &[bob_id.as_str()]).await;
    assert_error(
        &api.call(Method::POST, &path, &json!({ "account_ids": [bob_id] }))
            .await,
        422,
        "a member added twice",
    );
    let members = api.get(&path).await;
    assert_eq!(members.status, 200);
    assert_eq!(members.body[0]["id"], bob_id.as_str());
    let everyone = api.get(&format!("{path}?limit=0")).await;
    assert_eq!(everyone.body.as_array().map(Vec::len), Some(1));
    let holding = api.get(&format!("/api/v1/accounts/{bob_id}/lists")).await;
    assert_eq!(holding.body.as_array().map(Vec::len), Some(1));
    assert_eq!(holding.body[0]["id"], friends.as_str());

    // Another account's list is the same 404 as none, for every verb; it sees none of them.
    for (method, p) in [
        (Method::GET, format!("/api/v1/lists/{friends}")),
        (Method::PUT, format!("/api/v1/lists/{friends}")),
        (Method::DELETE, format!("/api/v1/lists/{friends}")),
        (Method::GET, format!("/api/v1/lists/{friends}/accounts")),
        (Method::POST, format!("/api/v1/lists/{friends}/accounts")),
        (Method::GET, format!("/api/v1/timelines/list/{friends}")),
        (Method::GET, "/api/v1/lists/not-a-list".to_string()),
    ] {
        let a = carol
            .call(
                method.clone(),
                &p,
                &json!({ "title": "mine now", "account_ids": [bob_id] }),
            )
            .await;
        assert_error(&a, 404, &format!("carol: {method} {p}"));
    }
    assert_eq!(carol.get("/api/v1/lists").await.body, json!([]));
    assert_eq!(
        carol
            .get(&format!("/api/v1/accounts/{bob_id}/lists"))
            .await
            .body,
        json!([])
    );

    // Scopes: read:lists to read, write:lists to change.
    let reader = token_with_scopes(&inst, alice.id, "read:lists").await;
    let reader = Client::new(&inst, Some(&reader));
    assert_eq!(reader.get("/api/v1/lists").await.status, 200);
    assert_error(
        &reader
            .call(Method::POST, "/api/v1/lists", &json!({ "title": "no" }))
            .await,
        403,
        "write without write:lists",
    );
    let other = token_with_scopes(&inst, alice.id, "read:statuses").await;
    assert_error(
        &Client::new(&inst, Some(&other))
            .get(&format!("/api/v1/timelines/list/{friends}"))
            .await,
        403,
        "a list timeline without read:lists",
    );

    // Removing a member (as a DELETE with the ids in the query, as some apps send it), then
    // the list; an unfollow takes the account out of every list.
    api.bare(
        Method::DELETE,
        &format!("/api/v1/lists/{friends}/accounts?account_ids[]={bob_id}"),
    )
    .await
    .assert_ok();
    assert_eq!(api.get(&path).await.body, json!([]));
    add_to_list(&api, &work, &[bob_id.as_str()]).await;
    act_ok(
        &api,
        Method::POST,
        &format!("/api/v1/accounts/{bob_id}/unfollow"),
    )
    .await;
    assert_eq!(
        api.get(&format!("/api/v1/lists/{work}/accounts"))
            .await
            .body,
        json!([]),
        "an unfollowed account leaves the lists"
    );
    act_ok(&api, Method::DELETE, &format!("/api/v1/lists/{friends}")).await;
    assert_error(
        &api.get(&format!("/api/v1/lists/{friends}")).await,
        404,
        "a deleted list",
    );

    // At most 50 lists (one exists).
    for n in 0..49 {
        new_list(&api, json!({ "title": format!("list {n}") })).await;
    }
    assert_error(
        &api.call(
            Method::POST,
            "/api/v1/lists",
            &json!({ "title": "one too many" }),
        )
        .await,
        422,
        "the 51st list",
    );
    inst.shutdown().await;
}

#[tokio::test]
async fn list_timelines_follow_replies_policy_exclusivity_and_membership() {
    let inst = Instance::start("all", &[]).await;
    let [
        (_, _, api),
        (bob, _, bob_api),
        (carol, _, carol_api),
        (dave, _, dave_api),
        (_, _, erin_api),
    ] = users(&inst, ["alice", "bob", "carol", "dave", "erin"]).await;
    let (bob_id, carol_id, dave_id) = (
        bob.id.to_string(),
        carol.id.to_string(),
        dave.id.to_string(),
    );
    for who in [bob_id.as_str(), carol_id.as_str(), dave_id.as_str()] {
        follow(&api, who).await;
    }
    let members = new_list(
        &api,
        json!({ "title": "members", "replies_policy": "list" }),
    )
    .await;
    let followed = new_list(
        &api,
        json!({ "title": "followed", "replies_policy": "followed" }),
    )
    .await;
    let none = new_list(&api, json!({ "title": "none", "replies_policy": "none" })).await;
    let quiet = new_list(&api, json!({ "title": "quiet", "exclusive": true })).await;
    for l in [members.as_str(), followed.as_str(), none.as_str()] {
        add_to_list(&api, l, &[bob_id.as_str()]).await;
    }
    add_to_list(&api, &quiet, &[dave_id.as_str()]).await;

    let alice_post = id(&api.posted(&json!({ "status": "alice's" })).await);
    let carol_post = id(&carol_api.posted(&json!({ "status": "carol's" })).await);
    let erin_post = id(&erin_api.posted(&json!({ "status": "erin's" })).await);
    let bob_post = id(&bob_api.posted(&json!({ "status": "bob's" })).await);
    let to_self = id(&bob_api.posted(&reply("a thread", &bob_post)).await);
    let to_owner = id(&bob_api.posted(&reply("to alice", &alice_post)).await);
    let to_followed = id(&bob_api.posted(&reply("to carol", &carol_post)).await);
    let to_stranger = id(&bob_api.posted(&reply("to erin", &erin_post)).await);
    let dave_post = id(&dave_api.posted(&json!({ "status": "dave's" })).await);
    let boost = id(&act_ok(
        &bob_api,
        Method::POST,
        &format!("/api/v1/statuses/{carol_post}/reblog"),
    )
    .await);

    let timeline = |l: &str| format!("/api/v1/timelines/list/{l}");
    // Mastodon's rules: threads always, a reply to the owner always, others by the policy;
    // boosts by a member like their posts.
    assert_eq!(
        ids(&api, &timeline(&members)).await,
        [
            boost.as_str(),
            to_owner.as_str(),
            to_self.as_str(),
            bob_post.as_str()
        ],
        "list: replies to members (bob himself) and to the owner"
    );
    assert_eq!(
        ids(&api, &timeline(&followed)).await,
        [
            boost.as_str(),
            to_followed.as_str(),
            to_owner.as_str(),
            to_self.as_str(),
            bob_post.as_str()
        ],
        "followed: replies to anyone alice follows"
    );
    assert_eq!(
        ids(&api, &timeline(&none)).await,
        [
            boost.as_str(),
            to_owner.as_str(),
            to_self.as_str(),
            bob_post.as_str()
        ],
        "none: no replies to others, but a thread and a reply to the owner"
    );
    assert_eq!(ids(&api, &timeline(&quiet)).await, [dave_post.as_str()]);
    let home = ids(&api, "/api/v1/timelines/home").await;
    assert!(
        !home.contains(&dave_post),
        "an exclusive list's member stays out of home: {home:?}"
    );
    assert!(home.contains(&bob_post) && home.contains(&to_stranger) && home.contains(&carol_post));
    assert!(!ids(&api, &timeline(&members)).await.contains(&to_stranger));

    // Pagination as everywhere: max_id / min_id over the list's entries.
    let page = ids(&api, &format!("{}?limit=2", timeline(&followed))).await;
    assert_eq!(page, [boost.as_str(), to_followed.as_str()]);
    let next = ids(
        &api,
        &format!("{}?limit=2&max_id={}", timeline(&followed), page[1]),
    )
    .await;
    assert_eq!(next, [to_owner.as_str(), to_self.as_str()]);

    // A member added later brings what home holds of theirs; one removed takes theirs along.
    add_to_list(&api, &members, &[carol_id.as_str()]).await;
    assert!(ids(&api, &timeline(&members)).await.contains(&carol_post));
    api.call(
        Method::DELETE,
        &format!("/api/v1/lists/{members}/accounts"),
        &json!({ "account_ids": [bob_id] }),
    )
    .await
    .assert_ok();
    assert_eq!(ids(&api, &timeline(&members)).await, [carol_post.as_str()]);

    // A deleted post leaves the list timelines too.
    act_ok(
        &dave_api,
        Method::DELETE,
        &format!("/api/v1/statuses/{dave_post}"),
    )
    .await;
    assert_eq!(ids(&api, &timeline(&quiet)).await, Vec::<String>::new());

    // Unfollowing carol takes her posts out of home (and her boosts, had she any), as on
    // Mastodon; bob's stay.
    assert!(
        ids(&api, "/api/v1/timelines/home")
            .await
            .contains(&carol_post)
    );
    act_ok(
        &api,
        Method::POST,
        &format!("/api/v1/accounts/{carol_id}/unfollow"),
    )
    .await;
    let home = ids(&api, "/api/v1/timelines/home").await;
    assert!(!home.contains(&carol_post), "{home:?}");
    assert!(home.contains(&bob_post), "{home:?}");
    inst.shutdown().await;
}

async fn mute(api: &Client, whom: &str, body: Value) -> Value {
    call_ok(
        api,
        Method::POST,
        &format!("/api/v1/accounts/{whom}/mute"),
        body,
    )
    .await
}

#[tokio::test]
async fn mutes_and_blocks_hide_posts_boosts_and_notifications_until_lifted() {
    let inst = Instance::start("all", &[]).await;
    let [(alice, _, api), (bob, _, bob_api), (carol, _, carol_api)] =
        users(&inst, ["alice", "bob", "carol"]).await;
    let (bob_id, carol_id) = (bob.id.to_string(), carol.id.to_string());
    follow(&api, &bob_id).await;
    follow(&api, &carol_id).await;
    let list = new_list(&api, json!({ "title": "both" })).await;
    add_to_list(&api, &list, &[bob_id.as_str(), carol_id.as_str()]).await;

    // Bad input: a duration that is not whole seconds, oneself.
    for d in [json!("soon"), json!(-1), json!(1.5)] {
        assert_error(
            &api.call(
                Method::POST,
                &format!("/api/v1/accounts/{bob_id}/mute"),
                &json!({ "duration": d }),
            )
            .await,
            422,
            "a bad duration",
        );
    }
    assert_error(
        &api.act(Method::POST, &format!("/api/v1/accounts/{}/mute", alice.id))
            .await,
        422,
        "muting oneself",
    );

    let bobs = id(&bob_api
        .posted(&json!({ "status": "bob says #mutetag" }))
        .await);
    let mention = id(&bob_api.posted(&json!({ "status": "@alice hi" })).await);
    let boost = id(&act_ok(
        &carol_api,
        Method::POST,
        &format!("/api/v1/statuses/{bobs}/reblog"),
    )
    .await);
    let carols = id(&carol_api
        .posted(&json!({ "status": "carol says #mutetag" }))
        .await);
    let paths = [
        "/api/v1/timelines/home".to_string(),
        "/api/v1/timelines/public".to_string(),
        "/api/v1/timelines/public?local=true".to_string(),
        "/api/v1/timelines/tag/mutetag".to_string(),
        format!("/api/v1/timelines/list/{list}"),
    ];
    let notified_by = |api: &Client| {
        let api = Client::new(&inst, api.token.as_deref());
        async move {
            let n = api.get("/api/v1/notifications").await;
            n.body
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["account"]["id"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    for p in &paths {
        assert!(ids(&api, p).await.contains(&bobs), "before the mute: {p}");
    }
    assert!(notified_by(&api).await.contains(&bob_id));
    let unread =
        || async { api.get("/api/v1/notifications/unread_count").await.body["count"].clone() };
    assert_eq!(unread().await, 1, "bob's mention");

    // Muted (notifications too, the default): bob's posts, carol's boost of bob's post and
    // bob's mention leave every timeline and the notifications; carol's stay.
    let rel = mute(&api, &bob_id, json!({})).await;
    assert_eq!(
        (
            rel["muting"].as_bool(),
            rel["muting_notifications"].as_bool()
        ),
        (Some(true), Some(true))
    );
    for p in &paths {
        let page = ids(&api, p).await;
        assert!(
            !page.contains(&bobs) && !page.contains(&mention) && !page.contains(&boost),
            "muted: {p} shows {page:?}"
        );
        assert!(page.contains(&carols), "carol's post stays on {p}");
    }
    assert!(!notified_by(&api).await.contains(&bob_id));
    assert_eq!(
        unread().await,
        0,
        "the unread count leaves out what the list does"
    );
    let muted = api.get("/api/v1/mutes").await;
    assert_eq!(muted.status, 200);
    assert_eq!(muted.body.as_array().map(Vec::len), Some(1));
    assert_eq!(muted.body[0]["id"], bob_id.as_str());
    assert_eq!(
        muted.body[0]["mute_expires_at"],
        Value::Null,
        "muted indefinitely"
    );
    // Others are not affected by alice's mute; a status opened directly still shows.
    assert!(
        ids(&carol_api, "/api/v1/timelines/public")
            .await
            .contains(&bobs)
    );
    assert_eq!(
        api.get(&format!("/api/v1/statuses/{bobs}")).await.status,
        200
    );

    // A mute that keeps notifications: the mention is back, the posts stay hidden.
    let rel = mute(&api, &bob_id, json!({ "notifications": false })).await;
    assert_eq!(rel["muting_notifications"], false);
    assert!(notified_by(&api).await.contains(&bob_id));
    assert!(!ids(&api, "/api/v1/timelines/home").await.contains(&bobs));

    // Unmuted: everything is back.
    let rel = act_ok(
        &api,
        Method::POST,
        &format!("/api/v1/accounts/{bob_id}/unmute"),
    )
    .await;
    assert_eq!(rel["muting"], false);
    for p in &paths {
        assert!(ids(&api, p).await.contains(&bobs), "unmuted: {p}");
    }
    assert_eq!(api.get("/api/v1/mutes").await.body, json!([]));

    // A block hides the same (and unfollows, so bob leaves the list too).
    act_ok(
        &api,
        Method::POST,
        &format!("/api/v1/accounts/{bob_id}/block"),
    )
    .await;
    for p in &paths[1..4] {
        assert!(!ids(&api, p).await.contains(&bobs), "blocked: {p}");
    }
    assert!(!notified_by(&api).await.contains(&bob_id));

    // Scopes: read:mutes to list, write:mutes to mute.
    let reader = token_with_scopes(&inst, alice.id, "read:mutes").await;
    let reader = Client::new(&inst, Some(&reader));
    assert_eq!(reader.get("/api/v1/mutes").await.status, 200);
    assert_error(
        &reader
            .act(Method::POST, &format!("/api/v1/accounts/{carol_id}/mute"))
            .await,
        403,
        "mute without write:mutes",
    );
    inst.shutdown().await;
}

#[tokio::test]
async fn a_mute_with_a_duration_ends_by_itself_on_the_queue() {
    let inst = Instance::start("all", &[]).await;
    let [(alice, _, api), (bob, _, bob_api)] = users(&inst, ["alice", "bob"]).await;
    let bob_id = bob.id.to_string();
    follow(&api, &bob_id).await;
    let bobs = id(&bob_api.posted(&json!({ "status": "soon back" })).await);

    let started = Instant::now();
    let rel = mute(&api, &bob_id, json!({ "duration": 3 })).await;
    assert_eq!(rel["muting"], true);
    let listed = api.get("/api/v1/mutes").await;
    let ends = listed.body[0]["mute_expires_at"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        chrono::DateTime::parse_from_rfc3339(&ends).is_ok(),
        "a mute with a duration lists its end: {}",
        listed.body
    );
    // Not early: while the mute stands its row stays and the post is hidden.
    let still = ids(&api, "/api/v1/timelines/home").await;
    if started.elapsed() < Duration::from_secs(3) {
        assert!(!still.contains(&bobs), "hidden while muted");
        assert_eq!(
            inst.count("SELECT count(*) FROM account_mutes").await,
            1,
            "the row stays until its end"
        );
    }
    // The queued task removes it after its end: the relationship reads unmuted again.
    eventually(WAIT, "the mute's expiry task", || async {
        let rel = api
            .get(&format!("/api/v1/accounts/relationships?id[]={bob_id}"))
            .await;
        (inst.count("SELECT count(*) FROM account_mutes").await == 0
            && rel.body[0]["muting"] == false)
            .then_some(())
    })
    .await;
    assert!(started.elapsed() >= Duration::from_secs(3), "never early");
    assert!(ids(&api, "/api/v1/timelines/home").await.contains(&bobs));
    assert_eq!(
        inst.count(
            "SELECT count(*) FROM hollo_task_message_v1 WHERE kind = 'hollo.mute-expiry.v1'"
        )
        .await,
        0,
        "one expiry, completed"
    );
    let _ = alice;
    inst.shutdown().await;
}

/// The poll-expiry standard for a mute's end: a worker process SIGKILLed while it runs the
/// expiry (held on the mute's row lock, so the kill lands mid-task) loses nothing and does
/// nothing twice: once its lease lapses another worker removes the mute, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mute_expiry_survives_a_worker_killed_mid_task() {
    let inst = Instance::start("web", &[]).await;
    let [(_, _, api), (bob, _, _)] = users(&inst, ["alice", "bob"]).await;
    let bob_id = bob.id.to_string();
    mute(&api, &bob_id, json!({ "duration": 1 })).await;
    support::expiry::KilledMidTask {
        lock: "SELECT 1 FROM account_mutes FOR UPDATE",
        kind: "hollo.mute-expiry.v1",
        done: "SELECT count(*) FROM account_mutes",
        before: 1,
        after: 0,
    }
    .check(&inst)
    .await;
    let rel = api
        .get(&format!("/api/v1/accounts/relationships?id[]={bob_id}"))
        .await;
    assert_eq!(rel.body[0]["muting"], false);
    inst.shutdown().await;
}

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

/// A domain block hides a whole server: its posts (home, public, tag), its notifications, and
/// it drops the follows both ways with an `Undo` and a `Reject`; a new `Follow` from there is
/// refused; unblocking shows its posts again. The peer runs on 127.0.0.2, another host.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_domain_block_hides_a_server_and_drops_its_follows() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start_on("127.0.0.2").await;
    let (alice, alice_token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&alice_token));
    let inbox = inst.fed.inbox("alice");
    let me = inst.fed.actor_iri("alice");

    // alice follows the peer (accepted) and the peer follows alice.
    let (_, their_follow) = follow_each_other(&inst, &api, &peer, "alice").await;
    let note = peer.new_id("notes");
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(),
        "content": "<p>@alice #domaintag</p>", "published": "2026-12-01T10:00:00Z",
        "to": [PUBLIC], "cc": [me],
        "tag": [{ "type": "Mention", "href": me, "name": "@alice" },
                { "type": "Hashtag", "name": "#domaintag" }]
    }));
    assert_eq!(peer.post(&inbox, &create).await, 202);
    let paths = [
        "/api/v1/timelines/home",
        "/api/v1/timelines/public",
        "/api/v1/timelines/tag/domaintag",
    ];
    let post_id = eventually(WAIT, "the note at home", || async {
        ids(&api, paths[0]).await.into_iter().next()
    })
    .await;
    for p in paths {
        assert!(ids(&api, p).await.contains(&post_id), "before: {p}");
    }
    let notified = || async {
        api.get("/api/v1/notifications")
            .await
            .body
            .as_array()
            .map(Vec::len)
            .unwrap_or(0)
    };
    assert_eq!(notified().await, 2, "a follow and a mention");

    // Bad input first: nothing, a URL, this server itself.
    for (body, what) in [
        (json!({}), "no domain"),
        (json!({ "domain": "https://127.0.0.2/" }), "a URL"),
        (json!({ "domain": "127.0.0.1" }), "our own domain"),
    ] {
        assert_error(
            &api.call(Method::POST, "/api/v1/domain_blocks", &body).await,
            422,
            what,
        );
    }
    api.form(Method::POST, "/api/v1/domain_blocks", "domain=127.0.0.2")
        .await
        .assert_ok();
    assert_eq!(
        api.get("/api/v1/domain_blocks").await.body,
        json!(["127.0.0.2"])
    );

    // Follows dropped both ways, each side told.
    received(&peer, "Undo", |b| b["object"]["type"] == "Follow").await;
    received(&peer, "Reject", |b| {
        b["object"]["id"] == their_follow.as_str()
    })
    .await;
    assert_eq!(inst.count("SELECT count(*) FROM follows").await, 0);
    assert_eq!(inst.count("SELECT count(*) FROM followers").await, 0);
    // Hidden everywhere, notifications too.
    for p in paths {
        assert!(!ids(&api, p).await.contains(&post_id), "blocked: {p}");
    }
    assert_eq!(notified().await, 0);
    assert_eq!(
        api.get("/api/v1/notifications/unread_count").await.body["count"],
        0
    );
    // A new Follow from there is refused.
    let again = json!({
        "id": peer.new_id("follows"), "type": "Follow", "actor": peer.actor(), "object": me,
    });
    assert_eq!(peer.post(&inbox, &again).await, 202);
    received(&peer, "Reject", |b| b["object"]["id"] == again["id"]).await;
    assert_eq!(inst.count("SELECT count(*) FROM followers").await, 0);

    // Another account is not affected; a token without write:blocks cannot block.
    let (_, carol_token) = inst.account("carol").await;
    let carol = Client::new(&inst, Some(&carol_token));
    assert!(ids(&carol, paths[1]).await.contains(&post_id));

    // Nor does the server's next public note reach alice's public stream, while carol's
    // (posted after it) does.
    let mut public = connect(&inst.base, "stream=public", &alice_token).await;
    let later = peer.new_id("notes");
    let create = peer.create(json!({
        "id": later, "type": "Note", "attributedTo": peer.actor(),
        "content": "<p>still here</p>", "published": "2026-12-01T11:00:00Z",
        "to": [PUBLIC], "cc": []
    }));
    assert_eq!(peer.post(&inbox, &create).await, 202);
    // Stored (and its stream event written) before the control is posted: the barrier.
    inst.until_count(
        "the later note is stored",
        &format!("SELECT count(*) FROM remote_posts WHERE iri = '{later}'"),
        |c| c == 1,
    )
    .await;
    let control = id(&carol.posted(&json!({ "status": "the control" })).await);
    let before = until_status(&mut public, &control).await;
    assert!(
        before.is_empty(),
        "a blocked server's note was streamed: {before:?}"
    );
    let reader = token_with_scopes(&inst, alice.id, "read:blocks").await;
    assert_error(
        &Client::new(&inst, Some(&reader))
            .form(Method::POST, "/api/v1/domain_blocks", "domain=example.com")
            .await,
        403,
        "write:blocks",
    );

    // Unblocked (the domain in the query, as a DELETE may send it): the posts show again.
    api.bare(Method::DELETE, "/api/v1/domain_blocks?domain=127.0.0.2")
        .await
        .assert_ok();
    assert_eq!(api.get("/api/v1/domain_blocks").await.body, json!([]));
    assert!(ids(&api, paths[1]).await.contains(&post_id));
    inst.shutdown().await;
}

/// Reads `(stream, event, status id)` messages until one has the id `want`, returning those
/// read before it.
async fn until_status(ws: &mut Socket, want: &str) -> Vec<(Vec<String>, String, String)> {
    let start = Instant::now();
    let mut before = Vec::new();
    loop {
        let left = WAIT
            .checked_sub(start.elapsed())
            .unwrap_or_else(|| panic!("timed out waiting for {want}; got {before:?}"));
        let m = tokio::time::timeout(left, ws.next())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {want}; got {before:?}"));
        let Some(Ok(Message::Text(text))) = m else {
            panic!("stream ended waiting for {want}: {m:?}")
        };
        let v: Value = serde_json::from_str(text.as_str()).unwrap();
        assert!(v.get("error").is_none(), "{v}");
        let payload: Value = v["payload"]
            .as_str()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null);
        let stream: Vec<String> = serde_json::from_value(v["stream"].clone()).unwrap();
        let event = v["event"].as_str().unwrap_or_default().to_string();
        let got = payload["id"].as_str().unwrap_or_default().to_string();
        if got == want {
            return before;
        }
        before.push((stream, event, got));
    }
}

#[tokio::test]
async fn list_streams_and_muted_accounts_on_the_streams() {
    let inst = Instance::start("all", &[]).await;
    let [
        (_, alice_token, api),
        (bob, _, bob_api),
        (carol, _, carol_api),
        (_, eve_token, _),
    ] = users(&inst, ["alice", "bob", "carol", "eve"]).await;
    let (bob_id, carol_id) = (bob.id.to_string(), carol.id.to_string());
    follow(&api, &bob_id).await;
    follow(&api, &carol_id).await;
    let list = new_list(&api, json!({ "title": "bob and carol" })).await;
    add_to_list(&api, &list, &[bob_id.as_str(), carol_id.as_str()]).await;

    // Another account's list cannot be streamed (404 at the handshake, an error when
    // subscribed), nor can a malformed one.
    match open(
        &inst.base,
        &format!("stream=list&list={list}"),
        Token::Header(&eve_token),
    )
    .await
    {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            assert_eq!(resp.status().as_u16(), 404)
        }
        other => panic!("eve streamed alice's list: {:?}", other.map(|_| ())),
    }
    let mut eve = connect(&inst.base, "stream=public:local", &eve_token).await;
    eve.send(Message::Text(
        json!({ "type": "subscribe", "stream": "list", "list": list })
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    let answer = tokio::time::timeout(WAIT, eve.next()).await.unwrap();
    let Some(Ok(Message::Text(answer))) = answer else {
        panic!("no answer: {answer:?}")
    };
    assert!(answer.as_str().contains("Not authorized"), "{answer}");

    // alice's list stream and user stream, with bob muted: bob's post and carol's boost of it
    // never arrive, carol's post (sent after them) does, on both.
    let mut listed = connect(
        &inst.base,
        &format!("stream=list&list={list}"),
        &alice_token,
    )
    .await;
    let mut user = connect(&inst.base, "stream=user", &alice_token).await;
    let first = id(&bob_api
        .posted(&json!({ "status": "before the mute" }))
        .await);
    let before = until_status(&mut listed, &first).await;
    assert!(before.is_empty(), "{before:?}");
    mute(&api, &bob_id, json!({})).await;
    let bobs = id(&bob_api.posted(&json!({ "status": "while muted" })).await);
    let boost = id(&act_ok(
        &carol_api,
        Method::POST,
        &format!("/api/v1/statuses/{bobs}/reblog"),
    )
    .await);
    let carols = id(&carol_api.posted(&json!({ "status": "the control" })).await);
    for (name, ws) in [("list", &mut listed), ("user", &mut user)] {
        let before = until_status(ws, &carols).await;
        assert!(
            !before.iter().any(|(_, _, id)| *id == bobs || *id == boost),
            "{name}: a muted account's post reached the stream: {before:?}"
        );
    }
    // The list stream names the list, as Mastodon's.
    act_ok(
        &api,
        Method::POST,
        &format!("/api/v1/accounts/{bob_id}/unmute"),
    )
    .await;
    let after = id(&bob_api.posted(&json!({ "status": "after the mute" })).await);
    let before = until_status(&mut listed, &after).await;
    assert!(
        before
            .iter()
            .all(|(s, _, _)| *s == ["list".to_string(), list.clone()])
    );
    let _ = until_status(&mut user, &after).await;
    inst.shutdown().await;
}
