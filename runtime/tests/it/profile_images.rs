//! Avatars and headers (R-MAPI-6) over HTTP against a real node on a real PostgreSQL with
//! the fs drive: refusals first (not an image, over `MEDIA_MAX_BYTES`, a token without
//! `write:accounts`, no token) with nothing stored, removal of what is not there; then upload
//! through `update_credentials` — processed to Mastodon's sizes, served from the drive, shown in
//! every Account entity, carried by the actor document as `icon`/`image` and sent to a follower
//! in a signed `Update` — replacement and removal; the media cleanup keeps them and removes a
//! file left behind by a request that never committed; the S3 drive (moto) stores and deletes
//! them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use image::ImageFormat;
use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Answer, Client, assert_error, header_text, peer_follows_accepted, received, run_media_cleanup,
    token_with_scopes,
};
use support::files::{files_under, temp_dir};
use support::moto::Moto;
use support::multipart::{Part, encode, form};
use support::node::Instance;
use support::peer::Peer;
use uuid::Uuid;

const MAX_BYTES: usize = 200_000;
const ADMIN: &str = "profile-images-admin-token";

fn storage_dir() -> PathBuf {
    temp_dir("hollo-profile-images")
}

async fn instance(dir: &Path) -> Instance {
    Instance::start(
        "all",
        &[
            ("FS_STORAGE_PATH", dir.to_str().unwrap()),
            ("MEDIA_MAX_BYTES", &MAX_BYTES.to_string()),
        ],
    )
    .await
}

async fn patch_form(api: &Client, parts: &[Part<'_>]) -> Answer {
    let (ctype, body) = form(parts);
    api.send(
        api.http
            .patch(format!("{}/api/v1/accounts/update_credentials", api.base))
            .header("content-type", ctype)
            .body(body),
    )
    .await
}

async fn remove(api: &Client, which: &str) -> Answer {
    api.act(Method::DELETE, &format!("/api/v1/profile/{which}"))
        .await
}

fn placeholder(inst: &Instance, which: &str) -> String {
    format!("{}/{which}s/original/missing.png", inst.base)
}

/// The account shows the placeholder images, as before any upload.
fn assert_placeholders(inst: &Instance, account: &Value) {
    assert_eq!(account["avatar"], json!(placeholder(inst, "avatar")));
    assert_eq!(account["avatar_static"], json!(placeholder(inst, "avatar")));
    assert_eq!(account["header"], json!(placeholder(inst, "header")));
    assert_eq!(account["header_static"], json!(placeholder(inst, "header")));
}

async fn actor(inst: &Instance, name: &str) -> Value {
    support::api::ap_doc(&inst.fed.actor_iri(name)).await
}

/// Fetches a served image: its content type and decoded dimensions.
async fn served(url: &str) -> (String, u32, u32) {
    let resp = reqwest::get(url).await.expect("GET the image");
    assert_eq!(resp.status(), 200, "{url}");
    let ctype = header_text(resp.headers(), "content-type");
    let bytes = resp.bytes().await.unwrap();
    let img = image::load_from_memory(&bytes).expect("the served file is an image");
    (ctype, img.width(), img.height())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_images_store_nothing_and_removing_nothing_is_a_placeholder() {
    let dir = storage_dir();
    let inst = instance(&dir).await;
    let (alice, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));
    let before = api
        .get("/api/v1/accounts/verify_credentials")
        .await
        .assert_ok();
    assert_placeholders(&inst, &before.body);

    // Not an image by its bytes, whatever it claims; the note beside it is not kept either.
    let svg = b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>";
    let a = patch_form(
        &api,
        &[
            ("note", None, b"new note"),
            ("avatar", Some(("a.png", "image/png")), svg),
        ],
    )
    .await;
    assert_error(&a, 422, "an SVG avatar");
    let a = patch_form(&api, &[("header", Some(("h.gif", "image/gif")), b"")]).await;
    assert_error(&a, 422, "an empty header");
    // Over MEDIA_MAX_BYTES (422, as media uploads answer it), and far over it.
    let mut big = encode(10, 10, ImageFormat::Png, 255);
    big.resize(MAX_BYTES + 1, 7);
    let a = patch_form(&api, &[("avatar", Some(("a.png", "image/png")), &big)]).await;
    assert_error(&a, 422, "an avatar over MEDIA_MAX_BYTES");
    // Far over it: refused before the rest is read. The server answers and closes, so the
    // client, still sending, may see the connection end instead of the answer. A client of
    // its own, so the connection the server closed is never handed to the requests after it.
    big.resize(MAX_BYTES * 5, 7);
    let (ctype, body) = form(&[("header", Some(("h.png", "image/png")), &big)]);
    let sent = reqwest::Client::new()
        .patch(format!("{}/api/v1/accounts/update_credentials", api.base))
        .bearer_auth(&token)
        .header("content-type", ctype)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(resp) => assert_eq!(resp.status(), 422, "a header far over MEDIA_MAX_BYTES"),
        Err(e) => assert!(e.is_request(), "closed before the body was read: {e}"),
    }
    // A valid avatar beside an invalid header: neither is kept.
    let ok = encode(50, 50, ImageFormat::Png, 255);
    let a = patch_form(
        &api,
        &[
            ("avatar", Some(("a.png", "image/png")), &ok),
            ("header", Some(("h.png", "image/png")), svg),
        ],
    )
    .await;
    assert_error(&a, 422, "a valid avatar with an invalid header");
    // Another file field is not an image slot.
    let a = patch_form(&api, &[("file", Some(("a.png", "image/png")), &ok)]).await;
    assert_error(&a, 422, "a file that is neither avatar nor header");

    // Scopes: write:accounts is needed; no token is a 401.
    let read_only = Client::new(
        &inst,
        Some(&token_with_scopes(&inst, alice.id, "read").await),
    );
    let a = patch_form(&read_only, &[("avatar", Some(("a.png", "image/png")), &ok)]).await;
    assert_error(&a, 403, "upload with a read-only token");
    assert_error(
        &remove(&read_only, "avatar").await,
        403,
        "remove, read-only",
    );
    let anon = Client::new(&inst, None);
    let a = patch_form(&anon, &[("avatar", Some(("a.png", "image/png")), &ok)]).await;
    assert_error(&a, 401, "upload without a token");
    assert_error(
        &remove(&anon, "header").await,
        401,
        "remove without a token",
    );

    // Nothing was stored: no file, no row, the profile as it was.
    assert_eq!(files_under(&dir), Vec::<String>::new());
    assert_eq!(inst.count("SELECT count(*) FROM media_files").await, 0);
    let after = api.get("/api/v1/accounts/verify_credentials").await;
    assert_eq!(after.body, before.body, "nothing half-written");

    // Removing what is not there: 200 with the CredentialAccount and its placeholders.
    for which in ["avatar", "header"] {
        let a = remove(&api, which).await;
        assert_eq!(a.status, 200, "{which}: {}", a.body);
        assert_placeholders(&inst, &a.body);
        assert_eq!(
            a.body["source"], before.body["source"],
            "a CredentialAccount"
        );
    }
    let doc = actor(&inst, "alice").await;
    assert!(
        doc.get("icon").is_none() && doc.get("image").is_none(),
        "{doc}"
    );
    inst.shutdown_removing(dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn avatars_and_headers_are_processed_served_shown_and_federated() {
    let dir = storage_dir();
    let inst = instance(&dir).await;
    let peer = Peer::start().await;
    let (alice, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));
    let me = inst.fed.actor_iri("alice");

    // The peer follows alice (accepted at once: she is not locked).
    peer_follows_accepted(&inst, &peer, "alice").await;

    // An opaque wide PNG as the avatar, a small JPEG as the header, with a text field.
    let avatar_in = encode(1280, 320, ImageFormat::Png, 255);
    let header_in = encode(300, 100, ImageFormat::Jpeg, 255);
    let a = patch_form(
        &api,
        &[
            ("display_name", None, b"Alice"),
            (
                "avatar",
                Some(("me.bin", "application/octet-stream")),
                &avatar_in,
            ),
            ("header", Some(("banner.jpg", "image/jpeg")), &header_in),
        ],
    )
    .await
    .assert_ok();
    assert_eq!(a.body["display_name"], "Alice");
    let avatar = a.body["avatar"].as_str().expect("avatar").to_string();
    let header = a.body["header"].as_str().expect("header").to_string();
    let media_base = format!("{}/media/", inst.base);
    assert!(avatar.starts_with(&media_base), "{avatar}");
    assert!(header.starts_with(&media_base), "{header}");
    // One still image per slot: the static URL is the same file.
    assert_eq!(a.body["avatar_static"], json!(avatar));
    assert_eq!(a.body["header_static"], json!(header));
    // Served from the drive, at Mastodon's sizes (crop-to-fill; the header enlarged).
    assert_eq!(served(&avatar).await, ("image/jpeg".to_string(), 400, 400));
    assert_eq!(served(&header).await, ("image/jpeg".to_string(), 1500, 500));
    assert_eq!(files_under(&dir).len(), 2, "{:?}", files_under(&dir));
    assert_eq!(inst.count("SELECT count(*) FROM media_files").await, 2);

    // Every view of the account shows them.
    let verified = api.get("/api/v1/accounts/verify_credentials").await;
    let shown = api.get(&format!("/api/v1/accounts/{}", alice.id)).await;
    for entity in [&verified.body, &shown.body] {
        assert_eq!(entity["avatar"], json!(avatar), "{entity}");
        assert_eq!(entity["avatar_static"], json!(avatar), "{entity}");
        assert_eq!(entity["header"], json!(header), "{entity}");
        assert_eq!(entity["header_static"], json!(header), "{entity}");
    }

    // The actor document carries them; the follower gets a signed Update with them.
    let doc = actor(&inst, "alice").await;
    assert_eq!(
        doc["icon"],
        json!({"type": "Image", "mediaType": "image/jpeg", "url": avatar})
    );
    assert_eq!(
        doc["image"],
        json!({"type": "Image", "mediaType": "image/jpeg", "url": header})
    );
    let update = received(&peer, "Update", |b| {
        b["object"]["icon"]["url"] == avatar.as_str()
    })
    .await;
    assert_eq!(update["actor"], json!(me));
    assert_eq!(update["object"]["id"], json!(me));
    assert_eq!(update["object"]["image"]["url"], json!(header));

    // A new avatar with transparency: a PNG, the old file gone from the drive.
    let clear = encode(64, 64, ImageFormat::Png, 100);
    let a = patch_form(&api, &[("avatar", Some(("c.png", "image/png")), &clear)])
        .await
        .assert_ok();
    let avatar2 = a.body["avatar"].as_str().expect("avatar").to_string();
    assert_ne!(avatar2, avatar);
    assert_eq!(a.body["header"], json!(header), "the header is kept");
    assert_eq!(served(&avatar2).await, ("image/png".to_string(), 400, 400));
    assert_eq!(reqwest::get(&avatar).await.unwrap().status(), 404);
    assert_eq!(files_under(&dir).len(), 2, "{:?}", files_under(&dir));
    assert_eq!(inst.count("SELECT count(*) FROM media_files").await, 2);
    let update = received(&peer, "Update", |b| {
        b["object"]["icon"]["url"] == avatar2.as_str()
    })
    .await;
    assert_eq!(update["object"]["icon"]["mediaType"], "image/png");

    // Removal: the placeholder, no icon on the actor, and another Update without it.
    let a = remove(&api, "avatar").await.assert_ok();
    assert_eq!(a.body["avatar"], json!(placeholder(&inst, "avatar")));
    assert_eq!(a.body["avatar_static"], json!(placeholder(&inst, "avatar")));
    assert_eq!(a.body["header"], json!(header));
    assert!(
        a.body["source"].is_object(),
        "a CredentialAccount: {}",
        a.body
    );
    assert_eq!(reqwest::get(&avatar2).await.unwrap().status(), 404);
    let doc = actor(&inst, "alice").await;
    assert!(doc.get("icon").is_none(), "{doc}");
    assert_eq!(doc["image"]["url"], json!(header));
    let update = received(&peer, "Update", |b| {
        b["object"].get("icon").is_none() && b["object"]["image"]["url"] == header.as_str()
    })
    .await;
    assert_eq!(update["object"]["id"], json!(me));
    let a = remove(&api, "header").await.assert_ok();
    assert_placeholders(&inst, &a.body);
    assert_eq!(files_under(&dir), Vec::<String>::new());
    assert_eq!(inst.count("SELECT count(*) FROM media_files").await, 0);
    received(&peer, "Update", |b| {
        b["object"].get("icon").is_none() && b["object"].get("image").is_none()
    })
    .await;
    inst.shutdown_removing(dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_media_cleanup_keeps_profile_images_and_removes_one_never_committed() {
    let dir = storage_dir();
    let inst = Instance::on_disk(&dir, &[("ADMIN_TOKEN", ADMIN)]).await;
    let (_, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));
    let img = encode(40, 40, ImageFormat::Png, 255);
    let a = patch_form(
        &api,
        &[
            ("avatar", Some(("a.png", "image/png")), &img),
            ("header", Some(("h.png", "image/png")), &img),
        ],
    )
    .await
    .assert_ok();
    // A file a request wrote before its transaction failed (or its process died): on the
    // drive, named by no row.
    let stray = format!("media/{}/avatar.jpg", Uuid::now_v7());
    std::fs::create_dir_all(dir.join(&stray).parent().unwrap()).unwrap();
    std::fs::write(dir.join(&stray), b"left behind").unwrap();
    // Everything looks two days old, past the cleanup's grace period.
    let old = std::time::SystemTime::now() - Duration::from_secs(2 * 86_400);
    for f in files_under(&dir) {
        std::fs::File::options()
            .write(true)
            .open(dir.join(f))
            .and_then(|f| f.set_modified(old))
            .expect("age");
    }
    let job = run_media_cleanup(&inst, ADMIN).await;
    assert_eq!(job["status"], "completed", "{job}");
    let left = files_under(&dir);
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(!left.contains(&stray), "{left:?}");
    for url in [&a.body["avatar"], &a.body["header"]] {
        assert_eq!(served(url.as_str().unwrap()).await.0, "image/jpeg");
    }
    inst.shutdown_removing(dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_s3_drive_stores_and_deletes_profile_images_through_moto() {
    let (moto, base) = Moto::with_public_bucket("hollo-profiles").await;
    let inst = Instance::start("all", &moto.drive_env("hollo-profiles", &base)).await;
    let (_, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));
    let a = patch_form(
        &api,
        &[(
            "header",
            Some(("h.png", "image/png")),
            &encode(3000, 1000, ImageFormat::Png, 50),
        )],
    )
    .await
    .assert_ok();
    let header = a.body["header"].as_str().unwrap().to_string();
    assert!(header.starts_with(&format!("{base}/media/")), "{header}");
    // The bucket serves it with the type it was stored with, at the header's size.
    assert_eq!(served(&header).await, ("image/png".to_string(), 1500, 500));
    assert_eq!(actor(&inst, "alice").await["image"]["url"], json!(header));
    let a = remove(&api, "header").await.assert_ok();
    assert_eq!(a.body["header"], json!(placeholder(&inst, "header")));
    assert_eq!(
        reqwest::get(&header).await.unwrap().status().as_u16(),
        404,
        "deleted from the bucket"
    );
    inst.shutdown().await;
}
