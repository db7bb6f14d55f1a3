//! Timelines, markers and notifications in the Mastodon client API (SPEC §11, R-MAPI-4, issue
//! 19 items 2, 3 and 6): home, public and tag timelines with Mastodon's pagination and
//! visibility, markers, the notification list with its filters, dismissal and unread count,
//! and what the inbox makes of a remote server's notes, likes, boosts, edits and deletes —
//! over HTTP against a real node on a real PostgreSQL, with the shared `Peer` as the remote.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Client, Listed, WAIT, assert_error, follow, follow_each_other, id, list, received, resolve_id,
    users,
};
use support::eventually;
use support::multipart::upload_png;
use support::node::Instance;
use support::peer::Peer;

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn home_public_and_tag_timelines_page_and_honour_visibility() {
    let dir = support::files::temp_dir("hollo-timelines");
    let inst = Instance::on_disk(&dir, &[]).await;
    let [
        (alice, alice_token, alice_api),
        (_, bob_token, bob_api),
        (_, carol_token, _),
    ] = users(&inst, ["alice", "bob", "carol"]).await;
    follow(&bob_api, &alice.id.to_string()).await;

    let public = id(&alice_api.posted(&json!({ "status": "one #Rust" })).await);
    let unlisted = id(&alice_api
        .posted(&json!({ "status": "two #rust", "visibility": "unlisted" }))
        .await);
    let private = id(&alice_api
        .posted(&json!({ "status": "three #rust", "visibility": "private" }))
        .await);
    let direct = id(&alice_api
        .posted(&json!({ "status": "@carol four", "visibility": "direct" }))
        .await);
    let bobs = id(&bob_api.posted(&json!({ "status": "bob's own" })).await);

    // Home: alice's followers-only post reaches her follower; the direct one does not (bob is
    // not mentioned); his own post is there; newest first.
    let home = list(&inst, Some(&bob_token), "/api/v1/timelines/home").await;
    assert_eq!(
        home.ids,
        [
            bobs.as_str(),
            private.as_str(),
            unlisted.as_str(),
            public.as_str()
        ],
        "{}",
        home.body
    );
    let carol_home = list(&inst, Some(&carol_token), "/api/v1/timelines/home").await;
    assert!(carol_home.ids.is_empty(), "carol follows nobody");
    let alice_home = list(&inst, Some(&alice_token), "/api/v1/timelines/home").await;
    assert_eq!(
        alice_home.ids,
        [
            direct.as_str(),
            private.as_str(),
            unlisted.as_str(),
            public.as_str()
        ]
    );

    // Pagination: `limit`, `Link` next (older) and prev (newer), `min_id` just newer.
    let first = list(&inst, Some(&bob_token), "/api/v1/timelines/home?limit=2").await;
    assert_eq!(first.ids, [bobs.as_str(), private.as_str()]);
    let second = list(&inst, Some(&bob_token), &first.next.expect("next")).await;
    assert_eq!(second.ids, [unlisted.as_str(), public.as_str()]);
    let back = list(&inst, Some(&bob_token), &second.prev.expect("prev")).await;
    assert_eq!(back.ids, [bobs.as_str(), private.as_str()]);
    let just_newer = list(
        &inst,
        Some(&bob_token),
        &format!("/api/v1/timelines/home?min_id={public}&limit=1"),
    )
    .await;
    assert_eq!(just_newer.ids, [unlisted.as_str()]);
    let since = list(
        &inst,
        Some(&bob_token),
        &format!("/api/v1/timelines/home?since_id={public}&limit=1"),
    )
    .await;
    assert_eq!(since.ids, [bobs.as_str()], "since_id: the newest first");

    // Public: public posts only, to anyone; `local` keeps them, `remote` has none here.
    let anon = list(&inst, None, "/api/v1/timelines/public").await;
    assert_eq!(anon.ids, [bobs.as_str(), public.as_str()], "{}", anon.body);
    assert_eq!(
        anon.body[1]["content"].as_str().map(|c| c.contains("one")),
        Some(true)
    );
    let local = list(&inst, None, "/api/v1/timelines/public?local=true").await;
    assert_eq!(local.ids, anon.ids);
    let remote = list(&inst, None, "/api/v1/timelines/public?remote=true").await;
    assert!(remote.ids.is_empty());

    // only_media: a post with an image.
    let media = upload_png(&inst.base, &alice_token).await;
    let pictured = id(&alice_api
        .posted(&json!({ "status": "look", "media_ids": [media["id"]] }))
        .await);
    let only_media = list(&inst, None, "/api/v1/timelines/public?only_media=true").await;
    assert_eq!(only_media.ids, [pictured.as_str()]);

    // Tag: public posts with the tag, any case, with or without `#`.
    for path in ["/api/v1/timelines/tag/rust", "/api/v1/timelines/tag/RUST"] {
        let tagged = list(&inst, Some(&bob_token), path).await;
        assert_eq!(tagged.ids, [public.as_str()], "{path}: {}", tagged.body);
    }
    // An edit that drops the tag takes the post off the tag timeline.
    alice_api
        .edit(&public, &json!({ "status": "one, untagged" }))
        .await
        .assert_ok();
    assert!(
        list(&inst, None, "/api/v1/timelines/tag/rust")
            .await
            .ids
            .is_empty()
    );

    // Deleted posts leave every timeline.
    let gone = alice_api
        .act(Method::DELETE, &format!("/api/v1/statuses/{unlisted}"))
        .await;
    assert_eq!(gone.status, 200);
    let home = list(&inst, Some(&bob_token), "/api/v1/timelines/home").await;
    assert!(!home.ids.contains(&unlisted), "{:?}", home.ids);

    // Bad input: home needs a token; a bad one is 401 even where anonymous reads are fine; a
    // cursor that is not an id is 422.
    let anon_client = Client::new(&inst, None);
    assert_error(
        &anon_client.get("/api/v1/timelines/home").await,
        401,
        "home without a token",
    );
    let bad = Client::new(&inst, Some("nope"));
    assert_error(
        &bad.get("/api/v1/timelines/public").await,
        401,
        "public with a bad token",
    );
    assert_error(
        &bob_api.get("/api/v1/timelines/home?max_id=abc").await,
        422,
        "a cursor that is no id",
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn markers_and_notifications_list_filter_dismiss_and_count() {
    let inst = Instance::start("all", &[]).await;
    let [
        (alice, alice_token, alice_api),
        (bob, _, bob_api),
        (_, carol_token, _),
    ] = users(&inst, ["alice", "bob", "carol"]).await;

    // follow, mention, favourite, reblog: four notifications for alice, all from bob.
    follow(&bob_api, &alice.id.to_string()).await;
    let post = id(&alice_api.posted(&json!({ "status": "hello" })).await);
    let mention = id(&bob_api.posted(&json!({ "status": "@alice hi" })).await);
    for action in ["favourite", "reblog"] {
        bob_api
            .act(Method::POST, &format!("/api/v1/statuses/{post}/{action}"))
            .await
            .assert_ok();
    }
    let all = list(&inst, Some(&alice_token), "/api/v1/notifications").await;
    let types: Vec<&str> = all
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["type"].as_str())
        .collect();
    assert_eq!(
        types,
        ["reblog", "favourite", "mention", "follow"],
        "{}",
        all.body
    );
    for n in all.body.as_array().unwrap() {
        assert_eq!(n["account"]["id"], json!(bob.id.to_string()), "{n}");
    }
    assert_eq!(all.body[0]["status"]["id"], json!(post));
    assert_eq!(all.body[2]["status"]["id"], json!(mention));
    assert!(
        all.body[3]["status"].is_null(),
        "a follow is about no status"
    );

    // Filters.
    let only = list(
        &inst,
        Some(&alice_token),
        "/api/v1/notifications?types[]=mention&types[]=follow",
    )
    .await;
    assert_eq!(only.ids, [all.ids[2].clone(), all.ids[3].clone()]);
    let without = list(
        &inst,
        Some(&alice_token),
        "/api/v1/notifications?exclude_types[]=mention",
    )
    .await;
    assert_eq!(without.ids.len(), 3);
    let paged = list(&inst, Some(&alice_token), "/api/v1/notifications?limit=3").await;
    assert_eq!(paged.ids, all.ids[..3]);
    let rest = list(&inst, Some(&alice_token), &paged.next.expect("next")).await;
    assert_eq!(rest.ids, all.ids[3..]);
    assert_error(
        &alice_api.get("/api/v1/notifications?types[]=bogus").await,
        422,
        "an unknown type",
    );

    // One by id: only one's own.
    let one = alice_api
        .get(&format!("/api/v1/notifications/{}", all.ids[1]))
        .await;
    assert_eq!(one.status, 200);
    assert_eq!(one.body["type"], "favourite");
    let carol_api = Client::new(&inst, Some(&carol_token));
    assert_error(
        &carol_api
            .get(&format!("/api/v1/notifications/{}", all.ids[1]))
            .await,
        404,
        "someone else's notification",
    );

    // Unread count follows the notifications marker; markers keep a version.
    let count = alice_api.get("/api/v1/notifications/unread_count").await;
    assert_eq!(count.body["count"], 4, "{}", count.body);
    let saved = alice_api
        .form(
            Method::POST,
            "/api/v1/markers",
            &format!("notifications[last_read_id]={}", all.ids[2]),
        )
        .await
        .assert_ok();
    assert_eq!(
        saved.body["notifications"]["last_read_id"],
        json!(all.ids[2])
    );
    assert_eq!(saved.body["notifications"]["version"], 1);
    let count = alice_api.get("/api/v1/notifications/unread_count").await;
    assert_eq!(count.body["count"], 2, "{}", count.body);
    let saved = alice_api
        .call(
            Method::POST,
            "/api/v1/markers",
            &json!({ "home": { "last_read_id": post },
                     "notifications": { "last_read_id": all.ids[0] } }),
        )
        .await;
    assert_eq!(saved.body["notifications"]["version"], 2, "{}", saved.body);
    assert_eq!(saved.body["home"]["last_read_id"], json!(post));
    let shown = alice_api.get("/api/v1/markers?timeline[]=home").await;
    assert_eq!(shown.body["home"]["version"], 1, "{}", shown.body);
    assert!(
        shown.body.get("notifications").is_none(),
        "only what was asked"
    );
    let count = alice_api.get("/api/v1/notifications/unread_count").await;
    assert_eq!(count.body["count"], 0);
    assert_error(
        &alice_api
            .call(
                Method::POST,
                "/api/v1/markers",
                &json!({ "home": { "last_read_id": "" } }),
            )
            .await,
        422,
        "an empty marker",
    );

    // Dismiss one, then clear the rest; each only one's own.
    let dismiss = |n: &str| format!("/api/v1/notifications/{n}/dismiss");
    assert_error(
        &carol_api.act(Method::POST, &dismiss(&all.ids[0])).await,
        404,
        "dismissing someone else's",
    );
    let d = alice_api.act(Method::POST, &dismiss(&all.ids[0])).await;
    assert_eq!(d.status, 200);
    assert_error(
        &alice_api
            .get(&format!("/api/v1/notifications/{}", all.ids[0]))
            .await,
        404,
        "a dismissed notification",
    );
    let c = alice_api
        .act(Method::POST, "/api/v1/notifications/clear")
        .await;
    assert_eq!(c.status, 200);
    assert!(
        list(&inst, Some(&alice_token), "/api/v1/notifications")
            .await
            .ids
            .is_empty()
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_inbox_fills_timelines_and_notifications_and_redelivery_changes_nothing() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let [(_, alice_token, api), (_, _, carol)] = users(&inst, ["alice", "carol"]).await;
    let inbox = inst.fed.inbox("alice");
    let me = inst.fed.actor_iri("alice");

    // alice follows the peer (it accepts), and the peer follows alice: a follow notification.
    let (peer_id, _) = follow_each_other(&inst, &api, &peer, "alice").await;

    // Notes: public, followers-only and one mentioning alice.
    let note = |path: &str, to: Value, cc: Value, extra: Value| {
        let iri = peer.new_id(path);
        let mut o = json!({
            "id": iri, "type": "Note", "attributedTo": peer.actor(),
            "content": format!("<p>{path}</p>"), "published": "2026-12-01T10:00:00Z",
            "to": to, "cc": cc,
        });
        if let (Some(o), Some(e)) = (o.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        o
    };
    let create = |o: &Value| {
        json!({ "id": format!("{}/activity", o["id"].as_str().unwrap()), "type": "Create",
                "actor": peer.actor(), "to": o["to"], "cc": o["cc"], "object": o })
    };
    let followers = format!("{}/followers", peer.actor());
    let public = note("notes", json!([PUBLIC]), json!([followers]), json!({}));
    let private = note("notes", json!([followers]), json!([]), json!({}));
    let mentioning = note(
        "notes",
        json!([PUBLIC]),
        json!([me]),
        json!({ "tag": [{ "type": "Mention", "href": me, "name": "@alice" }],
                "content": "<p>@alice hello</p>" }),
    );
    for o in [&public, &private, &mentioning] {
        let c = create(o);
        assert_eq!(peer.post(&inbox, &c).await, 202);
        // Redelivered: stored once, one entry, one notification.
        assert_eq!(peer.post(&inbox, &c).await, 202);
    }
    let home = eventually(WAIT, "three notes at home", || async {
        let h = list(&inst, Some(&alice_token), "/api/v1/timelines/home").await;
        (h.ids.len() == 3).then_some(h)
    })
    .await;
    let uris: Vec<&str> = home
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["uri"].as_str())
        .collect();
    for o in [&public, &private, &mentioning] {
        assert!(uris.contains(&o["id"].as_str().unwrap()), "{uris:?}");
    }
    let private_id = home
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["uri"] == private["id"])
        .map(id)
        .unwrap();
    let by_alice = api.get(&format!("/api/v1/statuses/{private_id}")).await;
    assert_eq!(by_alice.body["visibility"], "private", "{}", by_alice.body);
    assert_eq!(
        carol
            .get(&format!("/api/v1/statuses/{private_id}"))
            .await
            .status,
        404,
        "a followers-only note is not carol's to read"
    );
    let remote = list(&inst, None, "/api/v1/timelines/public?remote=true").await;
    assert_eq!(remote.ids.len(), 2, "the two public notes: {}", remote.body);
    let kinds = |ns: &Listed| -> Vec<String> {
        ns.body
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n["type"].as_str().map(str::to_string))
            .collect()
    };
    let ns = list(&inst, Some(&alice_token), "/api/v1/notifications").await;
    assert_eq!(kinds(&ns), ["mention", "follow"], "{}", ns.body);
    assert_eq!(ns.body[0]["account"]["id"], json!(peer_id));

    // Like and Announce of alice's post, each sent twice; then undone.
    let post = id(&api.posted(&json!({ "status": "mine" })).await);
    let post_uri = inst.fed.status_iri("alice", post.parse().unwrap());
    let like = json!({ "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(), "object": post_uri });
    let boost = json!({ "id": peer.new_id("boosts"), "type": "Announce", "actor": peer.actor(),
                        "to": [PUBLIC], "cc": [followers], "object": post_uri,
                        "published": "2026-12-01T11:00:00Z" });
    for a in [&like, &like, &boost, &boost] {
        assert_eq!(peer.post(&inbox, a).await, 202);
    }
    let shown = eventually(WAIT, "the like and the boost counted", || async {
        let s = api.get(&format!("/api/v1/statuses/{post}")).await;
        (s.body["favourites_count"] == 1 && s.body["reblogs_count"] == 1).then_some(s)
    })
    .await;
    assert_eq!(shown.body["favourites_count"], 1);
    let ns = list(&inst, Some(&alice_token), "/api/v1/notifications").await;
    // The like and the boost are processed side by side: either may be stored first.
    let mut got = kinds(&ns);
    got[..2].sort();
    assert_eq!(
        got,
        ["favourite", "reblog", "mention", "follow"],
        "{}",
        ns.body
    );
    for undone in [&like, &boost] {
        let undo = json!({ "id": peer.new_id("undos"), "type": "Undo", "actor": peer.actor(),
                           "object": undone });
        assert_eq!(peer.post(&inbox, &undo).await, 202);
    }
    eventually(WAIT, "the like and the boost taken back", || async {
        let s = api.get(&format!("/api/v1/statuses/{post}")).await;
        (s.body["favourites_count"] == 0 && s.body["reblogs_count"] == 0).then_some(())
    })
    .await;
    let ns = list(&inst, Some(&alice_token), "/api/v1/notifications").await;
    assert_eq!(kinds(&ns), ["mention", "follow"], "{}", ns.body);

    // The peer boosts its own public note: the boost reaches alice's home. alice boosts it
    // too; the peer's edit then notifies her (`update`).
    let self_boost = json!({ "id": peer.new_id("boosts"), "type": "Announce", "actor": peer.actor(),
                             "to": [PUBLIC], "cc": [followers], "object": public["id"],
                             "published": "2026-12-01T12:00:00Z" });
    assert_eq!(peer.post(&inbox, &self_boost).await, 202);
    let public_id = home
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["uri"] == public["id"])
        .map(id)
        .unwrap();
    eventually(WAIT, "the boost at home", || async {
        let h = list(&inst, Some(&alice_token), "/api/v1/timelines/home").await;
        h.body
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["reblog"]["id"] == json!(public_id))
            .then_some(())
    })
    .await;
    // A boost of a post we never saw (by someone else on the peer's server): the post is
    // fetched from its own server and the boost reaches home too.
    let dans = peer.iri("/notes/by-dan");
    peer.doc(
        "/notes/by-dan",
        json!({ "id": dans, "type": "Note", "attributedTo": peer.actor_of("dan"),
                "content": "<p>dan's</p>", "published": "2026-12-01T09:00:00Z", "to": [PUBLIC] }),
    );
    let boost_of_dans = json!({ "id": peer.new_id("boosts"), "type": "Announce",
                                "actor": peer.actor(), "to": [PUBLIC], "cc": [followers],
                                "object": dans, "published": "2026-12-01T12:30:00Z" });
    assert_eq!(peer.post(&inbox, &boost_of_dans).await, 202);
    let home_boost = eventually(WAIT, "the boost of dan's post at home", || async {
        let h = list(&inst, Some(&alice_token), "/api/v1/timelines/home").await;
        h.body
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["reblog"]["uri"] == json!(dans))
            .cloned()
    })
    .await;
    assert_eq!(
        home_boost["reblog"]["account"]["username"], "dan",
        "{home_boost}"
    );
    assert_eq!(home_boost["account"]["id"], json!(peer_id), "{home_boost}");
    api.act(
        Method::POST,
        &format!("/api/v1/statuses/{public_id}/reblog"),
    )
    .await
    .assert_ok();
    let mut edited = public.clone();
    edited["content"] = json!("<p>edited</p>");
    let update = json!({ "id": peer.new_id("updates"), "type": "Update", "actor": peer.actor(),
                         "to": edited["to"], "cc": edited["cc"], "object": edited });
    assert_eq!(peer.post(&inbox, &update).await, 202);
    eventually(WAIT, "an update notification", || async {
        let ns = list(
            &inst,
            Some(&alice_token),
            "/api/v1/notifications?types[]=update",
        )
        .await;
        (ns.ids.len() == 1).then_some(())
    })
    .await;
    let shown = api.get(&format!("/api/v1/statuses/{public_id}")).await;
    assert!(
        shown.body["content"].as_str().unwrap().contains("edited"),
        "{}",
        shown.body
    );

    // Delete: gone from reads, timelines and the mention's notification.
    for o in [&public, &mentioning] {
        let del = json!({ "id": peer.new_id("deletes"), "type": "Delete", "actor": peer.actor(),
                          "object": { "id": o["id"], "type": "Tombstone" } });
        assert_eq!(peer.post(&inbox, &del).await, 202);
    }
    eventually(WAIT, "the deleted notes leave home", || async {
        let h = list(&inst, Some(&alice_token), "/api/v1/timelines/home").await;
        let uris: Vec<Value> = h
            .body
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["uri"].clone())
            .collect();
        (!uris.contains(&public["id"]) && !uris.contains(&mentioning["id"])).then_some(())
    })
    .await;
    assert_eq!(
        api.get(&format!("/api/v1/statuses/{public_id}"))
            .await
            .status,
        404
    );
    let ns = list(&inst, Some(&alice_token), "/api/v1/notifications").await;
    assert_eq!(kinds(&ns), ["follow"], "{}", ns.body);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follow_options_decide_status_notifications_and_boosts_at_home() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let [
        (alice, alice_token, alice_api),
        (_, bob_token, bob_api),
        (carol, carol_token, carol_api),
    ] = users(&inst, ["alice", "bob", "carol"]).await;

    // bob follows alice asking for her posts' notifications and without her boosts (a form,
    // as Mastodon.py sends it); carol follows alice plainly.
    let rel = bob_api
        .form(
            Method::POST,
            &format!("/api/v1/accounts/{}/follow", alice.id),
            "notify=true&reblogs=false",
        )
        .await
        .assert_ok();
    assert_eq!(rel.body["notifying"], true, "{}", rel.body);
    assert_eq!(rel.body["showing_reblogs"], false, "{}", rel.body);
    follow(&carol_api, &alice.id.to_string()).await;
    let bad = bob_api
        .call(
            Method::POST,
            &format!("/api/v1/accounts/{}/follow", alice.id),
            &json!({ "notify": "perhaps" }),
        )
        .await;
    assert_error(&bad, 422, "notify that is no boolean");

    // A post notifies bob (`status`), not carol; a reply to someone else and a direct post
    // notify nobody; a reply to herself does.
    let post = id(&alice_api.posted(&json!({ "status": "news" })).await);
    let carols = id(&carol_api.posted(&json!({ "status": "carol's" })).await);
    alice_api
        .posted(&json!({ "status": "@carol re", "in_reply_to_id": carols }))
        .await;
    alice_api
        .posted(&json!({ "status": "@carol psst", "visibility": "direct" }))
        .await;
    let thread = id(&alice_api
        .posted(&json!({ "status": "more", "in_reply_to_id": post }))
        .await);
    let statuses = list(
        &inst,
        Some(&bob_token),
        "/api/v1/notifications?types[]=status",
    )
    .await;
    let about: Vec<&str> = statuses
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["status"]["id"].as_str())
        .collect();
    assert_eq!(about, [thread.as_str(), post.as_str()], "{}", statuses.body);
    let carol_statuses = list(
        &inst,
        Some(&carol_token),
        "/api/v1/notifications?types[]=status",
    )
    .await;
    assert!(carol_statuses.ids.is_empty(), "{}", carol_statuses.body);

    // alice boosts carol's post: carol follows alice and keeps boosts, so the boost reaches
    // her home; bob turned alice's boosts off.
    let boost = alice_api
        .act(Method::POST, &format!("/api/v1/statuses/{carols}/reblog"))
        .await
        .assert_ok();
    let boost_id = id(&boost.body);
    let carol_home = list(&inst, Some(&carol_token), "/api/v1/timelines/home").await;
    assert!(carol_home.ids.contains(&boost_id), "{}", carol_home.body);
    let bob_home = list(&inst, Some(&bob_token), "/api/v1/timelines/home").await;
    assert!(!bob_home.ids.contains(&boost_id), "{}", bob_home.body);
    assert!(bob_home.ids.contains(&post), "her own posts still come");

    // carol edits the post alice boosted: alice is told (`update`).
    carol_api
        .edit(&carols, &json!({ "status": "carol's, edited" }))
        .await
        .assert_ok();
    let updates = list(
        &inst,
        Some(&alice_token),
        "/api/v1/notifications?types[]=update",
    )
    .await;
    assert_eq!(updates.ids.len(), 1, "{}", updates.body);
    assert_eq!(
        updates.body[0]["account"]["id"],
        json!(carol.id.to_string())
    );
    assert_eq!(updates.body[0]["status"]["id"], json!(carols));

    // A remote account followed with notify: its new post arrives as a `status`.
    let peer_id = resolve_id(&alice_api, &peer.handle()).await;
    alice_api
        .call(
            Method::POST,
            &format!("/api/v1/accounts/{peer_id}/follow"),
            &json!({ "notify": true }),
        )
        .await
        .assert_ok();
    let me = inst.fed.actor_iri("alice");
    let inbox = inst.fed.inbox("alice");
    let f = received(&peer, "Follow", |_| true).await;
    let accept = json!({
        "id": peer.new_id("accepts"), "type": "Accept", "actor": peer.actor(),
        "object": { "id": f["id"], "type": "Follow", "actor": me, "object": peer.actor() },
    });
    assert_eq!(peer.post(&inbox, &accept).await, 202);
    let note = peer.new_id("notes");
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(),
        "content": "<p>remote news</p>", "published": "2026-12-01T10:00:00Z",
        "to": [PUBLIC], "cc": [format!("{}/followers", peer.actor())]
    }));
    // The note must find the follow accepted: wait for the Accept to be processed first.
    eventually(WAIT, "alice follows the peer", || async {
        let r = alice_api
            .get(&format!("/api/v1/accounts/relationships?id[]={peer_id}"))
            .await;
        (r.body[0]["following"] == true).then_some(())
    })
    .await;
    assert_eq!(peer.post(&inbox, &create).await, 202);
    let n = eventually(WAIT, "a status notification from the peer", || async {
        let ns = list(
            &inst,
            Some(&alice_token),
            "/api/v1/notifications?types[]=status",
        )
        .await;
        (ns.ids.len() == 1).then_some(ns)
    })
    .await;
    assert_eq!(n.body[0]["account"]["id"], json!(peer_id));
    assert_eq!(n.body[0]["status"]["uri"], json!(note));
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn direct_posts_make_conversations_for_each_participant() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let [
        (alice, alice_token, alice_api),
        (bob, bob_token, bob_api),
        (_, carol_token, carol_api),
    ] = users(&inst, ["alice", "bob", "carol"]).await;

    let first = id(&alice_api
        .posted(&json!({ "status": "@bob just us", "visibility": "direct" }))
        .await);
    alice_api
        .posted(&json!({ "status": "@bob not this one", "visibility": "public" }))
        .await;
    let mine = list(&inst, Some(&alice_token), "/api/v1/conversations").await;
    assert_eq!(mine.body.as_array().map(Vec::len), Some(1), "{}", mine.body);
    assert_eq!(mine.body[0]["unread"], false, "the author has read it");
    assert_eq!(mine.body[0]["accounts"][0]["id"], json!(bob.id.to_string()));
    assert_eq!(mine.body[0]["last_status"]["id"], json!(first));
    let bobs = list(&inst, Some(&bob_token), "/api/v1/conversations").await;
    assert_eq!(bobs.body[0]["unread"], true, "{}", bobs.body);
    assert_eq!(
        bobs.body[0]["accounts"][0]["id"],
        json!(alice.id.to_string())
    );
    let conversation = bobs.ids[0].clone();
    assert!(
        list(&inst, Some(&carol_token), "/api/v1/conversations")
            .await
            .ids
            .is_empty()
    );

    // A reply continues the conversation: the last status moves, the other side is unread.
    let read = bob_api
        .act(
            Method::POST,
            &format!("/api/v1/conversations/{conversation}/read"),
        )
        .await
        .assert_ok();
    assert_eq!(read.body["unread"], false);
    let reply = id(&bob_api
        .posted(&json!({ "status": "@alice back", "visibility": "direct",
                         "in_reply_to_id": first }))
        .await);
    let mine = list(&inst, Some(&alice_token), "/api/v1/conversations").await;
    assert_eq!(mine.ids.len(), 1, "{}", mine.body);
    assert_eq!(mine.body[0]["last_status"]["id"], json!(reply));
    assert_eq!(mine.body[0]["unread"], true);
    assert_error(
        &carol_api
            .act(
                Method::POST,
                &format!("/api/v1/conversations/{conversation}/read"),
            )
            .await,
        404,
        "someone else's conversation",
    );

    // A remote direct note to alice starts a conversation with the remote account.
    let me = inst.fed.actor_iri("alice");
    let note = peer.new_id("notes");
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(), "to": [me],
        "content": "<p>@alice psst</p>", "published": "2026-12-01T10:00:00Z",
        "tag": [{ "type": "Mention", "href": me, "name": "@alice" }]
    }));
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &create).await, 202);
    let mine = eventually(WAIT, "the remote conversation", || async {
        let l = list(&inst, Some(&alice_token), "/api/v1/conversations").await;
        (l.ids.len() == 2).then_some(l)
    })
    .await;
    // Ordered by last status: the remote note was written (published) before the rest.
    let remote = mine
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["last_status"]["uri"] == json!(note))
        .cloned()
        .expect("the note's conversation");
    assert_eq!(mine.body[1], remote, "{}", mine.body);
    assert_eq!(
        remote["accounts"][0]["acct"],
        json!(peer.handle()),
        "{remote}"
    );
    assert_eq!(remote["unread"], true);

    // Deleting the reply moves the last status back; deleting the first ends it.
    for (api, status, left) in [(&bob_api, &reply, 2), (&alice_api, &first, 1)] {
        api.act(Method::DELETE, &format!("/api/v1/statuses/{status}"))
            .await
            .assert_ok();
        let l = list(&inst, Some(&alice_token), "/api/v1/conversations").await;
        assert_eq!(l.ids.len(), left, "{}", l.body);
    }
    let bobs = list(&inst, Some(&bob_token), "/api/v1/conversations").await;
    assert!(bobs.ids.is_empty(), "{}", bobs.body);

    // Removing a conversation from one's list.
    let remote = list(&inst, Some(&alice_token), "/api/v1/conversations").await;
    let gone = alice_api
        .act(
            Method::DELETE,
            &format!("/api/v1/conversations/{}", remote.ids[0]),
        )
        .await;
    assert_eq!(gone.status, 200);
    assert!(
        list(&inst, Some(&alice_token), "/api/v1/conversations")
            .await
            .ids
            .is_empty()
    );
    inst.shutdown().await;
}

/// R-MAPI-6: an account's statuses honour `pinned`, `exclude_replies` (a thread's own
/// replies stay, as Mastodon's `AccountStatusesFilter`), `only_media` and `tagged`, for a local
/// account and for a remote one whose posts reached us. `pinned` used to be ignored, so apps
/// showed the newest posts as "Pinned".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn account_statuses_honour_pinned_replies_media_and_tags() {
    let dir = support::files::temp_dir("hollo-profile");
    let inst = Instance::on_disk(&dir, &[]).await;
    let peer = Peer::start().await;
    let [(alice, alice_token, alice_api), (_, bob_token, bob_api)] =
        users(&inst, ["alice", "bob"]).await;

    let bobs = id(&bob_api.posted(&json!({ "status": "bob's" })).await);
    let plain = id(&alice_api.posted(&json!({ "status": "plain" })).await);
    let tagged = id(&alice_api.posted(&json!({ "status": "about #Rust" })).await);
    let thread = id(&alice_api
        .posted(&json!({ "status": "more", "in_reply_to_id": plain }))
        .await);
    let reply = id(&alice_api
        .posted(&json!({ "status": "@bob hi", "in_reply_to_id": bobs }))
        .await);
    let media = upload_png(&inst.base, &alice_token).await;
    let pictured = id(&alice_api
        .posted(&json!({ "status": "look", "media_ids": [media["id"]] }))
        .await);

    let path = format!("/api/v1/accounts/{}/statuses", alice.id);
    let all = list(&inst, Some(&bob_token), &path).await;
    assert_eq!(
        all.ids.iter().collect::<Vec<_>>(),
        [&pictured, &reply, &thread, &tagged, &plain],
        "{}",
        all.body
    );
    for (query, want) in [
        ("pinned=true", vec![]),
        ("pinned=false", all.ids.iter().collect::<Vec<_>>()),
        (
            "exclude_replies=true",
            vec![&pictured, &thread, &tagged, &plain],
        ),
        ("exclude_reblogs=true", all.ids.iter().collect()),
        ("only_media=true", vec![&pictured]),
        ("tagged=rust", vec![&tagged]),
        ("tagged=%23RUST", vec![&tagged]),
        ("tagged=go", vec![]),
        ("exclude_replies=1&only_media=1&limit=1", vec![&pictured]),
    ] {
        let got = list(&inst, Some(&bob_token), &format!("{path}?{query}")).await;
        assert_eq!(
            got.ids.iter().collect::<Vec<_>>(),
            want,
            "{query}: {}",
            got.body
        );
    }
    // Filters and pages together: the next page of exclude_replies keeps excluding.
    let first = list(
        &inst,
        Some(&bob_token),
        &format!("{path}?exclude_replies=true&limit=2"),
    )
    .await;
    assert_eq!(first.ids.iter().collect::<Vec<_>>(), [&pictured, &thread]);
    let next = first.next.expect("a next page");
    assert!(next.contains("exclude_replies=true"), "{next}");
    let second = list(&inst, Some(&bob_token), &next).await;
    assert_eq!(second.ids.iter().collect::<Vec<_>>(), [&tagged, &plain]);

    // A remote account: its public notes sent to alice (a mention), one a reply in its own
    // thread, one to someone else, one tagged, one with an image.
    let alice_iri = inst.fed.actor_iri("alice");
    let note = |text: &str, extra: Value| {
        let id = peer.new_id("notes");
        let mut object = json!({
            "id": id, "type": "Note", "attributedTo": peer.actor(),
            "to": [PUBLIC], "cc": [alice_iri],
            "content": format!("<p>@alice {text}</p>"),
            "tag": [{ "type": "Mention", "href": alice_iri, "name": "@alice" }],
        });
        for (k, v) in extra.as_object().unwrap() {
            object[k] = v.clone();
        }
        (id, object)
    };
    let (first_note, first_obj) = note("first", json!({ "published": "2026-12-01T10:00:00Z" }));
    let (own_reply, own_obj) = note(
        "my thread",
        json!({ "inReplyTo": first_note, "published": "2026-12-01T10:01:00Z" }),
    );
    let (other_reply, other_obj) = note(
        "to someone",
        json!({ "inReplyTo": "https://elsewhere.example/notes/1",
                "published": "2026-12-01T10:02:00Z" }),
    );
    let (tag_note, mut tag_obj) =
        note("#Rust here", json!({ "published": "2026-12-01T10:03:00Z" }));
    tag_obj["tag"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "type": "Hashtag", "name": "#Rust", "href": peer.iri("/tags/rust") }));
    let (media_note, media_obj) = note(
        "a picture",
        json!({ "published": "2026-12-01T10:04:00Z",
                "attachment": [{ "type": "Document", "mediaType": "image/png",
                                  "url": peer.iri("/media/a.png"), "name": "a square" }] }),
    );
    for object in [&first_obj, &own_obj, &other_obj, &tag_obj, &media_obj] {
        let create = json!({
            "id": format!("{}/activity", object["id"].as_str().unwrap()),
            "type": "Create", "actor": peer.actor(), "to": [PUBLIC], "cc": [alice_iri],
            "object": object,
        });
        assert_eq!(peer.post(&inst.fed.inbox("alice"), &create).await, 202);
    }
    let iris = [
        &media_note,
        &tag_note,
        &other_reply,
        &own_reply,
        &first_note,
    ];
    let remote_path = eventually(WAIT, "the peer's five notes stored", || async {
        let found = alice_api
            .get(&format!(
                "/api/v2/search?q={}&type=statuses",
                url::form_urlencoded::byte_serialize(first_note.as_bytes()).collect::<String>()
            ))
            .await;
        let account = found.body["statuses"][0]["account"]["id"]
            .as_str()?
            .to_string();
        let path = format!("/api/v1/accounts/{account}/statuses");
        let all = alice_api.get(&path).await;
        (all.body.as_array()?.len() == iris.len()).then_some(path)
    })
    .await;
    let uris = |l: &Listed| -> Vec<String> {
        l.body
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["uri"].as_str().unwrap().to_string())
            .collect()
    };
    let all = list(&inst, Some(&alice_token), &remote_path).await;
    assert_eq!(uris(&all).iter().collect::<Vec<_>>(), iris, "{}", all.body);
    for (query, want) in [
        ("pinned=true", vec![]),
        (
            "exclude_replies=true",
            vec![&media_note, &tag_note, &own_reply, &first_note],
        ),
        ("only_media=true", vec![&media_note]),
        ("tagged=rust", vec![&tag_note]),
    ] {
        let got = list(&inst, Some(&alice_token), &format!("{remote_path}?{query}")).await;
        assert_eq!(
            uris(&got).iter().collect::<Vec<_>>(),
            want,
            "remote {query}: {}",
            got.body
        );
    }
    inst.shutdown().await;
}
