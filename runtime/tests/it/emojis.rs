//! The instance's custom emojis (R-MAPI-6) over HTTP on a real node and PostgreSQL:
//! the admin adds one from an image (bad input refused first, `ADMIN_TOKEN` required), apps
//! list it, a post of ours using `:shortcode:` shows it in `emojis` and carries it to a follower
//! as an `Emoji` tag of its `Note`, and deleting it removes its file.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::io::Cursor;

use image::{DynamicImage, ImageFormat};
use reqwest::Method;
use serde_json::{Value, json};
use support::api::{Client, follow_each_other, received};
use support::node::Instance;
use support::peer::Peer;

const ADMIN: &str = "emoji-admin-token";

fn png(w: u32, h: u32) -> Vec<u8> {
    let img = DynamicImage::ImageRgba8(image::RgbaImage::from_fn(w, h, |x, y| {
        image::Rgba([(x * 7 % 256) as u8, (y * 3 % 256) as u8, 90, 255])
    }));
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Png).expect("encode");
    out.into_inner()
}

/// `POST /api/v1/admin/custom_emojis` with `token`: (status, body).
async fn add(
    inst: &Instance,
    token: Option<&str>,
    parts: &[support::multipart::Part<'_>],
) -> (u16, Value) {
    Client::new(inst, token)
        .multipart(Method::POST, "/api/v1/admin/custom_emojis", parts)
        .await
        .parts()
}

/// A node storing files under a new directory (returned), with `ADMIN_TOKEN`; a peer; alice's
/// token and client.
async fn emoji_instance() -> (std::path::PathBuf, Instance, Peer, String, Client) {
    let dir = support::files::temp_dir("hollo-emoji-test");
    let inst = Instance::on_disk(&dir, &[("ADMIN_TOKEN", ADMIN)]).await;
    let peer = Peer::start().await;
    let (_, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));
    (dir, inst, peer, token, api)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_emojis_are_added_listed_used_federated_and_removed() {
    let (dir, inst, peer, token, api) = emoji_instance().await;
    let image = png(64, 64);

    // Refused first: no admin token, an account's token, a bad shortcode, no image, not an
    // image, too big, an unknown field.
    assert_eq!(
        add(
            &inst,
            None,
            &[
                ("shortcode", None, b"blob"),
                ("image", Some(("b.png", "image/png")), &image)
            ]
        )
        .await
        .0,
        401
    );
    assert_eq!(
        add(
            &inst,
            Some(&token),
            &[
                ("shortcode", None, b"blob"),
                ("image", Some(("b.png", "image/png")), &image)
            ]
        )
        .await
        .0,
        401,
        "an account token is not the admin's"
    );
    for (parts, what) in [
        (
            vec![
                ("shortcode", None, b"a b".as_slice()),
                ("image", Some(("b.png", "image/png")), image.as_slice()),
            ],
            "a space",
        ),
        (
            vec![
                ("shortcode", None, b"x".as_slice()),
                ("image", Some(("b.png", "image/png")), image.as_slice()),
            ],
            "one character",
        ),
        (vec![("shortcode", None, b"blob".as_slice())], "no image"),
        (
            vec![
                ("shortcode", None, b"blob".as_slice()),
                (
                    "image",
                    Some(("b.png", "image/png")),
                    b"not an image".as_slice(),
                ),
            ],
            "not an image",
        ),
        (
            vec![
                ("shortcode", None, b"blob".as_slice()),
                ("image", Some(("b.png", "image/png")), image.as_slice()),
                ("color", None, b"red".as_slice()),
            ],
            "an unknown field",
        ),
    ] {
        let (status, body) = add(&inst, Some(ADMIN), &parts).await;
        assert_eq!(status, 422, "{what}: {body}");
    }
    let big = vec![0u8; 300 * 1024];
    let (status, _) = add(
        &inst,
        Some(ADMIN),
        &[
            ("shortcode", None, b"blob"),
            ("image", Some(("b.png", "image/png")), &big),
        ],
    )
    .await;
    assert!(status == 413 || status == 422, "over 256 KB: {status}");
    assert_eq!(inst.count("SELECT count(*) FROM custom_emojis").await, 0);

    // Added: listed for apps and for the admin; the shortcode is then taken in any case.
    let (status, made) = add(
        &inst,
        Some(ADMIN),
        &[
            ("shortcode", None, b"blobcat"),
            ("category", None, b"cats"),
            ("image", Some(("b.png", "image/png")), &image),
        ],
    )
    .await;
    assert_eq!(status, 200, "{made}");
    assert_eq!(
        (made["shortcode"].as_str(), made["category"].as_str()),
        (Some("blobcat"), Some("cats"))
    );
    let url = made["url"].as_str().unwrap().to_string();
    let served = reqwest::get(&url).await.unwrap();
    assert_eq!(served.headers()["content-type"], "image/png");
    assert_eq!(
        served.bytes().await.unwrap().as_ref(),
        image.as_slice(),
        "stored as uploaded"
    );
    assert_eq!(
        add(
            &inst,
            Some(ADMIN),
            &[
                ("shortcode", None, b"BlobCat"),
                ("image", Some(("b.png", "image/png")), &image)
            ]
        )
        .await
        .0,
        422,
        "taken"
    );
    let listed = Client::new(&inst, None)
        .get("/api/v1/custom_emojis")
        .await
        .body;
    assert_eq!(
        listed,
        json!([{ "shortcode": "blobcat", "url": url, "static_url": url, "visible_in_picker": true, "category": "cats" }])
    );

    // Used in a post: its Status shows it; a follower gets the Note with its Emoji tag.
    follow_each_other(&inst, &api, &peer, "alice").await;
    let post = api
        .posted(&json!({ "status": "hello :blobcat: and :unknown:" }))
        .await;
    assert_eq!(
        post["emojis"],
        json!([{ "shortcode": "blobcat", "url": url, "static_url": url, "visible_in_picker": true }])
    );
    let create = received(&peer, "Create", |b| b["object"]["id"] == post["uri"]).await;
    let tags = create["object"]["tag"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let emoji = tags
        .iter()
        .find(|t| t["type"] == "Emoji")
        .expect("an Emoji tag");
    assert_eq!(
        (emoji["name"].as_str(), emoji["icon"]["url"].as_str()),
        (Some(":blobcat:"), Some(url.as_str()))
    );
    assert_eq!(
        tags.iter().filter(|t| t["type"] == "Emoji").count(),
        1,
        "no tag for an unknown code"
    );

    // Deleted: gone from the list and from the drive.
    let id = made["id"].as_str().unwrap();
    let gone = reqwest::Client::new()
        .delete(format!("{}/api/v1/admin/custom_emojis/{id}", inst.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status().as_u16(), 200);
    assert_eq!(
        Client::new(&inst, None)
            .get("/api/v1/custom_emojis")
            .await
            .body,
        json!([])
    );
    assert_eq!(reqwest::get(&url).await.unwrap().status().as_u16(), 404);
    inst.shutdown_removing(dir).await;
}

/// The admin copies a custom emoji from a remote post (R-MAPI-6): its image is fetched
/// through the fetch guard and stored as ours; a shortcode the post does not have, or no such
/// post, is a 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_posts_emoji_is_copied() {
    let (dir, inst, peer, _token, api) = emoji_instance().await;
    follow_each_other(&inst, &api, &peer, "alice").await;
    let image = png(32, 32);
    peer.state
        .uploads
        .lock()
        .unwrap()
        .insert("party.png".into(), ("image/png".into(), image.clone()));
    let note = peer.new_id("notes");
    let public = "https://www.w3.org/ns/activitystreams#Public";
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(), "to": [public],
        "content": "<p>:party:</p>", "published": "2026-12-01T10:00:00Z",
        "tag": [{ "type": "Emoji", "name": ":party:",
                  "icon": { "type": "Image", "url": peer.iri("/uploads/party.png") } }]
    }));
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &create).await, 202);
    let status_id = support::eventually(support::api::WAIT, "the note is stored", || async {
        let home = api.get("/api/v1/timelines/home").await.body;
        home.as_array()
            .and_then(|a| a.iter().find(|s| s["uri"] == note.as_str()))
            .map(|s| s["id"].as_str().unwrap().to_string())
    })
    .await;
    for (code, from, what) in [
        (
            "nope",
            status_id.as_str(),
            "a shortcode the post does not have",
        ),
        ("party", "not-an-id", "no such status"),
    ] {
        let (status, body) = add(
            &inst,
            Some(ADMIN),
            &[
                ("shortcode", None, code.as_bytes()),
                ("copy_from", None, from.as_bytes()),
            ],
        )
        .await;
        assert_eq!(status, 422, "{what}: {body}");
    }
    let (status, made) = add(
        &inst,
        Some(ADMIN),
        &[
            ("shortcode", None, b"party"),
            ("copy_from", None, status_id.as_bytes()),
        ],
    )
    .await;
    assert_eq!(status, 200, "{made}");
    let url = made["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}/media/", inst.base)),
        "ours now: {url}"
    );
    assert_eq!(
        reqwest::get(url)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .as_ref(),
        image.as_slice()
    );
    inst.shutdown_removing(dir).await;
}
