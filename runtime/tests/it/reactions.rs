//! Emoji reactions (R-MAPI-6, issue 32 item 3) over HTTP: Hollo's `react`/`unreact` and
//! Pleroma's reaction routes, the `emoji_reactions` of the Status entity, `emoji_reaction`
//! notifications, the `EmojiReact` (and its `Undo`) sent to a remote author and received from
//! one — Misskey's `Like` with `content` and a custom emoji included. Hostile cases first: what
//! is not an emoji, a reaction signed by someone else than its actor, a reaction to a post the
//! reactor may not read.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Client, WAIT, alice_and_peer, follow_each_other, id, notifications_of, received, users,
};
use support::eventually;
use support::node::Instance;

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn reactions_of(api: &Client, status: &str) -> Value {
    api.get(&format!("/api/v1/statuses/{status}")).await.body["emoji_reactions"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_reactions_are_checked_counted_notified_and_taken_back() {
    let inst = Instance::start("all", &[]).await;
    let [(alice, _, alice_api), (bob, _, bob_api), (_, _, carol_api)] =
        users(&inst, ["alice", "bob", "carol"]).await;
    inst.custom_emoji("blobcat", "http://img.example/blobcat.png")
        .await;
    let post = alice_api.posted(&json!({"status": "react to me"})).await;
    let sid = id(&post);

    // Not emojis: text, markup, an unknown shortcode — 422 and nothing stored.
    for bad in [
        "abc",
        "<b>x</b>",
        ":nosuch:",
        "👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍",
    ] {
        let a = bob_api
            .act(
                Method::POST,
                &format!("/api/v1/statuses/{sid}/react/{}", enc(bad)),
            )
            .await;
        assert_eq!(a.status, 422, "{bad}: {}", a.body);
    }
    assert_eq!(reactions_of(&alice_api, &sid).await, json!([]));

    // A post bob may not read takes no reaction from him: the same 404 as no post.
    let private = alice_api
        .posted(&json!({"status": "followers only", "visibility": "private"}))
        .await;
    let a = bob_api
        .act(
            Method::POST,
            &format!("/api/v1/statuses/{}/react/{}", id(&private), enc("👍")),
        )
        .await;
    assert_eq!(a.status, 404, "{}", a.body);

    // Hollo's path and Pleroma's, a Unicode emoji and a custom one; twice is once.
    for _ in 0..2 {
        bob_api
            .act(
                Method::POST,
                &format!("/api/v1/statuses/{sid}/react/{}", enc("👍")),
            )
            .await
            .assert_ok();
    }
    bob_api
        .act(
            Method::PUT,
            &format!(
                "/api/v1/pleroma/statuses/{sid}/reactions/{}",
                enc(":blobcat:")
            ),
        )
        .await
        .assert_ok();
    carol_api
        .act(
            Method::POST,
            &format!("/api/v1/statuses/{sid}/react/{}", enc("👍")),
        )
        .await
        .assert_ok();
    let shown = reactions_of(&bob_api, &sid).await;
    assert_eq!(shown[0]["name"], "👍");
    assert_eq!(shown[0]["count"], 2);
    assert_eq!(shown[0]["me"], true);
    assert_eq!(shown[0]["account_ids"][0], bob.id.to_string());
    assert_eq!(shown[1]["name"], "blobcat");
    assert_eq!(shown[1]["count"], 1);
    assert_eq!(shown[1]["url"], "http://img.example/blobcat.png");
    let to_alice = reactions_of(&alice_api, &sid).await;
    assert_eq!(to_alice[0]["me"], false);

    // Alice hears of each reaction once, as `emoji_reaction`; her own posts' reactions only.
    let n = notifications_of(&alice_api, "emoji_reaction").await;
    assert_eq!(n.len(), 3, "{n:?}");
    assert!(n.iter().all(|x| x["status"]["id"] == sid.as_str()));
    assert!(
        notifications_of(&bob_api, "emoji_reaction")
            .await
            .is_empty()
    );

    // Pleroma's list names the accounts.
    let listed = anonymous_list(&inst, &sid).await;
    assert_eq!(listed[0]["accounts"][0]["username"], "bob");
    assert_eq!(listed[0]["accounts"][1]["username"], "carol");
    let one = bob_api
        .get(&format!("/api/v1/pleroma/statuses/{sid}/reactions/blobcat"))
        .await;
    assert_eq!(one.body.as_array().map(Vec::len), Some(1), "{}", one.body);

    // Taking one back: the count, the flag and the notification follow.
    let a = bob_api
        .act(
            Method::POST,
            &format!("/api/v1/statuses/{sid}/unreact/{}", enc("👍")),
        )
        .await
        .assert_ok();
    let thumbs = a.body["emoji_reactions"]
        .as_array()
        .and_then(|r| r.iter().find(|x| x["name"] == "👍"))
        .cloned()
        .expect("carol's 👍 stays");
    assert_eq!(thumbs["count"], 1);
    assert_eq!(thumbs["me"], false);
    let a = bob_api
        .act(
            Method::DELETE,
            &format!("/api/v1/pleroma/statuses/{sid}/reactions/blobcat"),
        )
        .await
        .assert_ok();
    assert_eq!(a.body["emoji_reactions"].as_array().map(Vec::len), Some(1));
    let n = notifications_of(&alice_api, "emoji_reaction").await;
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(n[0]["account"]["username"], "carol");
    let _ = alice;
}

async fn anonymous_list(inst: &Instance, status: &str) -> Value {
    Client::new(inst, None)
        .get(&format!("/api/v1/pleroma/statuses/{status}/reactions"))
        .await
        .body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reactions_cross_to_and_from_a_remote_server() {
    let (inst, peer, _, api) = alice_and_peer().await;
    let (peer_id, _) = follow_each_other(&inst, &api, &peer, "alice").await;
    let me = inst.fed.actor_iri("alice");

    // Ours, to their post: an `EmojiReact` to the author, then its `Undo`.
    let note = peer.new_id("notes");
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(), "to": [PUBLIC],
        "content": "<p>theirs</p>", "published": "2026-12-01T10:00:00Z"
    }));
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &create).await, 202);
    let theirs = eventually(WAIT, "their note at home", || async {
        let home = api.get("/api/v1/timelines/home").await.body;
        home.as_array()?
            .iter()
            .find(|s| s["uri"] == note.as_str())
            .map(id)
    })
    .await;
    api.act(
        Method::POST,
        &format!("/api/v1/statuses/{theirs}/react/{}", enc("🎉")),
    )
    .await
    .assert_ok();
    let react = received(&peer, "EmojiReact", |b| b["object"] == note.as_str()).await;
    assert_eq!(react["actor"], me.as_str());
    assert_eq!(react["content"], "🎉");
    api.act(
        Method::POST,
        &format!("/api/v1/statuses/{theirs}/unreact/{}", enc("🎉")),
    )
    .await
    .assert_ok();
    let undo = received(&peer, "Undo", |b| b["object"]["type"] == "EmojiReact").await;
    assert_eq!(undo["object"]["id"], react["id"]);

    // Theirs, to our posts.
    let post = api.posted(&json!({"status": "ours"})).await;
    let (sid, uri) = (id(&post), post["uri"].as_str().expect("uri").to_string());
    let secret = api
        .posted(&json!({"status": "mentioned only", "visibility": "direct"}))
        .await;

    // Hostile first: signed by the peer but claiming another actor (401); a reaction to a
    // direct post not addressed to it, and one that is no emoji (accepted, stored nothing).
    let forged = json!({
        "id": peer.new_id("reacts"), "type": "EmojiReact", "actor": peer.actor_of("mallory"),
        "object": uri, "content": "👎",
    });
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &forged).await, 401);
    for (object, content) in [
        (secret["uri"].clone(), "👀"),
        (json!(uri), "<script>x</script>"),
    ] {
        let a = json!({
            "id": peer.new_id("reacts"), "type": "EmojiReact", "actor": peer.actor(),
            "object": object, "content": content,
        });
        assert_eq!(peer.post(&inst.fed.inbox("alice"), &a).await, 202);
    }

    // Fedify's and Pleroma's `EmojiReact`, and Misskey's `Like` with a custom emoji.
    let react_id = peer.new_id("reacts");
    let react = json!({
        "@context": ["https://www.w3.org/ns/activitystreams", {"litepub": "http://litepub.social/ns#", "EmojiReact": "litepub:EmojiReact"}],
        "id": react_id, "type": "EmojiReact", "actor": peer.actor(), "object": uri, "content": "❤️",
    });
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &react).await, 202);
    let like = json!({
        "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(), "object": uri,
        "content": ":misskey_blob:", "_misskey_reaction": ":misskey_blob:",
        "tag": [{ "id": peer.iri("/emojis/misskey_blob"), "type": "Emoji", "name": ":misskey_blob:",
                  "icon": { "type": "Image", "url": peer.iri("/uploads/blob.png") } }],
    });
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &like).await, 202);
    let shown = eventually(WAIT, "both remote reactions on our post", || async {
        let r = reactions_of(&api, &sid).await;
        (r.as_array()?.len() == 2).then_some(r)
    })
    .await;
    // Both arrived through the inbox queue, whose workers may store them in either order (the
    // list is in the order each emoji was first stored): find each by its name.
    let by_name = |name: &str| {
        shown
            .as_array()
            .and_then(|r| r.iter().find(|x| x["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {shown}"))
    };
    assert_eq!(by_name("❤️")["account_ids"][0], peer_id.as_str());
    let blob = by_name("misskey_blob");
    let blob = blob["url"].as_str().expect("url");
    assert!(
        blob.starts_with(&format!("{}/media/proxy/", inst.base)),
        "a remote emoji is shown through our proxy: {blob}"
    );
    // The Misskey `Like` was a reaction, not a favourite.
    let status = api.get(&format!("/api/v1/statuses/{sid}")).await.body;
    assert_eq!(status["favourites_count"], 0, "{status}");
    assert!(reactions_of(&api, &id(&secret)).await == json!([]));
    let n = eventually(WAIT, "the reactions' notifications", || async {
        let n = notifications_of(&api, "emoji_reaction").await;
        (n.len() == 2).then_some(n)
    })
    .await;
    assert!(n.iter().all(|x| x["account"]["id"] == peer_id.as_str()));

    // Their `Undo` takes it back, with its notification.
    let undo = json!({
        "id": peer.new_id("undos"), "type": "Undo", "actor": peer.actor(),
        "object": { "id": react_id, "type": "EmojiReact", "actor": peer.actor(), "object": uri },
    });
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &undo).await, 202);
    eventually(WAIT, "the undone reaction gone", || async {
        let r = reactions_of(&api, &sid).await;
        (r.as_array()?.len() == 1).then_some(())
    })
    .await;
    assert_eq!(notifications_of(&api, "emoji_reaction").await.len(), 1);
}

/// Fedibird's (and upstream Hollo's) paths: `PUT`/`DELETE
/// /api/v1/statuses/{id}/emoji_reactions/{emoji}` react and take back as `react`/`unreact`
/// do, with the same refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fedibird_paths_react_and_take_back() {
    let inst = Instance::start("all", &[]).await;
    let [(_, _, alice_api), (bob, _, bob_api)] = users(&inst, ["alice", "bob"]).await;
    let sid = id(&alice_api.posted(&json!({"status": "react here"})).await);
    let private = id(&alice_api
        .posted(&json!({"status": "followers only", "visibility": "private"}))
        .await);
    let path = |status: &str, emoji: &str| {
        format!("/api/v1/statuses/{status}/emoji_reactions/{}", enc(emoji))
    };

    let a = bob_api.act(Method::PUT, &path(&private, "🎉")).await;
    assert_eq!(a.status, 404, "a post bob may not read: {}", a.body);
    let a = bob_api.act(Method::PUT, &path(&sid, "abc")).await;
    assert_eq!(a.status, 422, "not an emoji: {}", a.body);

    let a = bob_api
        .act(Method::PUT, &path(&sid, "🎉"))
        .await
        .assert_ok();
    let shown = &a.body["emoji_reactions"];
    assert_eq!(shown[0]["name"], "🎉", "{shown}");
    assert_eq!(shown[0]["count"], 1);
    assert_eq!(shown[0]["me"], true);
    assert_eq!(shown[0]["account_ids"][0], bob.id.to_string());
    assert_eq!(
        notifications_of(&alice_api, "emoji_reaction").await.len(),
        1
    );

    let a = bob_api
        .act(Method::DELETE, &path(&sid, "🎉"))
        .await
        .assert_ok();
    assert_eq!(a.body["emoji_reactions"], json!([]), "{}", a.body);
    assert_eq!(reactions_of(&alice_api, &sid).await, json!([]));
}
