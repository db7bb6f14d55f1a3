//! A status's `content` is the same HTML everywhere (R-AP-1): what our client API shows,
//! what its URI serves and what the `Create` carries; URLs, mentions and hashtags become links
//! with `tag` entries, and a mentioned actor is addressed and delivered to.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use support::api::{alice_and_peer, ap_doc, call_ok, get_ok, peer_follows};
use support::eventually;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn content_is_one_html_for_the_api_the_uri_and_the_create_with_mentions_and_tags() {
    let (inst, peer, _alice, api) = alice_and_peer().await;
    inst.account("carol").await;
    let bob = peer.actor_of("bob");
    let text = format!(
        "Hi @{} and @carol, <b>not bold</b> & #Rust:\nhttps://x.example/a?b=1&c=2.\n\n@{} stays text",
        peer.handle_of("bob"),
        peer.handle_of("missing-dan"),
    );
    let created = api.posted(&json!({ "status": text })).await;
    let html = created["content"].as_str().expect("content").to_string();
    let carol = inst.fed.actor_iri("carol");
    let tag_href = format!("{}/tags/rust", inst.base);
    assert_eq!(
        html,
        format!(
            "<p>Hi <span class=\"h-card\"><a href=\"{bob}\" class=\"u-url mention\">@<span>bob</span></a></span> \
             and <span class=\"h-card\"><a href=\"{carol}\" class=\"u-url mention\">@<span>carol</span></a></span>, \
             &lt;b&gt;not bold&lt;/b&gt; &amp; \
             <a href=\"{tag_href}\" class=\"mention hashtag\" rel=\"tag\">#<span>Rust</span></a>:<br>\
             <a href=\"https://x.example/a?b=1&amp;c=2\" rel=\"nofollow noopener noreferrer\">https://x.example/a?b=1&amp;c=2</a>.</p>\
             <p>@{} stays text</p>",
            peer.handle_of("missing-dan")
        )
    );

    // The status's URI serves the same HTML, with the tags and the mentioned addressed.
    let uri = created["uri"].as_str().expect("uri");
    let served = ap_doc(uri).await;
    assert_eq!(served["content"], html.as_str());
    assert_eq!(
        served["tag"],
        json!([
            {"type": "Mention", "href": bob, "name": format!("@{}", peer.handle_of("bob"))},
            {"type": "Mention", "href": carol,
             "name": format!("@carol@{}", inst.base.trim_start_matches("http://"))},
            {"type": "Hashtag", "href": tag_href, "name": "#rust"},
        ])
    );
    let cc = served["cc"].as_array().expect("cc");
    assert!(
        cc.contains(&json!(bob)) && cc.contains(&json!(carol)),
        "{cc:?}"
    );

    // The mentioned remote actor gets the Create (it follows no one here), with the same HTML;
    // the API shows it again the same.
    let create = eventually(
        WAIT,
        "the Create at the mentioned actor's server",
        || async { peer.received().into_iter().find(|r| r.ty() == "Create") },
    )
    .await;
    assert!(create.verified.is_ok(), "{:?}", create.verified);
    assert_eq!(create.body["object"]["content"], html.as_str());
    assert_eq!(create.body["cc"], served["cc"]);
    let id = created["id"].as_str().expect("id");
    let shown = get_ok(&api, &format!("/api/v1/statuses/{id}")).await;
    assert_eq!(shown["content"], html.as_str());

    // An edit resolves the mentions of the new text: the Update names no one any more.
    let edited = call_ok(
        &api,
        Method::PUT,
        &format!("/api/v1/statuses/{id}"),
        json!({ "status": "plain now" }),
    )
    .await;
    assert_eq!(edited["content"], "<p>plain now</p>");
    let served = ap_doc(uri).await;
    assert_eq!(served["tag"], json!([]));
    inst.shutdown().await;
}

/// R-MAPI-6, found federating with GoToSocial: a remote account we learned from its
/// follow (stored without a WebFinger handle) is mentioned by `@name@host` — it resolves from
/// the stored actor by preferred username and host, as lookup and search do, with no WebFinger
/// round trip, and the `Create` it gets carries the `Mention` (so its server notifies it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mention_of_an_actor_learned_from_a_follow_links_without_webfinger() {
    let (inst, peer, alice, api) = alice_and_peer().await;
    peer_follows(&inst, &peer, "alice").await;
    inst.until_count(
        "the peer follows alice",
        &format!(
            "SELECT count(*) FROM followers WHERE account_id = '{}'",
            alice.id
        ),
        |c| c == 1,
    )
    .await;
    assert_eq!(
        inst.count("SELECT count(*) FROM remote_actors WHERE handle IS NOT NULL")
            .await,
        0,
        "learned from the follow: no handle"
    );
    let status = api
        .posted(&json!({ "status": format!("thanks @{}!", peer.handle()) }))
        .await;
    assert_eq!(status["mentions"][0]["url"], peer.actor(), "{status}");
    assert!(
        status["content"]
            .as_str()
            .is_some_and(|c| c.contains(&format!("href=\"{}\"", peer.actor()))),
        "the mention is a link: {status}"
    );
    let create = eventually(WAIT, "the Create reaches the peer", || async {
        peer.bodies()
            .into_iter()
            .find(|b| b["type"] == "Create" && b["object"]["id"] == status["uri"])
    })
    .await;
    let tags = create["object"]["tag"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        tags.iter()
            .any(|t| t["type"] == "Mention" && t["href"] == peer.actor().as_str()),
        "{create}"
    );
    assert_eq!(peer.webfinger_hits("peer"), None, "no WebFinger lookup");
    inst.shutdown().await;
}
