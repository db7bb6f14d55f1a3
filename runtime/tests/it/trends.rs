//! Trends (R-MAPI-6) over HTTP against a real node: `GET /api/v1/trends/tags` (and
//! `/api/v1/trends`), `/statuses` and `/links`. Only public posts count; a tag or link trends
//! once two accounts use it, a post once it has two favourites or boosts, replies never; a
//! reader is shown only what the visibility check lets them read and nothing of whom they
//! mute; pages follow `offset`/`limit` with a `Link` header. The scoring itself (rising, not
//! steady) is `trends.rs`'s unit tests.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Client, assert_error, call_ok, card_fetched_earlier, header_text, id, until_posts_show_card,
    users,
};
use support::node::Instance;

fn names(v: &Value, key: &str) -> Vec<String> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|t| t[key].as_str().expect("a string").to_string())
        .collect()
}

async fn favourite(api: &Client, status: &str) {
    call_ok(
        api,
        Method::POST,
        &format!("/api/v1/statuses/{status}/favourite"),
        json!({}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn trends_count_public_posts_and_show_each_reader_what_they_may_read() {
    let inst = Instance::start("all", &[]).await;
    let [(_, _, alice), (_, _, bob), (_, _, carol), (_, _, dave)] =
        users(&inst, ["alice", "bob", "carol", "dave"]).await;
    let post = |visibility: &'static str, text: &'static str| json!({"status": text, "visibility": visibility});

    // Tags: #rising by two accounts in public; #solo by one; #quiet and #hidden by two, but
    // unlisted and followers-only.
    alice.posted(&post("public", "now #rising")).await;
    bob.posted(&post("public", "me too #rising")).await;
    carol.posted(&post("public", "alone #solo")).await;
    for api in [&alice, &bob] {
        api.posted(&post("unlisted", "hush #quiet")).await;
        api.posted(&post("private", "friends #hidden")).await;
    }

    // Posts: two favourites make `two` trend, three make `three` trend higher; one favourite,
    // a reply and an unlisted post do not.
    let two = id(&alice.posted(&post("public", "two likes")).await);
    let three = id(&bob.posted(&post("public", "three likes")).await);
    let one = id(&carol.posted(&post("public", "one like")).await);
    let reply = id(&carol
        .posted(&json!({"status": "a reply", "in_reply_to_id": three}))
        .await);
    let unlisted = id(&dave.posted(&post("unlisted", "not public")).await);
    for (status, fans) in [
        (&two, vec![&bob, &carol]),
        (&three, vec![&alice, &carol, &dave]),
        (&one, vec![&alice]),
        (&reply, vec![&alice, &bob]),
        (&unlisted, vec![&alice, &bob]),
    ] {
        for fan in fans {
            favourite(fan, status).await;
        }
    }

    // Links: a page two accounts share, whose card was fetched before.
    let url = "https://news.example/story";
    card_fetched_earlier(&inst, url, "The story", "News").await;
    alice
        .posted(&post("public", "read https://news.example/story"))
        .await;
    bob.posted(&post("public", "https://news.example/story wow"))
        .await;
    carol
        .posted(&post("public", "elsewhere https://other.example/"))
        .await;
    until_posts_show_card(&inst, url, 2).await;

    // Dave mutes bob before anything is read: the trends are computed once and shared, what
    // each reader is shown of them is decided per request.
    let bob_id = bob.get("/api/v1/accounts/verify_credentials").await.body["id"]
        .as_str()
        .unwrap()
        .to_string();
    call_ok(
        &dave,
        Method::POST,
        &format!("/api/v1/accounts/{bob_id}/mute"),
        json!({}),
    )
    .await;

    let anon = Client::new(&inst, None);
    let tags = anon.get("/api/v1/trends/tags").await.assert_ok();
    assert_eq!(names(&tags.body, "name"), ["rising"], "{}", tags.body);
    assert_eq!(tags.body[0]["history"][0]["accounts"], "2");
    assert_eq!(tags.body[0]["history"][0]["uses"], "2");
    assert!(tags.body[0].get("following").is_none(), "anonymous");
    let same = alice.get("/api/v1/trends").await.assert_ok();
    assert_eq!(names(&same.body, "name"), ["rising"]);
    assert_eq!(same.body[0]["following"], false);

    let statuses = anon.get("/api/v1/trends/statuses").await.assert_ok();
    assert_eq!(
        names(&statuses.body, "id"),
        [three.as_str(), &two],
        "{}",
        statuses.body
    );
    let daves = dave.get("/api/v1/trends/statuses").await.assert_ok();
    assert_eq!(
        names(&daves.body, "id"),
        [two.as_str()],
        "dave muted bob: {}",
        daves.body
    );

    // Pages: one at a time, with `next` and `prev`.
    let first = anon
        .get("/api/v1/trends/statuses?limit=1")
        .await
        .assert_ok();
    assert_eq!(names(&first.body, "id"), [three.as_str()]);
    let link = header_text(&first.headers, "link");
    assert!(link.contains("offset=1&limit=1>; rel=\"next\""), "{link}");
    assert!(!link.contains("prev"), "{link}");
    let second = anon
        .get("/api/v1/trends/statuses?offset=1&limit=1")
        .await
        .assert_ok();
    assert_eq!(names(&second.body, "id"), [two.as_str()]);
    let link = header_text(&second.headers, "link");
    assert!(link.contains("offset=0&limit=1>; rel=\"prev\""), "{link}");
    assert!(!link.contains("next"), "{link}");

    let links = anon.get("/api/v1/trends/links").await.assert_ok();
    assert_eq!(names(&links.body, "url"), [url], "{}", links.body);
    assert_eq!(links.body[0]["title"], "The story");
    assert_eq!(links.body[0]["provider_name"], "News");
    assert_eq!(links.body[0]["history"][0]["accounts"], "2");

    for bad in ["limit=many", "offset=-1"] {
        let a = anon.get(&format!("/api/v1/trends/tags?{bad}")).await;
        assert_error(&a, 422, bad);
    }
}
