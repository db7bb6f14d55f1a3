//! Link previews (R-MAPI-6, issue 32 item 1), over HTTP against a site of our own making: a
//! post's first link gets a card a worker fetches — OpenGraph and oEmbed read, the image
//! stored and served by us, the player cut down to one iframe — shared by every post linking
//! the same URL (one fetch), pushed to open timelines as `status.update`, and dropped when an
//! edit removes the link. The hostile pages come first: huge, slow, a redirect loop, not HTML,
//! the metadata address, markup in every field — each gives a clean failure and no card.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use serde_json::{Value, json};
use support::api::{Client, WAIT, follow_each_other, id};
use support::eventually;
use support::multipart::png;
use support::node::Instance;
use support::peer::Peer;
use tokio_tungstenite::tungstenite::Message;

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

/// The linked site: pages by name, and how often each was asked for.
#[derive(Clone, Default)]
struct Site {
    base: Arc<Mutex<String>>,
    hits: Arc<Mutex<HashMap<String, u32>>>,
    /// Requests of `hang` being answered now, and the most at once.
    hanging: Arc<Mutex<(u32, u32)>>,
    /// `story` answers only once this is set, so a test can look at a post before its card
    /// can exist.
    story_open: Arc<std::sync::atomic::AtomicBool>,
}

/// One `hang` answer in progress: counted while its body is open.
struct Hanging(Site);

impl Hanging {
    fn new(site: Site) -> Hanging {
        let mut h = site.hanging.lock().expect("hanging");
        h.0 += 1;
        h.1 = h.1.max(h.0);
        drop(h);
        Hanging(site)
    }
}

impl Drop for Hanging {
    fn drop(&mut self) {
        if let Ok(mut h) = self.0.hanging.lock() {
            h.0 -= 1;
        }
    }
}

impl Site {
    async fn start() -> Site {
        let site = Site::default();
        let app = Router::new()
            .route("/{page}", get(page))
            .with_state(site.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        *site.base.lock().expect("base") =
            format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        site
    }

    fn url(&self, page: &str) -> String {
        format!("{}/{page}", self.base.lock().expect("base"))
    }

    /// The most `hang` answers that were open at once.
    fn most_hanging(&self) -> u32 {
        self.hanging.lock().expect("hanging").1
    }

    fn hits(&self, page: &str) -> u32 {
        self.hits
            .lock()
            .expect("hits")
            .get(page)
            .copied()
            .unwrap_or(0)
    }
}

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

async fn page(State(site): State<Site>, Path(name): Path<String>) -> Response {
    *site
        .hits
        .lock()
        .expect("hits")
        .entry(name.clone())
        .or_default() += 1;
    let base = site.base.lock().expect("base").clone();
    match name.as_str() {
        "story" => {
            while !site.story_open.load(std::sync::atomic::Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            html(format!(
            r#"<!doctype html><html lang="en"><head><title>fallback</title>
            <meta property="og:title" content="The Big Story">
            <meta property="og:description" content="What happened, and why.">
            <meta property="og:image" content="/lead.png">
            <meta property="og:image:alt" content="The lead photo">
            <meta property="og:site_name" content="Example News">
            <link rel="alternate" type="application/json+oembed" href="{base}/oembed">
            </head><body>story</body></html>"#
            ))
        }
        "oembed" => (
            [(header::CONTENT_TYPE, "application/json")],
            json!({
                "type": "video", "version": "1.0", "title": "The Big Story (video)",
                "author_name": "Reporter", "author_url": format!("{base}/reporter"),
                "provider_name": "Example Video", "width": 640, "height": 360,
                "html": "<script>steal()</script><iframe src=\"https://video.example/embed/1\" width=\"640\" height=\"360\" onload=\"x()\"></iframe>"
            })
            .to_string(),
        )
            .into_response(),
        "lead.png" => ([(header::CONTENT_TYPE, "image/png")], png(120, 80)).into_response(),
        "plain" => html(
            "<title>Plain page</title><meta name=description content=\"plain words\">".into(),
        ),
        "marked" => html(
            r#"<meta property="og:title" content="<script>alert(1)</script>Hi">
               <meta property="og:description" content="<img src=x onerror=alert(2)>">
               <meta property="og:image" content="javascript:alert(3)">"#
                .into(),
        ),
        // Two megabytes of page (the fetcher reads at most one).
        "huge" => html(format!(
            "<title>huge</title>{}",
            "<p>padding</p>".repeat(150_000)
        )),
        // Headers at once, then nothing for longer than the card's time limit.
        "slow" => {
            let body = futures::stream::unfold(0, |n| async move {
                if n == 0 {
                    Some((Ok::<_, std::io::Error>("<title>slow".to_string()), 1))
                } else {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    None
                }
            });
            Response::builder()
                .header(header::CONTENT_TYPE, "text/html")
                .body(Body::from_stream(body))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        // A page that never finishes, whatever its query string.
        "hang" => {
            let held = Hanging::new(site.clone());
            let body = futures::stream::unfold((0, held), |(n, held)| async move {
                if n == 0 {
                    Some((Ok::<_, std::io::Error>("<title>hang".to_string()), (1, held)))
                } else {
                    tokio::time::sleep(Duration::from_secs(600)).await;
                    None
                }
            });
            Response::builder()
                .header(header::CONTENT_TYPE, "text/html")
                .body(Body::from_stream(body))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        "loop" => (StatusCode::FOUND, [(header::LOCATION, "/loop")]).into_response(),
        "data" => (
            [(header::CONTENT_TYPE, "application/json")],
            "{\"title\":\"not a page\"}",
        )
            .into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn card_of(api: &Client, status: &str) -> Value {
    eventually(WAIT, &format!("a card on {status}"), || async {
        let s = api.get(&format!("/api/v1/statuses/{status}")).await.body;
        (!s["card"].is_null()).then(|| s["card"].clone())
    })
    .await
}

/// Waits until the worker recorded that `url` gave no card, and returns why.
async fn failure_of(inst: &Instance, url: &str) -> String {
    eventually(WAIT, &format!("{url} recorded as failed"), || async {
        sqlx::query_scalar::<_, String>(
            "SELECT error FROM preview_cards WHERE url = $1 AND failed_at IS NOT NULL",
        )
        .bind(url)
        .fetch_optional(&inst.pool)
        .await
        .expect("query")
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_pages_give_a_clean_failure_and_no_card() {
    let dir = support::files::temp_dir("hollo-cards");
    let inst = Instance::start(
        "all",
        &[
            ("FS_STORAGE_PATH", dir.to_str().expect("dir")),
            ("PREVIEW_CARD_TIMEOUT_SECONDS", "2"),
        ],
    )
    .await;
    let site = Site::start().await;
    let (_, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));

    let cases = [
        ("huge", "larger than"),
        ("slow", "no card within 2 s"),
        ("loop", "redirects"),
        ("data", "content type"),
    ];
    let mut posted = Vec::new();
    for (page, _) in cases {
        let s = api
            .posted(&json!({"status": format!("see {}", site.url(page))}))
            .await;
        posted.push(id(&s));
    }
    let metadata = "http://169.254.169.254/latest/meta-data";
    let s = api
        .posted(&json!({"status": format!("cloud {metadata}")}))
        .await;
    posted.push(id(&s));

    for (page, why) in cases {
        let error = failure_of(&inst, &site.url(page)).await;
        assert!(error.contains(why), "{page}: {error}");
    }
    let error = failure_of(&inst, metadata).await;
    assert!(error.starts_with("refused"), "{error}");
    // The redirect loop was followed a bounded number of times, the slow page asked once.
    assert!(site.hits("loop") <= 6, "{}", site.hits("loop"));
    assert_eq!(site.hits("slow"), 1);
    for status in &posted {
        let s = api.get(&format!("/api/v1/statuses/{status}")).await.body;
        assert!(s["card"].is_null(), "{s}");
    }

    // A failed page is not asked again for the next post that links it.
    let again = api
        .posted(&json!({"status": format!("again {}", site.url("loop"))}))
        .await;
    let before = site.hits("loop");
    eventually(WAIT, "the second post's card task done", || async {
        let pending: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM hollo_task_message_v1 WHERE kind = 'hollo.preview-card.v1'",
        )
        .fetch_one(&inst.pool)
        .await
        .expect("count");
        (pending == 0).then_some(())
    })
    .await;
    assert_eq!(site.hits("loop"), before);
    assert!(
        api.get(&format!("/api/v1/statuses/{}", id(&again)))
            .await
            .body["card"]
            .is_null()
    );

    // Markup in every field is text: nothing of it becomes HTML or an image.
    let marked = api
        .posted(&json!({"status": format!("odd {}", site.url("marked"))}))
        .await;
    let card = card_of(&api, &id(&marked)).await;
    assert_eq!(card["title"], "<script>alert(1)</script>Hi");
    assert_eq!(card["description"], "<img src=x onerror=alert(2)>");
    assert!(card["image"].is_null(), "{card}");
    assert_eq!(card["html"], "");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_link_gets_a_card_once_per_url_streamed_and_dropped_with_the_link() {
    let dir = support::files::temp_dir("hollo-cards");
    let inst = Instance::start("all", &[("FS_STORAGE_PATH", dir.to_str().expect("dir"))]).await;
    let site = Site::start().await;
    let (_, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));
    let story = site.url("story");

    // The user stream is open before the post: the card arrives as a `status.update`.
    let mut socket = support::stream::connect(&inst.base, "stream=user", &token).await;

    let first = api
        .posted(&json!({"status": format!("read this: {story} #news")}))
        .await;
    assert!(
        first["card"].is_null(),
        "posting does not wait for the page"
    );
    site.story_open
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let card = card_of(&api, &id(&first)).await;
    assert_eq!(card["url"], story.as_str());
    assert_eq!(card["type"], "video");
    assert_eq!(card["title"], "The Big Story (video)");
    assert_eq!(card["description"], "What happened, and why.");
    assert_eq!(card["author_name"], "Reporter");
    assert_eq!(card["provider_name"], "Example Video");
    assert_eq!(card["image_description"], "The lead photo");
    assert_eq!(card["language"], "en");
    assert_eq!(
        (card["width"].as_i64(), card["height"].as_i64()),
        (Some(640), Some(360))
    );
    let html = card["html"].as_str().expect("html");
    assert!(
        html.starts_with("<iframe src=\"https://video.example/embed/1\""),
        "{html}"
    );
    assert!(
        !html.contains("script") && !html.contains("onload"),
        "{html}"
    );
    assert!(card["blurhash"].is_string(), "{card}");
    // The image is ours: a re-encoded copy on this server's drive, not the site's URL.
    let image = card["image"].as_str().expect("image");
    assert!(image.starts_with(&inst.base), "{image}");
    let got = reqwest::get(image).await.expect("image");
    assert_eq!(got.status(), 200);
    assert!(
        got.headers()[header::CONTENT_TYPE]
            .to_str()
            .expect("type")
            .starts_with("image/")
    );

    // Events until the deadline; the post's own `update` comes first, then the card's.
    let deadline = tokio::time::Instant::now() + WAIT;
    let update = loop {
        let msg = tokio::time::timeout_at(deadline, socket.next())
            .await
            .expect("status.update with the card before the deadline")
            .expect("the stream stays open")
            .expect("a frame");
        let Message::Text(t) = msg else { continue };
        let v: Value = serde_json::from_str(&t).expect("event JSON");
        let Some(payload) = v["payload"].as_str() else {
            continue;
        };
        let payload: Value = serde_json::from_str(payload).expect("payload JSON");
        if v["event"] == "status.update"
            && payload["id"] == first["id"]
            && !payload["card"].is_null()
        {
            break payload;
        }
    };
    assert_eq!(update["card"]["title"], "The Big Story (video)");
    let _ = socket.close(None).await;

    // A second post linking the same page shows the same card without asking the site again.
    let second = api
        .posted(&json!({"status": format!("also {story}")}))
        .await;
    let again = card_of(&api, &id(&second)).await;
    assert_eq!(again, card);
    assert_eq!(site.hits("story"), 1);
    assert_eq!(site.hits("lead.png"), 1);

    // Timelines carry it too.
    let home = api.get("/api/v1/timelines/home").await.body;
    let shown = home
        .as_array()
        .and_then(|a| a.iter().find(|s| s["id"] == first["id"]))
        .expect("on home");
    assert_eq!(shown["card"]["title"], "The Big Story (video)");

    // An edit that drops the link drops the card; one that links elsewhere gets that page's.
    api.edit(&id(&first), &json!({"status": "no link any more"}))
        .await
        .assert_ok();
    eventually(WAIT, "the card gone after the edit", || async {
        let s = api
            .get(&format!("/api/v1/statuses/{}", id(&first)))
            .await
            .body;
        s["card"].is_null().then_some(())
    })
    .await;
    api.edit(
        &id(&second),
        &json!({"status": format!("now {}", site.url("plain"))}),
    )
    .await
    .assert_ok();
    eventually(WAIT, "the new page's card after the edit", || async {
        let s = api
            .get(&format!("/api/v1/statuses/{}", id(&second)))
            .await
            .body;
        (s["card"]["title"] == "Plain page").then_some(())
    })
    .await;
    let c = api
        .get(&format!("/api/v1/statuses/{}", id(&second)))
        .await
        .body;
    assert_eq!(c["card"]["type"], "link");
    assert_eq!(c["card"]["description"], "plain words");
    assert!(c["card"]["image"].is_null());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_remote_post_gets_its_card_too() {
    let dir = support::files::temp_dir("hollo-cards");
    let inst = Instance::start("all", &[("FS_STORAGE_PATH", dir.to_str().expect("dir"))]).await;
    let site = Site::start().await;
    let peer = Peer::start().await;
    let (_, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));
    follow_each_other(&inst, &api, &peer, "alice").await;
    let note = peer.new_id("notes");
    let story = site.url("plain");
    let create = peer.create(json!({
        "id": note, "type": "Note", "attributedTo": peer.actor(), "to": [PUBLIC],
        "content": format!("<p>look <a href=\"{story}\">{story}</a></p>"),
        "published": "2026-12-01T10:00:00Z"
    }));
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &create).await, 202);
    let card = eventually(WAIT, "the remote note's card at home", || async {
        let home = api.get("/api/v1/timelines/home").await.body;
        let s = home
            .as_array()?
            .iter()
            .find(|s| s["uri"] == note.as_str())?
            .clone();
        (!s["card"].is_null()).then(|| s["card"].clone())
    })
    .await;
    assert_eq!(card["title"], "Plain page");
    assert_eq!(card["url"], story.as_str());
    let _ = std::fs::remove_dir_all(&dir);
}

/// F5 (issue 61): card fetches shared the task slots, so pages that never finish (distinct
/// query strings defeated the failure record) held every task slot for the card time limit
/// and other tasks waited. Cards have slots of their own, at most two fetches per host at a
/// time, and a page that timed out is not asked again for a while, whatever its query: a task
/// queued meanwhile runs at once, the site never sees more than two requests at a time, and
/// the links that waited get no card without being fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_page_that_never_finishes_delays_no_other_work() {
    let dir = support::files::temp_dir("hollo-cards");
    let inst = Instance::start(
        "all",
        &[
            ("FS_STORAGE_PATH", dir.to_str().expect("dir")),
            ("PREVIEW_CARD_TIMEOUT_SECONDS", "20"),
        ],
    )
    .await;
    let site = Site::start().await;
    let (_, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));
    let links: Vec<String> = (0..8)
        .map(|i| format!("{}?v={i}", site.url("hang")))
        .collect();
    let mut posted = Vec::new();
    for link in &links {
        posted.push(id(&api
            .posted(&json!({"status": format!("watch {link}")}))
            .await));
    }
    eventually(WAIT, "the site holding card fetches", || async {
        (site.hits("hang") >= 1).then_some(())
    })
    .await;

    // Meanwhile, other work of the task queue runs at once, well within the card time limit.
    hollo_runtime::tasks::probe::enqueue(
        &inst.pool,
        hollo_runtime::queue::QueueName::Task,
        "meanwhile",
        1,
        0,
        0,
        Duration::ZERO,
    )
    .await
    .expect("enqueue a probe");
    eventually(
        Duration::from_secs(10),
        "a task run beside the hanging cards",
        || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM hollo_probe_result WHERE key = 'meanwhile-0'",
            )
            .fetch_one(&inst.pool)
            .await
            .ok()
            .filter(|n| *n == 1)
        },
    )
    .await;

    // Every link ends without a card. The host was held by at most two requests at a time;
    // once they gave up (each recorded as failed), the other query strings of the same page
    // were not fetched at all.
    eventually(Duration::from_secs(90), "every card task done", || async {
        let pending: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM hollo_task_message_v1 WHERE kind = 'hollo.preview-card.v1'",
        )
        .fetch_one(&inst.pool)
        .await
        .expect("count");
        (pending == 0).then_some(())
    })
    .await;
    let hits = site.hits("hang");
    assert!((1..=2).contains(&hits), "{hits} requests");
    assert!(site.most_hanging() <= 2, "{} at once", site.most_hanging());
    // The fetches that were made gave up (the fetcher's read timeout or the card's time
    // limit, whichever came first) and are recorded; the others are not.
    let failed: Vec<String> =
        sqlx::query_scalar("SELECT error FROM preview_cards WHERE failed_at IS NOT NULL")
            .fetch_all(&inst.pool)
            .await
            .expect("failures");
    assert_eq!(failed.len(), hits as usize, "{failed:?}");
    assert!(
        failed
            .iter()
            .all(|e| e.contains("timed out") || e.contains("no card within 20 s")),
        "{failed:?}"
    );
    for status in &posted {
        let s = api.get(&format!("/api/v1/statuses/{status}")).await.body;
        assert!(s["card"].is_null(), "{s}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
