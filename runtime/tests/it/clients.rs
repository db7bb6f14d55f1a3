//! Real clients against a real node (R-MAPI-1): the sign-in and consent pages in a
//! headless Debian Chromium driven by Selenium (`clients/oauth_browser.py`), and the whole
//! flow driven by Mastodon.py (`clients/mastodon_flow.py`). Python packages are pinned in
//! `clients/requirements.txt` and installed into a venv under target/ on first use. A missing
//! python3, chromium or chromedriver FAILS the test with a message naming it (.ci/run installs
//! them); nothing is skipped silently.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::Duration;

use support::api::users;
use support::node::Instance;
use support::peer::Peer;

const PASSWORD: &str = "client test password";

/// Runs `clients/<script> BASE USER PASSWORD [EXTRA…]` to completion within the deadline;
/// its standard output.
async fn run_script(script: &str, base: &str, user: &str, extra: &[&str]) -> String {
    let mut args = vec![base, user, PASSWORD];
    args.extend_from_slice(extra);
    support::clients::run(script, &args).await
}

async fn instance_with_user(name: &str) -> Instance {
    let inst = Instance::start("web", &[]).await;
    support::account_with_token(&inst.pool, name).await;
    hollo_runtime::passwords::set(&inst.pool, name, PASSWORD)
        .await
        .expect("set the password");
    inst
}

#[tokio::test(flavor = "multi_thread")]
async fn sign_in_and_consent_pages_in_chromium() {
    let inst = instance_with_user("alice").await;
    run_script("oauth_browser.py", &inst.base, "alice", &[]).await;
    inst.shutdown().await;
}

/// The first run in Chromium: the first-run page opened with the one-time link (the node is
/// behind a proxy, so the browser's loopback connection is not local), the owner created, then
/// an app's authorization-code sign-in with the new account ending in verify_credentials.
#[tokio::test(flavor = "multi_thread")]
async fn first_run_page_then_an_app_sign_in_in_chromium() {
    let inst = Instance::start("web", &[("BEHIND_PROXY", "true")]).await;
    let token = hollo_runtime::first_run::issue_setup_token(&inst.pool)
        .await
        .expect("a setup token");
    run_script("setup_browser.py", &inst.base, "owner", &[&token]).await;
    let admin: bool = sqlx::query_scalar("SELECT admin FROM accounts WHERE username = 'owner'")
        .fetch_one(&inst.pool)
        .await
        .expect("the owner");
    assert!(admin, "the owner is an administrator");
    inst.shutdown().await;
}

/// The whole flow of R-MAPI-1 "Tests" in Mastodon.py: register, authorize in the browser,
/// log in, read the instance, verify and update the profile, upload and remove an avatar (on
/// the fs drive, R-MAPI-6), then follow an account of a remote test peer (resolved by
/// search) and see the relationship turn to `following` once the peer accepts (R-MAPI-1,
/// R-MAPI-2). An `all` node, so the Follow is delivered and the Accept processed.
#[tokio::test(flavor = "multi_thread")]
async fn mastodon_py_registers_authorizes_and_verifies() {
    let media = support::files::temp_dir("hollo-clientflow");
    let inst = Instance::on_disk(&media, &[]).await;
    // With its key pair: following a remote account signs the fetches and the Follow.
    inst.account("mona").await;
    hollo_runtime::passwords::set(&inst.pool, "mona", PASSWORD)
        .await
        .expect("set the password");
    let peer = std::sync::Arc::new(Peer::start().await);
    let acceptor = tokio::spawn(accept_follows(peer.clone()));
    run_script("mastodon_flow.py", &inst.base, "mona", &[&peer.handle()]).await;
    acceptor.abort();
    inst.shutdown().await;
    let _ = std::fs::remove_dir_all(media);
}

/// The peer's person at the keyboard: every verified `Follow` it receives is accepted, once.
async fn accept_follows(peer: std::sync::Arc<Peer>) {
    let mut answered = std::collections::HashSet::new();
    loop {
        for r in peer.received() {
            if r.ty() != "Follow" || r.verified.is_err() || !answered.insert(r.id().to_string()) {
                continue;
            }
            let follower = r.body["actor"].as_str().unwrap_or_default().to_string();
            let accept = serde_json::json!({
                "id": peer.new_id("accepts"), "type": "Accept",
                "actor": r.body["object"], "object": r.body,
            });
            peer.post(&format!("{follower}/inbox"), &accept).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// R-MAPI-3's full path in Mastodon.py (`clients/statuses_flow.py`): a post with an image and
/// one with a poll are delivered to the remote test peer (which follows the account); the
/// peer's person favourites, boosts and replies; the script sees the notifications, counts,
/// context and timelines, then deletes the post, and the peer receives the `Delete` with a
/// `Tombstone` (R-MAPI-3, R-MAPI-4). An `all` node: deliveries and inbox work happen in it.
#[tokio::test(flavor = "multi_thread")]
async fn mastodon_py_posts_gets_reactions_and_deletes() {
    let media = support::files::temp_dir("hollo-fullpath");
    let inst = Instance::on_disk(&media, &[]).await;
    let (mona, token) = inst.account("mona").await;
    let peer = std::sync::Arc::new(Peer::start().await);
    let mona_iri = format!("{}/users/mona", inst.base);
    let follow = serde_json::json!({
        "id": peer.new_id("follows"), "type": "Follow",
        "actor": peer.actor(), "object": mona_iri,
    });
    assert_eq!(peer.post(&format!("{mona_iri}/inbox"), &follow).await, 202);
    support::eventually(Duration::from_secs(30), "the peer follows mona", || async {
        (inst
            .count(&format!(
                "SELECT count(*) FROM followers WHERE account_id = '{}'",
                mona.id
            ))
            .await
            == 1)
            .then_some(())
    })
    .await;
    let reactor = tokio::spawn(react_to_pictures(peer.clone(), mona_iri.clone()));
    let out = run_script(
        "statuses_flow.py",
        &inst.base,
        "mona",
        &[&token, &peer.handle()],
    )
    .await;
    reactor.abort();
    let deleted = out
        .lines()
        .find_map(|l| {
            l.split_once("; deleted ")
                .map(|(_, uri)| uri.trim().to_string())
        })
        .expect("the script names the deleted status");

    let creates: Vec<_> = peer
        .bodies()
        .into_iter()
        .filter(|b| b["type"] == "Create")
        .collect();
    let picture = creates
        .iter()
        .find(|c| c["object"]["id"] == deleted.as_str())
        .unwrap_or_else(|| panic!("the post was delivered: {creates:#?}"));
    let document = &picture["object"]["attachment"][0];
    assert_eq!(document["type"], "Document", "{picture:#}");
    assert_eq!(document["mediaType"], "image/png", "{document:#}");
    assert_eq!(
        (document["width"].as_u64(), document["height"].as_u64()),
        (Some(32), Some(24))
    );
    assert_eq!(document["name"], "a test card", "{document:#}");
    assert!(document["blurhash"].is_string(), "{document:#}");
    assert!(
        creates.iter().any(|c| c["object"]["type"] == "Question"),
        "the poll was delivered as a Question: {creates:#?}"
    );
    support::eventually(
        Duration::from_secs(30),
        "the peer receives the Delete",
        || async {
            peer.received().into_iter().find(|r| {
                r.ty() == "Delete"
                    && r.verified.is_ok()
                    && r.body["object"]["type"] == "Tombstone"
                    && r.body["object"]["id"] == deleted.as_str()
            })
        },
    )
    .await;
    inst.shutdown().await;
}

/// The peer's person: each verified post of `author` with an attachment is favourited,
/// boosted and replied to (mentioning the author), once.
async fn react_to_pictures(peer: std::sync::Arc<Peer>, author: String) {
    let mut answered = std::collections::HashSet::new();
    loop {
        for r in peer.received() {
            let note = &r.body["object"];
            let with_media = note["attachment"].as_array().is_some_and(|a| !a.is_empty());
            if r.ty() != "Create"
                || r.verified.is_err()
                || note["attributedTo"] != author.as_str()
                || !with_media
                || !answered.insert(r.id().to_string())
            {
                continue;
            }
            let inbox = format!("{author}/inbox");
            let public = "https://www.w3.org/ns/activitystreams#Public";
            let like = serde_json::json!({
                "id": peer.new_id("likes"), "type": "Like", "actor": peer.actor(), "object": note["id"],
            });
            let announce = serde_json::json!({
                "id": peer.new_id("announces"), "type": "Announce", "actor": peer.actor(),
                "object": note["id"], "to": [public], "cc": [author],
                "published": chrono::Utc::now().to_rfc3339(),
            });
            let reply_id = peer.new_id("notes");
            let reply = peer.create(serde_json::json!({
                "id": reply_id, "type": "Note", "attributedTo": peer.actor(),
                "inReplyTo": note["id"], "content": "<p>Lovely picture</p>",
                "published": chrono::Utc::now().to_rfc3339(),
                "to": [public], "cc": [author],
                "tag": [{"type": "Mention", "href": author, "name": "@mona"}],
            }));
            for activity in [like, announce, reply] {
                assert_eq!(peer.post(&inbox, &activity).await, 202, "{activity:#}");
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// R-MAPI-6's lists and mutes in Mastodon.py (`clients/lists_mutes_flow.py`): a list made,
/// changed, filled and emptied; a friend's post in its timeline; a mute that hides it and an
/// unmute that brings it back; a two-second mute ended by the queue's expiry task. An `all`
/// node: the expiry runs in it.
#[tokio::test(flavor = "multi_thread")]
async fn mastodon_py_drives_lists_and_mutes() {
    let inst = Instance::start("all", &[]).await;
    let [(_, token, _), (_, friend_token, _)] = users(&inst, ["lena", "fritz"]).await;
    let out = run_script(
        "lists_mutes_flow.py",
        &inst.base,
        "lena",
        &[&token, &friend_token],
    )
    .await;
    assert!(out.contains("lists_mutes_flow: all steps passed"), "{out}");
    inst.shutdown().await;
}

/// R-MAPI-6's filters and conversation mutes in Mastodon.py (`clients/filters_flow.py`): a v2
/// filter that warns then hides, its v1 view checked against the library's own `filters_apply`,
/// keywords and a status rule, a two-second filter ended on the queue, a muted conversation.
#[tokio::test(flavor = "multi_thread")]
async fn mastodon_py_drives_filters_and_conversation_mutes() {
    let inst = Instance::start("all", &[]).await;
    let [(_, token, _), (_, friend_token, _)] = users(&inst, ["fiona", "felix"]).await;
    let out = run_script(
        "filters_flow.py",
        &inst.base,
        "fiona",
        &[&token, &friend_token],
    )
    .await;
    assert!(out.contains("filters_flow: all steps passed"), "{out}");
    inst.shutdown().await;
}

/// R-MAPI-6's scheduled statuses in Mastodon.py (`clients/scheduled_flow.py`): one scheduled
/// with an image, listed, moved a few seconds ahead, another cancelled; the worker of this `all`
/// node publishes the first at its time, once.
#[tokio::test(flavor = "multi_thread")]
async fn mastodon_py_drives_scheduled_statuses() {
    let dir = support::files::temp_dir("hollo-sched-py");
    let inst = Instance::start(
        "all",
        &[
            ("FS_STORAGE_PATH", dir.to_str().unwrap()),
            ("SCHEDULED_STATUS_MIN_SECONDS", "1"),
        ],
    )
    .await;
    let (_, token) = inst.account("sally").await;
    let out = run_script("scheduled_flow.py", &inst.base, "sally", &[&token]).await;
    assert!(out.contains("scheduled_flow: all steps passed"), "{out}");
    inst.shutdown().await;
}

/// R-MAPI-6's link previews read by Mastodon.py (`clients/cards_flow.py`): a post linking this
/// server's own profile page gets its card from the worker of this `all` node; an edit without
/// the link drops it.
#[tokio::test(flavor = "multi_thread")]
async fn mastodon_py_reads_link_previews() {
    let dir = support::files::temp_dir("hollo-cards-py");
    let inst = Instance::on_disk(&dir, &[]).await;
    let (_, token) = inst.account("carla").await;
    let out = run_script("cards_flow.py", &inst.base, "carla", &[&token]).await;
    assert!(out.contains("cards_flow: all steps passed"), "{out}");
    inst.shutdown_removing(dir).await;
}

/// R-MAPI-6's quote posts in Mastodon.py's 4.5 API (`clients/quotes_flow.py`): quoting under
/// the author's policy, listing the quotes, closing the policy (then a quote is refused) and
/// revoking one.
#[tokio::test(flavor = "multi_thread")]
async fn mastodon_py_drives_quotes() {
    let inst = Instance::start("all", &[]).await;
    let [(_, token, _), (_, quoter_token, _)] = users(&inst, ["quinn", "quoter"]).await;
    let out = run_script(
        "quotes_flow.py",
        &inst.base,
        "quinn",
        &[&token, &quoter_token],
    )
    .await;
    assert!(out.contains("quotes_flow: all steps passed"), "{out}");
    inst.shutdown().await;
}

/// R-MAPI-6's emoji reactions and quotes in megalodon's Pleroma client
/// (`clients/js/reactions_flow.mjs`, installed by `clients/js/install` under
/// `target/js-clients`, run there on its pinned Node 22).
#[tokio::test(flavor = "multi_thread")]
async fn megalodon_drives_reactions_and_quotes() {
    let dir = std::env::var_os("HOLLO_JS_CLIENTS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/js-clients")
        });
    let node = dir.join("node_modules/.bin/node");
    assert!(
        node.is_file() && dir.join("node_modules/megalodon/package.json").is_file(),
        "megalodon is not installed in {}: run runtime/tests/clients/js/install (scripts/test does)",
        dir.display()
    );
    // Beside its node_modules, where its import resolves.
    let script = dir.join("reactions_flow.mjs");
    std::fs::copy(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/clients/js/reactions_flow.mjs"),
        &script,
    )
    .expect("copy reactions_flow.mjs");
    let inst = Instance::start("all", &[]).await;
    let [(_, author, _), (_, reactor, _)] = users(&inst, ["rena", "rory"]).await;
    let out = tokio::process::Command::new(&node)
        .arg(&script)
        .args([inst.base.as_str(), author.as_str(), reactor.as_str()])
        .current_dir(&dir)
        .output()
        .await
        .expect("run node");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("reactions_flow: all steps passed"), "{text}");
    inst.shutdown().await;
}

/// R-MAPI-6's profile flows in Mastodon.py (`clients/profile_flow.py`): a default visibility
/// that a post without one takes, pins on the profile, an @-mention found by prefix, a followed
/// hashtag bringing a stranger's post home, a featured tag.
#[tokio::test(flavor = "multi_thread")]
async fn mastodon_py_drives_profiles_pins_and_tags() {
    let inst = Instance::start("all", &[]).await;
    let [(_, token, _), (_, friend_token, _)] = users(&inst, ["petra", "paulo"]).await;
    let out = run_script(
        "profile_flow.py",
        &inst.base,
        "petra",
        &[&token, &friend_token],
    )
    .await;
    assert!(out.contains("profile_flow: all steps passed"), "{out}");
    inst.shutdown().await;
}
