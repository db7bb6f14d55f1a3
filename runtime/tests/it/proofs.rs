//! Object Integrity Proofs (FEP-8b32, `eddsa-jcs-2022`; R-AP-1) between our node and the
//! test peer: what we send carries a proof our actor document verifies, and an activity
//! relayed by someone else counts only with a valid proof by its own actor.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::Duration;

use chrono::Utc;
use hollo_runtime::federation::crypto::proofs;
use serde_json::{Value, json};
use support::eventually;
use support::node::Instance;
use support::peer::Peer;

const SECRET: &str = "proofs-test-secret-0123456789abcdef0123";
const WAIT: Duration = Duration::from_secs(30);

async fn instance(node_type: &str) -> Instance {
    Instance::start(
        node_type,
        &[("SECRET_KEY", SECRET), ("ALLOW_PRIVATE_ADDRESS", "true")],
    )
    .await
}

async fn actor_document(iri: &str) -> Value {
    reqwest::Client::new()
        .get(iri)
        .header("accept", "application/activity+json")
        .send()
        .await
        .expect("GET actor")
        .json()
        .await
        .expect("actor JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn what_we_send_carries_a_proof_that_our_actor_document_verifies() {
    let inst = instance("all").await;
    let peer = Peer::start().await;
    inst.account("bob").await;
    let follow = json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": peer.new_id("follows"), "type": "Follow", "actor": peer.actor(),
        "object": inst.fed.actor_iri("bob"),
    });
    assert_eq!(peer.post(&inst.fed.inbox("bob"), &follow).await, 202);
    let accept = eventually(WAIT, "the peer receives our Accept", || async {
        peer.received().into_iter().find(|r| r.ty() == "Accept")
    })
    .await;

    let claim = proofs::claim(&accept.body)
        .expect("a proof we can read")
        .expect("the Accept carries a proof");
    assert_eq!(claim.verification_method, inst.fed.proof_key_id("bob"));
    assert_eq!(accept.body["proof"]["cryptosuite"], "eddsa-jcs-2022");
    let actor = actor_document(&inst.fed.actor_iri("bob")).await;
    let key = proofs::listed_key(&actor, &claim.verification_method).expect("listed Multikey");
    proofs::verify(&accept.body, &claim, &key).expect("the proof verifies");
    let mut edited = accept.body.clone();
    edited["to"] = json!([]);
    assert!(
        proofs::verify(&edited, &claim, &key).is_err(),
        "and only this document"
    );

    // The key is made once and kept: a second fetch lists the same one.
    let again = actor_document(&inst.fed.actor_iri("bob")).await;
    assert_eq!(again["assertionMethod"], actor["assertionMethod"]);
    inst.shutdown().await;
}

fn create_by(author: &Peer, text: &str) -> Value {
    let note = author.new_id("notes");
    json!({
        "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/data-integrity/v1"],
        "id": format!("{note}/activity"), "type": "Create", "actor": author.actor(),
        "to": ["https://www.w3.org/ns/activitystreams#Public"],
        "object": {
            "id": note, "type": "Note", "attributedTo": author.actor(),
            "content": format!("<p>{text}</p>"), "published": "2026-12-01T04:00:00Z",
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_relayed_activity_counts_only_with_a_valid_proof_by_its_actor() {
    let inst = instance("web").await;
    inst.account("carol").await;
    let author = Peer::start().await;
    let relay = Peer::start_on("127.0.0.2").await;
    let inbox = format!("{}/inbox", inst.base);
    let stored = || inst.count("SELECT count(*) FROM inbox_activities");
    let key = author.proof_key_of("peer");

    // Relayed without a proof: the relay cannot speak for the author.
    let bare = create_by(&author, "no proof");
    assert_eq!(relay.post(&inbox, &bare).await, 401);
    assert_eq!(stored().await, 0);

    // Relayed with the author's proof: accepted, with no fetch of the activity itself.
    let signed = proofs::sign(&create_by(&author, "relayed"), &key, Utc::now()).expect("sign");
    assert_eq!(relay.post(&inbox, &signed).await, 202);
    assert_eq!(stored().await, 1);
    let actor: String = sqlx::query_scalar("SELECT actor FROM inbox_activities")
        .fetch_one(&inst.pool)
        .await
        .expect("row");
    assert_eq!(actor, author.actor());

    // A proof over other content, a proof by the relay's own key, a cryptosuite we cannot
    // check: all refused when relayed, nothing stored.
    let mut tampered =
        proofs::sign(&create_by(&author, "original"), &key, Utc::now()).expect("sign");
    tampered["object"]["content"] = "<p>forged</p>".into();
    assert_eq!(relay.post(&inbox, &tampered).await, 401);
    let by_relay = proofs::sign(
        &create_by(&author, "claimed"),
        &relay.proof_key_of("peer"),
        Utc::now(),
    )
    .expect("sign");
    assert_eq!(relay.post(&inbox, &by_relay).await, 401);
    let mut other_suite =
        proofs::sign(&create_by(&author, "suite"), &key, Utc::now()).expect("sign");
    other_suite["proof"]["cryptosuite"] = "ecdsa-rdfc-2019".into();
    assert_eq!(relay.post(&inbox, &other_suite).await, 401);
    assert_eq!(stored().await, 1);

    // An author whose server cannot be reached: refused, and the answer says no more about
    // our network than a failed signature-key fetch does (no connection detail).
    let mut ghost = create_by(&author, "ghost");
    let ghost_actor = "http://127.0.0.1:1/users/ghost";
    ghost["actor"] = ghost_actor.into();
    ghost["id"] = "http://127.0.0.1:1/activities/1".into();
    ghost["object"]["attributedTo"] = ghost_actor.into();
    let ghost_key = hollo_runtime::federation::crypto::proofs::ProofKey {
        id: format!("{ghost_actor}#ed25519-key"),
        key: ed25519_dalek::SigningKey::from_bytes(&[3u8; 32]),
    };
    let ghost = proofs::sign(&ghost, &ghost_key, Utc::now()).expect("sign");
    let body = serde_json::to_vec(&ghost).expect("json");
    let (status, answer) = relay
        .post_with(
            &inbox,
            &body,
            &relay.key(),
            std::time::SystemTime::now(),
            |_| {},
        )
        .await;
    assert_eq!(status, 401);
    let said = answer["error"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase();
    assert!(
        said.contains("key fetch refused") && !said.contains("connect"),
        "{said}"
    );
    assert_eq!(stored().await, 1);

    // Sent by the author itself, an unknown cryptosuite is ignored (its HTTP signature
    // speaks for it) but a proof that does not verify is refused.
    assert_eq!(author.post(&inbox, &other_suite).await, 202);
    assert_eq!(stored().await, 2);
    let mut broken = proofs::sign(&create_by(&author, "broken"), &key, Utc::now()).expect("sign");
    broken["object"]["content"] = "<p>changed after signing</p>".into();
    assert_eq!(author.post(&inbox, &broken).await, 401);
    assert_eq!(stored().await, 2);
    inst.shutdown().await;
}
