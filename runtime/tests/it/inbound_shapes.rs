//! Liberal in what we accept (R-AP-1): a `Create(Note)` in the shape each server family
//! sends — Mastodon, Misskey, Akkoma (Pleroma), GoToSocial, Fedify — and one in other valid
//! compactions (`@id`/`@type`, type arrays, `Public`, embedded actor and reply target, an
//! `attributedTo` array, a `url` array of Links, a single `tag`), each posted signed to our
//! inbox and checked as stored. Bad input — a malformed `@context`, an unknown activity type —
//! is refused with a 400 or ignored with its reason, and stores no post.
//!
//! Fixtures are in `tests/fixtures/inbound/`; `{{actor}}` and `{{base}}` become the test peer's
//! actor and origin (the inbox checks that the signer is the actor and the id its origin).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::eventually;
use support::node::Instance;
use support::peer::Peer;

const WAIT: Duration = Duration::from_secs(30);
const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

fn fixture(name: &str, peer: &Peer) -> Value {
    let path = format!(
        "{}/tests/fixtures/inbound/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("fixture");
    let text = text
        .replace("{{actor}}", &peer.actor())
        .replace("{{base}}", peer.base());
    serde_json::from_str(&text).expect("fixture JSON")
}

/// What we kept of a remote note.
#[derive(Debug)]
struct Stored {
    outcome: String,
    content: Option<String>,
    url: Option<String>,
    in_reply_to: Option<String>,
    body: Value,
}

/// Posts `activity` to our shared inbox, signed by the peer, and reads back what was stored.
async fn deliver(inst: &Instance, peer: &Peer, activity: &Value) -> Stored {
    let status = peer.post(&format!("{}/inbox", inst.base), activity).await;
    assert_eq!(status, 202, "{activity}");
    let id = activity
        .get("id")
        .or_else(|| activity.get("@id"))
        .and_then(Value::as_str)
        .expect("id")
        .to_string();
    let (outcome, body): (String, Value) = eventually(WAIT, "the activity processed", || {
        let id = id.clone();
        async move {
            sqlx::query_as(
                "SELECT outcome, body FROM inbox_activities WHERE id = $1 AND processed_at IS NOT NULL",
            )
            .bind(&id)
            .fetch_optional(&inst.pool)
            .await
            .expect("select")
        }
    })
    .await;
    let note = body["object"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let row: Option<(Option<String>, Option<String>, Option<String>)> =
        sqlx::query_as("SELECT content, url, in_reply_to FROM remote_posts WHERE iri = $1")
            .bind(&note)
            .fetch_optional(&inst.pool)
            .await
            .expect("post");
    let (content, url, in_reply_to) = row.unwrap_or_default();
    Stored {
        outcome,
        content,
        url,
        in_reply_to,
        body,
    }
}

async fn accepts(name: &str, content: &str, url: Option<&str>) -> (Instance, Peer, Stored) {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let activity = fixture(name, &peer);
    let s = deliver(&inst, &peer, &activity).await;
    assert_eq!(s.outcome, "Note stored", "{name}: {s:?}");
    assert_eq!(
        s.content.as_deref(),
        Some(content.replace("{{base}}", peer.base()).as_str()),
        "{name}"
    );
    assert_eq!(
        s.url,
        url.map(|u| u.replace("{{base}}", peer.base())),
        "{name}"
    );
    // Addressing and tags in the one shape the rest of the code reads.
    assert_eq!(s.body["to"], serde_json::json!([PUBLIC]), "{name}");
    assert_eq!(
        s.body["object"]["to"],
        serde_json::json!([PUBLIC]),
        "{name}"
    );
    assert!(
        s.body["object"]["tag"].is_array(),
        "{name}: {}",
        s.body["object"]["tag"]
    );
    let author = &s.body["object"]["attributedTo"];
    let author = author.as_str().or_else(|| author["id"].as_str());
    assert_eq!(author, Some(peer.actor().as_str()), "{name}");
    (inst, peer, s)
}

const HASHTAG: &str = r#"<a href="{{base}}/tags/fedi" class="mention hashtag" rel="nofollow noopener noreferrer">#<span>fedi</span></a>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mastodon() {
    let (inst, _, _) = accepts(
        "mastodon",
        &format!("<p>From Mastodon {HASHTAG}</p>"),
        Some("{{base}}/@peer/113000000000000001"),
    )
    .await;
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn misskey() {
    let (inst, _, s) = accepts(
        "misskey",
        r#"<p><span>From Misskey </span><a href="{{base}}/tags/fedi" rel="nofollow noopener noreferrer">#fedi</a></p>"#,
        None,
    )
    .await;
    assert_eq!(s.in_reply_to, None);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn akkoma() {
    // Its data attributes and own `rel` go, and so does the script.
    let (inst, _, s) = accepts(
        "akkoma",
        r#"From Akkoma <a class="hashtag" href="{{base}}/tag/fedi" rel="nofollow noopener noreferrer">#fedi</a>"#,
        None,
    )
    .await;
    assert_eq!(s.body["object"]["tag"][0]["type"], "Hashtag");
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gotosocial() {
    let (inst, peer, s) = accepts(
        "gotosocial",
        &format!("<p>From GoToSocial {HASHTAG}</p>"),
        Some("{{base}}/@peer/statuses/01JDX7Q9Z8Y7X6W5V4T3S2R1Q0"),
    )
    .await;
    assert_eq!(
        s.body["object"]["cc"],
        serde_json::json!([format!("{}/followers", peer.actor())])
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fedify() {
    let (inst, _, _) = accepts(
        "fedify",
        &format!("<p>From Fedify {HASHTAG}</p>"),
        Some("{{base}}/@peer/0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
    )
    .await;
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn other_valid_compactions() {
    let (inst, peer, s) = accepts(
        "compactions",
        "<p>Compacted otherwise</p>",
        Some("{{base}}/w/compacted-1"),
    )
    .await;
    assert_eq!(s.in_reply_to, Some(format!("{}/notes/parent", peer.base())));
    assert_eq!(s.body["object"]["tag"][0]["type"], "Mention");
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_is_refused_or_ignored_and_stores_no_post() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let inbox = format!("{}/inbox", inst.base);
    for context in [
        serde_json::json!(5),
        serde_json::json!([["nested"]]),
        serde_json::json!(true),
    ] {
        let mut activity = fixture("mastodon", &peer);
        activity["@context"] = context.clone();
        let body = serde_json::to_vec(&activity).expect("json");
        let (status, err) = peer
            .post_with(
                &inbox,
                &body,
                &peer.key(),
                std::time::SystemTime::now(),
                |_| {},
            )
            .await;
        assert_eq!(status, 400, "{context}: {err}");
        assert!(
            err["error"]
                .as_str()
                .unwrap_or_default()
                .contains("malformed @context"),
            "{err}"
        );
    }
    assert_eq!(inst.count("SELECT count(*) FROM inbox_activities").await, 0);
    // An activity type we do not know is kept as received and ignored with its reason.
    let mut odd = fixture("mastodon", &peer);
    odd["type"] = "EmojiReact".into();
    odd["id"] = format!("{}/activities/odd", peer.base()).into();
    let s = deliver(&inst, &peer, &odd).await;
    assert_eq!(s.outcome, "ignored: unsupported type EmojiReact");
    assert_eq!(inst.count("SELECT count(*) FROM remote_posts").await, 0);
    inst.shutdown().await;
}
