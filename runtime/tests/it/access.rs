//! Who may read and act on a post, decided against the relationships as they stand
//! (R-MAPI-VIS, R-MAPI-3; the fourth audit's F2 and F9):
//!
//! - a followers-only post is its author's followers' for as long as they follow: one blocked,
//!   removed from the followers, or who unfollowed no longer reads it by any route nor acts on
//!   it — local or remote — while someone who follows later does (as on Mastodon);
//! - a block, either way, refuses favourites, boosts, replies, quotes and reactions, from this
//!   server's users and from remote actors; and whom an author blocks (or whose server) does
//!   not fetch even its public posts with a signed request — the document, the page, the
//!   pinned posts — as Mastodon answers it (`visibility.rs` covers the client API);
//! - what a reader is shown of an account's and a post's counts, and the public profile's
//!   validator, does not move with posts that reader may not see.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Answer, Client, WAIT, add_to_list, call_ok, follow, id, new_list, peer_follows_accepted,
    received, remote_post_id, resolve_id, until_follow_accepted, users,
};
use support::eventually;
use support::node::Instance;
use support::peer::Peer;

/// 👍, as a path segment.
const THUMBS: &str = "%F0%9F%91%8D";
const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The routes that list statuses where a followers-only `status` (`sid`, at `uri`) shows to
/// a follower: by id, the home and list timelines, its author's profile, the thread of
/// `root` it replies to, favourites, bookmarks, search by its IRI, notifications (both
/// versions).
fn listing_paths(sid: &str, uri: &str, root: &str, author: &str, list: &str) -> Vec<String> {
    vec![
        format!("/api/v1/statuses?id[]={sid}"),
        "/api/v1/timelines/home?limit=40".to_string(),
        format!("/api/v1/timelines/list/{list}"),
        format!("/api/v1/accounts/{author}/statuses?limit=40"),
        format!("/api/v1/statuses/{root}/context"),
        "/api/v1/favourites".to_string(),
        "/api/v1/bookmarks".to_string(),
        format!("/api/v2/search?q={}&type=statuses&resolve=false", enc(uri)),
        "/api/v1/notifications?limit=40".to_string(),
        "/api/v2/notifications?limit=40".to_string(),
    ]
}

/// `who` no longer meets the status: 404 by id, absent from every listing, and every
/// action on it (favourite, boost, bookmark, reaction, reply, quote) a 404.
async fn cannot_reach(
    api: &Client,
    who: &str,
    status: &Value,
    root: &str,
    author: &str,
    list: &str,
) {
    let sid = id(status);
    let uri = status["uri"].as_str().unwrap();
    let one = api.get(&format!("/api/v1/statuses/{sid}")).await;
    assert_eq!(one.status, 404, "{who} still reads it: {}", one.body);
    let mut paths = listing_paths(&sid, uri, root, author, list);
    // Public posts only there, but a leak would show it.
    paths.push("/api/v1/timelines/tag/accesstag?limit=40".to_string());
    for path in paths {
        let a = api.get(&path).await;
        assert!(
            !a.body.to_string().contains(&sid),
            "{who}: {path} still shows it ({}): {}",
            a.status,
            a.body
        );
    }
    for action in [
        "favourite".to_string(),
        "reblog".to_string(),
        "bookmark".to_string(),
        format!("react/{THUMBS}"),
    ] {
        let a = api
            .act(Method::POST, &format!("/api/v1/statuses/{sid}/{action}"))
            .await;
        assert_eq!(a.status, 404, "{who} may still {action} it: {}", a.body);
    }
    for (what, body) in [
        (
            "reply to",
            json!({ "status": "a reply", "in_reply_to_id": sid }),
        ),
        (
            "quote",
            json!({ "status": "a quote", "quoted_status_id": sid }),
        ),
    ] {
        let a = api.post(&body).await;
        assert_eq!(a.status, 404, "{who} may still {what} it: {}", a.body);
    }
}

/// Followers-only posts are read against the follow as it stands, not the followers the
/// post had when it was written: a follower alice blocks, one she removes from her
/// followers, and one who unfollows no longer reach it through any route or action; one who
/// follows after it was written reads it; one it mentions reads it without following.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_followers_only_post_is_read_by_the_followers_of_now() {
    let inst = Instance::start("all", &[]).await;
    let [
        (alice, _, alice_api),
        (bob, _, bob_api),
        (carol, _, carol_api),
        (_, _, dave_api),
        (_, _, erin_api),
        (_, _, frank_api),
    ] = users(&inst, ["alice", "bob", "carol", "dave", "erin", "frank"]).await;
    let alice_id = alice.id.to_string();
    // Three followers, each asking to hear of every post, each with alice on a list.
    let mut lists = Vec::new();
    for api in [&bob_api, &carol_api, &dave_api] {
        call_ok(
            api,
            Method::POST,
            &format!("/api/v1/accounts/{alice_id}/follow"),
            json!({ "notify": true }),
        )
        .await;
        let list = new_list(api, json!({ "title": "alice" })).await;
        add_to_list(api, &list, &[alice_id.as_str()]).await;
        lists.push(list);
    }
    let root = alice_api.posted(&json!({ "status": "a thread" })).await;
    let secret = alice_api
        .posted(&json!({
            "status": "FOLLOWERS-ONLY-SECRET #accesstag",
            "visibility": "private",
            "in_reply_to_id": id(&root),
        }))
        .await;
    let sid = id(&secret);
    let uri = secret["uri"].as_str().unwrap().to_string();
    let mentioning = alice_api
        .posted(&json!({ "status": "@frank MENTIONED-SECRET", "visibility": "private" }))
        .await;

    // Each follower meets it everywhere (so what is looked for below is what a leak shows).
    for (who, api, list) in [
        ("bob", &bob_api, &lists[0]),
        ("carol", &carol_api, &lists[1]),
        ("dave", &dave_api, &lists[2]),
    ] {
        for action in ["favourite", "bookmark"] {
            let a = api
                .act(Method::POST, &format!("/api/v1/statuses/{sid}/{action}"))
                .await;
            assert_eq!(a.status, 200, "{who} {action}: {}", a.body);
        }
        for path in listing_paths(&sid, &uri, &id(&root), &alice_id, list) {
            let a = api.get(&path).await;
            assert!(
                a.body.to_string().contains(&sid),
                "{who}, a follower, does not see it in {path}: {}",
                a.body
            );
        }
    }
    let frank_reads = frank_api
        .get(&format!("/api/v1/statuses/{}", id(&mentioning)))
        .await;
    assert_eq!(
        frank_reads.status, 200,
        "the mentioned read it: {}",
        frank_reads.body
    );

    // Alice blocks bob, removes carol from her followers; dave unfollows.
    call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{}/block", bob.id),
        json!({}),
    )
    .await;
    call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{}/remove_from_followers", carol.id),
        json!({}),
    )
    .await;
    call_ok(
        &dave_api,
        Method::POST,
        &format!("/api/v1/accounts/{alice_id}/unfollow"),
        json!({}),
    )
    .await;
    for (who, api, list) in [
        ("bob (blocked)", &bob_api, &lists[0]),
        ("carol (removed)", &carol_api, &lists[1]),
        ("dave (unfollowed)", &dave_api, &lists[2]),
    ] {
        cannot_reach(api, who, &secret, &id(&root), &alice_id, list).await;
    }
    // Its author's counts show none of their favourites any more either.
    let own = alice_api.get(&format!("/api/v1/statuses/{sid}")).await;
    assert_eq!(own.status, 200, "{}", own.body);

    // Someone who follows now reads what was written before; following again reads again.
    follow(&erin_api, &alice_id).await;
    follow(&dave_api, &alice_id).await;
    for (who, api) in [("erin", &erin_api), ("dave", &dave_api)] {
        let a = api.get(&format!("/api/v1/statuses/{sid}")).await;
        assert_eq!(
            a.status, 200,
            "{who}, a follower now, cannot read it: {}",
            a.body
        );
        let profile = api
            .get(&format!("/api/v1/accounts/{alice_id}/statuses"))
            .await;
        assert!(
            profile.body.to_string().contains(&sid),
            "{who} does not see it on alice's profile: {}",
            profile.body
        );
    }
    // The mentioned still read what names them, without following.
    let frank_reads = frank_api
        .get(&format!("/api/v1/statuses/{}", id(&mentioning)))
        .await;
    assert_eq!(frank_reads.status, 200, "{}", frank_reads.body);
    inst.shutdown().await;
}

/// A signed `GET` of our status's IRI as `peer` (its person's key): the status code.
async fn signed_get(peer: &Peer, url: &str) -> u16 {
    use hollo_runtime::federation::transport::signature;
    let u = url::Url::parse(url).unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    signature::sign_request(&peer.key(), &Method::GET, &u, None, &mut headers).unwrap();
    reqwest::Client::new()
        .get(url)
        .headers(headers)
        .header("accept", "application/activity+json")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A `GET` of `url` signed as the peer's person `name`, wanting `accept`: the status code and
/// the body.
async fn signed_get_as(peer: &Peer, name: &str, url: &str, accept: &str) -> (u16, String) {
    use hollo_runtime::federation::transport::signature::{self, SigningKey};
    let key = SigningKey::new(
        format!("{}#main-key", peer.actor_of(name)),
        support::peer::peer_key(),
    )
    .unwrap();
    let u = url::Url::parse(url).unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    signature::sign_request(&key, &Method::GET, &u, None, &mut headers).unwrap();
    let resp = reqwest::Client::new()
        .get(url)
        .headers(headers)
        .header("accept", accept)
        .send()
        .await
        .unwrap();
    (
        resp.status().as_u16(),
        resp.text().await.unwrap_or_default(),
    )
}

/// Waits until the inbox has processed each of the activities `ids`.
async fn processed(inst: &Instance, ids: &[&str]) {
    let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    eventually(WAIT, "the activities processed", || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM inbox_activities WHERE id = ANY($1) AND processed_at IS NOT NULL",
        )
        .bind(&ids)
        .fetch_one(&inst.pool)
        .await
        .unwrap();
        (n == ids.len() as i64).then_some(())
    })
    .await;
}

/// Notifications of `account` of `kind` about `post`.
async fn notified(inst: &Instance, account: uuid::Uuid, kind: &str, post: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM notifications WHERE account_id = $1 AND type = $2 AND post_id = $3::uuid",
    )
    .bind(account)
    .bind(kind)
    .bind(post)
    .fetch_one(&inst.pool)
    .await
    .unwrap()
}

/// A remote follower that unfollows gets nothing more of the followers-only post: it may not
/// fetch it (signed or not), and its like and reaction of it are dropped. A remote actor
/// alice blocks has its like, boost, reaction and quote request of her public post dropped
/// (the request answered with a `Reject`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn remote_ex_followers_and_blocked_actors_reach_nothing() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let [(alice, _, alice_api)] = users(&inst, ["alice"]).await;
    let inbox = inst.fed.inbox("alice");
    let follow_activity = peer_follows_accepted(&inst, &peer, "alice").await;
    let public = alice_api.posted(&json!({ "status": "for everyone" })).await;
    let secret = alice_api
        .posted(&json!({ "status": "REMOTE-FOLLOWERS-SECRET", "visibility": "private" }))
        .await;
    let secret_uri = secret["uri"].as_str().unwrap().to_string();
    // Delivered to the peer, a follower then.
    received(&peer, "Create", |b| {
        b["object"]["id"] == secret_uri.as_str()
    })
    .await;

    // The peer unfollows.
    let undo = json!({
        "id": peer.new_id("undos"), "type": "Undo", "actor": peer.actor(),
        "object": follow_activity,
    });
    assert_eq!(peer.post(&inbox, &undo).await, 202);
    inst.until_count("the follower gone", "SELECT count(*) FROM followers", |n| {
        n == 0
    })
    .await;
    for signed in [true, false] {
        let code = if signed {
            signed_get(&peer, &secret_uri).await
        } else {
            reqwest::Client::new()
                .get(&secret_uri)
                .header("accept", "application/activity+json")
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        };
        assert_eq!(code, 404, "signed: {signed}");
    }
    let like = json!({
        "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(), "object": secret_uri,
    });
    let react = json!({
        "id": peer.new_id("reacts"), "type": "EmojiReact", "actor": peer.actor(),
        "object": secret_uri, "content": "👀",
    });
    for a in [&like, &react] {
        assert_eq!(peer.post(&inbox, a).await, 202);
    }
    processed(
        &inst,
        &[like["id"].as_str().unwrap(), react["id"].as_str().unwrap()],
    )
    .await;
    for kind in ["favourite", "emoji_reaction"] {
        assert_eq!(
            notified(&inst, alice.id, kind, &id(&secret)).await,
            0,
            "an ex-follower's {kind} of the followers-only post"
        );
    }
    let seen = alice_api
        .get(&format!("/api/v1/statuses/{}", id(&secret)))
        .await;
    assert_eq!(seen.body["favourites_count"], 0, "{}", seen.body);
    let reactions = alice_api
        .get(&format!(
            "/api/v1/pleroma/statuses/{}/reactions",
            id(&secret)
        ))
        .await;
    assert_eq!(reactions.body, json!([]), "{}", reactions.body);

    // Alice blocks the peer's mallory: its like, boost, reaction and quote request of her
    // public post are dropped.
    let mallory = resolve_id(&alice_api, &peer.handle_of("mallory")).await;
    call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{mallory}/block"),
        json!({}),
    )
    .await;
    let public_uri = public["uri"].as_str().unwrap().to_string();
    let quoting = peer.iri("/notes/quoting");
    peer.doc(
        "/notes/quoting",
        json!({
            "id": quoting, "type": "Note", "attributedTo": peer.actor_of("mallory"),
            "content": "<p>quoting</p>", "quote": public_uri, "to": [PUBLIC],
        }),
    );
    let activities = [
        json!({ "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor_of("mallory"),
                "object": public_uri }),
        json!({ "id": peer.new_id("announces"), "type": "Announce",
                "actor": peer.actor_of("mallory"), "object": public_uri, "to": [PUBLIC] }),
        json!({ "id": peer.new_id("reacts"), "type": "EmojiReact",
                "actor": peer.actor_of("mallory"), "object": public_uri, "content": "👎" }),
        json!({ "id": peer.new_id("quote-requests"), "type": "QuoteRequest",
                "actor": peer.actor_of("mallory"), "object": public_uri,
                "instrument": quoting }),
    ];
    for a in &activities {
        assert_eq!(peer.post_as("mallory", &inbox, a).await, 202, "{a}");
    }
    let ids: Vec<&str> = activities
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    processed(&inst, &ids).await;
    let request_id = activities[3]["id"].clone();
    let answer = received(&peer, "Reject", |b| b["object"]["id"] == request_id).await;
    assert_eq!(answer["actor"], inst.fed.actor_iri("alice"), "{answer}");
    for kind in ["favourite", "reblog", "emoji_reaction", "quote"] {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM notifications WHERE account_id = $1 AND type = $2",
        )
        .bind(alice.id)
        .bind(kind)
        .fetch_one(&inst.pool)
        .await
        .unwrap();
        assert_eq!(n, 0, "a blocked actor's {kind}");
    }
    let seen = alice_api
        .get(&format!("/api/v1/statuses/{}", id(&public)))
        .await;
    assert_eq!(seen.body["favourites_count"], 0, "{}", seen.body);
    assert_eq!(seen.body["reblogs_count"], 0, "{}", seen.body);
    let reactions = alice_api
        .get(&format!(
            "/api/v1/pleroma/statuses/{}/reactions",
            id(&public)
        ))
        .await;
    assert_eq!(reactions.body, json!([]), "{}", reactions.body);

    // Nor does mallory fetch her public post, pinned, with a signature: not the document, not
    // the page, not the pinned posts. The peer's person, and anyone unsigned, still do.
    call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/statuses/{}/pin", id(&public)),
        json!({}),
    )
    .await;
    let page = format!("{}/@alice/{}", inst.base, id(&public));
    let featured = format!("{}/collections/featured", inst.fed.actor_iri("alice"));
    const AP: &str = "application/activity+json";
    let pinned = |body: &str| body.contains(public_uri.as_str());
    for (name, shown) in [("mallory", false), ("peer", true)] {
        let (code, body) = signed_get_as(&peer, name, &public_uri, AP).await;
        assert_eq!(code == 200, shown, "{name} fetches the post: {code} {body}");
        let (code, body) = signed_get_as(&peer, name, &page, "text/html").await;
        assert_eq!(code == 200, shown, "{name} opens the page: {code} {body}");
        let (code, body) = signed_get_as(&peer, name, &featured, AP).await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(
            pinned(&body),
            shown,
            "{name}'s view of the pinned posts: {body}"
        );
    }
    let unsigned = reqwest::Client::new()
        .get(&public_uri)
        .header("accept", AP)
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 200, "anyone reads the public post");
    // A server alice blocks: none of its actors fetches it signed.
    let other = Peer::start_on("127.0.0.2").await;
    let (code, body) = signed_get_as(&other, "peer", &public_uri, AP).await;
    assert_eq!(code, 200, "another server's actor fetches the post: {body}");
    call_ok(
        &alice_api,
        Method::POST,
        "/api/v1/domain_blocks",
        json!({ "domain": "127.0.0.2" }),
    )
    .await;
    let (code, body) = signed_get_as(&other, "peer", &public_uri, AP).await;
    assert_eq!(
        code, 404,
        "a blocked server's actor fetches the post: {body}"
    );
    inst.shutdown().await;
}

/// A local follower of a remote author reads its followers-only posts while the follow
/// stands: once the author blocks it, or it unfollows, it reads them no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_remote_authors_followers_only_post_goes_with_the_follow() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let [(bob, _, bob_api), (carol, _, carol_api)] = users(&inst, ["bob", "carol"]).await;
    let mut follows = Vec::new();
    for (name, account, api) in [("bob", &bob, &bob_api), ("carol", &carol, &carol_api)] {
        let me = inst.fed.actor_iri(name);
        let peer_id = resolve_id(api, &peer.handle()).await;
        call_ok(
            api,
            Method::POST,
            &format!("/api/v1/accounts/{peer_id}/follow"),
            json!({}),
        )
        .await;
        let f = received(&peer, "Follow", |b| b["actor"] == me.as_str()).await;
        let accept = json!({
            "id": peer.new_id("accepts"), "type": "Accept", "actor": peer.actor(),
            "object": { "id": f["id"], "type": "Follow", "actor": me, "object": peer.actor() },
        });
        assert_eq!(peer.post(&inst.fed.inbox(name), &accept).await, 202);
        until_follow_accepted(&inst, account.id, &peer.actor(), "the follow accepted").await;
        follows.push(peer_id);
    }
    let note = peer.new_id("notes");
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(),
        "to": [peer.iri("/users/peer/followers")],
        "content": "<p>REMOTE-AUTHOR-SECRET</p>", "published": "2026-12-01T10:00:00Z",
    }));
    assert_eq!(
        peer.post(&format!("{}/inbox", inst.base), &create).await,
        202
    );
    let sid = remote_post_id(&inst, &note, "the followers-only note")
        .await
        .to_string();
    for (who, api) in [("bob", &bob_api), ("carol", &carol_api)] {
        let a = api.get(&format!("/api/v1/statuses/{sid}")).await;
        assert_eq!(
            a.status, 200,
            "{who}, a follower, cannot read it: {}",
            a.body
        );
    }

    // The author blocks bob; carol unfollows.
    let block = json!({
        "id": peer.new_id("blocks"), "type": "Block", "actor": peer.actor(),
        "object": inst.fed.actor_iri("bob"),
    });
    assert_eq!(peer.post(&inst.fed.inbox("bob"), &block).await, 202);
    processed(&inst, &[block["id"].as_str().unwrap()]).await;
    call_ok(
        &carol_api,
        Method::POST,
        &format!("/api/v1/accounts/{}/unfollow", follows[1]),
        json!({}),
    )
    .await;
    for (who, api) in [
        ("bob (blocked)", &bob_api),
        ("carol (unfollowed)", &carol_api),
    ] {
        let a = api.get(&format!("/api/v1/statuses/{sid}")).await;
        assert_eq!(a.status, 404, "{who} still reads it: {}", a.body);
        let profile = api
            .get(&format!("/api/v1/accounts/{}/statuses", follows[0]))
            .await;
        assert!(
            !profile.body.to_string().contains(&sid),
            "{who} still sees it on the author's profile: {}",
            profile.body
        );
        let a = api
            .act(Method::POST, &format!("/api/v1/statuses/{sid}/favourite"))
            .await;
        assert_eq!(a.status, 404, "{who} may still favourite it: {}", a.body);
    }
    inst.shutdown().await;
}

/// What each engagement with `sid` answers for `api`.
async fn engagements(api: &Client, sid: &str) -> Vec<(String, Answer)> {
    let mut out = Vec::new();
    for action in [
        "favourite".to_string(),
        "reblog".to_string(),
        format!("react/{THUMBS}"),
    ] {
        let a = api
            .act(Method::POST, &format!("/api/v1/statuses/{sid}/{action}"))
            .await;
        out.push((action, a));
    }
    for (what, body) in [
        (
            "reply",
            json!({ "status": "a reply", "in_reply_to_id": sid }),
        ),
        (
            "quote",
            json!({ "status": "a quote", "quoted_status_id": sid }),
        ),
    ] {
        out.push((what.to_string(), api.post(&body).await));
    }
    out
}

/// A block either way refuses every engagement with the other's posts — favourite, boost,
/// reaction, reply, quote — stores nothing and notifies no one; once lifted, each works
/// again. As on Mastodon, the answer says who blocks: one's own block of the author is a 403,
/// the author's block of one a 404 (its posts are not one's to see at all). The same for a
/// post of a remote actor who blocks one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_block_either_way_refuses_every_engagement() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let [(alice, _, alice_api), (bob, _, bob_api)] = users(&inst, ["alice", "bob"]).await;
    let post = alice_api
        .posted(&json!({ "status": "a public post" }))
        .await;
    let sid = id(&post);

    for (blocker, blocked) in [(&alice_api, &bob), (&bob_api, &alice)] {
        call_ok(
            blocker,
            Method::POST,
            &format!("/api/v1/accounts/{}/block", blocked.id),
            json!({}),
        )
        .await;
        // alice (the author) blocks bob: not found; bob blocks alice: forbidden.
        let refusal = if blocked.id == bob.id { 404 } else { 403 };
        for (what, a) in engagements(&bob_api, &sid).await {
            assert_eq!(
                a.status,
                refusal,
                "{} blocks {}: bob's {what}: {}",
                if blocked.id == bob.id { "alice" } else { "bob" },
                blocked.username,
                a.body
            );
            assert!(a.body["error"].is_string(), "{}", a.body);
        }
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM notifications WHERE account_id = $1")
            .bind(alice.id)
            .fetch_one(&inst.pool)
            .await
            .unwrap();
        assert_eq!(n, 0, "alice notified of a refused engagement");
        let seen = alice_api.get(&format!("/api/v1/statuses/{sid}")).await;
        for count in ["favourites_count", "reblogs_count", "replies_count"] {
            assert_eq!(seen.body[count], 0, "{count}: {}", seen.body);
        }
        call_ok(
            blocker,
            Method::POST,
            &format!("/api/v1/accounts/{}/unblock", blocked.id),
            json!({}),
        )
        .await;
    }
    // Lifted: each works.
    for (what, a) in engagements(&bob_api, &sid).await {
        assert_eq!(a.status, 200, "bob's {what} once unblocked: {}", a.body);
    }

    // A remote actor who blocks alice: its public post takes none of hers.
    let note = peer.new_id("notes");
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(), "to": [PUBLIC],
        "content": "<p>a remote public post</p>", "published": "2026-12-01T10:00:00Z",
    }));
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &create).await, 202);
    let theirs = remote_post_id(&inst, &note, "the remote post")
        .await
        .to_string();
    let block = json!({
        "id": peer.new_id("blocks"), "type": "Block", "actor": peer.actor(),
        "object": inst.fed.actor_iri("alice"),
    });
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &block).await, 202);
    processed(&inst, &[block["id"].as_str().unwrap()]).await;
    for (what, a) in engagements(&alice_api, &theirs).await {
        assert_eq!(
            a.status, 404,
            "alice's {what} of a blocker's post: {}",
            a.body
        );
    }
    let sent: Vec<String> = peer
        .received()
        .iter()
        .map(|r| r.ty().to_string())
        .filter(|t| {
            matches!(
                t.as_str(),
                "Like" | "Announce" | "EmojiReact" | "QuoteRequest"
            )
        })
        .collect();
    assert!(sent.is_empty(), "sent to a blocker: {sent:?}");
    inst.shutdown().await;
}

/// The ETag of `/@name` as an anonymous browser gets it.
async fn profile_etag(inst: &Instance, name: &str) -> String {
    let resp = reqwest::Client::new()
        .get(format!("{}/@{name}", inst.base))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    support::api::header_text(resp.headers(), "etag")
}

/// Counts count what their reader may see: a direct message and a followers-only post of
/// alice's, and private replies to her public post, change neither her `statuses_count` nor
/// the post's `replies_count` as an anonymous reader or someone following no one sees them,
/// nor her public profile's ETag; alice sees her own posts counted and the replies she may
/// read; a public reply counts for everyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counts_and_validators_count_what_the_reader_may_see() {
    let inst = Instance::start("all", &[]).await;
    let [
        (alice, _, alice_api),
        (bob, _, bob_api),
        (carol, _, carol_api),
        (_, _, dave_api),
    ] = users(&inst, ["alice", "bob", "carol", "dave"]).await;
    let anonymous = Client::new(&inst, None);
    let post = alice_api
        .posted(&json!({ "status": "a public post" }))
        .await;
    let sid = id(&post);
    // Alice follows carol (so she may read carol's followers-only reply).
    follow(&alice_api, &carol.id.to_string()).await;
    let account_path = format!("/api/v1/accounts/{}", alice.id);
    let status_path = format!("/api/v1/statuses/{sid}");
    let before = dave_api.get(&account_path).await;
    assert_eq!(
        before.body["statuses_count"], 1,
        "one public post: {}",
        before.body
    );
    let before_etag = profile_etag(&inst, "alice").await;

    alice_api
        .posted(&json!({ "status": "@bob a direct message", "visibility": "direct" }))
        .await;
    alice_api
        .posted(&json!({ "status": "for my followers", "visibility": "private" }))
        .await;
    bob_api
        .posted(&json!({ "status": "@alice psst", "visibility": "direct", "in_reply_to_id": sid }))
        .await;
    carol_api
        .posted(
            &json!({ "status": "a followers-only reply", "visibility": "private",
                         "in_reply_to_id": sid }),
        )
        .await;

    let a = dave_api.get(&account_path).await;
    assert_eq!(a.body["statuses_count"], 1, "dave: {}", a.body);
    for (who, api) in [("anonymous", &anonymous), ("dave", &dave_api)] {
        let s = api.get(&status_path).await;
        assert_eq!(s.body["replies_count"], 0, "{who}: {}", s.body);
    }
    assert_eq!(
        profile_etag(&inst, "alice").await,
        before_etag,
        "the profile's ETag moved"
    );
    // Alice sees all she wrote, and the two replies she may read.
    let me = alice_api.get("/api/v1/accounts/verify_credentials").await;
    assert_eq!(me.body["statuses_count"], 3, "{}", me.body);
    let s = alice_api.get(&status_path).await;
    assert_eq!(s.body["replies_count"], 2, "{}", s.body);
    // Bob sees his own reply counted.
    let s = bob_api.get(&status_path).await;
    assert_eq!(s.body["replies_count"], 1, "{}", s.body);

    // A public reply counts for everyone, and a public post moves the ETag.
    dave_api
        .posted(&json!({ "status": "a public reply", "in_reply_to_id": sid }))
        .await;
    alice_api
        .posted(&json!({ "status": "another public post" }))
        .await;
    let s = anonymous.get(&status_path).await;
    assert_eq!(s.body["replies_count"], 1, "{}", s.body);
    let a = dave_api.get(&account_path).await;
    assert_eq!(a.body["statuses_count"], 2, "{}", a.body);
    assert_ne!(profile_etag(&inst, "alice").await, before_etag);
    let _ = bob;
    inst.shutdown().await;
}

/// An instance upgraded with followers-only posts whose `audience` froze their followers:
/// the post-deploy migration keeps in it only whom each post names — ours, the local
/// accounts it mentions; theirs, those it mentions or addresses — and touches no other post.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_audience_migration_keeps_only_whom_a_post_names() {
    use hollo_runtime::db;
    use uuid::Uuid;
    let db = support::fresh_db_with(false).await;
    let pool = &db.pool;
    db::MIGRATOR.run(pool).await.unwrap();
    let origin = "https://hollo.example";
    let mut ids = Vec::new();
    for name in ["alice", "bob", "carol", "dave"] {
        ids.push(support::account_with_token(pool, name).await.0);
    }
    let [alice, bob, carol, dave] = ids[..] else {
        unreachable!()
    };
    let mention = |name: &str| {
        json!([{ "key": name, "name": format!("@{name}"),
                                        "href": format!("{origin}/users/{name}") }])
    };
    let mut ours = Vec::new();
    for (visibility, audience) in [("private", vec![bob, carol]), ("direct", vec![carol, bob])] {
        let id = Uuid::now_v7();
        sqlx::query(
            "INSERT INTO statuses (id, account_id, uri, content, visibility, mentions, audience)
             VALUES ($1, $2, $3, 'x', $4, $5, $6)",
        )
        .bind(id)
        .bind(alice)
        .bind(format!("{origin}/users/alice/statuses/{id}"))
        .bind(visibility)
        .bind(mention("carol"))
        .bind(&audience)
        .execute(pool)
        .await
        .unwrap();
        ours.push(id);
    }
    let theirs = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO remote_posts (id, iri, actor, body, visibility, mentions, audience)
         VALUES ($1, 'https://remote.example/notes/1', 'https://remote.example/users/x', $2,
                 'private', $3, $4)",
    )
    .bind(theirs)
    .bind(json!({ "to": ["https://remote.example/users/x/followers"],
                  "cc": format!("{origin}/users/dave") }))
    .bind(mention("carol"))
    .bind(vec![bob, carol, dave])
    .execute(pool)
    .await
    .unwrap();

    db::migrate_post(pool).await.unwrap();
    let audience = |sql: &'static str, id: Uuid| async move {
        let mut a: Vec<Uuid> = sqlx::query_scalar(sql)
            .bind(id)
            .fetch_one(pool)
            .await
            .unwrap();
        a.sort();
        a
    };
    let sorted = |mut v: Vec<Uuid>| {
        v.sort();
        v
    };
    let ours_sql = "SELECT audience FROM statuses WHERE id = $1";
    assert_eq!(
        audience(ours_sql, ours[0]).await,
        vec![carol],
        "ours, followers-only"
    );
    assert_eq!(
        audience(ours_sql, ours[1]).await,
        sorted(vec![carol, bob]),
        "a direct one is untouched"
    );
    assert_eq!(
        audience("SELECT audience FROM remote_posts WHERE id = $1", theirs).await,
        sorted(vec![carol, dave]),
        "theirs: the mentioned and the addressed"
    );
}
