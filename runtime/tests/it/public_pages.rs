//! The public pages (issue 33, R-WEB-1) against a real node and PostgreSQL: hostile input
//! first (odd handles, unknown handles, huge cursors, markup in every field a person types),
//! then content negotiation on every IRI kind (`/users/…`, `/@…`, actor and post), what is
//! never shown (followers-only and direct posts: the unknown id's 404, on no list, tag page
//! or feed; unlisted posts off tag pages), deletion (410), caching (ETag, 304), the head of
//! the pages (OpenGraph, ActivityPub alternate, CSP, landmarks), and — through the Python
//! harness of `clients/` — feedparser, mf2py and a headless Chromium at 375 and 1280 px.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Method;
use reqwest::header::{self, HeaderMap};
use serde_json::{Value, json};
use support::api::{Answer, Client, id, users};
use support::multipart::{form, png};
use support::node::Instance;

const HTML: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
const AP: &str = "application/activity+json";
const ADMIN: &str = "pages-admin-token-0123456789";
const LD: &str = "application/ld+json; profile=\"https://www.w3.org/ns/activitystreams\"";

struct Got {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Got {
    fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
}

async fn fetch(base: &str, path: &str, accept: Option<&str>, etag: Option<&str>) -> Got {
    let mut req = reqwest::Client::new().get(format!("{base}{path}"));
    if let Some(a) = accept {
        req = req.header(header::ACCEPT, a);
    }
    if let Some(e) = etag {
        req = req.header(header::IF_NONE_MATCH, e);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.text().await.expect("body");
    Got {
        status,
        headers,
        body,
    }
}

async fn page(base: &str, path: &str) -> Got {
    fetch(base, path, Some(HTML), None).await
}

/// The account `name` with a display name, a bio and fields, and its token.
async fn person(inst: &Instance, name: &str, profile: Value) -> String {
    let (_, token) = inst.account(name).await;
    let api = Client::new(inst, Some(&token));
    api.call(
        Method::PATCH,
        "/api/v1/accounts/update_credentials",
        &profile,
    )
    .await
    .assert_ok();
    token
}

/// Uploads a PNG with `alt` as its description; its MediaAttachment.
async fn upload(inst: &Instance, token: &str, alt: &str) -> Value {
    let (ctype, body) = form(&[
        ("file", Some(("a.png", "image/png")), &png(64, 48)),
        ("description", None, alt.as_bytes()),
    ]);
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v1/media", inst.base))
        .bearer_auth(token)
        .header("content-type", ctype)
        .body(body)
        .send()
        .await
        .expect("upload");
    assert_eq!(resp.status().as_u16(), 200);
    resp.json().await.expect("MediaAttachment")
}

fn assert_html_page(g: &Got, what: &str) {
    assert_eq!(g.status, 200, "{what}: {}", g.body);
    assert!(
        g.header(header::CONTENT_TYPE).starts_with("text/html"),
        "{what}: {:?}",
        g.headers
    );
    assert!(g.header(header::VARY).contains("Accept"), "{what}: Vary");
    assert_eq!(g.body.matches("<h1").count(), 1, "{what}: one h1");
    for landmark in ["<main>", "<header", "<nav"] {
        assert!(g.body.contains(landmark), "{what}: {landmark}");
    }
    assert!(!g.body.contains("<script"), "{what}: no script");
    let csp = g.header(header::CONTENT_SECURITY_POLICY);
    assert!(csp.contains("default-src 'none'"), "{what}: {csp}");
    assert!(csp.contains("style-src 'self'"), "{what}: {csp}");
    assert!(
        !csp.contains("unsafe") && !csp.contains("script-src"),
        "{what}: {csp}"
    );
    assert!(
        g.body.contains("<meta property=\"og:title\"")
            && g.body.contains("<meta name=\"twitter:card\""),
        "{what}: OpenGraph and Twitter card"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn public_pages_negotiate_hide_what_is_not_public_and_cache() {
    let media = support::files::temp_dir("hollo-pages");
    let inst = Instance::on_disk(&media, &[("ADMIN_TOKEN", ADMIN)]).await;
    let base = inst.base.clone();

    // --- Hostile input first. Markup in every field a person types.
    let eve_token = person(
        &inst,
        "eve",
        json!({
            "display_name": "<script>alert(1)</script>",
            "note": "<b>bold</b> \"><script>alert(2)</script>",
            "fields_attributes": [
                {"name": "<i>x</i>", "value": "\"><script>alert(3)</script>"},
                {"name": "Site", "value": "javascript:alert(4)"},
            ],
        }),
    )
    .await;
    let eve = Client::new(&inst, Some(&eve_token));
    let bad_alt = "<img src=x onerror=alert(5)>\"'";
    let m = upload(&inst, &eve_token, bad_alt).await;
    let evil = eve
        .posted(&json!({
            // A control character XML 1.0 cannot carry: the feed must still parse.
            "status": "<script>alert(6)</script> & \u{1}ctrl ]]> #pagetag",
            "spoiler_text": "<u>cw</u>",
            "media_ids": [id(&m)],
        }))
        .await;
    for path in [
        "/@eve".to_string(),
        format!("/@eve/{}", id(&evil)),
        "/tags/pagetag".to_string(),
        "/".to_string(),
    ] {
        let g = page(&base, &path).await;
        assert_html_page(&g, &path);
        for raw in [
            "<script>",
            "<img src=x",
            "onerror=alert(5)>",
            "<b>bold",
            "<u>cw",
            "<i>x",
        ] {
            assert!(
                !g.body.contains(raw),
                "{path} shows {raw:?} unescaped:\n{}",
                g.body
            );
        }
        assert!(
            !g.body.contains("href=\"javascript:"),
            "{path}: a javascript: link"
        );
        assert!(
            g.body.contains("&lt;script&gt;alert("),
            "{path}: escaped text shown"
        );
    }
    let eve_page = page(&base, &format!("/@eve/{}", id(&evil))).await;
    assert!(
        eve_page
            .body
            .contains("alt=\"&lt;img src=x onerror=alert(5)&gt;&quot;&#x27;\""),
        "alt text escaped in the attribute:\n{}",
        eve_page.body
    );
    let feed = fetch(&base, "/@eve/atom.xml", None, None).await;
    assert_eq!(feed.status, 200);
    assert!(!feed.body.contains("<script>"), "{}", feed.body);

    // Odd handles, unknown ones, remote ones, ids and cursors that name nothing: 404 pages.
    let unknown_body = page(&base, "/@nobody").await;
    assert_eq!(unknown_body.status, 404);
    assert!(
        unknown_body
            .header(header::CONTENT_TYPE)
            .starts_with("text/html")
    );
    let long = "a".repeat(3000);
    for path in [
        "/@nobody".to_string(),
        "/@%3Cscript%3E".to_string(),
        "/@eve@remote.example".to_string(),
        "/@eve%40remote.example".to_string(),
        "/@..%2F..%2Fetc%2Fpasswd".to_string(),
        "/@%F0%9F%98%80".to_string(),
        "/@e've".to_string(),
        format!("/@{long}"),
        "/@eve/not-an-id".to_string(),
        format!("/@eve/{}", uuid::Uuid::now_v7()),
        "/@eve?max_id=999999999999999999999999999999999999999999".to_string(),
        "/@eve?max_id=%27%3B%20DROP%20TABLE%20statuses".to_string(),
        "/tags/not%20a%20tag".to_string(),
        "/tags/%3Cscript%3E".to_string(),
        "/@nobody/atom.xml".to_string(),
        "/users/nobody".to_string(),
    ] {
        let g = page(&base, &path).await;
        assert_eq!(g.status, 404, "{path}: {}", g.body);
        assert!(!g.body.contains("<script"), "{path}");
    }
    // The largest id is a valid cursor: the newest page.
    let g = page(&base, "/@eve?max_id=ffffffff-ffff-ffff-ffff-ffffffffffff").await;
    assert_eq!(g.status, 200);
    assert!(g.body.contains(&id(&evil)));

    // --- The account the rest reads: a profile, posts of every visibility, a thread.
    let alice_token = person(
        &inst,
        "alice",
        json!({
            "display_name": "Alice Example",
            "note": "Tea & cake",
            "fields_attributes": [{"name": "Site", "value": "https://alice.example/me"}],
        }),
    )
    .await;
    let (_, bob_token) = inst.account("bob").await;
    let alice = Client::new(&inst, Some(&alice_token));
    let bob = Client::new(&inst, Some(&bob_token));
    let m = upload(&inst, &alice_token, "A gradient, described").await;
    let public = alice
        .posted(&json!({ "status": "PUBLIC-POST with a picture #pagetag", "media_ids": [id(&m)] }))
        .await;
    let poll = alice
        .posted(&json!({
            "status": "POLL-POST",
            "poll": { "options": ["<b>tea</b>", "cake"], "expires_in": 3600 },
        }))
        .await;
    let unlisted = alice
        .posted(&json!({ "status": "UNLISTED-POST #pagetag", "visibility": "unlisted" }))
        .await;
    let private = alice
        .posted(&json!({ "status": "SECRET-PRIVATE #pagetag", "visibility": "private" }))
        .await;
    let direct = alice
        .posted(&json!({ "status": "@bob SECRET-DIRECT #pagetag", "visibility": "direct" }))
        .await;
    let reply = alice
        .posted(&json!({ "status": "PUBLIC-REPLY to the secret", "in_reply_to_id": id(&private) }))
        .await;
    let answer = bob
        .posted(&json!({ "status": "@alice BOB-ANSWER", "in_reply_to_id": id(&public) }))
        .await;
    let secrets = [
        "SECRET-PRIVATE",
        "SECRET-DIRECT",
        &id(&private),
        &id(&direct),
    ];
    // Pinned: the unlisted post heads the profile; the followers-only one, pinned too, does not.
    for pinned in [&unlisted, &private] {
        alice
            .act(
                Method::POST,
                &format!("/api/v1/statuses/{}/pin", id(pinned)),
            )
            .await
            .assert_ok();
    }

    // --- Negotiation, both ways, on every IRI kind.
    let actor = inst.fed.actor_iri("alice");
    let note = public["uri"].as_str().unwrap().to_string();
    let local_path = |u: &str| u.strip_prefix(&base).unwrap().to_string();
    for (path, iri, default_html) in [
        (local_path(&actor), actor.clone(), false),
        ("/@alice".to_string(), actor.clone(), true),
        (local_path(&note), note.clone(), false),
        (format!("/@alice/{}", id(&public)), note.clone(), true),
    ] {
        let g = page(&base, &path).await;
        assert_html_page(&g, &path);
        assert!(
            g.body.contains(&format!(
                "<link rel=\"alternate\" type=\"application/activity+json\" href=\"{}\">",
                iri.replace('/', "&#x2f;")
            )),
            "{path}: the ActivityPub alternate:\n{}",
            g.body
        );
        for accept in [Some(AP), Some(LD)]
            .into_iter()
            .chain((!default_html).then_some(None))
        {
            let g = fetch(&base, &path, accept, None).await;
            assert_eq!(g.status, 200, "{path} {accept:?}: {}", g.body);
            assert!(
                g.header(header::CONTENT_TYPE).contains("json"),
                "{path} {accept:?}: {:?}",
                g.headers
            );
            assert!(
                g.header(header::VARY).contains("Accept"),
                "{path} {accept:?}"
            );
            let doc: Value = serde_json::from_str(&g.body).expect("JSON");
            assert_eq!(doc["id"], json!(iri), "{path} {accept:?}");
        }
        if default_html {
            let g = fetch(&base, &path, None, None).await;
            assert!(
                g.header(header::CONTENT_TYPE).starts_with("text/html"),
                "{path}"
            );
        }
    }

    // --- What is never shown. A followers-only or direct post's page is the unknown id's.
    let stranger = support::peer::Peer::start().await;
    let unknown = page(&base, &format!("/@alice/{}", uuid::Uuid::now_v7())).await;
    assert_eq!(unknown.status, 404);
    for secret in [&private, &direct] {
        for path in [
            format!("/@alice/{}", id(secret)),
            local_path(secret["uri"].as_str().unwrap()),
        ] {
            let g = page(&base, &path).await;
            assert_eq!(g.status, 404, "{path}");
            assert_eq!(g.body, unknown.body, "{path}: not the unknown id's page");
            assert!(!g.body.contains("SECRET"), "{path}");
        }
        // Nor under another handle, nor to an ActivityPub client.
        let g = page(&base, &format!("/@bob/{}", id(secret))).await;
        assert_eq!(g.status, 404);
        let g = fetch(&base, &format!("/@alice/{}", id(secret)), Some(AP), None).await;
        assert_eq!(g.status, 404);
        // Nor to another server's actor that does not follow alice, asking with a signed
        // fetch for the object's IRI (R-MAPI-VIS: only public and unlisted objects are served).
        let iri = url::Url::parse(secret["uri"].as_str().unwrap()).unwrap();
        let mut signed = HeaderMap::new();
        signed.insert(header::ACCEPT, AP.parse().unwrap());
        hollo_runtime::federation::transport::signature::sign_request(
            &stranger.key(),
            &Method::GET,
            &iri,
            None,
            &mut signed,
        )
        .expect("sign");
        let answer = reqwest::Client::new()
            .get(iri.clone())
            .headers(signed)
            .send()
            .await
            .expect("signed fetch");
        assert_eq!(
            answer.status(),
            404,
            "a non-follower's signed fetch of {iri}"
        );
        assert!(!answer.text().await.unwrap_or_default().contains("SECRET"));
    }
    let profile = page(&base, "/@alice").await;
    let tag = page(&base, "/tags/pagetag").await;
    let feed = fetch(&base, "/@alice/atom.xml", None, None).await;
    let tag_feed = fetch(&base, "/tags/PageTag/atom.xml", None, None).await;
    for (what, g) in [
        ("profile", &profile),
        ("tag", &tag),
        ("feed", &feed),
        ("tag feed", &tag_feed),
    ] {
        assert_eq!(g.status, 200, "{what}: {}", g.body);
        for s in secrets {
            assert!(!g.body.contains(s), "{what} shows {s}:\n{}", g.body);
        }
        assert!(g.body.contains("PUBLIC-POST"), "{what}");
    }
    assert!(
        profile.body.contains("aria-label=\"Pinned posts\""),
        "{}",
        profile.body
    );
    assert_eq!(
        profile.body.matches("UNLISTED-POST").count(),
        2,
        "pinned and in the list"
    );
    // Mastodon's rule: unlisted posts on the profile (and its feed), not on tag pages.
    assert!(profile.body.contains("UNLISTED-POST") && feed.body.contains("UNLISTED-POST"));
    assert!(!tag.body.contains("UNLISTED-POST") && !tag_feed.body.contains("UNLISTED-POST"));
    let g = page(&base, &format!("/@alice/{}", id(&unlisted))).await;
    assert_eq!(g.status, 200, "an unlisted post has its permalink");
    // A public reply to a followers-only post: its thread leaves the parent out.
    let g = page(&base, &format!("/@alice/{}", id(&reply))).await;
    assert_eq!(g.status, 200);
    assert!(g.body.contains("PUBLIC-REPLY"));
    for s in secrets {
        assert!(!g.body.contains(s), "the reply's thread shows {s}");
    }
    // A poll's options and tally, its typed markup escaped.
    let g = page(&base, &format!("/@alice/{}", id(&poll))).await;
    assert!(g.body.contains("<ul class=\"poll\">"), "{}", g.body);
    assert!(g.body.contains("&lt;b&gt;tea&lt;&#x2f;b&gt;") && g.body.contains("cake"));
    // The thread: the answer below the post.
    let g = page(&base, &format!("/@alice/{}", id(&public))).await;
    assert!(g.body.contains("BOB-ANSWER"), "{}", g.body);
    assert!(
        g.body.contains("alt=\"A gradient, described\""),
        "{}",
        g.body
    );
    assert!(g.body.contains("class=\"h-entry"), "h-entry");
    assert!(g.body.contains("rel=\"me nofollow noopener noreferrer\" class=\"u-url\">https:&#x2f;&#x2f;alice.example&#x2f;me</a>")
        || profile.body.contains("href=\"https:&#x2f;&#x2f;alice.example&#x2f;me\" rel=\"me"),
        "{}", profile.body);
    // A post of bob's under alice's handle is not there.
    let g = page(&base, &format!("/@alice/{}", id(&answer))).await;
    assert_eq!(g.status, 404);

    // A tag of non-ASCII letters has its page, under its percent-encoded name.
    alice
        .posted(&json!({ "status": "UNICODE-TAG #日本語" }))
        .await;
    let g = page(&base, "/tags/%E6%97%A5%E6%9C%AC%E8%AA%9E").await;
    assert_html_page(&g, "the unicode tag");
    assert!(g.body.contains("UNICODE-TAG"), "{}", g.body);
    // HEAD answers the headers alone.
    let head = reqwest::Client::new()
        .head(format!("{base}/@alice"))
        .header(header::ACCEPT, HTML)
        .send()
        .await
        .expect("HEAD");
    assert_eq!(head.status().as_u16(), 200);
    assert!(head.headers().contains_key(header::ETAG));
    assert!(head.text().await.unwrap().is_empty());

    // --- Deleted: 410 on the permalink.
    let gone = alice.posted(&json!({ "status": "GONE-SOON" })).await;
    alice
        .act(Method::DELETE, &format!("/api/v1/statuses/{}", id(&gone)))
        .await
        .assert_ok();
    let g = page(&base, &format!("/@alice/{}", id(&gone))).await;
    assert_eq!(g.status, 410, "{}", g.body);
    assert!(!g.body.contains("GONE-SOON"));

    // --- Caching: validators, public max-age, 304 with the ETag, a new post changes it.
    let first = page(&base, "/@alice").await;
    let etag = first.header(header::ETAG).to_string();
    assert!(etag.starts_with('"') && etag.len() > 10, "{etag}");
    assert!(!first.header(header::LAST_MODIFIED).is_empty());
    assert!(
        first
            .header(header::CACHE_CONTROL)
            .starts_with("public, max-age=")
    );
    let again = fetch(&base, "/@alice", Some(HTML), Some(&etag)).await;
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    assert_eq!(again.header(header::ETAG), etag);
    // The feed fetched above is stale now (posts were added since): a 200, then its own 304.
    let stale = feed.header(header::ETAG).to_string();
    let fresh = fetch(&base, "/@alice/atom.xml", None, Some(&stale)).await;
    assert_eq!(fresh.status, 200);
    let feed_etag = fresh.header(header::ETAG).to_string();
    assert_eq!(
        fetch(&base, "/@alice/atom.xml", None, Some(&feed_etag))
            .await
            .status,
        304
    );
    alice.posted(&json!({ "status": "NEWER-POST" })).await;
    let changed = fetch(&base, "/@alice", Some(HTML), Some(&etag)).await;
    assert_eq!(changed.status, 200);
    assert!(changed.body.contains("NEWER-POST"));
    assert_ne!(changed.header(header::ETAG), etag);
    let css = fetch(&base, "/assets/pages.css", None, None).await;
    assert_eq!(css.status, 200);
    assert!(css.header(header::CONTENT_TYPE).starts_with("text/css"));
    assert!(
        css.header(header::CACHE_CONTROL)
            .contains("max-age=31536000")
    );

    // --- Readers other than browsers: feedparser, mf2py, OpenGraph.
    let image = m["url"].as_str().unwrap().to_string();
    // The tag page's picture is the first image it shows (alice's, the newest tagged post);
    // the home page's, its first account's avatar (alice, first by name).
    let me = alice.get("/api/v1/accounts/verify_credentials").await;
    let alice_avatar = me.body["avatar"].as_str().unwrap().to_string();
    let spec = json!({
        "og_images": { "/tags/pagetag": image, "/": alice_avatar },
        "profile": "/@alice", "post": format!("/@alice/{}", id(&public)),
        "feed": "/@alice/atom.xml", "tag_feed": "/tags/pagetag/atom.xml",
        "name": "Alice Example", "rel_me": "https://alice.example/me",
        "post_text": "PUBLIC-POST with a picture", "image": image,
        "feed_has": ["PUBLIC-POST", "UNLISTED-POST"],
        "tag_feed_has": ["PUBLIC-POST"], "tag_feed_lacks": ["UNLISTED-POST"],
        "absent": secrets,
        // The hostile account's feed (markup, `&`, `]]>`, a control character) parses too.
        "valid_feeds": ["/@eve/atom.xml"],
    });
    support::clients::run("pages_check.py", &[&base, &spec.to_string()]).await;

    // --- A real browser at phone and desktop widths.
    let out: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("artifacts/pages");
    let post_path = format!("/@alice/{}", id(&public));
    let reply_path = format!("/@alice/{}", id(&reply));
    let eve_path = format!("/@eve/{}", id(&evil));
    support::clients::run(
        "pages_browser.py",
        &[
            &base,
            out.to_str().unwrap(),
            "/",
            "/@alice",
            &post_path,
            &reply_path,
            "/tags/pagetag",
            "/@eve",
            &eve_path,
        ],
    )
    .await;
    assert!(out.join("at_alice-375.png").is_file());

    // A custom emoji in a post shows as its image (from our origin) with its shortcode as alt
    // text, as on Mastodon's pages; a shortcode of no emoji stays text.
    let (ctype, body) = form(&[
        ("shortcode", None, b"blob"),
        ("image", Some(("b.png", "image/png")), &png(16, 16)),
    ]);
    let added = reqwest::Client::new()
        .post(format!("{base}/api/v1/admin/custom_emojis"))
        .bearer_auth(ADMIN)
        .header("content-type", ctype)
        .body(body)
        .send()
        .await
        .expect("add an emoji");
    assert_eq!(added.status(), 200);
    let emoji_post = alice
        .posted(&json!({ "status": "EMOJI-POST :blob: and :nothing:" }))
        .await;
    let g = page(&base, &format!("/@alice/{}", id(&emoji_post))).await;
    assert_eq!(g.status, 200);
    let img = format!("<img class=\"emoji\" src=\"{base}/media/");
    assert!(g.body.contains(&img), "{}", g.body);
    assert!(g.body.contains("alt=\":blob:\""), "{}", g.body);
    assert!(g.body.contains(":nothing:"));

    inst.shutdown().await;
    let _ = std::fs::remove_dir_all(media);
}

/// Boosts `post` as `c`; the boost's Status.
async fn boost(c: &Client, post: &Value, body: Value) -> Value {
    let path = format!("/api/v1/statuses/{}/reblog", id(post));
    let b = c.call(Method::POST, &path, &body).await.assert_ok();
    b.body
}

/// The account's own boosts on its profile page, as Mastodon's profile lists them: public and
/// unlisted boosts of posts an anonymous reader may read, newest first among its posts, each
/// marked with its booster; a followers-only boost, a boost of a followers-only post and a
/// boost of a deleted post are not there. The Atom feed keeps the account's own posts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn profile_lists_the_accounts_public_boosts() {
    let inst = Instance::start("all", &[]).await;
    let base = inst.base.clone();
    let [(_, _, alice), (_, _, bob), (_, _, carol)] = users(&inst, ["alice", "bob", "carol"]).await;
    alice.posted(&json!({ "status": "ALICE-OLDER" })).await;
    let bobs = bob.posted(&json!({ "status": "BOB-BOOSTED" })).await;
    let carols = carol
        .posted(&json!({ "status": "CAROL-QUIETLY-BOOSTED" }))
        .await;
    let secret = alice
        .posted(&json!({ "status": "ALICE-SECRET-SELF", "visibility": "private" }))
        .await;
    let gone = bob.posted(&json!({ "status": "BOB-GONE" })).await;
    let shown = boost(&alice, &bobs, json!({})).await;
    boost(&alice, &carols, json!({ "visibility": "private" })).await;
    boost(&alice, &secret, json!({})).await;
    boost(&alice, &gone, json!({})).await;
    bob.act(Method::DELETE, &format!("/api/v1/statuses/{}", id(&gone)))
        .await
        .assert_ok();
    alice.posted(&json!({ "status": "ALICE-NEWEST" })).await;

    let g = page(&base, "/@alice").await;
    assert_html_page(&g, "/@alice");
    let at = |s: &str| {
        g.body
            .find(s)
            .unwrap_or_else(|| panic!("{s} missing:\n{}", g.body))
    };
    // Newest first: alice's newest post, bob's boosted post, then alice's older one.
    assert!(at("ALICE-NEWEST") < at("BOB-BOOSTED") && at("BOB-BOOSTED") < at("ALICE-OLDER"));
    assert!(
        g.body.contains("<p class=\"boost-label\">") && g.body.contains(">alice</a> boosted</p>"),
        "the boost is marked:\n{}",
        g.body
    );
    assert_eq!(g.body.matches("class=\"boost-label\"").count(), 1);
    // The boosted item is bob's post: its author and permalink.
    assert!(
        g.body
            .contains(&format!("{base}/@bob/{}", id(&bobs)).replace('/', "&#x2f;"))
    );
    for absent in ["CAROL-QUIETLY-BOOSTED", "ALICE-SECRET-SELF", "BOB-GONE"] {
        assert!(!g.body.contains(absent), "/@alice shows {absent}");
    }
    // The boost's id is a cursor like a post's: the next page starts below it.
    let below = page(&base, &format!("/@alice?max_id={}", id(&shown))).await;
    assert_eq!(below.status, 200);
    assert!(below.body.contains("ALICE-OLDER") && !below.body.contains("BOB-BOOSTED"));
    assert!(!below.body.contains("ALICE-NEWEST"));
    // Bob's own page shows his post as his, not as a boost; alice's feed has no boosts.
    let b = page(&base, "/@bob").await;
    assert!(b.body.contains("BOB-BOOSTED") && !b.body.contains("boost-label"));
    let feed = fetch(&base, "/@alice/atom.xml", None, None).await;
    assert_eq!(feed.status, 200);
    assert!(feed.body.contains("ALICE-NEWEST") && !feed.body.contains("BOB-BOOSTED"));
    // Undone, the boost leaves the page.
    alice
        .act(
            Method::POST,
            &format!("/api/v1/statuses/{}/unreblog", id(&bobs)),
        )
        .await
        .assert_ok();
    let g = page(&base, "/@alice").await;
    assert!(!g.body.contains("BOB-BOOSTED"), "{}", g.body);
    inst.shutdown().await;
}

/// The page's ETag as served now, and that asking with it is a 304 carrying the same tag.
async fn current_tag(base: &str, path: &str) -> String {
    let g = fetch(base, path, Some(HTML), None).await;
    assert_eq!(g.status, 200, "{path}: {}", g.body);
    let tag = g.header(header::ETAG).to_string();
    assert!(tag.starts_with('"') && tag.len() > 10, "{path}: {tag}");
    let again = fetch(base, path, Some(HTML), Some(&tag)).await;
    assert_eq!(again.status, 304, "{path}: a current copy");
    assert!(again.body.is_empty());
    assert_eq!(again.header(header::ETAG), tag, "{path}: the 304's tag");
    assert!(
        again.header(header::VARY).contains("Accept"),
        "{path}: Vary on the 304"
    );
    assert!(
        again
            .header(header::CACHE_CONTROL)
            .starts_with("public, max-age=")
    );
    tag
}

/// After `what`, each of `paths` answers its old tag with a 200 and a new tag.
async fn changed(base: &str, tags: &mut [(&str, String)], what: &str) {
    for (path, old) in tags.iter_mut() {
        let g = fetch(base, path, Some(HTML), Some(old)).await;
        assert_eq!(g.status, 200, "{path} after {what}: still a 304");
        assert_ne!(g.header(header::ETAG), old.as_str(), "{path} after {what}");
        *old = current_tag(base, path).await;
    }
}

/// The cheap validator (computed from database facts before rendering) changes with every
/// visible change — a new post, a deletion, a profile edit, a favourite, a poll vote, a
/// boost — and stays the same otherwise, on the profile, the tag page, their feeds and home.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn revalidation_sees_every_visible_change() {
    let inst = Instance::start("all", &[]).await;
    let base = inst.base.clone();
    let alice_token = person(&inst, "alice", json!({ "display_name": "Alice" })).await;
    let (_, bob_token) = inst.account("bob").await;
    let alice = Client::new(&inst, Some(&alice_token));
    let bob = Client::new(&inst, Some(&bob_token));
    let first = alice.posted(&json!({ "status": "FIRST #cachetag" })).await;
    let poll = alice
        .posted(&json!({
            "status": "POLL #cachetag",
            "poll": { "options": ["tea", "cake"], "expires_in": 3600 },
        }))
        .await;
    let paths = ["/@alice", "/tags/cachetag", "/"];
    let mut tags = Vec::new();
    for p in paths {
        tags.push((p, current_tag(&base, p).await));
    }
    // Nothing changed: the same tags (the validator is a function of the facts).
    for (p, t) in &tags {
        assert_eq!(&current_tag(&base, p).await, t, "{p} without a change");
    }
    let feed = fetch(&base, "/@alice/atom.xml", None, None).await;
    let feed_tag = feed.header(header::ETAG).to_string();
    assert_eq!(
        fetch(&base, "/@alice/atom.xml", None, Some(&feed_tag))
            .await
            .status,
        304
    );

    // A new post (profile, tag page), then its deletion.
    let second = alice.posted(&json!({ "status": "SECOND #cachetag" })).await;
    changed(&base, &mut tags, "a new post (and the post count)").await;
    alice
        .act(Method::DELETE, &format!("/api/v1/statuses/{}", id(&second)))
        .await
        .assert_ok();
    changed(&base, &mut tags, "a deletion (and the post count)").await;
    let g = page(&base, "/@alice").await;
    assert!(!g.body.contains("SECOND"));

    // A profile edit: the profile, the home page's entry, the tag page's author.
    update_credentials(&alice, json!({ "display_name": "Alice Renamed" })).await;
    changed(&base, &mut tags, "a profile edit").await;
    assert!(page(&base, "/").await.body.contains("Alice Renamed"));

    // Someone else's favourite and vote: counts under a post, a poll's tally.
    bob.act(
        Method::POST,
        &format!("/api/v1/statuses/{}/favourite", id(&first)),
    )
    .await
    .assert_ok();
    changed(&base, &mut tags[..2], "a favourite").await;
    let poll_id = poll["poll"]["id"].as_str().unwrap();
    bob.call(
        Method::POST,
        &format!("/api/v1/polls/{poll_id}/votes"),
        &json!({ "choices": [1] }),
    )
    .await
    .assert_ok();
    changed(&base, &mut tags[..2], "a vote").await;
    // An edit of a post's text.
    alice
        .edit(&id(&first), &json!({ "status": "FIRST EDITED #cachetag" }))
        .await
        .assert_ok();
    changed(&base, &mut tags[..2], "an edit").await;
    // A follow: the follower count on the profile and home.
    let alice_id = alice.get("/api/v1/accounts/verify_credentials").await.body["id"]
        .as_str()
        .unwrap()
        .to_string();
    bob.act(Method::POST, &format!("/api/v1/accounts/{alice_id}/follow"))
        .await
        .assert_ok();
    changed(&base, &mut [tags[0].clone(), tags[2].clone()], "a follow").await;
    // The feed saw the deletion and the edit too.
    assert_eq!(
        fetch(&base, "/@alice/atom.xml", None, Some(&feed_tag))
            .await
            .status,
        200
    );
    inst.shutdown().await;
}

/// A site of web pages for the profile links: `/good` links back to alice's profile page,
/// `/moved` redirects to `/actor`, which links back to her actor IRI; `/other` links to bob,
/// `/plain` to nobody, and `/huge` (2 MiB, over the fetcher's 1 MiB) has the link at its end.
async fn link_site(profile: &str, actor: &str, bob: &str) -> String {
    use axum::http::header as h;
    use axum::response::IntoResponse;
    let html = |body: String| ([(h::CONTENT_TYPE, "text/html; charset=utf-8")], body);
    let good = html(format!(
        "<!doctype html><title>me</title><link rel=\"me\" href=\"{profile}\"><p>hello</p>"
    ));
    let actor_page = html(format!(
        "<!doctype html><p><a href=\"{actor}\" rel=\"nofollow me\">fediverse</a></p>"
    ));
    let other = html(format!("<a rel=\"me\" href=\"{bob}\">bob</a>"));
    let plain = html(format!("<a href=\"{profile}\">no rel</a>"));
    let huge = html(format!(
        "<!doctype html><p>{}</p><a rel=\"me\" href=\"{profile}\">late</a>",
        "x".repeat(2 * 1024 * 1024)
    ));
    let app = axum::Router::new()
        .route("/good", axum::routing::get(move || async move { good }))
        .route(
            "/actor",
            axum::routing::get(move || async move { actor_page }),
        )
        .route(
            "/moved",
            axum::routing::get(|| async {
                (reqwest::StatusCode::FOUND, [(h::LOCATION, "/actor")]).into_response()
            }),
        )
        .route("/other", axum::routing::get(move || async move { other }))
        .route("/plain", axum::routing::get(move || async move { plain }))
        .route("/huge", axum::routing::get(move || async move { huge }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    base
}

/// `fields[].verified_at` of the token holder's CredentialAccount, by field name (and the
/// same in `source.fields`).
async fn verified(c: &Client) -> std::collections::BTreeMap<String, bool> {
    let me = c
        .get("/api/v1/accounts/verify_credentials")
        .await
        .assert_ok();
    let of = |fields: &Value| -> std::collections::BTreeMap<String, bool> {
        fields
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["name"].as_str().unwrap().to_string(),
                    f["verified_at"].is_string(),
                )
            })
            .collect()
    };
    let shown = of(&me.body["fields"]);
    assert_eq!(shown, of(&me.body["source"]["fields"]), "{}", me.body);
    shown
}

/// Waits until no verification of links is queued or running.
/// `PATCH /api/v1/accounts/update_credentials` of `body`, asserting a 200.
async fn update_credentials(api: &Client, body: Value) -> Answer {
    api.call(Method::PATCH, "/api/v1/accounts/update_credentials", &body)
        .await
        .assert_ok()
}

/// Sets alice's two profile fields, Site and Blog, asserting a 200; the account.
async fn set_site_and_blog(alice: &Client, site: &str, blog: &str) -> Answer {
    update_credentials(
        alice,
        json!({ "fields_attributes": [
            {"name": "Site", "value": site},
            {"name": "Blog", "value": blog},
        ]}),
    )
    .await
}

async fn links_checked(inst: &Instance) {
    support::eventually(Duration::from_secs(60), "the link verification task", || async {
        (inst
            .count("SELECT count(*) FROM hollo_task_message_v1 WHERE kind = 'hollo.verify-links.v1'")
            .await
            == 0)
            .then_some(())
    })
    .await;
}

/// Verified `rel="me"` links, as Mastodon's: a field whose page links back to the account (its
/// profile page or its actor IRI, through a redirect too) gets `verified_at` in the API and a
/// mark on the profile page; a page that does not link back, links to someone else or is too
/// large to read stays unverified; a changed value loses its verification at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn profile_links_are_verified_by_rel_me() {
    let inst = Instance::start("all", &[]).await;
    let base = inst.base.clone();
    let profile = format!("{base}/@alice");
    let site = link_site(
        &profile,
        &inst.fed.actor_iri("alice"),
        &format!("{base}/@bob"),
    )
    .await;
    inst.account("bob").await;
    let alice_token = person(
        &inst,
        "alice",
        json!({ "fields_attributes": [
            {"name": "Site", "value": format!("{site}/good")},
            {"name": "Other", "value": format!("{site}/other")},
            {"name": "Huge", "value": format!("{site}/huge")},
            {"name": "Plain", "value": format!("{site}/plain")},
        ]}),
    )
    .await;
    let alice = Client::new(&inst, Some(&alice_token));
    links_checked(&inst).await;
    let v = verified(&alice).await;
    assert_eq!(
        v,
        [
            ("Site", true),
            ("Other", false),
            ("Huge", false),
            ("Plain", false)
        ]
        .into_iter()
        .map(|(k, b)| (k.to_string(), b))
        .collect(),
    );
    let g = page(&base, "/@alice").await;
    assert_eq!(
        g.body.matches("class=\"verified-mark\"").count(),
        1,
        "{}",
        g.body
    );
    let good = format!("{site}/good").replace('/', "&#x2f;");
    let at = g.body.find(&good).expect("the verified link");
    let around = &g.body[at.saturating_sub(200)..(at + 600).min(g.body.len())];
    assert!(
        around.contains("class=\"verified\"")
            && around.contains("rel=\"me nofollow noopener noreferrer\"")
            && around.contains("Verified link"),
        "{around}"
    );

    // Site unchanged keeps its verification; the new value starts unverified and is checked
    // (a redirect to a page linking the actor IRI).
    let u = set_site_and_blog(&alice, &format!("{site}/good"), &format!("{site}/moved")).await;
    assert!(u.body["fields"][0]["verified_at"].is_string(), "{}", u.body);
    assert!(u.body["fields"][1]["verified_at"].is_null(), "{}", u.body);
    links_checked(&inst).await;
    let v = verified(&alice).await;
    assert_eq!(v.get("Blog"), Some(&true), "{v:?}");
    assert_eq!(v.get("Site"), Some(&true), "{v:?}");

    // A changed value loses its verification in the same request, even if its new page links
    // back too (it is checked again).
    let u = set_site_and_blog(
        &alice,
        &format!("{site}/good?again"),
        &format!("{site}/plain"),
    )
    .await;
    assert!(u.body["fields"][0]["verified_at"].is_null(), "{}", u.body);
    assert!(u.body["fields"][1]["verified_at"].is_null(), "{}", u.body);
    links_checked(&inst).await;
    let v = verified(&alice).await;
    assert_eq!(v.get("Site"), Some(&true), "{v:?}");
    assert_eq!(v.get("Blog"), Some(&false), "{v:?}");
    assert_eq!(
        inst.count("SELECT count(*) FROM account_field_verifications")
            .await,
        1
    );
    inst.shutdown().await;
}

/// Hollo's per-account theme colour (issue 33 item 1): chosen with `theme_color` on
/// `update_credentials` (an unknown name is a 422 and changes nothing), drawn on the account's
/// profile and post pages as a class the stylesheet defines (no inline style under the CSP),
/// moving the profile's validator; empty is the default again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_account_draws_its_pages_in_its_theme_colour() {
    let inst = Instance::start("all", &[]).await;
    let base = inst.base.clone();
    let (_, token) = inst.account("tess").await;
    let tess = Client::new(&inst, Some(&token));
    let post = tess.posted(&json!({ "status": "in colour" })).await;
    let post_path = format!("/@tess/{}", post["id"].as_str().expect("id"));
    let before = page(&base, "/@tess").await;
    assert!(!before.body.contains("theme-"), "no colour chosen yet");
    let etag = before.header(header::ETAG).to_string();

    for bad in ["Jade", "url(x)", "jade;color:red"] {
        let a = tess
            .call(
                Method::PATCH,
                "/api/v1/accounts/update_credentials",
                &json!({ "theme_color": bad }),
            )
            .await;
        assert_eq!(a.status, 422, "{bad}: {}", a.body);
    }
    assert_eq!(page(&base, "/@tess").await.header(header::ETAG), etag);

    tess.form(
        Method::PATCH,
        "/api/v1/accounts/update_credentials",
        "theme_color=jade",
    )
    .await
    .assert_ok();
    for path in ["/@tess", post_path.as_str()] {
        let got = page(&base, path).await;
        assert!(got.body.contains("<body class=\"theme-jade\">"), "{path}");
    }
    assert_ne!(page(&base, "/@tess").await.header(header::ETAG), etag);
    let css = fetch(&base, "/assets/pages.css", None, None).await;
    assert!(
        css.body.contains("body.theme-jade {"),
        "the stylesheet defines it"
    );

    update_credentials(&tess, json!({ "theme_color": "" })).await;
    assert!(!page(&base, "/@tess").await.body.contains("theme-"));
}
