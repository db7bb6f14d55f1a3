//! Mastodon media uploads (R-MAPI-3) over HTTP against real nodes on a real
//! PostgreSQL: refusals first (a lying type, oversize, too many pixels, bad focus, ids that are
//! not the caller's) with nothing stored, then synchronous and worker-processed uploads, the fs
//! drive's file serving, attaching to statuses, the cleanup of abandoned uploads, and the S3
//! drive against moto's S3 server.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use hollo_runtime::media::{self, AttachError, Drive};
use image::ImageFormat;
use reqwest::Method;
use serde_json::{Value, json};
use support::api::{Answer, Client, assert_error, run_media_cleanup, token_with_scopes, users};
use support::eventually;
use support::files::{files_under, temp_dir};
use support::images::{gif_with_frame, png_bomb};
use support::moto::Moto;
use support::multipart::Part;
use support::node::Instance;
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(60);
const ADMIN: &str = "media-admin-token";

fn encode(w: u32, h: u32, format: ImageFormat) -> Vec<u8> {
    support::multipart::encode(w, h, format, 255)
}

fn png(w: u32, h: u32) -> Vec<u8> {
    encode(w, h, ImageFormat::Png)
}

/// Uploads to `/api/v{version}/media`.
async fn upload(api: &Client, version: u8, parts: &[Part<'_>]) -> Answer {
    api.multipart(Method::POST, &format!("/api/v{version}/media"), parts)
        .await
}

async fn upload_file(api: &Client, version: u8, bytes: &[u8]) -> Answer {
    upload(
        api,
        version,
        &[("file", Some(("a.png", "image/png")), bytes)],
    )
    .await
}

fn storage_dir() -> PathBuf {
    temp_dir("hollo-media-test")
}

async fn stored_rows(inst: &Instance) -> (i64, i64) {
    (
        inst.count("SELECT count(*) FROM media_attachments").await,
        inst.count("SELECT count(*) FROM media_files").await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_uploads_store_nothing_and_others_media_is_not_found() {
    let dir = storage_dir();
    let inst = Instance::start(
        "all",
        &[
            ("FS_STORAGE_PATH", dir.to_str().unwrap()),
            ("MEDIA_MAX_BYTES", "200000"),
            ("MEDIA_MAX_PIXELS", "40000"),
        ],
    )
    .await;
    let (alice, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);

    // Text that claims to be a PNG, by its Content-Type and its name.
    let lie = upload(
        &api,
        2,
        &[(
            "file",
            Some(("cat.png", "image/png")),
            b"<svg onload=alert(1)>",
        )],
    )
    .await;
    assert_error(&lie, 422, "a lying Content-Type");
    assert!(
        lie.body["error"].as_str().unwrap().contains("content type"),
        "{}",
        lie.body
    );
    // An SVG, honestly labelled, is not accepted either.
    let svg = upload(
        &api,
        1,
        &[(
            "file",
            Some(("x.svg", "image/svg+xml")),
            b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
        )],
    )
    .await;
    assert_error(&svg, 422, "SVG");
    // Over MEDIA_MAX_BYTES: noise after a PNG header, 200,001 bytes.
    let mut big = png(10, 10);
    big.resize(200_001, 7);
    assert_error(
        &upload_file(&api, 2, &big).await,
        422,
        "over MEDIA_MAX_BYTES",
    );
    assert_error(
        &upload_file(&api, 1, &big).await,
        422,
        "over MEDIA_MAX_BYTES (v1)",
    );
    // Far over it (past the route's body limit too): refused before the rest is read.
    big.resize(1_000_000, 7);
    assert_error(
        &upload_file(&api, 2, &big).await,
        422,
        "far over MEDIA_MAX_BYTES",
    );
    // Over MEDIA_MAX_PIXELS (201×200 > 40,000), small in bytes.
    let wide = upload_file(&api, 2, &png(201, 200)).await;
    assert_error(&wide, 422, "over MEDIA_MAX_PIXELS");
    assert!(
        wide.body["error"].as_str().unwrap().contains("201x200"),
        "{}",
        wide.body
    );
    // A header that promises an image and data that is not one, processed at once.
    let mut broken = png(50, 50);
    broken.truncate(60);
    assert_error(&upload_file(&api, 1, &broken).await, 422, "undecodable");
    // Bad focus, no file.
    let ok = png(20, 20);
    for focus in ["2,0", "0", "a,b", "0,-1.5"] {
        let r = upload(
            &api,
            2,
            &[
                ("file", Some(("a.png", "image/png")), &ok),
                ("focus", None, focus.as_bytes()),
            ],
        )
        .await;
        assert_error(&r, 422, &format!("focus {focus}"));
    }
    assert_error(
        &upload(&api, 2, &[("description", None, b"no file")]).await,
        422,
        "no file",
    );
    let long = "d".repeat(1501);
    assert_error(
        &upload(
            &api,
            2,
            &[
                ("file", Some(("a.png", "image/png")), &ok),
                ("description", None, long.as_bytes()),
            ],
        )
        .await,
        422,
        "description over 1,500 characters",
    );
    assert_eq!(stored_rows(&inst).await, (0, 0), "nothing stored");
    assert_eq!(files_under(&dir), Vec::<String>::new(), "no file written");
    assert_eq!(
        inst.count("SELECT count(*) FROM hollo_task_message_v1")
            .await,
        0,
        "no task"
    );

    // Authentication and scopes.
    let anon = reqwest::Client::new()
        .post(format!("{}/api/v2/media", inst.base))
        .send()
        .await
        .unwrap();
    assert_eq!(anon.status().as_u16(), 401);
    let read_only = Client::bearer(
        &inst,
        &token_with_scopes(&inst, alice.id, "read write:statuses").await,
    );
    assert_error(
        &upload_file(&read_only, 2, &ok).await,
        403,
        "no write:media",
    );
    let media_only = Client::bearer(
        &inst,
        &token_with_scopes(&inst, alice.id, "write:media").await,
    );
    let (s, mine) = upload_file(&media_only, 2, &ok).await.parts();
    assert_eq!(s, 200, "{mine}");
    let id = mine["id"].as_str().unwrap().to_string();

    // Unknown, malformed and another account's ids are all the same 404.
    let (_, bob_token) = inst.account("bob").await;
    let bob = Client::bearer(&inst, &bob_token);
    for path in [
        format!("/api/v1/media/{}", Uuid::now_v7()),
        "/api/v1/media/not-an-id".to_string(),
        format!("/api/v1/media/{id}"),
    ] {
        assert_error(&bob.get(&path).await, 404, &path);
        assert_error(
            &bob.call(Method::PUT, &path, &json!({"description": "mine now"}))
                .await,
            404,
            &path,
        );
        let del = bob.bare(Method::DELETE, &path).await;
        assert_error(&del, 404, &path);
    }
    let (s, v) = api.get(&format!("/api/v1/media/{id}")).await.parts();
    assert_eq!(
        (s, v["description"].clone()),
        (200, Value::Null),
        "untouched: {v}"
    );
    assert_error(
        &api.call(
            Method::PUT,
            &format!("/api/v1/media/{id}"),
            &json!({"focus": "1.2,0"}),
        )
        .await,
        422,
        "bad focus on update",
    );
    inst.shutdown_removing(dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_processed_stored_and_served_with_their_types() {
    let dir = storage_dir();
    let inst = Instance::on_disk(&dir, &[]).await;
    let (_, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);

    let original = png(1280, 320);
    let (s, m) = upload(
        &api,
        1,
        &[
            (
                "file",
                Some(("banner.bin", "application/octet-stream")),
                &original,
            ),
            ("description", None, "a wide banner".as_bytes()),
            ("focus", None, b"0.5,-0.25"),
        ],
    )
    .await
    .parts();
    assert_eq!(s, 200, "{m}");
    let id = m["id"].as_str().unwrap().to_string();
    assert_eq!(m["type"], "image");
    assert_eq!(m["description"], "a wide banner");
    assert!(
        m["remote_url"].is_null() && m["preview_remote_url"].is_null() && m["text_url"].is_null()
    );
    assert_eq!(
        m["meta"]["original"],
        json!({"width": 1280, "height": 320, "size": "1280x320", "aspect": 4.0})
    );
    assert_eq!(
        m["meta"]["small"],
        json!({"width": 640, "height": 160, "size": "640x160", "aspect": 4.0})
    );
    assert_eq!(m["meta"]["focus"], json!({"x": 0.5, "y": -0.25}));
    assert!(m["blurhash"].as_str().is_some_and(|b| b.len() >= 6), "{m}");
    let url = m["url"].as_str().unwrap();
    assert_eq!(
        url,
        format!("{}/media/{id}/original.png", inst.base),
        "the sniffed type names the file"
    );

    // The file and its thumbnail, served by the web node.
    let http = reqwest::Client::new();
    let resp = http.get(url).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let h = resp.headers().clone();
    assert_eq!(h["content-type"], "image/png");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert!(
        h["cache-control"].to_str().unwrap().contains("max-age="),
        "{h:?}"
    );
    assert_eq!(resp.bytes().await.unwrap().as_ref(), original.as_slice());
    let preview = http
        .get(m["preview_url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(preview.status().as_u16(), 200);
    assert_eq!(preview.headers()["content-type"], "image/jpeg");
    let small = image::load_from_memory(&preview.bytes().await.unwrap()).expect("a thumbnail");
    assert_eq!((small.width(), small.height()), (640, 160));
    for missing in [
        format!("/media/{}/original.png", Uuid::now_v7()),
        format!("/media/{id}/original.exe"),
        format!("/media/{id}/..%2F..%2Fsecret.png"),
        "/media/x/original.png".to_string(),
    ] {
        let r = http
            .get(format!("{}{missing}", inst.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 404, "{missing}");
    }
    let mut keys: Vec<String> = sqlx::query_scalar("SELECT key FROM media_files ORDER BY key")
        .fetch_all(&inst.pool)
        .await
        .unwrap();
    keys.sort();
    assert_eq!(
        files_under(&dir),
        keys,
        "every file is registered for the cleanup"
    );
    assert!(
        keys.iter()
            .all(|k| hollo_runtime::tasks::cleanups::valid_media_key(k))
    );

    // Reading and editing while unattached.
    let (s, v) = api.get(&format!("/api/v1/media/{id}")).await.parts();
    assert_eq!((s, &v["id"]), (200, &json!(id)), "{v}");
    let (s, v) = api
        .call(
            Method::PUT,
            &format!("/api/v1/media/{id}"),
            &json!({"description": "new words", "focus": "-1,1"}),
        )
        .await
        .parts();
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["description"], "new words");
    assert_eq!(v["meta"]["focus"], json!({"x": -1.0, "y": 1.0}));
    let form = api
        .form(
            Method::PUT,
            &format!("/api/v1/media/{id}"),
            "description=form+words",
        )
        .await;
    assert_eq!(
        (form.status, &form.body["description"]),
        (200, &json!("form words")),
        "{}",
        form.body
    );
    assert_eq!(
        form.body["meta"]["focus"],
        json!({"x": -1.0, "y": 1.0}),
        "focus kept"
    );

    // The other formats: the type comes from the bytes, thumbnails keep transparency.
    for (format, mime, ext) in [
        (ImageFormat::Jpeg, "image/jpeg", "jpg"),
        (ImageFormat::Gif, "image/gif", "gif"),
        (ImageFormat::WebP, "image/webp", "webp"),
    ] {
        let bytes = encode(64, 48, format);
        let (s, m) = upload(&api, 2, &[("file", Some(("x.png", "image/png")), &bytes)])
            .await
            .parts();
        assert_eq!(s, 200, "{mime}: {m}");
        let url = m["url"].as_str().unwrap();
        assert!(url.ends_with(&format!("/original.{ext}")), "{url}");
        let r = http.get(url).send().await.unwrap();
        assert_eq!(r.headers()["content-type"], mime);
        assert_eq!(m["meta"]["small"]["size"], "64x48", "never enlarged");
    }

    // A custom thumbnail is the preview.
    let (s, m) = upload(
        &api,
        2,
        &[
            ("file", Some(("a.png", "image/png")), &png(300, 300)),
            ("thumbnail", Some(("t.png", "image/png")), &png(40, 10)),
        ],
    )
    .await
    .parts();
    assert_eq!(s, 200, "{m}");
    assert_eq!(m["meta"]["small"]["size"], "40x10", "{m}");
    assert_eq!(m["meta"]["original"]["size"], "300x300", "{m}");

    // Deleting an unattached upload removes its rows and files.
    let before = files_under(&dir).len();
    api.bare(Method::DELETE, &format!("/api/v1/media/{id}"))
        .await
        .assert_ok();
    assert_eq!(files_under(&dir).len(), before - 2);
    assert_error(
        &api.get(&format!("/api/v1/media/{id}")).await,
        404,
        "deleted",
    );

    // The instance reports the limits it enforces.
    let (s, v) = api.get("/api/v2/instance").await.parts();
    assert_eq!(s, 200);
    let c = &v["configuration"]["media_attachments"];
    assert_eq!(c["image_size_limit"], 16 * 1024 * 1024);
    assert_eq!(c["image_matrix_limit"], 33_177_600);
    assert_eq!(
        c["supported_mime_types"],
        json!(["image/jpeg", "image/png", "image/gif", "image/webp"])
    );
    assert_eq!(v["configuration"]["statuses"]["max_media_attachments"], 4);
    inst.shutdown_removing(dir).await;
}

/// Polls `GET /api/v1/media/:id` until it is no longer 206.
async fn until_processed(api: &Client, id: &str) -> Answer {
    eventually(WAIT, "the upload is processed", || async {
        let got = api.get(&format!("/api/v1/media/{id}")).await;
        (got.status != 206).then_some(got)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_v2_uploads_are_answered_202_and_processed_by_a_worker() {
    let dir = storage_dir();
    let mut inst = Instance::start(
        "web",
        &[
            ("FS_STORAGE_PATH", dir.to_str().unwrap()),
            ("MEDIA_SYNC_MAX_BYTES", "1000"),
        ],
    )
    .await;
    let (_, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);
    let big = png(900, 600);
    assert!(big.len() > 1000);

    let (s, m) = upload_file(&api, 2, &big).await.parts();
    assert_eq!(s, 202, "{m}");
    assert!(m["url"].is_null() && m["preview_url"].is_null(), "{m}");
    let id = m["id"].as_str().unwrap().to_string();
    let (s, v) = api.get(&format!("/api/v1/media/{id}")).await.parts();
    assert_eq!(s, 206, "still processing with no worker: {v}");
    // v1 is always synchronous.
    let (s, v) = upload_file(&api, 1, &big).await.parts();
    assert_eq!(s, 200, "{v}");
    assert!(v["url"].is_string());
    // A file whose header is fine and whose data is not: stored, then failed by the worker.
    let mut broken = png(900, 600);
    broken.truncate(broken.len() / 2);
    let (s, b) = upload_file(&api, 2, &broken).await.parts();
    assert_eq!(s, 202, "{b}");
    let broken_id = b["id"].as_str().unwrap().to_string();

    inst.worker(&[]).await;
    let (s, v) = until_processed(&api, &id).await.parts();
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["meta"]["original"]["size"], "900x600");
    assert_eq!(v["meta"]["small"]["size"], "640x427");
    assert!(v["blurhash"].is_string());
    let file = reqwest::get(v["url"].as_str().unwrap()).await.unwrap();
    assert_eq!(file.headers()["content-type"], "image/png");
    assert_eq!(file.bytes().await.unwrap().as_ref(), big.as_slice());
    let thumb = reqwest::get(v["preview_url"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(thumb.status().as_u16(), 200);

    let failed = until_processed(&api, &broken_id).await;
    assert_error(&failed, 422, "failed processing");
    let v = failed.body;
    assert!(
        v["error"].as_str().unwrap().contains("Error processing"),
        "{v}"
    );
    let (state, error): (String, Option<String>) =
        sqlx::query_as("SELECT state, error FROM media_attachments WHERE id = $1::uuid")
            .bind(&broken_id)
            .fetch_one(&inst.pool)
            .await
            .unwrap();
    assert_eq!(state, "failed");
    assert!(error.is_some_and(|e| !e.is_empty()));
    assert_eq!(
        inst.count("SELECT count(*) FROM hollo_task_message_v1")
            .await,
        0,
        "every task completed"
    );
    inst.shutdown_removing(dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_attach_uploads_and_read_them_back_in_order() {
    let dir = storage_dir();
    let inst = Instance::on_disk(&dir, &[]).await;
    let [(alice, _, api), (bob, bob_token, _)] = users(&inst, ["alice", "bob"]).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let (s, m) = upload(
            &api,
            2,
            &[
                ("file", Some(("a.png", "image/png")), &png(10 + i, 10)),
                ("description", None, format!("n{i}").as_bytes()),
            ],
        )
        .await
        .parts();
        assert_eq!(s, 200, "{m}");
        ids.push(Uuid::parse_str(m["id"].as_str().unwrap()).unwrap());
    }
    let (_, bm) = upload_file(&Client::bearer(&inst, &bob_token), 2, &png(5, 5))
        .await
        .parts();
    let bobs = Uuid::parse_str(bm["id"].as_str().unwrap()).unwrap();
    let status = |account: Uuid| {
        let pool = inst.pool.clone();
        async move {
            let id = Uuid::now_v7();
            sqlx::query(
                "INSERT INTO statuses (id, account_id, uri, content) VALUES ($1, $2, $3, '')",
            )
            .bind(id)
            .bind(account)
            .bind(format!("https://h.example/s/{id}"))
            .execute(&pool)
            .await
            .unwrap();
            id
        }
    };
    let (s1, s2) = (status(alice.id).await, status(alice.id).await);
    let attach = |status: Uuid, list: Vec<Uuid>| {
        let pool = inst.pool.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            let r = media::attach(&mut tx, alice.id, status, &list).await;
            if r.is_ok() {
                tx.commit().await.unwrap();
            }
            r
        }
    };
    assert!(matches!(
        attach(s1, ids.clone()).await,
        Err(AttachError::TooMany)
    ));
    assert!(
        matches!(attach(s1, vec![ids[0], bobs]).await, Err(AttachError::NotFound(id)) if id == bobs)
    );
    assert!(matches!(
        attach(s1, vec![Uuid::now_v7()]).await,
        Err(AttachError::NotFound(_))
    ));
    sqlx::query("UPDATE media_attachments SET state = 'failed', error = 'x' WHERE id = $1")
        .bind(ids[4])
        .execute(&inst.pool)
        .await
        .unwrap();
    assert!(matches!(
        attach(s1, vec![ids[4]]).await,
        Err(AttachError::Failed(_))
    ));
    attach(s1, vec![ids[2], ids[0], ids[2]])
        .await
        .expect("attach in order");
    assert!(matches!(
        attach(s2, vec![ids[0]]).await,
        Err(AttachError::AttachedElsewhere(_))
    ));
    attach(s2, vec![ids[1]]).await.expect("another status");
    let _ = bob;

    let drive = Drive::disabled(inst.base.clone());
    let mut conn = inst.pool.acquire().await.unwrap();
    let map: std::collections::HashMap<Uuid, Vec<Value>> =
        hollo_runtime::mastodon::media::of_statuses(&mut conn, &drive, &[s1, s2, Uuid::now_v7()])
            .await
            .unwrap()
            .into_iter()
            .map(|(k, v)| {
                (
                    k,
                    v.iter().map(|e| serde_json::to_value(e).unwrap()).collect(),
                )
            })
            .collect();
    assert_eq!(map.len(), 2);
    let descriptions: Vec<&str> = map[&s1]
        .iter()
        .map(|e| e["description"].as_str().unwrap())
        .collect();
    assert_eq!(descriptions, ["n2", "n0"], "attach order");
    assert_eq!(map[&s1][0]["id"], json!(ids[2].to_string()));
    assert_eq!(
        map[&s1][0]["url"],
        json!(format!("{}/media/{}/original.png", inst.base, ids[2]))
    );
    let docs = media::documents_for(&mut conn, &drive, s1).await.unwrap();
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0]["type"], "Document");
    assert_eq!(docs[0]["mediaType"], "image/png");
    assert_eq!(docs[0]["name"], "n2");
    assert_eq!(docs[0]["width"], 12);
    assert_eq!(docs[0]["focalPoint"], json!([0.0, 0.0]));
    assert!(docs[0]["blurhash"].is_string());
    drop(conn);
    // Attached uploads are the status's now: the media routes no longer show them.
    assert_error(
        &api.get(&format!("/api/v1/media/{}", ids[0])).await,
        404,
        "attached",
    );
    assert_error(
        &api.call(
            Method::PUT,
            &format!("/api/v1/media/{}", ids[0]),
            &json!({"description": "x"}),
        )
        .await,
        404,
        "attached",
    );
    // Deleting the status deletes its attachments' rows.
    sqlx::query("DELETE FROM statuses WHERE id = $1")
        .bind(s1)
        .execute(&inst.pool)
        .await
        .unwrap();
    assert_eq!(
        inst.count(&format!(
            "SELECT count(*) FROM media_attachments WHERE id IN ('{}', '{}')",
            ids[0], ids[2]
        ))
        .await,
        0
    );
    inst.shutdown_removing(dir).await;
}

/// Makes uploads look two days old: their rows and their files.
async fn age_uploads(inst: &Instance, dir: Option<&Path>) {
    sqlx::query("UPDATE media_attachments SET created_at = now() - interval '2 days'")
        .execute(&inst.pool)
        .await
        .unwrap();
    if let Some(dir) = dir {
        let old = std::time::SystemTime::now() - Duration::from_secs(2 * 86_400);
        for f in files_under(dir) {
            std::fs::File::options()
                .write(true)
                .open(dir.join(f))
                .and_then(|f| f.set_modified(old))
                .expect("age");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_media_cleanup_removes_uploads_no_status_took_within_a_day() {
    let dir = storage_dir();
    let inst = Instance::on_disk(&dir, &[("ADMIN_TOKEN", ADMIN)]).await;
    let (alice, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);
    let (_, kept) = upload_file(&api, 2, &png(30, 30)).await.parts();
    let (_, dropped) = upload_file(&api, 2, &png(40, 40)).await.parts();
    let (_, fresh) = upload_file(&api, 2, &png(50, 50)).await.parts();
    let (_, gone) = upload_file(&api, 2, &png(60, 60)).await.parts();
    let kept = Uuid::parse_str(kept["id"].as_str().unwrap()).unwrap();
    let gone = Uuid::parse_str(gone["id"].as_str().unwrap()).unwrap();
    let dropped_id = dropped["id"].as_str().unwrap().to_string();
    let (status, deleted) = (Uuid::now_v7(), Uuid::now_v7());
    for (id, media) in [(status, kept), (deleted, gone)] {
        sqlx::query("INSERT INTO statuses (id, account_id, uri, content) VALUES ($1, $2, $3, '')")
            .bind(id)
            .bind(alice.id)
            .bind(format!("https://h.example/s/{id}"))
            .execute(&inst.pool)
            .await
            .unwrap();
        let mut tx = inst.pool.begin().await.unwrap();
        media::attach(&mut tx, alice.id, id, &[media])
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    assert_eq!(files_under(&dir).len(), 8);
    // A deleted status takes its attachments along; their files are orphans now.
    sqlx::query("DELETE FROM statuses WHERE id = $1")
        .bind(deleted)
        .execute(&inst.pool)
        .await
        .unwrap();
    age_uploads(&inst, Some(&dir)).await;
    sqlx::query("UPDATE media_attachments SET created_at = now() WHERE id = $1::uuid")
        .bind(fresh["id"].as_str().unwrap())
        .execute(&inst.pool)
        .await
        .unwrap();

    let job = run_media_cleanup(&inst, ADMIN).await;
    assert_eq!(job["status"], "completed", "{job}");
    let left = files_under(&dir);
    assert_eq!(left.len(), 4, "{left:?}");
    assert!(left.iter().all(|f| !f.contains(&dropped_id)), "{left:?}");
    assert!(
        left.iter().all(|f| !f.contains(&gone.to_string())),
        "{left:?}"
    );
    assert!(
        left.iter().any(|f| f.contains(&kept.to_string())),
        "attached: kept"
    );
    assert_eq!(
        inst.count("SELECT count(*) FROM media_attachments").await,
        2
    );
    assert_eq!(inst.count("SELECT count(*) FROM media_files").await, 4);
    assert_error(
        &api.get(&format!("/api/v1/media/{dropped_id}")).await,
        404,
        "cleaned up",
    );
    inst.shutdown_removing(dir).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_s3_drive_stores_serves_processes_and_cleans_up_through_moto() {
    let (moto, base) = Moto::with_public_bucket("hollo-media").await;
    let mut env = moto.drive_env("hollo-media", &base);
    env.extend([("MEDIA_SYNC_MAX_BYTES", "2000"), ("ADMIN_TOKEN", ADMIN)]);
    let inst = Instance::start("all", &env).await;
    let (_, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);

    let small = png(20, 20);
    let (s, m) = upload_file(&api, 2, &small).await.parts();
    assert_eq!(s, 200, "{m}");
    let url = m["url"].as_str().unwrap();
    assert!(url.starts_with(&format!("{base}/media/")), "{url}");
    let got = reqwest::get(url).await.unwrap();
    assert_eq!(got.status().as_u16(), 200, "the object is in the bucket");
    assert_eq!(
        got.headers()["content-type"],
        "image/png",
        "stored with its sniffed type"
    );
    assert_eq!(got.bytes().await.unwrap().as_ref(), small.as_slice());
    let thumb = reqwest::get(m["preview_url"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(thumb.status().as_u16(), 200);
    // The web node does not serve an S3 drive's keys itself.
    let own = reqwest::get(format!(
        "{}/media/{}/original.png",
        inst.base,
        m["id"].as_str().unwrap()
    ))
    .await
    .unwrap();
    assert_eq!(own.status().as_u16(), 404);

    // Processed by a worker (this `all` node), reading the raw file back from the bucket.
    let big = png(700, 700);
    assert!(big.len() > 2000);
    let (s, m2) = upload_file(&api, 2, &big).await.parts();
    assert_eq!(s, 202, "{m2}");
    let (s, v) = until_processed(&api, m2["id"].as_str().unwrap())
        .await
        .parts();
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["meta"]["small"]["size"], "640x640");
    let thumb = reqwest::get(v["preview_url"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(thumb.headers()["content-type"], "image/jpeg");

    // Abandoned uploads leave the bucket with the cleanup.
    age_uploads(&inst, None).await;
    let job = run_media_cleanup(&inst, ADMIN).await;
    assert_eq!(job["status"], "completed", "{job}");
    for u in [url.to_string(), v["url"].as_str().unwrap().to_string()] {
        let r = reqwest::get(&u).await.unwrap();
        assert_eq!(r.status().as_u16(), 404, "{u} deleted");
    }
    assert_eq!(
        inst.count("SELECT count(*) FROM media_attachments").await,
        0
    );
    inst.shutdown().await;
}

/// R-API: a GIF whose 1×1 screen holds a frame over `MEDIA_MAX_PIXELS` (which the
/// decoder allocated in full) is refused 422 from its frame descriptors, nothing stored; a GIF
/// whose frames are within the limit is fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gif_frame_over_the_pixel_limit_is_refused() {
    let dir = storage_dir();
    let inst = Instance::start(
        "all",
        &[
            ("FS_STORAGE_PATH", dir.to_str().unwrap()),
            ("MEDIA_MAX_PIXELS", "1000000"),
        ],
    )
    .await;
    let (_, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);
    let gif = gif_with_frame(1, 1, 1001, 1000);
    for version in [1, 2] {
        let got = upload(
            &api,
            version,
            &[("file", Some(("a.gif", "image/gif")), &gif)],
        )
        .await;
        assert_error(&got, 422, &format!("an oversize GIF frame (v{version})"));
        assert!(
            got.body["error"].as_str().unwrap().contains("1001x1000"),
            "{}",
            got.body
        );
    }
    assert_eq!(stored_rows(&inst).await, (0, 0), "nothing stored");
    assert_eq!(files_under(&dir), Vec::<String>::new(), "no file written");
    let (s, v) = upload(
        &api,
        1,
        &[(
            "file",
            Some(("a.gif", "image/gif")),
            &gif_with_frame(10, 10, 1000, 1000),
        )],
    )
    .await
    .parts();
    assert_eq!(s, 200, "{v}");
    inst.shutdown().await;
}

/// R-API: a PNG within the pixel limit whose 16 bits per channel make it decode to
/// twice the budget (`MEDIA_MAX_PIXELS` × 4 bytes) — a few KB that decode to 8 MB here, as a
/// 260 KB one decodes to 265 MB at the default limit — is refused 422 from its header, with
/// one decoding slot and nothing stored; the same size in 8 bits is fine. (This asserts the
/// refusal; memory is measured outside timed tests, see README "Security model".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_png_bomb_is_refused_from_its_header() {
    let dir = storage_dir();
    let inst = Instance::start(
        "all",
        &[
            ("FS_STORAGE_PATH", dir.to_str().unwrap()),
            ("MEDIA_MAX_PIXELS", "1000000"),
            ("MEDIA_DECODE_CONCURRENCY", "1"),
        ],
    )
    .await;
    let (_, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);
    let bomb = png_bomb(1000, 1000);
    assert!(bomb.len() < 64 * 1024, "a bomb: {} bytes", bomb.len());
    for version in [1, 2] {
        let got = upload_file(&api, version, &bomb).await;
        assert_error(&got, 422, &format!("a 16-bit PNG bomb (v{version})"));
    }
    assert_eq!(stored_rows(&inst).await, (0, 0), "nothing stored");
    assert_eq!(files_under(&dir), Vec::<String>::new(), "no file written");
    let (s, v) = upload_file(&api, 1, &png(1000, 1000)).await.parts();
    assert_eq!(s, 200, "{v}");
    inst.shutdown().await;
}

/// R-API: files are streamed from disk with Range support (RFC 9110 §14): the first
/// bytes, a suffix, an open end, and an unsatisfiable range (416 with `bytes */size`), keeping
/// the type, `nosniff` and caching headers on every answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_files_answer_range_requests() {
    let dir = storage_dir();
    let inst = Instance::on_disk(&dir, &[]).await;
    let (_, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);
    let original = png(300, 200);
    let (s, m) = upload_file(&api, 1, &original).await.parts();
    assert_eq!(s, 200, "{m}");
    let url = m["url"].as_str().unwrap().to_string();
    let size = original.len();
    let http = reqwest::Client::new();
    let get = |range: Option<&'static str>| {
        let mut req = http.get(&url);
        if let Some(r) = range {
            req = req.header("range", r);
        }
        req.send()
    };
    let check_headers = |h: &reqwest::header::HeaderMap, what: &str| {
        assert_eq!(h["x-content-type-options"], "nosniff", "{what}");
        assert!(
            h["cache-control"].to_str().unwrap().contains("max-age="),
            "{what}: {h:?}"
        );
        assert_eq!(h["accept-ranges"], "bytes", "{what}");
    };

    let whole = get(None).await.unwrap();
    assert_eq!(whole.status().as_u16(), 200);
    check_headers(whole.headers(), "whole");
    assert_eq!(whole.headers()["content-type"], "image/png");
    assert_eq!(
        whole.headers()["content-length"].to_str().unwrap(),
        size.to_string()
    );
    assert_eq!(whole.bytes().await.unwrap().as_ref(), original.as_slice());

    let first = get(Some("bytes=0-7")).await.unwrap();
    assert_eq!(first.status().as_u16(), 206);
    check_headers(first.headers(), "first bytes");
    assert_eq!(first.headers()["content-type"], "image/png");
    assert_eq!(
        first.headers()["content-range"].to_str().unwrap(),
        format!("bytes 0-7/{size}")
    );
    assert_eq!(first.bytes().await.unwrap().as_ref(), &original[..8]);

    let suffix = get(Some("bytes=-12")).await.unwrap();
    assert_eq!(suffix.status().as_u16(), 206);
    assert_eq!(
        suffix.headers()["content-range"].to_str().unwrap(),
        format!("bytes {}-{}/{size}", size - 12, size - 1)
    );
    assert_eq!(
        suffix.bytes().await.unwrap().as_ref(),
        &original[size - 12..]
    );

    let open = get(Some("bytes=100-")).await.unwrap();
    assert_eq!(open.status().as_u16(), 206);
    assert_eq!(open.bytes().await.unwrap().as_ref(), &original[100..]);

    let past = http
        .get(&url)
        .header("range", format!("bytes={}-{}", size + 10, size + 20))
        .send()
        .await
        .unwrap();
    assert_eq!(past.status().as_u16(), 416);
    check_headers(past.headers(), "unsatisfiable");
    assert_eq!(
        past.headers()["content-range"].to_str().unwrap(),
        format!("bytes */{size}")
    );
    let body: Value = past.json().await.unwrap();
    assert!(body["error"].is_string(), "{body}");

    let head = http.head(&url).send().await.unwrap();
    assert_eq!(head.status().as_u16(), 200);
    assert_eq!(head.headers()["content-type"], "image/png");
    inst.shutdown_removing(dir).await;
}
