//! Pins and hashtags in the Mastodon client API (R-MAPI-6), over HTTP on a real
//! node and PostgreSQL, with the test peer as the other server: pin/unpin with Mastodon's
//! refusals (another's status, a direct one, past 5), `pinned` on the profile, the actor's
//! `featured` collection and the signed `Add`/`Remove` the followers get, a remote actor's
//! pins from its `Add`/`Remove`; a tag's page, follow/unfollow with its public posts reaching
//! home (and leaving it), followed tags, featured tags and the actor's `featuredTags`,
//! hashtag search; and the limits the instance advertises.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Client, WAIT, act_ok, alice_and_peer, ap_doc, assert_error, call_ok, follow, follow_each_other,
    get_ok, id, received, resolve_id, token_with_scopes, users,
};
use support::eventually;
use support::node::Instance;
use support::peer::Peer;

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

fn ids(v: &Value) -> Vec<String> {
    v.as_array().expect("a list").iter().map(id).collect()
}

#[tokio::test]
async fn pins_are_refused_kept_shown_and_federated_as_mastodon_does() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let [(alice, _, api), (_, _, bob)] = users(&inst, ["alice", "bob"]).await;
    let (peer_id, _) = follow_each_other(&inst, &api, &peer, "alice").await;
    let alice_id = alice.id.to_string();

    let mut posts = Vec::new();
    for n in 0..6 {
        posts.push(id(&api
            .posted(&json!({ "status": format!("post {n}") }))
            .await));
    }
    let direct = id(&api
        .posted(&json!({ "status": "@bob secret", "visibility": "direct" }))
        .await);
    let private = id(&api
        .posted(&json!({ "status": "followers only", "visibility": "private" }))
        .await);
    let bobs = id(&bob.posted(&json!({ "status": "bob's" })).await);

    // Refusals first: another's status, a direct one, an unknown id, no scope, no token.
    let pin = |who: &Client, status: &str| {
        let path = format!("/api/v1/statuses/{status}/pin");
        let who = Client::new(&inst, who.token.as_deref());
        async move { who.act(Method::POST, &path).await }
    };
    assert_error(&pin(&api, &bobs).await, 422, "another's status");
    assert_error(&pin(&api, &direct).await, 422, "a direct status");
    assert_error(&pin(&api, "not-an-id").await, 404, "no such status");
    assert_error(&pin(&bob, &private).await, 404, "a status bob may not read");
    let reader = token_with_scopes(&inst, alice.id, "read").await;
    assert_error(
        &pin(&Client::new(&inst, Some(&reader)), &posts[0]).await,
        403,
        "no write:accounts",
    );
    assert_error(
        &pin(&Client::new(&inst, None), &posts[0]).await,
        401,
        "no token",
    );
    assert_eq!(inst.count("SELECT count(*) FROM status_pins").await, 0);

    // Five pins; the sixth is refused; pinning again changes nothing.
    for p in posts.iter().take(5) {
        let a = pin(&api, p).await;
        assert_eq!(
            (a.status, a.body["pinned"].as_bool()),
            (200, Some(true)),
            "{}",
            a.body
        );
    }
    assert_error(&pin(&api, &posts[5]).await, 422, "a sixth pin");
    assert_eq!(pin(&api, &posts[0]).await.status, 200, "again: idempotent");
    // `pinned` is the owner's to see.
    assert_eq!(
        get_ok(&api, &format!("/api/v1/statuses/{}", posts[0])).await["pinned"],
        true
    );
    assert_eq!(
        get_ok(&bob, &format!("/api/v1/statuses/{}", posts[0])).await["pinned"],
        false
    );
    // The profile's pinned statuses, the latest pin first; the plain list is unchanged.
    let pinned = get_ok(
        &bob,
        &format!("/api/v1/accounts/{alice_id}/statuses?pinned=true"),
    )
    .await;
    let want: Vec<String> = posts.iter().take(5).rev().cloned().collect();
    assert_eq!(ids(&pinned), want);
    let all = get_ok(&bob, &format!("/api/v1/accounts/{alice_id}/statuses")).await;
    assert!(ids(&all).len() >= 6, "pins do not narrow the plain list");

    // The followers heard of each pin: a signed Add to the actor's featured collection.
    let me = inst.fed.actor_iri("alice");
    let featured = format!("{me}/collections/featured");
    let first_uri = get_ok(&api, &format!("/api/v1/statuses/{}", posts[0])).await["uri"].clone();
    let add = received(&peer, "Add", |b| b["object"] == first_uri).await;
    assert_eq!(
        (add["actor"].as_str(), add["target"].as_str()),
        (Some(me.as_str()), Some(featured.as_str()))
    );
    // The actor names the collection; the collection embeds the public pins (not the private).
    let actor = ap_doc(&me).await;
    assert_eq!(actor["featured"], featured.as_str());
    assert_eq!(
        actor["featuredTags"],
        format!("{me}/collections/tags").as_str()
    );
    act_ok(
        &api,
        Method::POST,
        &format!("/api/v1/statuses/{}/unpin", posts[4]),
    )
    .await;
    assert_eq!(pin(&api, &private).await.status, 200);
    let coll = ap_doc(&featured).await;
    assert_eq!(coll["type"], "OrderedCollection");
    let items: Vec<&str> = coll["orderedItems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(items.len(), 4, "{coll}");
    assert!(
        coll["orderedItems"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["type"] == "Note")
    );
    let private_uri = get_ok(&api, &format!("/api/v1/statuses/{private}")).await["uri"].clone();
    assert!(
        !items.contains(&private_uri.as_str().unwrap()),
        "a private pin is not served"
    );

    // Unpin: `pinned` false, off the profile, a Remove sent.
    let unpinned = act_ok(
        &api,
        Method::POST,
        &format!("/api/v1/statuses/{}/unpin", posts[0]),
    )
    .await;
    assert_eq!(unpinned["pinned"], false);
    let pinned = ids(&get_ok(
        &bob,
        &format!("/api/v1/accounts/{alice_id}/statuses?pinned=true"),
    )
    .await);
    assert!(
        !pinned.contains(&posts[0]) && !pinned.contains(&private),
        "{pinned:?}"
    );
    received(&peer, "Remove", |b| b["object"] == first_uri).await;
    // A deleted status leaves the pins.
    act_ok(
        &api,
        Method::DELETE,
        &format!("/api/v1/statuses/{}", posts[1]),
    )
    .await;
    assert_eq!(inst.count("SELECT count(*) FROM status_pins").await, 3);

    // A remote actor's pins come from its Add/Remove to its own featured collection.
    let inbox = inst.fed.inbox("alice");
    // The note's custom emoji: an image on the peer.
    let png: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8,
        0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00,
        0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    let uploads = |name: &str, ty: &str, body: &[u8]| {
        peer.state
            .uploads
            .lock()
            .unwrap()
            .insert(name.into(), (ty.into(), body.to_vec()));
    };
    uploads("blobcat.png", "image/png", png);
    uploads("page.html", "text/html", b"<script>alert(1)</script>");
    let emoji_image = peer.iri("/uploads/blobcat.png");
    let note = peer.new_id("notes");
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(), "to": [PUBLIC],
        "content": "<p>pin me :blobcat:</p>", "published": "2026-12-01T10:00:00Z",
        "tag": [{ "type": "Emoji", "name": ":blobcat:",
                  "icon": { "type": "Image", "mediaType": "image/png",
                            "url": emoji_image } }]
    }));
    assert_eq!(peer.post(&inbox, &create).await, 202);
    let theirs = format!("{}/collections/featured", peer.actor());
    let stray = json!({ "id": peer.new_id("adds"), "type": "Add", "actor": peer.actor(),
                        "object": note, "target": "https://elsewhere.example/collections/featured" });
    assert_eq!(peer.post(&inbox, &stray).await, 202);
    let added = json!({ "id": peer.new_id("adds"), "type": "Add", "actor": peer.actor(),
                        "object": note, "target": theirs });
    assert_eq!(peer.post(&inbox, &added).await, 202);
    let path = format!("/api/v1/accounts/{peer_id}/statuses?pinned=true");
    let shown = eventually(WAIT, "the peer's pin", || async {
        let v = get_ok(&api, &path).await;
        (v.as_array().is_some_and(|a| a.len() == 1)).then_some(v)
    })
    .await;
    assert_eq!(shown[0]["uri"], note.as_str());
    // Its Emoji tag is the status's custom emoji (R-MAPI-6), shown through our media
    // proxy: the app asks us, we fetch the peer's image.
    let emoji = &shown[0]["emojis"][0];
    assert_eq!(
        (
            emoji["shortcode"].as_str(),
            emoji["visible_in_picker"].as_bool()
        ),
        (Some("blobcat"), Some(false))
    );
    let proxied = emoji["url"].as_str().unwrap().to_string();
    assert!(
        proxied.starts_with(&format!("{}/media/proxy/", inst.base)),
        "{proxied}"
    );
    let got = reqwest::get(&proxied).await.unwrap();
    assert_eq!(got.status().as_u16(), 200);
    assert_eq!(got.headers()["content-type"], "image/png");
    assert_eq!(got.headers()["x-content-type-options"], "nosniff");
    assert_eq!(got.bytes().await.unwrap().as_ref(), png);
    // Not an open relay: another URL under the same MAC, or a wrong MAC, is a 404; a URL we
    // minted that answers with something other than an image is not relayed (502).
    let elsewhere = proxied.replace("blobcat.png", "page.html");
    assert_eq!(
        reqwest::get(&elsewhere).await.unwrap().status().as_u16(),
        404
    );
    let proxy = hollo_runtime::media::proxy::MediaProxy::new(support::node::SECRET);
    let html = proxy.url(&inst.base, &peer.iri("/uploads/page.html"));
    assert_eq!(reqwest::get(&html).await.unwrap().status().as_u16(), 502);
    let forged = format!(
        "{}/media/proxy/00ff?url=https%3A%2F%2Fexample.com%2Fa.png",
        inst.base
    );
    assert_eq!(reqwest::get(&forged).await.unwrap().status().as_u16(), 404);
    assert_eq!(
        inst.count("SELECT count(*) FROM remote_pins").await,
        1,
        "the stray Add was ignored"
    );
    let removed = json!({ "id": peer.new_id("removes"), "type": "Remove", "actor": peer.actor(),
                          "object": note, "target": theirs });
    assert_eq!(peer.post(&inbox, &removed).await, 202);
    eventually(WAIT, "the peer's unpin", || async {
        (get_ok(&api, &path).await == json!([])).then_some(())
    })
    .await;

    // The limit is advertised.
    let instance = get_ok(&api, "/api/v2/instance").await;
    assert_eq!(
        instance["configuration"]["accounts"]["max_pinned_statuses"],
        5
    );
    assert_eq!(
        instance["configuration"]["accounts"]["max_featured_tags"],
        10
    );
    inst.shutdown().await;
}

#[tokio::test]
async fn followed_tags_reach_home_and_featured_tags_are_kept() {
    let inst = Instance::start("all", &[]).await;
    let [(alice, _, api), (bob, _, bob_api), (_, _, carol)] =
        users(&inst, ["alice", "bob", "carol"]).await;
    follow(&api, &bob.id.to_string()).await;

    // A tag's page: any case, `#` optional; a name that is no hashtag is a 404.
    let tag = get_ok(&api, "/api/v1/tags/Rust").await;
    assert_eq!(
        (tag["name"].as_str(), tag["following"].as_bool()),
        (Some("rust"), Some(false))
    );
    assert_eq!(tag["history"].as_array().unwrap().len(), 7);
    for bad in ["123", "a.b", "%23"] {
        assert_error(&api.get(&format!("/api/v1/tags/{bad}")).await, 404, bad);
    }
    let anonymous = get_ok(&Client::new(&inst, None), "/api/v1/tags/rust").await;
    assert!(anonymous.get("following").is_none(), "{anonymous}");
    assert_error(
        &Client::new(&inst, None)
            .act(Method::POST, "/api/v1/tags/rust/follow")
            .await,
        401,
        "no token",
    );

    let home = || async { ids(&get_ok(&api, "/api/v1/timelines/home").await) };
    let before = id(&carol.posted(&json!({ "status": "#rust before" })).await);
    let followed = act_ok(&api, Method::POST, "/api/v1/tags/%23Rust/follow").await;
    assert_eq!(followed["following"], true);
    let listed = get_ok(&api, "/api/v1/followed_tags").await;
    assert_eq!(listed[0]["name"], "rust");
    // From now on carol's public #rust posts reach alice's home (carol is not followed); an
    // unlisted one, one without the tag, and what came before do not.
    let public = id(&carol.posted(&json!({ "status": "I like #Rust" })).await);
    let unlisted = id(&carol
        .posted(&json!({ "status": "quiet #rust", "visibility": "unlisted" }))
        .await);
    let untagged = id(&carol.posted(&json!({ "status": "no tag" })).await);
    let bobs = id(&bob_api.posted(&json!({ "status": "bob on #rust" })).await);
    let h = home().await;
    assert!(h.contains(&public) && h.contains(&bobs), "{h:?}");
    for not in [&unlisted, &untagged, &before] {
        assert!(!h.contains(not), "{not} not at home");
    }
    // Hashtag search finds it, and says it is followed.
    let found = get_ok(&api, "/api/v2/search?q=%23ru&type=hashtags").await;
    assert_eq!(found["hashtags"][0]["name"], "rust", "{found}");
    assert_eq!(found["hashtags"][0]["following"], true);
    assert!(
        found["hashtags"][0]["history"][0]["uses"]
            .as_str()
            .unwrap()
            .parse::<i64>()
            .unwrap()
            >= 3
    );
    assert_eq!(
        get_ok(&api, "/api/v2/search?q=zzz&type=hashtags").await["hashtags"],
        json!([])
    );
    // Unfollowed: what only the tag brought leaves home; bob's (followed) post stays.
    let unfollowed = act_ok(&api, Method::POST, "/api/v1/tags/rust/unfollow").await;
    assert_eq!(unfollowed["following"], false);
    let h = home().await;
    assert!(!h.contains(&public) && h.contains(&bobs), "{h:?}");
    assert_eq!(get_ok(&api, "/api/v1/followed_tags").await, json!([]));

    // Featured tags: bad input first.
    for (body, what) in [
        (json!({}), "no name"),
        (json!({ "name": "a b" }), "not a tag"),
        (json!({ "name": "42" }), "digits"),
    ] {
        assert_error(
            &api.call(Method::POST, "/api/v1/featured_tags", &body).await,
            422,
            what,
        );
    }
    api.posted(&json!({ "status": "alice on #Rust" })).await;
    api.posted(&json!({ "status": "more #rust", "visibility": "direct" }))
        .await;
    let made = api
        .form(Method::POST, "/api/v1/featured_tags", "name=%23Rust")
        .await
        .assert_ok();
    assert_eq!(
        (
            made.body["name"].as_str(),
            made.body["statuses_count"].as_str()
        ),
        (Some("rust"), Some("1")),
        "a direct post is not counted"
    );
    assert!(
        made.body["last_status_at"]
            .as_str()
            .is_some_and(|d| d.len() == 10),
        "a date: {}",
        made.body
    );
    assert_error(
        &api.call(
            Method::POST,
            "/api/v1/featured_tags",
            &json!({ "name": "rust" }),
        )
        .await,
        422,
        "twice",
    );
    let fid = id(&made.body);
    assert_error(
        &carol
            .act(Method::DELETE, &format!("/api/v1/featured_tags/{fid}"))
            .await,
        404,
        "carol's delete",
    );
    for n in 0..9 {
        call_ok(
            &api,
            Method::POST,
            "/api/v1/featured_tags",
            json!({ "name": format!("tag{n}x") }),
        )
        .await;
    }
    assert_error(
        &api.call(
            Method::POST,
            "/api/v1/featured_tags",
            &json!({ "name": "eleventh" }),
        )
        .await,
        422,
        "an eleventh",
    );
    let shown = get_ok(
        &carol,
        &format!("/api/v1/accounts/{}/featured_tags", alice.id),
    )
    .await;
    assert_eq!(shown.as_array().unwrap().len(), 10);
    assert_eq!(shown[0]["name"], "rust");
    // The actor's featuredTags collection, as peers read it.
    let coll = ap_doc(&format!("{}/collections/tags", inst.fed.actor_iri("alice"))).await;
    assert_eq!(coll["totalItems"], 10);
    assert_eq!(coll["items"][0]["type"], "Hashtag");
    assert_eq!(coll["items"][0]["name"], "#rust");
    act_ok(
        &api,
        Method::DELETE,
        &format!("/api/v1/featured_tags/{fid}"),
    )
    .await;
    assert_eq!(
        get_ok(&api, "/api/v1/featured_tags")
            .await
            .as_array()
            .unwrap()
            .len(),
        9
    );
    // Suggestions: tags alice used and does not feature.
    let sugg = get_ok(&api, "/api/v1/featured_tags/suggestions").await;
    assert_eq!(sugg[0]["name"], "rust", "{sugg}");
    inst.shutdown().await;
}

/// R-MAPI-6: a remote account's counts are its server's `totalItems`, asked for when
/// its profile is viewed and ours are missing or a day old; an unreadable collection is 0.
#[tokio::test]
async fn remote_profiles_show_their_servers_counts() {
    let (inst, peer, _, api) = alice_and_peer().await;
    let actor = peer.actor();
    let path = |c: &str| actor.replacen(peer.base(), "", 1) + "/" + c;
    peer.doc(&path("followers"), json!({ "id": format!("{actor}/followers"), "type": "OrderedCollection", "totalItems": 42 }));
    peer.doc(
        &path("outbox"),
        json!({ "id": format!("{actor}/outbox"), "type": "OrderedCollection", "totalItems": 1234 }),
    );
    // `following` is not served (hidden): unknown, shown as 0.
    let peer_id = resolve_id(&api, &peer.handle()).await;
    let first = get_ok(&api, &format!("/api/v1/accounts/{peer_id}")).await;
    assert_eq!(first["followers_count"], 0, "not read yet");
    let counted = eventually(WAIT, "the counts are read", || async {
        let a = get_ok(&api, &format!("/api/v1/accounts/{peer_id}")).await;
        (a["followers_count"] == 42).then_some(a)
    })
    .await;
    assert_eq!(
        (
            counted["statuses_count"].as_i64(),
            counted["following_count"].as_i64()
        ),
        (Some(1234), Some(0))
    );
    // Fresh: another view asks for nothing.
    get_ok(&api, &format!("/api/v1/accounts/{peer_id}")).await;
    assert_eq!(
        inst.count(
            "SELECT count(*) FROM hollo_task_message_v1 WHERE kind = 'hollo.actor-counts.v1'"
        )
        .await,
        0
    );
    inst.shutdown().await;
}
