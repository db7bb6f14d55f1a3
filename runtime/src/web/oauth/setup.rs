//! The first-run page, `/setup` (as upstream Hollo's): while no account exists, a form that
//! creates the owner — an administrator, as `hollo account create NAME --admin` makes — in a
//! browser, then sends it to the sign-in page. A server-rendered page like the sign-in pages
//! (no JavaScript, the same headers, the same CSRF and `Origin` checks on its form).
//!
//! Who may use it (R-API): someone on the server's own machine — the peer is loopback, this node
//! is not configured behind a proxy and no forwarding header says the request came from
//! elsewhere (behind a reverse proxy every request comes from loopback) — or anyone holding a
//! one-time token `hollo serve` printed in its log (`first_run`). Once any account exists the
//! page is the 404 of an unknown route, and its form creates nothing.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{Extensions, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use minijinja::context;
use serde::Deserialize;

use super::authorize::{CsrfForm, Guarded, host, see_other, with_csrf};
use super::{pages, session};
use crate::first_run;
use crate::web::{ApiError, AppState};

/// The headers a proxy adds to say whom it forwards for: any of them means the request did not
/// start on this machine, whatever the peer address.
const FORWARDING_HEADERS: &[&str] = &[
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-real-ip",
    "x-client-ip",
];

/// Whether the request comes from the server's own machine (see the module's comment). The
/// browser must also have asked for this server by a loopback name or `PUBLIC_URL`'s host: a
/// page of another site whose name was rebound to 127.0.0.1 (DNS rebinding) sends its own name
/// as `Host`.
pub fn from_this_machine(s: &AppState, headers: &HeaderMap, ext: &Extensions) -> bool {
    let loopback = ext
        .get::<ConnectInfo<SocketAddr>>()
        .is_some_and(|ConnectInfo(a)| a.ip().to_canonical().is_loopback());
    loopback
        && !s.behind_proxy
        && !FORWARDING_HEADERS
            .iter()
            .any(|name| headers.contains_key(*name))
        && asked_for_us(s, headers)
}

/// Whether the `Host` header names this server: a loopback name or address, or `PUBLIC_URL`'s
/// host (the port aside).
fn asked_for_us(s: &AppState, headers: &HeaderMap) -> bool {
    let Some(host) = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| format!("http://{h}").parse::<url::Url>().ok())
        .and_then(|u| u.host().map(|h| h.to_owned()))
    else {
        return false;
    };
    let ours = url::Url::parse(&s.public_origin)
        .ok()
        .and_then(|u| u.host().map(|h| h.to_owned()));
    match &host {
        url::Host::Domain(name) => {
            name.eq_ignore_ascii_case("localhost") || ours.as_ref() == Some(&host)
        }
        url::Host::Ipv4(ip) => ip.is_loopback() || ours.as_ref() == Some(&host),
        url::Host::Ipv6(ip) => ip.is_loopback() || ours.as_ref() == Some(&host),
    }
}

/// Why a request may not use the page, as the response to give; `None`: it may.
async fn refused(
    s: &AppState,
    headers: &HeaderMap,
    ext: &Extensions,
    token: Option<&str>,
) -> Option<Response> {
    let outcome = async {
        if first_run::any_account(&s.pool).await? {
            return Ok(Some(ApiError::not_found("not found").into_response()));
        }
        if from_this_machine(s, headers, ext) {
            return Ok(None);
        }
        let token = token.map(str::trim).unwrap_or_default();
        if first_run::setup_token_ok(&s.pool, token).await? {
            return Ok(None);
        }
        Ok(Some(pages::error(
            StatusCode::FORBIDDEN,
            &host(s),
            "Not from here",
            "This page opens only in a browser on the server's own machine, or with the \
             one-time link the server printed in its log when it started.",
        )))
    };
    outcome.await.unwrap_or_else(|e: sqlx::Error| {
        tracing::warn!(error = %e, "database error on the first-run page");
        Some(unavailable(s))
    })
}

fn unavailable(s: &AppState) -> Response {
    pages::error(
        StatusCode::SERVICE_UNAVAILABLE,
        &host(s),
        "Try again later",
        "The server cannot reach its database right now.",
    )
}

#[derive(Deserialize)]
pub struct SetupQuery {
    token: Option<String>,
}

/// The form, with what was typed (never the password) and why it was refused.
fn form_page(
    s: &AppState,
    headers: &HeaderMap,
    status: StatusCode,
    token: &str,
    username: &str,
    error: Option<&str>,
) -> Response {
    let (csrf, new) = session::csrf_token(headers);
    let page = pages::render(
        status,
        "setup.html",
        context! {
            host => host(s), csrf => &csrf, token, username, error,
            min_chars => crate::passwords::MIN_CHARS,
        },
    );
    with_csrf(page, s, headers, &csrf, new)
}

/// `GET /setup`.
pub async fn show(
    State(s): State<AppState>,
    headers: HeaderMap,
    ext: Extensions,
    Query(q): Query<SetupQuery>,
) -> Response {
    if let Some(resp) = refused(&s, &headers, &ext, q.token.as_deref()).await {
        return resp;
    }
    let token = q.token.unwrap_or_default();
    form_page(&s, &headers, StatusCode::OK, &token, "", None)
}

#[derive(Deserialize)]
pub struct SetupForm {
    csrf: Option<String>,
    token: Option<String>,
    username: Option<String>,
    password: Option<String>,
    password_confirmation: Option<String>,
}

impl CsrfForm for SetupForm {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

/// `POST /setup`: creates the owner, then sends the browser to the sign-in page.
pub async fn create(
    State(s): State<AppState>,
    headers: HeaderMap,
    ext: Extensions,
    Guarded(f): Guarded<SetupForm>,
) -> Response {
    let token = f.token.unwrap_or_default();
    if let Some(resp) = refused(&s, &headers, &ext, Some(&token)).await {
        return resp;
    }
    let username = f
        .username
        .unwrap_or_default()
        .trim()
        .trim_start_matches('@')
        .to_owned();
    let password = f.password.unwrap_or_default();
    let again = |why: &str| {
        form_page(
            &s,
            &headers,
            StatusCode::UNPROCESSABLE_ENTITY,
            &token,
            &username,
            Some(why),
        )
    };
    if !crate::accounts::valid_username(&username) {
        return again("Choose a username of 1 to 30 letters, digits or underscores.");
    }
    if let Err(e) = crate::passwords::check_rules(&password) {
        return again(&format!("That password cannot be used: {e}."));
    }
    if f.password_confirmation.as_deref() != Some(password.as_str()) {
        return again("The two passwords differ.");
    }
    let Some(fed) = s.fed.as_ref() else {
        // Accounts' private keys are encrypted with SECRET_KEY: none can be made without it.
        return pages::error(
            StatusCode::SERVICE_UNAVAILABLE,
            &host(&s),
            "Not configured",
            "This server has no secret key set, so it cannot create accounts yet.",
        );
    };
    // Hashing is bounded like sign-ins' password checks.
    let Ok(ticket) = s.hashing.admit() else {
        return again("The server is busy. Try again in a moment.");
    };
    let created = async {
        let hash = crate::passwords::hash(&password).await?;
        drop(ticket);
        crate::accounts::create_owner(&s.pool, fed.cipher(), &username, &hash).await
    };
    match created.await {
        Ok(Some(account)) => {
            tracing::info!(username = %account.username, "the owner account was created on the first-run page");
            let query = serde_urlencoded::to_string([("created", account.username.as_str())])
                .unwrap_or_default();
            see_other(&format!("/auth/sign_in?{query}"))
        }
        // Someone was first (another form, the CLI): the page is closed.
        Ok(None) => ApiError::not_found("not found").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "creating the owner on the first-run page failed");
            unavailable(&s)
        }
    }
}
