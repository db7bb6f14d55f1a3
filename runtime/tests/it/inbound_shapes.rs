//! Liberal in what we accept (R-AP-1): a `Create(Note)` in the shape each server family
//! sends — Mastodon, Misskey, Akkoma (Pleroma), GoToSocial, Fedify — and one in other valid
//! compactions (`@id`/`@type`, type arrays, `Public`, embedded actor and reply target, an
//! `attributedTo` array, a `url` array of Links, a single `tag`), each posted signed to our
//! inbox and checked as stored. Bad input — a malformed `@context`, an unknown activity type —
//! is refused with a 400 or ignored with its reason, and stores no post. Hostile input — tens
//! of thousands of attachments, tags, poll options, fields, aliases, and megabytes of text, in
//! a note we receive or fetch, an actor's update, or rows stored before the bounds — is kept
//! and shown at `federation::bounds`' caps.
//!
//! Fixtures are in `tests/fixtures/inbound/`; `{{actor}}` and `{{base}}` become the test peer's
//! actor and origin (the inbox checks that the signer is the actor and the id its origin).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::Duration;

use hollo_runtime::federation::bounds::{
    MAX_ADDRESSEES, MAX_ALIASES, MAX_ATTACHMENTS, MAX_CONTENT_BYTES, MAX_FIELDS, MAX_NAME_BYTES,
    MAX_POLL_COUNT, MAX_POLL_OPTION_BYTES, MAX_POLL_OPTIONS, MAX_STRING_BYTES, MAX_SUMMARY_BYTES,
    MAX_TAG_STRING_BYTES, MAX_TAGS_PER_KIND,
};
use serde_json::{Value, json};
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

/// The Poll entity of the stored remote post `iri`, as an anonymous reader gets its status.
async fn poll_of(inst: &Instance, iri: &str) -> Value {
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM remote_posts WHERE iri = $1")
        .bind(iri)
        .fetch_one(&inst.pool)
        .await
        .expect("the post");
    let resp = reqwest::get(format!("{}/api/v1/statuses/{id}", inst.base))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let st: Value = resp.json().await.unwrap();
    st["poll"].clone()
}

/// Mastodon's poll: a `Question` with `oneOf`, each option counted by its
/// `replies.totalItems`, `votersCount` and `endTime` — shown as Mastodon's Poll entity.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mastodon_question() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let s = deliver(&inst, &peer, &fixture("mastodon_question", &peer)).await;
    assert_eq!(s.outcome, "Question stored", "{s:?}");
    assert_eq!(s.content.as_deref(), Some("<p>Tea or coffee?</p>"));
    let p = poll_of(&inst, s.body["object"]["id"].as_str().unwrap()).await;
    assert_eq!(
        p["options"],
        json!([{"title": "Tea", "votes_count": 4}, {"title": "Coffee", "votes_count": 3}]),
        "{p}"
    );
    assert_eq!(
        (
            &p["votes_count"],
            &p["voters_count"],
            &p["multiple"],
            &p["expired"]
        ),
        (&json!(7), &json!(7), &json!(false), &json!(false)),
        "{p}"
    );
    assert_eq!(p["expires_at"], "2099-12-01T10:00:00Z", "{p}");
    inst.shutdown().await;
}

/// A remote poll's counts, voters and end as a server may garble them — strings, negative,
/// fractional and huge numbers, none at all — and option names of 5 000 bytes: stored and
/// shown bounded (a garbled count is 0, a huge one `MAX_POLL_COUNT`, a garbled voters count
/// or end none), never an error and never an overflow of the sums.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_remote_poll_with_garbage_counts_is_stored_bounded() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let option = |name: String, total: Value| json!({"type": "Note", "name": name, "replies": {"type": "Collection", "totalItems": total}});
    let options = vec![
        option("string".into(), json!("five")),
        option("negative".into(), json!(-3)),
        option("fraction".into(), json!(2.5)),
        option("huge".into(), json!(1e300)),
        option("beyond i64".into(), json!(u64::MAX)),
        option("null".into(), Value::Null),
        json!({"type": "Note", "name": "no replies"}),
        json!({"type": "Note", "name": "a collection", "replies": "https://x.example/r"}),
        option("é".repeat(2500), json!(2)),
        json!({"type": "Note", "content": "no name"}),
    ];
    let note = note_by(
        &peer,
        "peer",
        "garbage",
        json!({"type": "Question", "anyOf": options, "votersCount": -1, "endTime": "soon"}),
    );
    deliver_as(&inst, &peer, "peer", note.clone()).await;
    let p = poll_of(&inst, note["id"].as_str().unwrap()).await;
    let counts: Vec<i64> = p["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["votes_count"].as_i64().unwrap())
        .collect();
    assert_eq!(
        counts,
        [0, 0, 0, 0, MAX_POLL_COUNT, 0, 0, 0, 2],
        "the unnamed option is left out: {p}"
    );
    assert_eq!(p["votes_count"], MAX_POLL_COUNT + 2);
    let long = p["options"][8]["title"].as_str().unwrap();
    assert!(long.len() <= MAX_POLL_OPTION_BYTES, "{}", long.len());
    assert_eq!(
        (&p["voters_count"], &p["expires_at"], &p["multiple"]),
        (&Value::Null, &Value::Null, &json!(true)),
        "{p}"
    );
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

// Remote lists and strings are bounded when stored (issue 61 F1): a remote server chooses how
// long its lists are, we choose how much of them we keep and show.

/// What one rendered status (with its author) may cost at most, from the caps: its text
/// (sanitized HTML may escape a character into up to 4 bytes), its attachments and tags (a
/// proxied image URL percent-encodes the remote one, up to 3 bytes a byte, and is shown twice)
/// and its author's profile.
fn status_bound() -> usize {
    let proxied = |n: usize| 3 * n + 256;
    let text = 4 * MAX_CONTENT_BYTES + MAX_SUMMARY_BYTES + 4 * MAX_STRING_BYTES;
    let attachments = MAX_ATTACHMENTS
        * (2 * proxied(MAX_STRING_BYTES) + 2 * MAX_STRING_BYTES + MAX_NAME_BYTES + 512);
    let tags = MAX_TAGS_PER_KIND
        * (2 * proxied(MAX_TAG_STRING_BYTES)
            + 4 * MAX_TAG_STRING_BYTES
            + 2 * MAX_STRING_BYTES
            + 512);
    let account = 2 * MAX_NAME_BYTES
        + 4 * MAX_SUMMARY_BYTES
        + MAX_FIELDS * 2 * 4 * MAX_NAME_BYTES
        + MAX_TAGS_PER_KIND * 2 * proxied(MAX_TAG_STRING_BYTES)
        + 4 * proxied(MAX_STRING_BYTES)
        + 4 * MAX_STRING_BYTES;
    let poll = MAX_POLL_OPTIONS * (4 * MAX_POLL_OPTION_BYTES + 64) + 512;
    text + attachments + tags + account + poll + 4096
}

/// A public note of the peer's `/users/{author}` at `/notes/{name}`, with `extra` merged in.
fn note_by(peer: &Peer, author: &str, name: &str, extra: Value) -> Value {
    let mut note = json!({
        "id": peer.iri(&format!("/notes/{name}")), "type": "Note",
        "attributedTo": peer.actor_of(author), "content": format!("<p>{name}</p>"),
        "published": "2026-11-30T10:00:00Z", "to": [PUBLIC],
    });
    for (k, v) in extra.as_object().expect("an object") {
        note[k] = v.clone();
    }
    note
}

/// Delivers `note` in a `Create` signed as `author`, checks the inbox took it, and waits for it
/// to be processed; returns the stored body.
async fn deliver_as(inst: &Instance, peer: &Peer, author: &str, note: Value) -> Value {
    let mut create = peer.create(note);
    create["actor"] = peer.actor_of(author).into();
    let size = serde_json::to_vec(&create).expect("json").len();
    assert!(size < 1024 * 1024, "a body the inbox takes ({size} bytes)");
    let status = peer
        .post_as(author, &format!("{}/inbox", inst.base), &create)
        .await;
    assert_eq!(status, 202);
    let id = create["id"].as_str().expect("id").to_string();
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
    assert!(
        outcome.starts_with("Note stored") || outcome.starts_with("Question stored"),
        "{outcome}"
    );
    body
}

/// How many entries of `list` have `"type": ty`.
fn of_type(list: &Value, ty: &str) -> usize {
    list.as_array()
        .expect("a list")
        .iter()
        .filter(|t| t["type"] == ty)
        .count()
}

/// A remote note's every list and long string: 10 000 attachments, 2 000 tags of each kind, a
/// 10 000-option poll, 3 000 addressees, 500 KB of content — stored at the caps, and rendered
/// to an anonymous reader of the public timeline at the caps, the page within what the caps
/// allow. (Before: all of it was kept and every read rendered all of it, each attachment with
/// a signed proxy URL; one anonymous read of 21 such notes was 121 MB of JSON.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_list_of_a_remote_note_is_stored_and_shown_bounded() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let base = peer.base().to_string();
    let attachments: Vec<Value> = (0..10_000)
        .map(|i| json!({"type": "Document", "mediaType": "image/png", "url": format!("{base}/m/{i}.png")}))
        .collect();
    let mut tags = Vec::new();
    for i in 0..2_000 {
        tags.push(json!({"type": "Mention", "href": format!("{base}/users/m{i}"), "name": format!("@m{i}@x")}));
        tags.push(json!({"type": "Hashtag", "href": format!("{base}/tags/t{i}"), "name": format!("#t{i}")}));
        tags.push(json!({"type": "Emoji", "name": format!(":e{i}:"), "icon": {"url": format!("{base}/e/{i}.png")}}));
        tags.push(json!({"type": "Link", "href": format!("{base}/l/{i}")}));
    }
    let options: Vec<Value> = (0..10_000)
        .map(|i| json!({"type": "Note", "name": format!("option {i}")}))
        .collect();
    let addressees: Vec<String> = (0..3_000).map(|i| format!("{base}/users/a{i}")).collect();
    let notes = [
        ("attachments", json!({"attachment": attachments})),
        ("tags", json!({"tag": tags})),
        (
            "poll",
            json!({"type": "Question", "oneOf": options, "endTime": "2099-01-01T00:00:00Z"}),
        ),
        (
            "strings",
            json!({
                "content": format!("<p>{}</p>", "a".repeat(500_000)),
                "summary": "s".repeat(100_000),
                "cc": addressees,
                "attachment": [{"type": "Document", "mediaType": "image/png",
                                "url": format!("{base}/m/long.png"), "name": "n".repeat(60_000)}],
            }),
        ),
    ];
    let mut bodies = std::collections::HashMap::new();
    for (name, extra) in notes {
        let body = deliver_as(&inst, &peer, "peer", note_by(&peer, "peer", name, extra)).await;
        bodies.insert(name, body["object"].clone());
    }

    // What the inbox kept of each, and what `remote_posts` holds.
    let o = &bodies["attachments"];
    assert_eq!(o["attachment"].as_array().unwrap().len(), MAX_ATTACHMENTS);
    let o = &bodies["tags"];
    for ty in ["Mention", "Hashtag", "Emoji", "Link"] {
        assert_eq!(of_type(&o["tag"], ty), MAX_TAGS_PER_KIND, "{ty}");
    }
    let o = &bodies["poll"];
    assert_eq!(o["oneOf"].as_array().unwrap().len(), MAX_POLL_OPTIONS);
    let (options, counts): (i32, i32) =
        sqlx::query_as("SELECT jsonb_array_length(options), cardinality(remote_counts) FROM polls")
            .fetch_one(&inst.pool)
            .await
            .unwrap();
    assert_eq!(
        (options as usize, counts as usize),
        (MAX_POLL_OPTIONS, MAX_POLL_OPTIONS)
    );
    let o = &bodies["strings"];
    assert_eq!(o["cc"].as_array().unwrap().len(), MAX_ADDRESSEES);
    assert!(o["content"].as_str().unwrap().len() <= MAX_CONTENT_BYTES);
    assert!(o["summary"].as_str().unwrap().len() <= MAX_SUMMARY_BYTES);
    assert!(o["attachment"][0]["name"].as_str().unwrap().len() <= MAX_NAME_BYTES);
    let rows: Vec<(String, i32, i32, i32, i32, i32)> = sqlx::query_as(
        "SELECT iri, jsonb_array_length(attachments), jsonb_array_length(mentions),
                coalesce(array_length(tags, 1), 0), octet_length(content)::int,
                octet_length(body::text)::int
           FROM remote_posts",
    )
    .fetch_all(&inst.pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 4);
    for (iri, attachments, mentions, tags, content, body) in rows {
        assert!(
            attachments as usize <= MAX_ATTACHMENTS,
            "{iri}: {attachments}"
        );
        assert!(mentions as usize <= MAX_TAGS_PER_KIND, "{iri}: {mentions}");
        assert!(tags as usize <= MAX_TAGS_PER_KIND, "{iri}: {tags}");
        assert!(
            content as usize <= 4 * MAX_CONTENT_BYTES,
            "{iri}: {content}"
        );
        assert!(body < 300_000, "{iri}: a stored body of {body} bytes");
        if iri.ends_with("/attachments") {
            assert_eq!(attachments as usize, MAX_ATTACHMENTS);
        }
        if iri.ends_with("/tags") {
            assert_eq!(
                (mentions as usize, tags as usize),
                (MAX_TAGS_PER_KIND, MAX_TAGS_PER_KIND)
            );
        }
    }

    // An anonymous reader's page: each status at the caps, the page within what they allow.
    let resp = reqwest::get(format!("{}/api/v1/timelines/public?limit=40", inst.base))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.bytes().await.unwrap();
    let page: Vec<Value> = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(page.len(), 4);
    assert!(
        bytes.len() <= page.len() * status_bound(),
        "{} bytes for {} statuses (bound {} each)",
        bytes.len(),
        page.len(),
        status_bound()
    );
    for s in &page {
        let name = s["uri"].as_str().unwrap().rsplit('/').next().unwrap();
        assert!(
            s["media_attachments"].as_array().unwrap().len() <= MAX_ATTACHMENTS,
            "{name}"
        );
        assert!(
            s["emojis"].as_array().unwrap().len() <= MAX_TAGS_PER_KIND,
            "{name}"
        );
        assert!(
            s["tags"].as_array().unwrap().len() <= MAX_TAGS_PER_KIND,
            "{name}"
        );
        match name {
            "attachments" => assert_eq!(
                s["media_attachments"].as_array().unwrap().len(),
                MAX_ATTACHMENTS
            ),
            "tags" => {
                assert_eq!(s["emojis"].as_array().unwrap().len(), MAX_TAGS_PER_KIND);
                assert_eq!(s["tags"].as_array().unwrap().len(), MAX_TAGS_PER_KIND);
            }
            "poll" => assert_eq!(
                s["poll"]["options"].as_array().unwrap().len(),
                MAX_POLL_OPTIONS
            ),
            _ => {}
        }
    }
    inst.shutdown().await;
}

/// A remote actor's lists and strings: an `Update` of itself with 6 000 profile fields, 6 000
/// aliases, 2 000 emojis and a 100 KB display name is stored at the caps, and every status
/// of theirs shows the capped profile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_list_of_a_remote_actor_is_stored_and_shown_bounded() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let base = peer.base().to_string();
    let actor = peer.actor_of("hostile");
    // First as the peer serves it (the inbox fetches it to check the signature), then updated.
    deliver_as(
        &inst,
        &peer,
        "hostile",
        note_by(&peer, "hostile", "first", json!({})),
    )
    .await;
    let mut doc = support::api::ap_doc(&actor).await;
    doc["name"] = "N".repeat(100_000).into();
    doc["attachment"] = (0..6_000)
        .map(
            |i| json!({"type": "PropertyValue", "name": format!("f{i}"), "value": format!("v{i}")}),
        )
        .collect();
    doc["alsoKnownAs"] = (0..6_000)
        .map(|i| Value::String(format!("{base}/users/alias{i}")))
        .collect();
    doc["tag"] = (0..2_000)
        .map(|i| json!({"type": "Emoji", "name": format!(":e{i}:"), "icon": {"url": format!("{base}/e/{i}.png")}}))
        .collect();
    let update = json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": format!("{actor}#update-1"), "type": "Update", "actor": actor, "object": doc,
    });
    assert!(serde_json::to_vec(&update).unwrap().len() < 1024 * 1024);
    assert_eq!(
        peer.post_as("hostile", &format!("{}/inbox", inst.base), &update)
            .await,
        202
    );
    let stored: Value = eventually(WAIT, "the update applied", || async {
        let outcome: Option<String> = sqlx::query_scalar(
            "SELECT outcome FROM inbox_activities WHERE type = 'Update' AND processed_at IS NOT NULL",
        )
        .fetch_optional(&inst.pool)
        .await
        .unwrap();
        outcome?;
        sqlx::query_scalar("SELECT document FROM remote_actors WHERE iri = $1")
            .bind(&actor)
            .fetch_optional(&inst.pool)
            .await
            .unwrap()
    })
    .await;
    assert_eq!(stored["attachment"].as_array().unwrap().len(), MAX_FIELDS);
    assert_eq!(stored["alsoKnownAs"].as_array().unwrap().len(), MAX_ALIASES);
    assert_eq!(of_type(&stored["tag"], "Emoji"), MAX_TAGS_PER_KIND);
    assert!(stored["name"].as_str().unwrap().len() <= MAX_NAME_BYTES);

    deliver_as(
        &inst,
        &peer,
        "hostile",
        note_by(&peer, "hostile", "second", json!({})),
    )
    .await;
    let page: Vec<Value> = reqwest::get(format!("{}/api/v1/timelines/public", inst.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page.len(), 2);
    for s in &page {
        let a = &s["account"];
        assert_eq!(a["fields"].as_array().unwrap().len(), MAX_FIELDS);
        assert_eq!(a["emojis"].as_array().unwrap().len(), MAX_TAGS_PER_KIND);
        assert!(a["display_name"].as_str().unwrap().len() <= MAX_NAME_BYTES);
    }
    inst.shutdown().await;
}

/// The same caps hold for a note we fetch (search resolution) rather than receive.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fetched_note_is_stored_bounded_too() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let base = peer.base().to_string();
    let attachments: Vec<Value> = (0..10_000)
        .map(|i| json!({"type": "Document", "mediaType": "image/png", "url": format!("{base}/m/{i}.png")}))
        .collect();
    let note = note_by(&peer, "peer", "fetched", json!({"attachment": attachments}));
    let iri = note["id"].as_str().unwrap().to_string();
    peer.doc("/notes/fetched", note);
    let (_, token) = inst.account("alice").await;
    let api = support::api::Client::bearer(&inst, &token);
    let q: String = url::form_urlencoded::byte_serialize(iri.as_bytes()).collect();
    let found = api
        .get(&format!("/api/v2/search?q={q}&resolve=true&type=statuses"))
        .await
        .assert_ok();
    let statuses = found.body["statuses"].as_array().unwrap();
    assert_eq!(statuses.len(), 1, "{}", found.body);
    assert_eq!(
        statuses[0]["media_attachments"].as_array().unwrap().len(),
        MAX_ATTACHMENTS
    );
    let (stored, body): (i32, i32) = sqlx::query_as(
        "SELECT jsonb_array_length(attachments), jsonb_array_length(body->'attachment')
           FROM remote_posts WHERE iri = $1",
    )
    .bind(&iri)
    .fetch_one(&inst.pool)
    .await
    .unwrap();
    assert_eq!(
        (stored as usize, body as usize),
        (MAX_ATTACHMENTS, MAX_ATTACHMENTS)
    );
    inst.shutdown().await;
}

/// Rows stored before the bounds (as a node without them stored a hostile note and actor:
/// whole) are bounded where they are read: the public timeline shows them at the caps, within
/// what the caps allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rows_stored_before_the_bounds_are_shown_bounded() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let base = peer.base().to_string();
    let note = note_by(&peer, "peer", "old", json!({}));
    let iri = note["id"].as_str().unwrap().to_string();
    deliver_as(&inst, &peer, "peer", note).await;
    let many = |n: usize, f: &dyn Fn(usize) -> Value| -> Value { (0..n).map(f).collect() };
    let attachments = many(
        10_000,
        &|i| json!({"type": "Document", "mediaType": "image/png", "url": format!("{base}/m/{i}.png"), "name": "d".repeat(if i < 8 { 5_000 } else { 1 })}),
    );
    let emojis = many(
        10_000,
        &|i| json!({"type": "Emoji", "name": format!(":e{i}:"), "icon": {"url": format!("{base}/e/{i}.png")}}),
    );
    let actor = peer.actor();
    let mentions = many(
        10_000,
        &|i| json!({"href": actor, "name": format!("@peer{i}@x")}),
    );
    let tags: Vec<String> = (0..10_000).map(|i| format!("t{i}")).collect();
    sqlx::query(
        "UPDATE remote_posts SET attachments = $2, mentions = $3, tags = $4, content = $5,
                body = jsonb_set(body, '{tag}', $6)
          WHERE iri = $1",
    )
    .bind(&iri)
    .bind(&attachments)
    .bind(&mentions)
    .bind(&tags)
    .bind(format!("<p>{}</p>", "a".repeat(1_000_000)))
    .bind(&emojis)
    .execute(&inst.pool)
    .await
    .unwrap();
    let fields = many(
        10_000,
        &|i| json!({"type": "PropertyValue", "name": format!("f{i}"), "value": "v".repeat(if i < 20 { 5_000 } else { 1 })}),
    );
    let junk = many(10_000, &|i| json!(format!("junk {i}")));
    sqlx::query(
        "UPDATE remote_actors
            SET document = document || jsonb_build_object('attachment', $2::jsonb, 'tag', $3::jsonb,
                                                          'name', $4::text, 'junk', $5::jsonb)
          WHERE iri = $1",
    )
    .bind(&actor)
    .bind(&fields)
    .bind(&emojis)
    .bind("N".repeat(200_000))
    .bind(&junk)
    .execute(&inst.pool)
    .await
    .unwrap();

    let resp = reqwest::get(format!("{}/api/v1/timelines/public", inst.base))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.bytes().await.unwrap();
    assert!(
        bytes.len() <= status_bound(),
        "{} bytes for one status (bound {})",
        bytes.len(),
        status_bound()
    );
    let page: Vec<Value> = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(page.len(), 1);
    let s = &page[0];
    let len = |v: &Value| v.as_array().unwrap().len();
    assert_eq!(len(&s["media_attachments"]), MAX_ATTACHMENTS);
    assert_eq!(len(&s["emojis"]), MAX_TAGS_PER_KIND);
    assert_eq!(len(&s["tags"]), MAX_TAGS_PER_KIND);
    assert_eq!(len(&s["mentions"]), MAX_TAGS_PER_KIND);
    assert!(s["content"].as_str().unwrap().len() <= 4 * MAX_CONTENT_BYTES + 16);
    let a = &s["account"];
    assert_eq!(len(&a["fields"]), MAX_FIELDS);
    for f in a["fields"].as_array().unwrap() {
        assert!(f["value"].as_str().unwrap().len() <= MAX_NAME_BYTES, "{f}");
    }
    for m in s["media_attachments"].as_array().unwrap() {
        assert!(m["description"].as_str().unwrap().len() <= MAX_NAME_BYTES);
    }
    assert_eq!(len(&a["emojis"]), MAX_TAGS_PER_KIND);
    assert!(a["display_name"].as_str().unwrap().len() <= MAX_NAME_BYTES);
    inst.shutdown().await;
}
