//! The first-run page `/setup` (R-API): while no account exists it creates the owner, but only
//! for someone on the server's own machine or holding a one-time token from the log. The
//! attacks: a remote peer without the token, a wrong token, a request a proxy forwarded from
//! elsewhere (its peer is loopback), a node behind a proxy, a form without its CSRF token or from
//! another origin, and a second owner (one after the other, and concurrent forms). The browser
//! path (the page, then an OAuth sign-in as a Mastodon app does it) is in `clients.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use reqwest::StatusCode;
use reqwest::header::SET_COOKIE;
use support::node::Instance;
use tower::ServiceExt;

const PASSWORD: &str = "first owner password";

/// Extra request headers, as (name, value).
type Headers<'a> = Vec<(&'a str, &'a str)>;

/// A refused form: what it lacks, its CSRF cookie, extra headers and its fields.
type Case<'a> = (&'a str, Option<&'a Csrf>, Headers<'a>, Headers<'a>);

/// A form's CSRF token: the double-submit cookie the page set and the field it carries.
struct Csrf {
    cookie: String,
    field: String,
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The `hollo_csrf` cookie and the form's `csrf` field of a page.
fn csrf_of(headers: &reqwest::header::HeaderMap, body: &str) -> Csrf {
    let cookie = headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| c.strip_prefix("hollo_csrf="))
        .and_then(|c| c.split(';').next())
        .expect("a CSRF cookie")
        .to_string();
    let needle = "name=\"csrf\" value=\"";
    let start = body.find(needle).expect("a csrf field") + needle.len();
    let field = body[start..start + body[start..].find('"').unwrap()].to_string();
    Csrf { cookie, field }
}

/// `GET /setup` from this machine (the test's own loopback connection): the form, and its CSRF.
async fn local_form(base: &str) -> Csrf {
    let resp = no_redirects()
        .get(format!("{base}/setup"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "the page opens locally");
    let headers = resp.headers().clone();
    let body = resp.text().await.unwrap();
    assert!(body.contains("action=\"/setup\""), "{body}");
    csrf_of(&headers, &body)
}

/// The form's fields for `username` (with `csrf` and `token` when given).
fn fields<'a>(
    csrf: Option<&'a str>,
    token: Option<&'a str>,
    username: &'a str,
) -> Vec<(&'static str, &'a str)> {
    let mut f = vec![
        ("username", username),
        ("password", PASSWORD),
        ("password_confirmation", PASSWORD),
    ];
    f.extend(csrf.map(|c| ("csrf", c)));
    f.extend(token.map(|t| ("token", t)));
    f
}

/// `POST /setup` over HTTP with `csrf` (cookie and field), extra headers and the fields.
async fn post_form(
    base: &str,
    csrf: Option<&Csrf>,
    headers: &[(&str, &str)],
    form: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = no_redirects().post(format!("{base}/setup")).form(form);
    if let Some(c) = csrf {
        req = req.header("cookie", format!("hollo_csrf={}", c.cookie));
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

async fn accounts(inst: &Instance) -> i64 {
    inst.count("SELECT count(*) FROM accounts").await
}

/// A request to the node's router as if from `peer` (the connection's address, as the server
/// gives every request).
fn from_peer(peer: &str, req: axum::http::request::Builder, body: Body) -> Request<Body> {
    let peer: SocketAddr = peer.parse().unwrap();
    req.extension(ConnectInfo(peer)).body(body).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_remote_peer_needs_the_one_time_token_and_a_wrong_one_is_refused() {
    let inst = Instance::start("web", &[]).await;
    // Starting with no account made one token (and printed its link).
    assert_eq!(inst.count("SELECT count(*) FROM setup_tokens").await, 1);
    let token = hollo_runtime::first_run::issue_setup_token(&inst.pool)
        .await
        .unwrap();
    let router = hollo_runtime::web::router(hollo_runtime::web::AppState {
        public_origin: inst.base.clone(),
        ..hollo_runtime::web::AppState::new(inst.pool.clone(), Some(inst.fed.clone()))
    });
    let call = |req: Request<Body>| {
        let router = router.clone();
        async move {
            let resp = router.oneshot(req).await.unwrap();
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            (status, headers, String::from_utf8_lossy(&body).into_owned())
        }
    };
    let remote = "203.0.113.9:40000";
    for path in ["/setup", "/setup?token=", "/setup?token=not-the-token"] {
        let (status, _, body) = call(from_peer(remote, Request::get(path), Body::empty())).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert!(
            !body.contains("action=\"/setup\""),
            "{path}: no form: {body}"
        );
    }
    // A token one character off is as wrong as any.
    let mut near = token.clone();
    near.pop();
    near.push(if token.ends_with('A') { 'B' } else { 'A' });
    let (status, _, _) = call(from_peer(
        remote,
        Request::get(format!("/setup?token={near}")),
        Body::empty(),
    ))
    .await;
    assert_eq!(status, 403, "a near-miss token");

    // The right token opens the form; its POST still needs the token, not only the CSRF.
    let (status, headers, body) = call(from_peer(
        remote,
        Request::get(format!("/setup?token={token}")),
        Body::empty(),
    ))
    .await;
    assert_eq!(status, 200, "{body}");
    let csrf = {
        let mut h = reqwest::header::HeaderMap::new();
        for v in headers.get_all("set-cookie") {
            h.append(SET_COOKIE, v.to_str().unwrap().parse().unwrap());
        }
        csrf_of(&h, &body)
    };
    let post = |token: Option<&str>| {
        let form = serde_urlencoded::to_string(fields(Some(&csrf.field), token, "owner")).unwrap();
        from_peer(
            remote,
            Request::post("/setup")
                .header("content-type", "application/x-www-form-urlencoded")
                .header("cookie", format!("hollo_csrf={}", csrf.cookie)),
            Body::from(form),
        )
    };
    for wrong in [None, Some(""), Some(near.as_str())] {
        let (status, _, body) = call(post(wrong)).await;
        assert_eq!(status, 403, "token {wrong:?}: {body}");
    }
    assert_eq!(accounts(&inst).await, 0, "nothing was created");

    let (status, headers, body) = call(post(Some(&token))).await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(
        headers.get("location").unwrap(),
        "/auth/sign_in?created=owner"
    );
    let admin: bool = sqlx::query_scalar("SELECT admin FROM accounts WHERE username = 'owner'")
        .fetch_one(&inst.pool)
        .await
        .unwrap();
    assert!(admin, "the owner is an administrator");
    // Used: every token is gone, and the page is closed for good.
    assert_eq!(inst.count("SELECT count(*) FROM setup_tokens").await, 0);
    let (status, _, _) = call(from_peer(
        remote,
        Request::get(format!("/setup?token={token}")),
        Body::empty(),
    ))
    .await;
    assert_eq!(status, 404);
    let (status, _, _) = call(post(Some(&token))).await;
    assert_eq!(status, 404);
    assert_eq!(accounts(&inst).await, 1);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_forwarded_from_elsewhere_is_not_local() {
    let inst = Instance::start("web", &[]).await;
    let base = &inst.base;
    let csrf = local_form(base).await;
    for header in [
        ("x-forwarded-for", "203.0.113.7"),
        ("forwarded", "for=203.0.113.7"),
        ("x-real-ip", "203.0.113.7"),
    ] {
        let resp = no_redirects()
            .get(format!("{base}/setup"))
            .header(header.0, header.1)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "GET with {header:?}");
        let resp = post_form(
            base,
            Some(&csrf),
            &[header],
            &fields(Some(&csrf.field), None, "proxied"),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "POST with {header:?}");
    }
    // A page of another site whose name was rebound to this machine (DNS rebinding) asks for
    // its own name.
    let resp = no_redirects()
        .get(format!("{base}/setup"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN, "another site's name");
    let resp = post_form(
        base,
        Some(&csrf),
        &[("host", "evil.example")],
        &fields(Some(&csrf.field), None, "rebound"),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN, "another site's name");
    assert_eq!(accounts(&inst).await, 0);
    inst.shutdown().await;

    // A node configured behind a proxy: every request comes through it, none is local.
    let inst = Instance::start("web", &[("BEHIND_PROXY", "true")]).await;
    let resp = no_redirects()
        .get(format!("{}/setup", inst.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_form_without_its_csrf_token_or_from_another_origin_is_refused() {
    let inst = Instance::start("web", &[]).await;
    let base = &inst.base;
    let csrf = local_form(base).await;
    let cases: Vec<Case> = vec![
        ("no cookie, no field", None, vec![], fields(None, None, "a")),
        (
            "a field without its cookie",
            None,
            vec![],
            fields(Some(&csrf.field), None, "a"),
        ),
        (
            "a cookie without the field",
            Some(&csrf),
            vec![],
            fields(None, None, "a"),
        ),
        (
            "another site's form",
            Some(&csrf),
            vec![("origin", "https://evil.example")],
            fields(Some(&csrf.field), None, "a"),
        ),
    ];
    for (what, c, headers, form) in &cases {
        let resp = post_form(base, *c, headers, form).await;
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{what}");
    }
    assert_eq!(accounts(&inst).await, 0);

    // What the CLI refuses is refused here too, and the form comes back with the name.
    for (what, username, password, again) in [
        ("a bad name", "no spaces", PASSWORD, PASSWORD),
        ("a short password", "owner", "short", "short"),
        ("two passwords", "owner", PASSWORD, "another password"),
    ] {
        let form = [
            ("csrf", csrf.field.as_str()),
            ("username", username),
            ("password", password),
            ("password_confirmation", again),
        ];
        let resp = post_form(base, Some(&csrf), &[], &form).await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{what}");
        let body = resp.text().await.unwrap();
        assert!(body.contains("id=\"error\""), "{what}: {body}");
    }
    assert_eq!(accounts(&inst).await, 0);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_forms_make_one_owner_and_the_page_closes() {
    let inst = Instance::start("web", &[]).await;
    let base = inst.base.clone();
    let csrf = std::sync::Arc::new(local_form(&base).await);
    let tries: Vec<_> = (0..4)
        .map(|i| {
            let (base, csrf) = (base.clone(), csrf.clone());
            tokio::spawn(async move {
                let name = format!("owner{i}");
                let resp = post_form(
                    &base,
                    Some(&csrf),
                    &[],
                    &fields(Some(&csrf.field), None, &name),
                )
                .await;
                resp.status()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tries {
        statuses.push(t.await.unwrap());
    }
    let created = statuses
        .iter()
        .filter(|s| **s == StatusCode::SEE_OTHER)
        .count();
    assert_eq!(created, 1, "{statuses:?}");
    assert!(
        statuses
            .iter()
            .all(|s| *s == StatusCode::SEE_OTHER || *s == StatusCode::NOT_FOUND),
        "{statuses:?}"
    );
    assert_eq!(accounts(&inst).await, 1);

    // Afterwards: the page is an unknown route's 404, and a form creates nothing.
    let resp = no_redirects()
        .get(format!("{base}/setup"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let resp = post_form(
        &base,
        Some(&csrf),
        &[],
        &fields(Some(&csrf.field), None, "late"),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(accounts(&inst).await, 1);

    // The sign-in page the owner was sent to takes the new password.
    let owner: String = sqlx::query_scalar("SELECT username FROM accounts")
        .fetch_one(&inst.pool)
        .await
        .unwrap();
    let resp = no_redirects()
        .get(format!("{base}/auth/sign_in?created={owner}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let headers = resp.headers().clone();
    let body = resp.text().await.unwrap();
    assert!(body.contains(&format!("@{owner}")), "{body}");
    let c = csrf_of(&headers, &body);
    let resp = no_redirects()
        .post(format!("{base}/oauth/sign_in"))
        .header("cookie", format!("hollo_csrf={}", c.cookie))
        .form(&[
            ("csrf", c.field.as_str()),
            ("next", ""),
            ("username", owner.as_str()),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()
            .get_all(SET_COOKIE)
            .iter()
            .any(|v| v.to_str().unwrap().starts_with("hollo_session=")),
        "a session"
    );
    assert!(resp.text().await.unwrap().contains("id=\"signed-in\""));

    // A start with an account prints no link and clears any left (one made here as if
    // before): deleting every account later must not reopen the page to an old log line.
    hollo_runtime::first_run::issue_setup_token(&inst.pool)
        .await
        .unwrap();
    hollo_runtime::first_run::greet_when_new(
        &inst.pool,
        "127.0.0.1:3000".parse().unwrap(),
        &base,
        false,
    )
    .await;
    assert_eq!(inst.count("SELECT count(*) FROM setup_tokens").await, 0);
    inst.shutdown().await;
}
