//! RFC 9421 HTTP Message Signatures beside draft-cavage (R-AP-1), against a test peer that
//! accepts only one of them: our inbox verifies RFC 9421 and refuses a signature covering too
//! few components; a host that signed to us with RFC 9421 gets our deliveries signed that way;
//! a host known for RFC 9421 that answers 401 gets the same delivery again with draft-cavage at
//! once, and is remembered as draft-cavage.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::{Duration, SystemTime};

use axum::http::HeaderValue;
use serde_json::{Value, json};
use support::eventually;
use support::node::Instance;
use support::peer::{Peer, Received, post_headers};

const WAIT: Duration = Duration::from_secs(30);

fn follow(peer: &Peer, inst: &Instance, name: &str) -> Value {
    json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": peer.new_id("follows"), "type": "Follow",
        "actor": peer.actor(), "object": inst.fed.actor_iri(name),
    })
}

async fn scheme_of(inst: &Instance, peer: &Peer) -> Option<String> {
    sqlx::query_scalar("SELECT scheme FROM host_signature_schemes WHERE host = $1")
        .bind(peer.host())
        .fetch_optional(&inst.pool)
        .await
        .expect("scheme")
}

fn accepts(peer: &Peer) -> Vec<Received> {
    peer.received()
        .into_iter()
        .filter(|r| r.ty() == "Accept")
        .collect()
}

/// A POST signed with RFC 9421 whose `Signature-Input` is then replaced by `input`.
async fn post_with_input(url: &str, peer: &Peer, body: &[u8], input: Option<&str>) -> (u16, Value) {
    let mut headers = peer.rfc9421_headers(url, body);
    if let Some(input) = input {
        headers.insert(
            "signature-input",
            HeaderValue::from_str(input).expect("header"),
        );
    }
    headers.insert(
        "content-type",
        HeaderValue::from_static("application/activity+json"),
    );
    post_headers(url, headers, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_rfc9421_peer_is_verified_and_answered_in_rfc9421() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    peer.accept_schemes(false, true);
    inst.account("alice").await;
    let inbox = inst.fed.inbox("alice");

    // Too few components, a tampered body, an unsigned-for algorithm: 401, nothing stored.
    let body = serde_json::to_vec(&follow(&peer, &inst, "alice")).expect("json");
    let created = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let key_id = peer.key().key_id;
    for (input, why) in [
        (
            format!(r#"sig1=("@method" "@target-uri");created={created};keyid="{key_id}""#),
            "content-digest",
        ),
        (
            format!(r#"sig1=("@target-uri" "content-digest");created={created};keyid="{key_id}""#),
            "@method",
        ),
        (
            format!(
                r#"sig1=("@method" "@target-uri" "content-digest");created={created};keyid="{key_id}";alg="hmac-sha256""#
            ),
            "hmac-sha256",
        ),
    ] {
        let (status, err) = post_with_input(&inbox, &peer, &body, Some(&input)).await;
        assert_eq!(status, 401, "{input}: {err}");
        assert!(
            err["error"].as_str().unwrap_or_default().contains(why),
            "{why}: {err}"
        );
    }
    let mut tampered = body.clone();
    tampered.push(b' ');
    let headers = peer.rfc9421_headers(&inbox, &body);
    assert_eq!(post_headers(&inbox, headers, &tampered).await.0, 401);
    assert_eq!(inst.count("SELECT count(*) FROM inbox_activities").await, 0);
    assert_eq!(
        scheme_of(&inst, &peer).await,
        None,
        "nothing learned from refused requests"
    );

    // A well-signed Follow is taken; its Accept goes out signed with RFC 9421, which this peer
    // (reading only RFC 9421) verifies.
    let (status, err) = peer
        .post_rfc9421(&inbox, &follow(&peer, &inst, "alice"))
        .await;
    assert_eq!(status, 202, "{err}");
    assert_eq!(scheme_of(&inst, &peer).await.as_deref(), Some("rfc9421"));
    let accept = eventually(WAIT, "the Accept at the peer", || async {
        accepts(&peer).pop()
    })
    .await;
    assert_eq!(accept.scheme, "rfc9421");
    assert!(accept.verified.is_ok(), "{:?}", accept.verified);
    assert_eq!(accepts(&peer).len(), 1, "one knock was enough");
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_host_that_refuses_rfc9421_gets_draft_cavage_at_once_and_is_remembered() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    peer.accept_schemes(true, false);
    let (_, token) = inst.account("alice").await;
    // Known for RFC 9421 (as if it had signed to us with it), but its inboxes read only
    // draft-cavage.
    sqlx::query("INSERT INTO host_signature_schemes (host, scheme) VALUES ($1, 'rfc9421')")
        .bind(peer.host())
        .execute(&inst.pool)
        .await
        .expect("known");
    assert_eq!(
        peer.post(&inst.fed.inbox("alice"), &follow(&peer, &inst, "alice"))
            .await,
        202
    );
    let knocks = eventually(WAIT, "the Accept delivered", || async {
        let a = accepts(&peer);
        a.iter().any(|r| r.verified.is_ok()).then_some(a)
    })
    .await;
    let schemes: Vec<(&str, bool)> = knocks
        .iter()
        .map(|r| (r.scheme, r.verified.is_ok()))
        .collect();
    assert_eq!(schemes, [("rfc9421", false), ("cavage", true)]);
    eventually(
        WAIT,
        "the Accept's delivery recorded as delivered",
        || async {
            let state: Option<String> = sqlx::query_scalar(
                "SELECT state FROM deliveries d JOIN outbox_activities o ON o.id = d.activity_id
              WHERE o.type = 'Accept'",
            )
            .fetch_optional(&inst.pool)
            .await
            .expect("delivery");
            (state.as_deref() == Some("delivered")).then_some(())
        },
    )
    .await;

    // The next delivery to that host knocks once, with draft-cavage.
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v1/follows", inst.base))
        .bearer_auth(&token)
        .json(&json!({"account": peer.handle()}))
        .send()
        .await
        .expect("follow");
    assert!(resp.status().is_success());
    let follow = eventually(WAIT, "our Follow at the peer", || async {
        peer.received().into_iter().find(|r| r.ty() == "Follow")
    })
    .await;
    assert_eq!((follow.scheme, follow.verified.is_ok()), ("cavage", true));
    assert_eq!(peer.count_of("Follow"), 1);
    inst.shutdown().await;
}
