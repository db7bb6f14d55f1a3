//! The remote media proxy (R-MAPI-6, issue 32 item 7): a remote post's images and a remote
//! account's avatar and header are shown through this server's signed URLs (`remote_url`
//! keeps the origin), served as images with `nosniff`, fetched from the remote once for many
//! readers (the node's cache, counted in `/metrics`), and a URL this server did not sign is a
//! 404. Only what sniffs as a raster image is relayed, under the sniffed type; a failure is
//! one generic 502, remembered for a while. (The memory bound under a burst is in `dos.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use serde_json::json;
use support::api::{WAIT, alice_and_peer, follow_each_other};
use support::eventually;
use support::multipart::png;

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn remote_images_reach_readers_only_through_our_signed_urls_and_one_fetch() {
    let (inst, peer, _, api) = alice_and_peer().await;
    let (peer_id, _) = follow_each_other(&inst, &api, &peer, "alice").await;
    let (photo, face) = (png(40, 30), png(8, 8));
    for (name, bytes) in [("photo.png", &photo), ("face.png", &face)] {
        peer.state
            .uploads
            .lock()
            .expect("uploads")
            .insert(name.into(), ("image/png".into(), bytes.clone()));
    }
    let photo_url = peer.iri("/uploads/photo.png");
    let note = peer.new_id("notes");
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(), "to": [PUBLIC],
        "content": "<p>look</p>", "published": "2026-12-01T10:00:00Z",
        "attachment": [{ "type": "Document", "mediaType": "image/png",
                         "url": photo_url, "name": "a photo" }]
    }));
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &create).await, 202);
    let status = eventually(WAIT, "the note at home", || async {
        let home = api.get("/api/v1/timelines/home").await.body;
        home.as_array()?
            .iter()
            .find(|s| s["uri"] == note.as_str())
            .cloned()
    })
    .await;
    let media = &status["media_attachments"][0];
    assert_eq!(media["remote_url"], photo_url.as_str());
    let shown = media["url"].as_str().expect("url").to_string();
    assert!(
        shown.starts_with(&format!("{}/media/proxy/", inst.base)),
        "{media}"
    );
    assert_eq!(media["preview_url"], shown.as_str());
    assert!(
        !status
            .to_string()
            .contains(&format!("\"url\":\"{photo_url}\""))
    );

    // Eight readers at once: the same bytes, as an image, and the remote asked once.
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let url = shown.clone();
            tokio::spawn(async move { reqwest::get(url).await.expect("proxy") })
        })
        .collect();
    for r in readers {
        let resp = r.await.expect("reader");
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "image/png");
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
        assert_eq!(resp.bytes().await.expect("body").as_ref(), photo.as_slice());
    }
    let fetched = peer
        .hits()
        .iter()
        .filter(|h| h.path == "/uploads/photo.png")
        .count();
    assert_eq!(fetched, 1, "one fetch for eight readers");
    let metrics = reqwest::get(format!("{}/metrics", inst.health_base()))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("hollo_media_proxy_requests_total{outcome=\"hit\"} 7"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("media_proxy"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Another URL under the same signature, or a forged one: the same 404.
    let (base, _) = shown.split_once("?url=").expect("a proxied URL");
    let other: String =
        url::form_urlencoded::byte_serialize(peer.iri("/uploads/face.png").as_bytes()).collect();
    for forged in [
        format!("{base}?url={other}"),
        format!("{}/media/proxy/00ff?url={other}", inst.base),
    ] {
        assert_eq!(
            reqwest::get(&forged).await.expect("proxy").status(),
            404,
            "{forged}"
        );
    }

    // A remote account's avatar and header, through the proxy too.
    sqlx::query(
        "UPDATE remote_actors
            SET document = document || jsonb_build_object(
                  'icon', jsonb_build_object('type', 'Image', 'url', $2::text),
                  'image', jsonb_build_object('type', 'Image', 'url', $2::text))
          WHERE iri = $1",
    )
    .bind(peer.actor())
    .bind(peer.iri("/uploads/face.png"))
    .execute(&inst.pool)
    .await
    .expect("the actor's icon");
    let account = api.get(&format!("/api/v1/accounts/{peer_id}")).await.body;
    for key in ["avatar", "avatar_static", "header", "header_static"] {
        let url = account[key].as_str().expect(key);
        assert!(
            url.starts_with(&format!("{}/media/proxy/", inst.base)),
            "{key}: {url}"
        );
    }
    let avatar = reqwest::get(account["avatar"].as_str().expect("avatar"))
        .await
        .expect("proxy");
    assert_eq!(avatar.status(), 200);
    assert_eq!(
        avatar.bytes().await.expect("body").as_ref(),
        face.as_slice()
    );
    inst.shutdown().await;
}

/// The proxied URL of `remote` on `inst` (as the node mints it in entities).
fn proxied(inst: &support::node::Instance, remote: &str) -> String {
    hollo_runtime::media::proxy::MediaProxy::new(support::node::SECRET).url(&inst.base, remote)
}

/// An upload the peer serves under `/uploads/{name}` with `content_type` as it is.
fn serve(peer: &support::peer::Peer, name: &str, content_type: &str, body: &[u8]) {
    peer.state
        .uploads
        .lock()
        .expect("uploads")
        .insert(name.into(), (content_type.into(), body.to_vec()));
}

fn fetches(peer: &support::peer::Peer, name: &str) -> usize {
    let path = format!("/uploads/{name}");
    peer.hits().iter().filter(|h| h.path == path).count()
}

/// Issue 61 F3: `Content-Type: image/png, text/html` passed the `image/` prefix check and was
/// relayed as it came, so a browser rendered the remote's HTML on our origin. The bytes decide
/// now, as for uploads: only JPEG, PNG, GIF and WebP are relayed, under the type we sniffed;
/// HTML or SVG is a 502 whatever the remote calls it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_sniffed_raster_images_are_relayed_under_the_type_we_decided() {
    let inst = support::node::Instance::start("web", &[]).await;
    let peer = support::peer::Peer::start().await;
    let html = b"<html><body><script>alert(document.domain)</script></body></html>";
    let svg = br#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#;
    serve(&peer, "page.png", "image/png, text/html", html);
    serve(&peer, "plain.png", "image/png", html);
    serve(&peer, "vector.png", "image/png", svg);
    let photo = png(12, 9);
    serve(&peer, "photo.jpg", "image/jpeg, text/html", &photo);
    for name in ["page.png", "plain.png", "vector.png"] {
        let resp = reqwest::get(proxied(&inst, &peer.iri(&format!("/uploads/{name}"))))
            .await
            .expect("proxy");
        let status = resp.status();
        let ty = support::api::header_text(resp.headers(), "content-type");
        let body = resp.text().await.expect("body");
        assert_eq!(status, 502, "{name}: {ty} {body}");
        assert!(ty.starts_with("application/json"), "{name}: {ty}");
        assert!(!body.contains("<script"), "{name}: {body}");
    }
    let resp = reqwest::get(proxied(&inst, &peer.iri("/uploads/photo.jpg")))
        .await
        .expect("proxy");
    assert_eq!(resp.status(), 200);
    let h = resp.headers().clone();
    assert_eq!(
        h["content-type"], "image/png",
        "the sniffed type, not the remote's"
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["content-security-policy"], "default-src 'none'; sandbox");
    assert_eq!(resp.bytes().await.expect("body").as_ref(), photo.as_slice());
    inst.shutdown().await;
}

/// Issue 61 F8: a failed proxy fetch was not remembered, so every reader's GET hit the remote
/// again. A failure is remembered for a while: the second GET is answered without a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_fetch_is_remembered_and_not_repeated() {
    let inst = support::node::Instance::start("web", &[]).await;
    let peer = support::peer::Peer::start().await;
    serve(&peer, "page.png", "image/png", b"<html>not an image</html>");
    for name in ["missing.png", "page.png"] {
        let url = proxied(&inst, &peer.iri(&format!("/uploads/{name}")));
        for _ in 0..3 {
            let status = reqwest::get(&url).await.expect("proxy").status();
            assert_eq!(status, 502, "{name}");
        }
        assert_eq!(
            fetches(&peer, name),
            1,
            "{name}: one request for three readers"
        );
    }
    inst.shutdown().await;
}

/// Issue 61 F7: the proxy's 502 said what the guard or the resolver found ("localhost:
/// 127.0.0.1 is a loopback … address", "cannot resolve …"), an oracle for internal names.
/// Every failure is now the same generic 502; the detail is only logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_fetch_says_nothing_of_what_a_name_resolves_to() {
    let inst = support::node::Instance::start("web", &[("ALLOW_PRIVATE_ADDRESS", "false")]).await;
    let mut answers = Vec::new();
    for remote in [
        "https://localhost/a.png",
        "https://127.0.0.1/a.png",
        "https://no-such-host.invalid/a.png",
        "https://169.254.169.254/latest/meta-data/a.png",
    ] {
        let resp = reqwest::get(proxied(&inst, remote)).await.expect("proxy");
        let status = resp.status().as_u16();
        let body: serde_json::Value = resp.json().await.expect("a JSON error");
        let text = body.to_string();
        for leak in [
            "127.0.0.1",
            "169.254",
            "localhost",
            "invalid",
            "loopback",
            "resolve",
            "ALLOW_PRIVATE_ADDRESS",
        ] {
            assert!(!text.contains(leak), "{remote}: {text}");
        }
        answers.push((status, body));
    }
    assert_eq!(answers[0].0, 502, "{answers:?}");
    assert!(
        answers.iter().all(|a| *a == answers[0]),
        "one answer for every failure: {answers:?}"
    );
    inst.shutdown().await;
}
