//! Posting preferences (R-MAPI-6): `source[privacy|sensitive|language]` kept from
//! `update_credentials`, shown in `verify_credentials` and `GET /api/v1/preferences`, and
//! applied to what is posted or boosted without them — a followers-only default must never
//! let a post or a boost go out public by omission (the privacy bug the issue names). Over
//! HTTP on a real node and PostgreSQL, with the fediverse `Peer` as a follower: what reaches
//! it is addressed as the default says.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Answer, Client, assert_error, has, id, peer_follows_accepted, received, token_with_scopes,
    users,
};
use support::node::Instance;
use support::peer::Peer;

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

async fn patch_form(api: &Client, body: &str) -> Answer {
    api.form(Method::PATCH, "/api/v1/accounts/update_credentials", body)
        .await
}

async fn prefs(api: &Client) -> Value {
    let a = api.get("/api/v1/preferences").await.assert_ok();
    a.body
}

fn mastodon_defaults() -> Value {
    json!({
        "posting:default:visibility": "public",
        "posting:default:sensitive": false,
        "posting:default:language": null,
        "reading:expand:media": "default",
        "reading:expand:spoilers": false,
    })
}

/// Outgoing `Update` activities: queued, in flight, or already at the peer.
async fn updates_sent(inst: &Instance, peer: &Peer) -> usize {
    let queued = inst
        .count("SELECT count(*) FROM hollo_activity_message_v1 WHERE message::text LIKE '%\"Update\"%'")
        .await as usize;
    queued + peer.count_of("Update")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_preferences_are_refused_and_change_nothing() {
    let inst = Instance::start("all", &[]).await;
    let (alice, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));
    assert_eq!(prefs(&api).await, mastodon_defaults(), "a new account");

    for body in [
        "source[privacy]=direct",
        "source[privacy]=everyone",
        "source[sensitive]=perhaps",
        "source[language]=english",
        "source[language]=%3Cb%3E",
        // A valid privacy with a bad language: the whole request is refused.
        "source[privacy]=private&source[language]=xx_YY",
    ] {
        assert_error(&patch_form(&api, body).await, 422, body);
    }
    for body in [
        json!({"source": "private"}),
        json!({"source": {"privacy": 3}}),
        json!({"source": {"privacy": "direct"}}),
        json!({"source": {"sensitive": "maybe"}}),
    ] {
        let a = api
            .call(Method::PATCH, "/api/v1/accounts/update_credentials", &body)
            .await;
        assert_error(&a, 422, &body.to_string());
    }
    assert_eq!(prefs(&api).await, mastodon_defaults(), "after refusals");
    let post = api.posted(&json!({"status": "still public"})).await;
    assert_eq!(post["visibility"], "public");

    // Scopes: preferences need read:accounts; no token is 401.
    let write_only = Client::new(
        &inst,
        Some(&token_with_scopes(&inst, alice.id, "write").await),
    );
    assert_error(
        &write_only.get("/api/v1/preferences").await,
        403,
        "a token without read:accounts",
    );
    let read = Client::new(
        &inst,
        Some(&token_with_scopes(&inst, alice.id, "read").await),
    );
    assert_eq!(prefs(&read).await, mastodon_defaults(), "read covers it");
    let anonymous = Client::new(&inst, None);
    assert_eq!(anonymous.get("/api/v1/preferences").await.status, 401);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_followers_only_default_keeps_posts_and_boosts_followers_only() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let [(_, _, api), (_, _, bob)] = users(&inst, ["alice", "bob"]).await;

    // The peer follows alice, so her posts are delivered to it.
    peer_follows_accepted(&inst, &peer, "alice").await;

    let changed = patch_form(
        &api,
        "source[privacy]=private&source[sensitive]=true&source[language]=de",
    )
    .await
    .assert_ok();
    assert_eq!(changed.body["source"]["privacy"], "private");
    assert_eq!(changed.body["source"]["sensitive"], true);
    assert_eq!(changed.body["source"]["language"], "de");
    let me = api.get("/api/v1/accounts/verify_credentials").await.body;
    assert_eq!(me["source"], changed.body["source"]);
    assert_eq!(
        prefs(&api).await,
        json!({
            "posting:default:visibility": "private",
            "posting:default:sensitive": true,
            "posting:default:language": "de",
            "reading:expand:media": "default",
            "reading:expand:spoilers": false,
        })
    );
    // Posting defaults are not part of the actor: no Update goes out for them.
    assert_eq!(
        updates_sent(&inst, &peer).await,
        0,
        "an Update of the actor"
    );
    // Another account keeps Mastodon's defaults.
    assert_eq!(prefs(&bob).await, mastodon_defaults(), "bob's");

    // A post without visibility, sensitivity or language takes the defaults ...
    let quiet = api.posted(&json!({"status": "for my followers"})).await;
    assert_eq!(quiet["visibility"], "private", "{quiet}");
    assert_eq!(quiet["sensitive"], true);
    assert_eq!(quiet["language"], "de");
    // ... and goes out addressed to the followers only.
    let create = received(&peer, "Create", |b| b["object"]["id"] == quiet["uri"]).await;
    for key in ["to", "cc"] {
        assert!(
            !has(&create[key], PUBLIC) && !has(&create["object"][key], PUBLIC),
            "{key} of {create}"
        );
    }
    assert!(has(&create["to"], &inst.fed.followers("alice")), "{create}");
    // Anonymous readers do not see it.
    let anonymous = Client::new(&inst, None);
    assert_eq!(
        anonymous
            .get(&format!("/api/v1/statuses/{}", id(&quiet)))
            .await
            .status,
        404
    );

    // What is asked wins over the defaults.
    let loud = api
        .posted(&json!({"status": "hello world", "visibility": "public",
                        "sensitive": false, "language": "en"}))
        .await;
    assert_eq!(loud["visibility"], "public");
    assert_eq!(loud["sensitive"], false);
    assert_eq!(loud["language"], "en");

    // A boost without visibility takes the default too (Mastodon's ReblogService).
    let bobs = bob.posted(&json!({"status": "boost me"})).await;
    let boost = api
        .act(
            Method::POST,
            &format!("/api/v1/statuses/{}/reblog", id(&bobs)),
        )
        .await
        .assert_ok();
    assert_eq!(boost.body["visibility"], "private", "{}", boost.body);
    let announce = received(&peer, "Announce", |_| true).await;
    for key in ["to", "cc"] {
        assert!(!has(&announce[key], PUBLIC), "{key} of {announce}");
    }

    // An empty language clears it; the others stay.
    let cleared = patch_form(&api, "source[language]=").await.assert_ok();
    assert_eq!(cleared.body["source"]["language"], "");
    assert_eq!(cleared.body["source"]["privacy"], "private");
    assert_eq!(prefs(&api).await["posting:default:language"], Value::Null);
    // JSON bodies set them the same way.
    api.call(
        Method::PATCH,
        "/api/v1/accounts/update_credentials",
        &json!({"source": {"privacy": "unlisted", "sensitive": false}}),
    )
    .await
    .assert_ok();
    let unlisted = api.posted(&json!({"status": "quietly public"})).await;
    assert_eq!(unlisted["visibility"], "unlisted");
    assert_eq!(unlisted["sensitive"], false);
    inst.shutdown().await;
}
