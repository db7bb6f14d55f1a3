//! OAuth 2 as Mastodon speaks it (SPEC §11 R-MAPI-1), over HTTP against a
//! real node and PostgreSQL: app registration, the sign-in and consent pages (driven here by a
//! cookie-keeping HTTP client; tests/clients.rs drives them in Chromium), codes with PKCE,
//! client credentials, revocation, scopes on the client routes, sign-in limits, metadata and
//! the password commands.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::Stdio;

use base64::Engine;
use hollo_runtime::passwords;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, LOCATION, RETRY_AFTER, SET_COOKIE};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::api::register_app;
use support::node::Instance;

const PASSWORD: &str = "correct horse battery";
const CB: &str = "https://app.example/callback";

/// A browser without JavaScript: keeps cookies, follows nothing by itself.
struct Browser {
    http: reqwest::Client,
    base: String,
    cookies: BTreeMap<String, String>,
}

struct Page {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Page {
    fn location(&self) -> String {
        self.headers
            .get(LOCATION)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    }
    /// The value of the form field `name` (hidden fields are HTML-escaped by the template).
    fn field(&self, name: &str) -> String {
        let needle = format!("name=\"{name}\" value=\"");
        let start = self
            .body
            .find(&needle)
            .unwrap_or_else(|| panic!("no field {name} in {}", self.body))
            + needle.len();
        let end = self.body[start..].find('"').unwrap() + start;
        self.body[start..end]
            .replace("&amp;", "&")
            .replace("&#x2f;", "/")
            .replace("&#x3d;", "=")
    }
}

impl Browser {
    fn new(base: &str) -> Browser {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: base.to_string(),
            cookies: BTreeMap::new(),
        }
    }

    async fn take(&mut self, resp: reqwest::Response) -> Page {
        for c in resp.headers().get_all(SET_COOKIE) {
            let c = c.to_str().unwrap();
            let (pair, _) = c.split_once(';').unwrap_or((c, ""));
            let (k, v) = pair.split_once('=').unwrap();
            self.cookies.insert(k.to_string(), v.to_string());
        }
        let (status, headers) = (resp.status(), resp.headers().clone());
        Page {
            status,
            headers,
            body: resp.text().await.unwrap(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn get(&mut self, path: &str) -> Page {
        let url = if path.starts_with("http") {
            path.to_string()
        } else {
            format!("{}{path}", self.base)
        };
        let resp = self
            .http
            .get(url)
            .header("cookie", self.cookie_header())
            .send()
            .await
            .unwrap();
        self.take(resp).await
    }

    async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .header("cookie", self.cookie_header())
            .form(form)
            .send()
            .await
            .unwrap();
        self.take(resp).await
    }
}

struct App {
    client_id: String,
    client_secret: String,
}

async fn register(base: &str, scopes: &str, uris: Value) -> App {
    let v = register_app(
        base,
        json!({"client_name": "Test App", "redirect_uris": uris, "scopes": scopes, "website": "https://app.example"}),
    )
    .await;
    App {
        client_id: v["client_id"].as_str().unwrap().to_string(),
        client_secret: v["client_secret"].as_str().unwrap().to_string(),
    }
}

async fn user(inst: &Instance, name: &str) -> String {
    let (_, cli_token) = support::account_with_token(&inst.pool, name).await;
    passwords::set(&inst.pool, name, PASSWORD).await.unwrap();
    cli_token
}

fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

fn authorize_path(app: &App, scope: &str, extra: &str) -> String {
    format!(
        "/oauth/authorize?response_type=code&client_id={}&redirect_uri={}&scope={}&state=st%26ate{extra}",
        app.client_id,
        urlencode(CB),
        urlencode(scope)
    )
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Signs in on the page and approves; returns the code from the redirect.
async fn approve(b: &mut Browser, path: &str, user: &str) -> String {
    let page = b.get(path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let page = if page.body.contains("action=\"/oauth/sign_in\"") {
        let (csrf, next) = (page.field("csrf"), page.field("next"));
        let signed = b
            .post(
                "/oauth/sign_in",
                &[
                    ("csrf", &csrf),
                    ("next", &next),
                    ("username", user),
                    ("password", PASSWORD),
                ],
            )
            .await;
        assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
        b.get(&signed.location()).await
    } else {
        page
    };
    assert!(page.body.contains("Authorize Test App"), "{}", page.body);
    let fields: Vec<(String, String)> = [
        "csrf",
        "client_id",
        "redirect_uri",
        "scope",
        "state",
        "code_challenge",
        "code_challenge_method",
    ]
    .iter()
    .map(|n| (n.to_string(), page.field(n)))
    .collect();
    let mut form: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    form.push(("decision", "approve"));
    let done = b.post("/oauth/authorize", &form).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let loc = url::Url::parse(&done.location()).unwrap();
    assert_eq!(loc.as_str().split('?').next(), Some(CB));
    let q: BTreeMap<String, String> = loc.query_pairs().into_owned().collect();
    assert_eq!(
        q.get("state").map(String::as_str),
        Some("st&ate"),
        "state comes back as sent"
    );
    q["code"].clone()
}

async fn token(base: &str, form: &[(&str, &str)]) -> (StatusCode, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{base}/oauth/token"))
        .form(form)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap())
}

/// An OAuth error answer: `status` and the `error` code, with the body in the message.
fn refused(got: (StatusCode, Value), status: StatusCode, error: &str, what: &str) {
    let (s, e) = got;
    assert_eq!(
        (s, e["error"].as_str()),
        (status, Some(error)),
        "{what}: {e}"
    );
}

async fn get_json(base: &str, path: &str, token: &str) -> (StatusCode, Value) {
    let resp = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (resp.status(), resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn apps_register_from_forms_and_json_and_bad_input_writes_nothing() {
    let inst = Instance::start("web", &[]).await;
    let http = reqwest::Client::new();
    let url = format!("{}/api/v1/apps", inst.base);
    let form = http
        .post(&url)
        .form(&[
            ("client_name", "Form App"),
            ("redirect_uris", "urn:ietf:wg:oauth:2.0:oob"),
            ("scopes", "read write:statuses"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200);
    let form: Value = form.json().await.unwrap();
    assert_eq!(form["name"], "Form App");
    assert_eq!(form["redirect_uri"], "urn:ietf:wg:oauth:2.0:oob");
    assert_eq!(form["scopes"], json!(["read", "write:statuses"]));
    assert!(
        form["client_id"].as_str().unwrap().len() >= 32
            && form["client_secret"].as_str().unwrap().len() >= 32
    );
    let stored: Vec<u8> = sqlx::query_scalar("SELECT client_secret_hash FROM oauth_apps")
        .fetch_one(&inst.pool)
        .await
        .unwrap();
    assert_ne!(
        stored,
        form["client_secret"].as_str().unwrap().as_bytes(),
        "only a hash is stored"
    );

    let j: Value = http
        .post(&url)
        .json(&json!({"client_name": "Json App", "redirect_uris": [CB, "elk://cb"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(j["redirect_uris"], json!([CB, "elk://cb"]));
    assert_eq!(j["scopes"], json!(["read"]), "Mastodon's default scope");

    for (body, why) in [
        (json!({"redirect_uris": CB}), "blank name"),
        (json!({"client_name": "x"}), "no redirect URI"),
        (
            json!({"client_name": "x", "redirect_uris": "/relative"}),
            "relative redirect URI",
        ),
        (
            json!({"client_name": "x", "redirect_uris": "https://a.example/#f"}),
            "fragment",
        ),
        (
            json!({"client_name": "x", "redirect_uris": CB, "scopes": "read admin:all"}),
            "unknown scope",
        ),
        (json!({"client_name": 5, "redirect_uris": CB}), "wrong type"),
    ] {
        let r = http.post(&url).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 422, "{why}");
        assert!(
            r.json::<Value>().await.unwrap()["error"].is_string(),
            "{why}"
        );
    }
    let r = http
        .post(&url)
        .header("content-type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422, "malformed JSON");
    assert_eq!(
        inst.count("SELECT count(*) FROM oauth_apps").await,
        2,
        "refusals write nothing"
    );
    inst.shutdown().await;
}

#[tokio::test]
async fn the_code_flow_with_pkce_and_every_refusal() {
    let inst = Instance::start("web", &[]).await;
    let base = inst.base.clone();
    user(&inst, "alice").await;
    let app = register(&base, "read write follow profile", json!(CB)).await;
    let verifier = "a".repeat(20) + "-._~" + &"Z9".repeat(12);
    let path = authorize_path(
        &app,
        "read write:statuses",
        &format!(
            "&code_challenge={}&code_challenge_method=S256",
            challenge(&verifier)
        ),
    );
    let mut b = Browser::new(&base);

    // The sign-in page: a wrong password is a 401 page, nothing signed in.
    let page = b.get(&path).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("to continue to <strong>Test App</strong>"),
        "{}",
        page.body
    );
    let set_cookie: Vec<_> = page
        .headers
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    assert!(
        set_cookie.iter().any(|c| c.starts_with("hollo_csrf=")
            && c.contains("HttpOnly")
            && c.contains("SameSite=Lax")
            && !c.contains("Secure")),
        "{set_cookie:?}"
    );
    let (csrf, next) = (page.field("csrf"), page.field("next"));
    let wrong = b
        .post(
            "/oauth/sign_in",
            &[
                ("csrf", &csrf),
                ("next", &next),
                ("username", "alice"),
                ("password", "wrong password"),
            ],
        )
        .await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("Wrong username or password"));
    assert!(!b.cookies.contains_key("hollo_session"));
    // Without the CSRF field the form is refused.
    let forged = b
        .post(
            "/oauth/sign_in",
            &[
                ("next", &next),
                ("username", "alice"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(forged.status, 403);
    assert!(!b.cookies.contains_key("hollo_session"));

    let code = approve(&mut b, &path, "alice").await;
    assert!(b.cookies.contains_key("hollo_session"));
    assert_eq!(
        inst.count("SELECT count(*) FROM web_sessions").await,
        1,
        "the session is in PostgreSQL"
    );

    let base_form = |extra: Vec<(&'static str, String)>| {
        let mut f = vec![
            ("grant_type", "authorization_code".to_string()),
            ("client_id", app.client_id.clone()),
            ("client_secret", app.client_secret.clone()),
            ("redirect_uri", CB.to_string()),
            ("code", code.clone()),
        ];
        for (k, v) in extra {
            f.retain(|(key, _)| *key != k);
            f.push((k, v));
        }
        f
    };
    let send = |f: Vec<(&'static str, String)>| {
        let base = base.clone();
        async move {
            let form: Vec<(&str, &str)> = f.iter().map(|(k, v)| (*k, v.as_str())).collect();
            token(&base, &form).await
        }
    };
    for (extra, status, error, what) in [
        (
            vec![],
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "no verifier",
        ),
        (
            vec![("code_verifier", "b".repeat(43))],
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "wrong verifier",
        ),
        (
            vec![
                ("code_verifier", verifier.clone()),
                ("client_secret", "wrong".into()),
            ],
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "wrong secret",
        ),
        (
            vec![
                ("code_verifier", verifier.clone()),
                ("redirect_uri", "https://evil.example/cb".into()),
            ],
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "another redirect_uri",
        ),
        (
            vec![
                ("code_verifier", verifier.clone()),
                ("grant_type", "password".into()),
            ],
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "password grant",
        ),
    ] {
        refused(send(base_form(extra)).await, status, error, what);
    }
    refused(
        token(&base, &[("client_id", &app.client_id)]).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
        "refused",
    );

    // The right verifier, as JSON with HTTP Basic client authentication.
    let resp = reqwest::Client::new()
        .post(format!("{base}/oauth/token"))
        .basic_auth(&app.client_id, Some(&app.client_secret))
        .json(&json!({"grant_type": "authorization_code", "code": code, "redirect_uri": CB, "code_verifier": verifier}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let t: Value = resp.json().await.unwrap();
    assert_eq!(t["token_type"], "Bearer");
    assert_eq!(t["scope"], "read write:statuses");
    let access = t["access_token"].as_str().unwrap().to_string();
    let (s, me) = get_json(&base, "/api/v1/accounts/verify_credentials", &access).await;
    assert_eq!(
        (s, me["username"].as_str()),
        (StatusCode::OK, Some("alice"))
    );
    let (s, a) = get_json(&base, "/api/v1/apps/verify_credentials", &access).await;
    assert_eq!((s, a["name"].as_str()), (StatusCode::OK, Some("Test App")));

    // A replayed code fails and revokes the token it bought.
    refused(
        send(base_form(vec![("code_verifier", verifier.clone())])).await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
        "refused",
    );
    let (s, _) = get_json(&base, "/api/v1/accounts/verify_credentials", &access).await;
    assert_eq!(
        s,
        StatusCode::UNAUTHORIZED,
        "the replay revoked the first token"
    );

    // An expired code (signed in already: straight to consent).
    let code2 = approve(&mut b, &authorize_path(&app, "read", ""), "alice").await;
    sqlx::query(
        "UPDATE oauth_codes SET expires_at = now() - interval '1 second' WHERE used_at IS NULL",
    )
    .execute(&inst.pool)
    .await
    .unwrap();
    refused(
        send(base_form(vec![("code", code2)])).await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
        "expired",
    );

    // A redirect URI the app did not register: an error page, never a redirect.
    let other = authorize_path(&app, "read", "")
        .replace(&urlencode(CB), &urlencode("https://evil.example/cb"));
    let page = b.get(&other).await;
    assert_eq!(page.status, 400);
    assert!(page.headers.get(LOCATION).is_none());
    assert!(page.body.contains("Wrong redirect URI"));
    let page = b
        .get("/oauth/authorize?response_type=code&client_id=nobody")
        .await;
    assert_eq!(page.status, 400);
    assert!(page.body.contains("Unknown app"));
    // A scope beyond the app's, or plain PKCE: sent back to the app as errors.
    let page = b.get(&authorize_path(&app, "push", "")).await;
    assert_eq!(page.status, 303);
    assert!(
        page.location()
            .starts_with(&format!("{CB}?error=invalid_scope")),
        "{}",
        page.location()
    );
    let page = b
        .get(&authorize_path(
            &app,
            "read",
            "&code_challenge=abc&code_challenge_method=plain",
        ))
        .await;
    assert!(
        page.location().contains("error=invalid_request"),
        "{}",
        page.location()
    );
    // Denying sends access_denied with the state.
    let page = b.get(&authorize_path(&app, "read", "")).await;
    let deny = b
        .post(
            "/oauth/authorize",
            &[
                ("csrf", &page.field("csrf")),
                ("client_id", &app.client_id),
                ("redirect_uri", CB),
                ("scope", "read"),
                ("state", "s1"),
                ("decision", "deny"),
            ],
        )
        .await;
    assert_eq!(
        deny.location(),
        format!(
            "{CB}?error=access_denied&error_description=the+resource+owner+denied+the+request&state=s1"
        )
    );
    inst.shutdown().await;
}

#[tokio::test]
async fn out_of_band_codes_client_credentials_revocation_and_scopes() {
    let inst = Instance::start("web", &[]).await;
    let base = inst.base.clone();
    let cli = user(&inst, "bob").await;
    let oob = "urn:ietf:wg:oauth:2.0:oob";
    let app = register(&base, "read write profile", json!(oob)).await;
    let mut b = Browser::new(&base);
    let page = b
        .get(&format!(
            "/oauth/authorize?response_type=code&client_id={}&redirect_uri={oob}&scope=profile",
            app.client_id
        ))
        .await;
    let signed = b
        .post(
            "/oauth/sign_in",
            &[
                ("csrf", &page.field("csrf")),
                ("next", &page.field("next")),
                ("username", "bob"),
                ("password", PASSWORD),
            ],
        )
        .await;
    let consent = b.get(&signed.location()).await;
    assert!(
        consent.body.contains("<li>profile</li>"),
        "{}",
        consent.body
    );
    let shown = b
        .post(
            "/oauth/authorize",
            &[
                ("csrf", &consent.field("csrf")),
                ("client_id", &app.client_id),
                ("redirect_uri", oob),
                ("scope", "profile"),
                ("decision", "approve"),
            ],
        )
        .await;
    assert_eq!(shown.status, 200);
    let start = shown.body.find("<code id=\"code\">").unwrap() + "<code id=\"code\">".len();
    let code = shown.body[start..start + 43].to_string();
    let (s, t) = token(
        &base,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &app.client_id),
            ("client_secret", &app.client_secret),
            ("redirect_uri", oob),
            ("code", &code),
        ],
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let profile = t["access_token"].as_str().unwrap().to_string();

    // profile reads verify_credentials and nothing else.
    let (s, _) = get_json(&base, "/api/v1/accounts/verify_credentials", &profile).await;
    assert_eq!(s, 200);
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{base}/api/v1/statuses"))
        .bearer_auth(&profile)
        .json(&json!({"status": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"],
        "This action is outside the authorized scopes"
    );
    let (s, _) = get_json(&base, "/api/v1/notifications", &profile).await;
    assert_eq!(s, 403);
    // The CLI token keeps every scope.
    let (s, _) = get_json(&base, "/api/v1/notifications", &cli).await;
    assert_eq!(s, 200);

    // Client credentials: an app token, no account.
    refused(
        token(
            &base,
            &[
                ("grant_type", "client_credentials"),
                ("client_id", &app.client_id),
                ("client_secret", &app.client_secret),
                ("scope", "push"),
            ],
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_scope",
        "refused",
    );
    let (s, t) = token(
        &base,
        &[
            ("grant_type", "client_credentials"),
            ("client_id", &app.client_id),
            ("client_secret", &app.client_secret),
        ],
    )
    .await;
    assert_eq!(
        (s, t["scope"].as_str()),
        (StatusCode::OK, Some("read")),
        "{t}"
    );
    let app_token = t["access_token"].as_str().unwrap().to_string();
    let (s, a) = get_json(&base, "/api/v1/apps/verify_credentials", &app_token).await;
    assert_eq!((s, a["name"].as_str()), (StatusCode::OK, Some("Test App")));
    let (s, e) = get_json(&base, "/api/v1/accounts/verify_credentials", &app_token).await;
    assert_eq!(
        (s, e["error"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("This method requires an authenticated user")
        )
    );
    let (s, _) = get_json(&base, "/api/v1/apps/verify_credentials", &cli).await;
    assert_eq!(s, 401, "a CLI token belongs to no app");

    // Revocation: another app cannot revoke; the owner can; unknown tokens are a quiet 200.
    let other = register(&base, "read", json!(CB)).await;
    let revoke = |app: &App, tok: &str| {
        let f = [
            ("client_id", app.client_id.clone()),
            ("client_secret", app.client_secret.clone()),
            ("token", tok.to_string()),
        ];
        let http = http.clone();
        let url = format!("{base}/oauth/revoke");
        async move { http.post(url).form(&f).send().await.unwrap().status() }
    };
    assert_eq!(revoke(&other, &profile).await, 200);
    assert_eq!(
        get_json(&base, "/api/v1/accounts/verify_credentials", &profile)
            .await
            .0,
        200,
        "still valid"
    );
    assert_eq!(revoke(&app, &profile).await, 200);
    assert_eq!(
        get_json(&base, "/api/v1/accounts/verify_credentials", &profile)
            .await
            .0,
        401,
        "revoked"
    );
    assert_eq!(revoke(&app, "no-such-token").await, 200);
    let bad = App {
        client_id: app.client_id.clone(),
        client_secret: "wrong".into(),
    };
    assert_eq!(revoke(&bad, &app_token).await, 401);

    // RFC 8414 metadata.
    let m: Value = http
        .get(format!("{base}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(m["issuer"], format!("{base}/"));
    assert_eq!(m["token_endpoint"], format!("{base}/oauth/token"));
    assert_eq!(m["code_challenge_methods_supported"], json!(["S256"]));
    assert!(
        m["scopes_supported"]
            .as_array()
            .unwrap()
            .contains(&json!("read:statuses"))
    );
    inst.shutdown().await;
}

#[tokio::test]
async fn failed_sign_ins_are_limited_per_account_and_per_address() {
    let inst = Instance::start("web", &[]).await;
    let base = inst.base.clone();
    user(&inst, "carol").await;
    let app = register(&base, "read", json!(CB)).await;
    let mut b = Browser::new(&base);
    let page = b.get(&authorize_path(&app, "read", "")).await;
    let (csrf, next) = (page.field("csrf"), page.field("next"));
    let try_as = async |b: &mut Browser, name: &str, pw: &str| {
        b.post(
            "/oauth/sign_in",
            &[
                ("csrf", &csrf),
                ("next", &next),
                ("username", name),
                ("password", pw),
            ],
        )
        .await
    };
    for _ in 0..5 {
        assert_eq!(try_as(&mut b, "carol", "wrong password").await.status, 401);
    }
    // Over the account's limit even the right password is refused, with Retry-After.
    let limited = try_as(&mut b, "carol", PASSWORD).await;
    assert_eq!(limited.status, 429);
    let retry: u64 = limited.headers[RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=900).contains(&retry), "{retry}");
    assert!(limited.body.contains("Too many failed sign-ins"));
    assert!(!b.cookies.contains_key("hollo_session"));
    // The address has 5 failures; 15 more on other names reach its limit of 20.
    for i in 0..15 {
        assert_eq!(
            try_as(&mut b, &format!("nobody{i}"), "wrong password")
                .await
                .status,
            401
        );
    }
    user(&inst, "dave").await;
    assert_eq!(
        try_as(&mut b, "dave", PASSWORD).await.status,
        429,
        "the address is over its limit"
    );
    // Once the window has passed (aged here in the database), sign-in works again.
    sqlx::query("UPDATE sign_in_failures SET at = at - interval '16 minutes'")
        .execute(&inst.pool)
        .await
        .unwrap();
    assert_eq!(try_as(&mut b, "carol", PASSWORD).await.status, 303);
    inst.shutdown().await;
}

/// R-API: 40 parallel wrong guesses were all checked against a limit of 5, and the
/// right password worked afterwards. Each attempt is now reserved before its password is
/// checked, so exactly the limit is checked, the rest are 429, and the account stays locked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_guesses_cannot_pass_the_limit_together() {
    // Enough hashing places that none of the 40 is refused as busy (503): the limit alone
    // decides.
    let inst = Instance::start("web", &[("PASSWORD_HASH_CONCURRENCY", "8")]).await;
    let base = inst.base.clone();
    user(&inst, "grace").await;
    let app = register(&base, "read", json!(CB)).await;
    let mut b = Browser::new(&base);
    let page = b.get(&authorize_path(&app, "read", "")).await;
    let (csrf, next) = (page.field("csrf"), page.field("next"));
    let attempt = |password: &'static str| {
        let (http, cookies) = (b.http.clone(), b.cookie_header());
        let form = [
            ("csrf", csrf.clone()),
            ("next", next.clone()),
            ("username", "grace".to_string()),
            ("password", password.to_string()),
        ];
        let url = format!("{base}/oauth/sign_in");
        async move {
            http.post(url)
                .header("cookie", cookies)
                .form(&form)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    let guesses: Vec<_> = (0..40)
        .map(|_| tokio::spawn(attempt("wrong password")))
        .collect();
    let mut statuses = BTreeMap::new();
    for g in guesses {
        *statuses.entry(g.await.unwrap().as_u16()).or_insert(0) += 1;
    }
    assert_eq!(
        statuses,
        BTreeMap::from([(401, 5), (429, 35)]),
        "exactly the limit of guesses is checked"
    );
    assert_eq!(
        inst.count("SELECT count(*) FROM sign_in_failures WHERE subject = 'account:grace'")
            .await,
        5
    );
    assert_eq!(
        attempt(PASSWORD).await.as_u16(),
        429,
        "the right password is refused while the account is locked"
    );
    inst.shutdown().await;
}

#[tokio::test]
async fn password_commands_hash_with_argon2id_and_refuse_bad_passwords() {
    let inst = Instance::start("web", &[]).await;
    let env = [
        ("DATABASE_URL", inst.url.as_str()),
        ("SECRET_KEY", support::node::SECRET),
        ("RUST_LOG", "warn"),
    ];
    let run_with_stdin = |args: &[&str], stdin: &str| {
        let mut child = support::process::command(args, &env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run_with_stdin(
        &["account", "create", "erin", "--password-stdin"],
        "short\n",
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("too short"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        inst.count("SELECT count(*) FROM accounts").await,
        0,
        "a refused password creates nothing"
    );

    let out = run_with_stdin(
        &["account", "create", "erin", "--password-stdin"],
        "first password\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim().len(),
        43,
        "the bearer token is still printed"
    );
    let hash: String =
        sqlx::query_scalar("SELECT password_hash FROM accounts WHERE username = 'erin'")
            .fetch_one(&inst.pool)
            .await
            .unwrap();
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    let hashing = passwords::Hashing::new(1);
    assert!(
        passwords::sign_in(
            &inst.pool,
            &hashing,
            &hashing.admit().unwrap(),
            "erin",
            "first password"
        )
        .await
        .unwrap()
        .is_some()
    );

    let out = run_with_stdin(&["account", "set-password", "erin"], "second password\r\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        passwords::sign_in(
            &inst.pool,
            &hashing,
            &hashing.admit().unwrap(),
            "erin",
            "first password"
        )
        .await
        .unwrap()
        .is_none()
    );
    assert!(
        passwords::sign_in(
            &inst.pool,
            &hashing,
            &hashing.admit().unwrap(),
            "ERIN",
            "second password"
        )
        .await
        .unwrap()
        .is_some()
    );
    let out = run_with_stdin(&["account", "set-password", "nobody"], "another password\n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no account named"));
    // Without --password-stdin the account has no password and cannot sign in.
    let out = run_with_stdin(&["account", "create", "frank"], "refused");
    assert!(out.status.success());
    assert!(
        passwords::sign_in(&inst.pool, &hashing, &hashing.admit().unwrap(), "frank", "")
            .await
            .unwrap()
            .is_none()
    );
    inst.shutdown().await;
}

/// What the operator's `spec.admin` Job runs (issue 63 item 7): `hollo account create NAME
/// --admin --password-env VAR --if-absent --no-token`. The password comes from the environment
/// (a Secret there), nothing is printed that grants access (no bearer token in a Job's log), and
/// a second run — every later reconcile may make one — leaves the account exactly as its owner
/// left it: a password they changed stays changed.
#[tokio::test]
async fn account_create_if_absent_takes_its_password_from_the_environment_and_never_resets_it() {
    let inst = Instance::start("web", &[]).await;
    let first = "first password from a Secret";
    let base = [
        ("DATABASE_URL", inst.url.as_str()),
        ("SECRET_KEY", support::node::SECRET),
        ("RUST_LOG", "warn"),
    ];
    let ensure = |env: &[(&str, &str)]| {
        let mut all = base.to_vec();
        all.extend_from_slice(env);
        support::process::run(
            &[
                "account",
                "create",
                "owner",
                "--admin",
                "--password-env",
                "FIRST_PASSWORD",
                "--if-absent",
                "--no-token",
            ],
            &all,
        )
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    let hashing = passwords::Hashing::new(1);
    let signs_in = |password: &'static str| {
        let (pool, hashing) = (&inst.pool, &hashing);
        async move {
            passwords::sign_in(pool, hashing, &hashing.admit().unwrap(), "owner", password)
                .await
                .unwrap()
                .is_some()
        }
    };

    // The variable unset, or a password the rules refuse: nothing is created.
    let out = ensure(&[]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("FIRST_PASSWORD"),
        "the error names the variable: {}",
        text(&out.stderr)
    );
    let out = ensure(&[("FIRST_PASSWORD", "short")]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("too short"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(inst.count("SELECT count(*) FROM accounts").await, 0);

    // Created: an administrator signing in with that password, and nothing on stdout.
    let out = ensure(&[("FIRST_PASSWORD", first)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "no bearer token is printed");
    assert!(!text(&out.stderr).contains(first), "{}", text(&out.stderr));
    let admin: bool = sqlx::query_scalar("SELECT admin FROM accounts WHERE username = 'owner'")
        .fetch_one(&inst.pool)
        .await
        .unwrap();
    assert!(admin);
    assert_eq!(
        inst.count("SELECT count(*) FROM account_tokens").await,
        0,
        "--no-token makes no token"
    );
    assert!(signs_in("first password from a Secret").await);

    // The owner changes the password; the next run leaves the account alone and succeeds.
    let out = support::process::command(&["account", "set-password", "owner"], &base)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"the owner's own password\n")?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    for password in [first, "another password in the Secret"] {
        let out = ensure(&[("FIRST_PASSWORD", password)]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "");
        assert!(
            text(&out.stderr).contains("exists"),
            "says it left the account alone: {}",
            text(&out.stderr)
        );
    }
    // Even a name differing only in case is the same account.
    let mut upper = base.to_vec();
    upper.push(("FIRST_PASSWORD", first));
    let out = support::process::run(
        &[
            "account",
            "create",
            "OWNER",
            "--password-env",
            "FIRST_PASSWORD",
            "--if-absent",
        ],
        &upper,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "no account made, so no token");
    assert_eq!(inst.count("SELECT count(*) FROM accounts").await, 1);
    assert!(signs_in("the owner's own password").await);
    assert!(!signs_in("first password from a Secret").await);

    // Without --if-absent an existing name is still an error; --no-token needs a password.
    let out = support::process::run(
        &[
            "account",
            "create",
            "owner",
            "--password-env",
            "FIRST_PASSWORD",
        ],
        &upper,
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("already exists"),
        "{}",
        text(&out.stderr)
    );
    let out = support::process::run(&["account", "create", "someone", "--no-token"], &base);
    assert!(!out.status.success());
    assert_eq!(inst.count("SELECT count(*) FROM accounts").await, 1);
    inst.shutdown().await;
}

#[tokio::test]
async fn behind_an_https_proxy_the_cookies_are_secure_and_the_forwarded_address_counts() {
    let inst = Instance::start("web", &[("BEHIND_PROXY", "true")]).await;
    let base = inst.base.clone();
    user(&inst, "gail").await;
    let app = register(&base, "read", json!(CB)).await;
    let http = reqwest::Client::new();
    let page = http
        .get(format!("{base}{}", authorize_path(&app, "read", "")))
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .unwrap();
    let cookie = page.headers()[SET_COOKIE].to_str().unwrap().to_string();
    assert!(
        cookie.ends_with("HttpOnly; SameSite=Lax; Secure"),
        "{cookie}"
    );
    let page = http
        .get(format!("{base}{}", authorize_path(&app, "read", "")))
        .send()
        .await
        .unwrap();
    assert!(
        !page.headers()[SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Secure"),
        "plain http through the proxy"
    );

    let mut b = Browser::new(&base);
    let page = b.get(&authorize_path(&app, "read", "")).await;
    let (csrf, next) = (page.field("csrf"), page.field("next"));
    // Each try names another account, so only the address limit (20) can apply.
    let fail_from = |addr: &'static str, name: String| {
        let (http, cookies) = (b.http.clone(), b.cookie_header());
        let form = [
            ("csrf", csrf.clone()),
            ("next", next.clone()),
            ("username", name),
            ("password", "wrong password".into()),
        ];
        let url = format!("{base}/oauth/sign_in");
        async move {
            http.post(url)
                .header("cookie", cookies)
                .header("x-forwarded-for", format!("203.0.113.7, {addr}"))
                .form(&form)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    for i in 0..20 {
        assert_eq!(
            fail_from("198.51.100.1", format!("n{i}")).await,
            401,
            "try {i}"
        );
    }
    assert_eq!(
        fail_from("198.51.100.1", "n20".into()).await,
        429,
        "the proxy-appended address is limited"
    );
    assert_eq!(
        fail_from("198.51.100.2", "n21".into()).await,
        401,
        "another client behind the proxy is not"
    );
    assert_eq!(
        inst.count("SELECT count(*) FROM sign_in_failures WHERE subject = 'address:203.0.113.7'")
            .await,
        0,
        "the client-written entry is not believed"
    );
    inst.shutdown().await;
}

// R-API, one test per attack, each tried first.

/// Script and local-file redirect URIs are refused at registration, nothing stored; native
/// apps' custom schemes and the out-of-band URN still register.
#[tokio::test]
async fn script_and_file_redirect_uris_are_refused_at_registration() {
    let inst = Instance::start("web", &[]).await;
    let base = inst.base.clone();
    for bad in [
        "javascript:alert(document.domain)",
        "JavaScript://x/%0aalert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "file:///etc/passwd",
    ] {
        let resp = reqwest::Client::new()
            .post(format!("{base}/api/v1/apps"))
            .json(&json!({"client_name": "Evil", "redirect_uris": [CB, bad], "scopes": "read"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 422, "{bad}");
    }
    assert_eq!(inst.count("SELECT count(*) FROM oauth_apps").await, 0);
    for ok in [
        "com.example.app:/cb",
        "elk://callback",
        "urn:ietf:wg:oauth:2.0:oob",
    ] {
        let resp = reqwest::Client::new()
            .post(format!("{base}/api/v1/apps"))
            .json(&json!({"client_name": "Native", "redirect_uris": ok, "scopes": "read"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{ok}");
    }
    inst.shutdown().await;
}

/// Anyone can register an app with any redirect URI: not signed in, a bad request is an error
/// page on our host, never a redirect to the app (an open redirect otherwise).
#[tokio::test]
async fn an_anonymous_bad_request_is_an_error_page_not_a_redirect() {
    let inst = Instance::start("web", &[]).await;
    let app = register(&inst.base, "read write", json!(CB)).await;
    let mut b = Browser::new(&inst.base);
    for bad in [
        authorize_path(&app, "read", "").replace("response_type=code", "response_type=token"),
        authorize_path(&app, "read", "").replace("response_type=code&", ""),
        authorize_path(&app, "push", ""),
        authorize_path(
            &app,
            "read",
            "&code_challenge=abc&code_challenge_method=plain",
        ),
    ] {
        let page = b.get(&bad).await;
        assert_eq!(page.status, 400, "{bad}: {}", page.body);
        assert!(page.headers.get(LOCATION).is_none(), "{bad}");
    }
    inst.shutdown().await;
}

/// A code issued without a challenge, traded with a verifier (a PKCE downgrade): refused;
/// without one it is a plain code flow.
#[tokio::test]
async fn a_verifier_for_a_code_issued_without_a_challenge_is_refused() {
    let inst = Instance::start("web", &[]).await;
    let base = inst.base.clone();
    user(&inst, "carol").await;
    let app = register(&base, "read write", json!(CB)).await;
    let mut b = Browser::new(&base);
    let code = approve(&mut b, &authorize_path(&app, "read", ""), "carol").await;
    let form = |verifier: Option<&str>| {
        let mut f = vec![
            ("grant_type", "authorization_code".to_string()),
            ("client_id", app.client_id.clone()),
            ("client_secret", app.client_secret.clone()),
            ("redirect_uri", CB.to_string()),
            ("code", code.clone()),
        ];
        if let Some(v) = verifier {
            f.push(("code_verifier", v.to_string()));
        }
        f
    };
    let with = form(Some(&"v".repeat(43)));
    let f: Vec<(&str, &str)> = with.iter().map(|(k, v)| (*k, v.as_str())).collect();
    refused(
        token(&base, &f).await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
        "a verifier without a challenge",
    );
    let without = form(None);
    let f: Vec<(&str, &str)> = without.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (s, t) = token(&base, &f).await;
    assert_eq!(s, 200, "{t}");
    inst.shutdown().await;
}

/// The consent form of a signed-in browser: a CSRF token planted in its `hollo_csrf` cookie
/// (by a sibling subdomain or a plain-http hop) does not pass, nor does the right token sent
/// from another origin; from our own origin it does.
#[tokio::test]
async fn forms_need_the_sessions_csrf_token_and_our_origin() {
    let inst = Instance::start("web", &[]).await;
    let base = inst.base.clone();
    user(&inst, "carol").await;
    let app = register(&base, "read write", json!(CB)).await;
    let mut b = Browser::new(&base);
    approve(&mut b, &authorize_path(&app, "read", ""), "carol").await;
    let page = b.get(&authorize_path(&app, "read", "")).await;
    assert!(page.body.contains("Authorize Test App"), "{}", page.body);
    let good_csrf = page.field("csrf");
    let planted = "planted-by-the-attacker-0123456789";
    b.cookies.insert("hollo_csrf".into(), planted.into());
    let consent = |csrf: &str| {
        vec![
            ("csrf", csrf.to_string()),
            ("client_id", app.client_id.clone()),
            ("redirect_uri", CB.to_string()),
            ("scope", "read".to_string()),
            ("decision", "approve".to_string()),
        ]
    };
    let forged = consent(planted);
    let f: Vec<(&str, &str)> = forged.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let page = b.post("/oauth/authorize", &f).await;
    assert_eq!(page.status, 403, "a planted CSRF cookie: {}", page.body);
    assert!(page.headers.get(LOCATION).is_none());
    let good = consent(&good_csrf);
    let f: Vec<(&str, &str)> = good.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let from = |origin: &str| {
        b.http
            .post(format!("{base}/oauth/authorize"))
            .header("cookie", b.cookie_header())
            .header("origin", origin)
            .form(&f)
            .send()
    };
    let resp = from("https://evil.example").await.unwrap();
    assert_eq!(resp.status(), 403, "another origin");
    let resp = from(&base).await.unwrap();
    assert_eq!(resp.status(), 303, "our origin");
    assert!(
        resp.headers()[LOCATION]
            .to_str()
            .unwrap()
            .starts_with(&format!("{CB}?code="))
    );
    inst.shutdown().await;
}

/// Setting a password ends every sign-in session and revokes the tokens apps got through
/// OAuth; the CLI token stays.
#[tokio::test]
async fn a_password_change_ends_sessions_and_revokes_app_tokens() {
    let inst = Instance::start("web", &[]).await;
    let base = inst.base.clone();
    let cli = user(&inst, "carol").await;
    let app = register(&base, "read write", json!(CB)).await;
    let mut b = Browser::new(&base);
    let code = approve(&mut b, &authorize_path(&app, "read", ""), "carol").await;
    let (s, t) = token(
        &base,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &app.client_id),
            ("client_secret", &app.client_secret),
            ("redirect_uri", CB),
            ("code", &code),
        ],
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let access = t["access_token"].as_str().unwrap().to_string();
    let me = |token: String| {
        let base = base.clone();
        async move {
            get_json(&base, "/api/v1/accounts/verify_credentials", &token)
                .await
                .0
        }
    };
    assert_eq!(me(access.clone()).await, StatusCode::OK);
    passwords::set(&inst.pool, "carol", "a brand new password")
        .await
        .unwrap();
    assert_eq!(
        me(access).await,
        StatusCode::UNAUTHORIZED,
        "the app's token is revoked"
    );
    assert_eq!(me(cli).await, StatusCode::OK, "the CLI token stays");
    assert_eq!(inst.count("SELECT count(*) FROM web_sessions").await, 0);
    let page = b.get(&authorize_path(&app, "read", "")).await;
    assert!(
        page.body.contains("action=\"/oauth/sign_in\""),
        "signed out by the change: {}",
        page.body
    );
    inst.shutdown().await;
}

/// `POST /auth/sign_out` (CSRF-checked) ends the browser's session and clears its cookie.
#[tokio::test]
async fn signing_out_ends_the_session() {
    let inst = Instance::start("web", &[]).await;
    let base = inst.base.clone();
    user(&inst, "carol").await;
    let app = register(&base, "read write", json!(CB)).await;
    let mut b = Browser::new(&base);
    approve(&mut b, &authorize_path(&app, "read", ""), "carol").await;
    assert_eq!(inst.count("SELECT count(*) FROM web_sessions").await, 1);
    let page = b.get(&authorize_path(&app, "read", "")).await;
    assert!(
        page.body.contains("action=\"/auth/sign_out\""),
        "{}",
        page.body
    );
    let csrf = page.field("csrf");
    let out = b.post("/auth/sign_out", &[("csrf", "wrong")]).await;
    assert_eq!(out.status, 403, "a forged sign-out");
    assert_eq!(inst.count("SELECT count(*) FROM web_sessions").await, 1);
    let out = b.post("/auth/sign_out", &[("csrf", &csrf)]).await;
    assert_eq!(out.status, 200, "{}", out.body);
    assert!(
        out.headers
            .get_all(SET_COOKIE)
            .iter()
            .any(|c| c.to_str().unwrap().starts_with("hollo_session=;")),
        "{:?}",
        out.headers
    );
    assert_eq!(inst.count("SELECT count(*) FROM web_sessions").await, 0);
    let page = b.get(&authorize_path(&app, "read", "")).await;
    assert!(
        page.body.contains("action=\"/oauth/sign_in\""),
        "{}",
        page.body
    );
    inst.shutdown().await;
}
