//! `GET /oauth/authorize` and the pages behind it (RFC 6749 §4.1.1–4.1.2): a request whose
//! client or redirect URI is wrong gets an error page and never a redirect (§4.1.2.1); any
//! other bad parameter is sent back to the app's redirect URI as `error=…` — only for a
//! signed-in person: anyone can register an app with any redirect URI, so an anonymous request
//! that fails would make this page an open redirect (R-API); it gets the error page.
//! A person who is not signed in gets the sign-in page (`POST /oauth/sign_in`), then the consent page naming
//! the app and the scopes; approving (`POST /oauth/authorize`) redirects with `code` and
//! `state`, or shows the code for the out-of-band URI.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequest, Query, Request, State};
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use minijinja::context;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::apps::{self, App};
use super::form::FormOrJson;
use super::{OOB, codes, pages, session, throttle};
use crate::accounts::Account;
use crate::scopes::Scopes;
use crate::web::AppState;

/// The authorization request's parameters, as the query of `GET /oauth/authorize` and the
/// hidden fields of the consent form carry them. Serialized only as a query
/// (`serde_urlencoded`), which leaves out what is `None`.
#[derive(Deserialize, Serialize, Default, Clone)]
pub struct AuthorizeParams {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub scope: Option<String>,
    pub state: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    pub force_login: Option<String>,
}

/// A request that passed every check.
struct Checked {
    app: App,
    redirect_uri: String,
    scopes: Scopes,
    state: Option<String>,
    challenge: Option<String>,
}

pub(super) fn host(s: &AppState) -> String {
    s.public_origin
        .split_once("://")
        .map_or(s.public_origin.as_str(), |(_, h)| h)
        .to_string()
}

/// `""` is what an empty hidden field sends: no value.
fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// `redirect_uri` with `pairs` added to its query.
fn redirect_with(redirect_uri: &str, pairs: &[(&str, &str)]) -> Response {
    let Ok(mut url) = url::Url::parse(redirect_uri) else {
        return (StatusCode::BAD_REQUEST, "invalid redirect URI").into_response();
    };
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in pairs {
            q.append_pair(k, v);
        }
    }
    see_other(url.as_str())
}

pub(super) fn see_other(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(v) => (StatusCode::SEE_OTHER, [(header::LOCATION, v)]).into_response(),
        Err(_) => (StatusCode::BAD_REQUEST, "invalid redirect URI").into_response(),
    }
}

/// An RFC 6749 §4.1.2.1 error sent back to the app (or shown, for the out-of-band URI and
/// when the person is not signed in, see the module's comment).
fn refuse(
    s: &AppState,
    redirect_uri: &str,
    state: Option<&str>,
    code: &str,
    description: &str,
    may_redirect: bool,
) -> Response {
    if redirect_uri == OOB || !may_redirect {
        return pages::error(
            StatusCode::BAD_REQUEST,
            &host(s),
            "Authorization failed",
            &format!("{code}: {description}"),
        );
    }
    let mut pairs = vec![("error", code), ("error_description", description)];
    if let Some(state) = state {
        pairs.push(("state", state));
    }
    redirect_with(redirect_uri, &pairs)
}

/// Checks an authorization request; `may_redirect`: whether errors may go back to the app's
/// redirect URI (a signed-in person).
async fn check(s: &AppState, p: &AuthorizeParams, may_redirect: bool) -> Result<Checked, Response> {
    let h = host(s);
    let app = match given(&p.client_id) {
        Some(id) => apps::by_client_id(&s.pool, id)
            .await
            .map_err(|e| db_error(s, e))?,
        None => None,
    };
    let Some(app) = app else {
        return Err(pages::error(
            StatusCode::BAD_REQUEST,
            &h,
            "Unknown app",
            "invalid_client: this app is not registered here (unknown client_id).",
        ));
    };
    let redirect_uri = match given(&p.redirect_uri) {
        Some(uri) => uri.to_owned(),
        None if app.redirect_uris.len() == 1 => app.redirect_uris[0].clone(),
        None => String::new(),
    };
    // Registered before `valid_redirect_uri` refused `javascript:` and the like: not used.
    if !app.redirect_uris.contains(&redirect_uri) || !apps::valid_redirect_uri(&redirect_uri) {
        return Err(pages::error(
            StatusCode::BAD_REQUEST,
            &h,
            "Wrong redirect URI",
            "invalid_request: the redirect URI is not one this app registered, so this page will not send you there.",
        ));
    }
    let state = given(&p.state).map(str::to_owned);
    let st = state.as_deref();
    if given(&p.response_type) != Some("code") {
        return Err(refuse(
            s,
            &redirect_uri,
            st,
            "unsupported_response_type",
            "only response_type=code is supported",
            may_redirect,
        ));
    }
    let scopes = match Scopes::parse(p.scope.as_deref().unwrap_or("")) {
        Ok(scopes) if app.scopes().covers(&scopes) => scopes,
        Ok(_) => {
            return Err(refuse(
                s,
                &redirect_uri,
                st,
                "invalid_scope",
                "the requested scope is more than the app registered",
                may_redirect,
            ));
        }
        Err(e) => {
            return Err(refuse(
                s,
                &redirect_uri,
                st,
                "invalid_scope",
                &e.to_string(),
                may_redirect,
            ));
        }
    };
    let challenge = match (given(&p.code_challenge), given(&p.code_challenge_method)) {
        (None, None) => None,
        (Some(c), Some("S256"))
            if c.len() == 43
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            Some(c.to_owned())
        }
        (Some(_), Some("S256")) => {
            return Err(refuse(
                s,
                &redirect_uri,
                st,
                "invalid_request",
                "code_challenge must be a BASE64URL SHA-256 (43 characters)",
                may_redirect,
            ));
        }
        (Some(_), _) => {
            return Err(refuse(
                s,
                &redirect_uri,
                st,
                "invalid_request",
                "code_challenge_method must be S256 (plain is not supported)",
                may_redirect,
            ));
        }
        (None, Some(_)) => {
            return Err(refuse(
                s,
                &redirect_uri,
                st,
                "invalid_request",
                "code_challenge_method without code_challenge",
                may_redirect,
            ));
        }
    };
    Ok(Checked {
        app,
        redirect_uri,
        scopes,
        state,
        challenge,
    })
}

fn db_error(s: &AppState, e: sqlx::Error) -> Response {
    tracing::warn!(error = %e, "database error on an authorization page");
    pages::error(
        StatusCode::SERVICE_UNAVAILABLE,
        &host(s),
        "Try again later",
        "The server cannot reach its database right now.",
    )
}

/// Adds the CSRF cookie to a page when the browser has none yet.
pub(super) fn with_csrf(
    resp: Response,
    s: &AppState,
    headers: &HeaderMap,
    csrf: &str,
    new: bool,
) -> Response {
    if !new {
        return resp;
    }
    let age = session::SESSION_DAYS * 86_400;
    with_cookie(resp, s, headers, (session::CSRF_COOKIE, csrf, age))
}

/// The query that brings the browser back to the authorization request after signing in.
fn next_query(p: &AuthorizeParams) -> String {
    let p = AuthorizeParams {
        force_login: None,
        ..p.clone()
    };
    serde_urlencoded::to_string(&p).unwrap_or_default()
}

fn sign_in_page(
    s: &AppState,
    headers: &HeaderMap,
    status: StatusCode,
    app: Option<&App>,
    p: &AuthorizeParams,
    username: &str,
    error: Option<&str>,
) -> Response {
    let (csrf, new) = session::csrf_token(headers);
    // Without an app (the page of `GET /auth/sign_in`) the form carries no request.
    let next = if app.is_some() {
        next_query(p)
    } else {
        String::new()
    };
    let page = pages::render(
        status,
        "sign_in.html",
        context! {
            host => host(s), app_name => app.map(|a| a.name.clone()), csrf => &csrf,
            next, username, error,
        },
    );
    with_csrf(page, s, headers, &csrf, new)
}

fn consent_page(s: &AppState, headers: &HeaderMap, c: &Checked, account: &Account) -> Response {
    let (csrf, new) = session::csrf_token(headers);
    let page = pages::render(
        StatusCode::OK,
        "consent.html",
        context! {
            host => host(s), app_name => &c.app.name, website => &c.app.website, username => &account.username,
            scopes => c.scopes.iter().collect::<Vec<_>>(), scope => c.scopes.to_string(), csrf => &csrf,
            client_id => &c.app.client_id, redirect_uri => &c.redirect_uri, state => c.state.clone().unwrap_or_default(),
            code_challenge => c.challenge.clone().unwrap_or_default(),
            code_challenge_method => if c.challenge.is_some() { "S256" } else { "" },
        },
    );
    with_csrf(page, s, headers, &csrf, new)
}

/// This browser's signed-in account (if any) and the checked request: what both the
/// authorization page and its consent form start from.
async fn signed_in_and_checked(
    s: &AppState,
    headers: &HeaderMap,
    p: &AuthorizeParams,
) -> Result<(Option<Account>, Checked), Response> {
    let account = session::current(&s.pool, headers)
        .await
        .map_err(|e| db_error(s, e))?;
    let c = check(s, p, account.is_some()).await?;
    Ok((account, c))
}

/// `GET /oauth/authorize`.
pub async fn show(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(p): Query<AuthorizeParams>,
) -> Response {
    let (account, c) = match signed_in_and_checked(&s, &headers, &p).await {
        Ok(found) => found,
        Err(resp) => return resp,
    };
    let force = given(&p.force_login).is_some_and(|v| v == "true" || v == "1");
    match account {
        Some(account) if !force => consent_page(&s, &headers, &c, &account),
        _ => sign_in_page(&s, &headers, StatusCode::OK, Some(&c.app), &p, "", None),
    }
}

/// The checks every form POST passes first: `Origin` (when sent) is ours, and the CSRF field
/// is this browser's token.
/// A form of these pages, taken only from this server's own origin with the browser's CSRF
/// token; otherwise the handler never runs and the browser gets the refusal page.
pub struct Guarded<T>(pub T);

/// A form that carries the CSRF token of the page it was sent from.
pub trait CsrfForm {
    fn csrf(&self) -> Option<&str>;
}

/// The forms of these pages: each carries the token in its `csrf` field.
macro_rules! csrf_forms {
    ($($form:ty),+) => {
        $(impl CsrfForm for $form {
            fn csrf(&self) -> Option<&str> {
                self.csrf.as_deref()
            }
        })+
    };
}

csrf_forms!(SignInForm, DecisionForm, SignOutForm);

impl<T: DeserializeOwned + CsrfForm> FromRequest<AppState> for Guarded<T> {
    type Rejection = Response;

    async fn from_request(req: Request, s: &AppState) -> Result<Self, Response> {
        let headers = req.headers().clone();
        let FormOrJson(f) = FormOrJson::<T>::from_request(req, s)
            .await
            .map_err(IntoResponse::into_response)?;
        match form_refused(s, &headers, f.csrf()) {
            Some(refused) => Err(refused),
            None => Ok(Guarded(f)),
        }
    }
}

/// `resp` setting the cookie `name` (every cookie of ours has the same attributes, `Secure`
/// when the browser came over HTTPS).
fn with_cookie(
    mut resp: Response,
    s: &AppState,
    headers: &HeaderMap,
    (name, value, max_age_seconds): (&str, &str, i64),
) -> Response {
    if let Some(v) = session::set_cookie(
        name,
        value,
        max_age_seconds,
        session::over_https(s, headers),
    ) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

fn form_refused(s: &AppState, headers: &HeaderMap, csrf: Option<&str>) -> Option<Response> {
    if !session::origin_ok(&s.public_origin, headers) {
        return Some(pages::error(
            StatusCode::FORBIDDEN,
            &host(s),
            "Wrong origin",
            "This form was sent from another site.",
        ));
    }
    (!session::csrf_ok(headers, csrf)).then(|| form_expired(s))
}

fn form_expired(s: &AppState) -> Response {
    pages::error(
        StatusCode::FORBIDDEN,
        &host(s),
        "The form expired",
        "The form could not be verified (CSRF). Go back, reload the page and try again.",
    )
}

#[derive(Deserialize)]
pub struct SignInForm {
    csrf: Option<String>,
    next: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// `POST /oauth/sign_in`.
pub async fn sign_in(
    State(s): State<AppState>,
    headers: HeaderMap,
    ext: Extensions,
    Guarded(f): Guarded<SignInForm>,
) -> Response {
    let next = f.next.unwrap_or_default();
    let Ok(p) = serde_urlencoded::from_str::<AuthorizeParams>(&next) else {
        return pages::error(
            StatusCode::BAD_REQUEST,
            &host(&s),
            "Bad request",
            "The sign-in form did not carry a valid authorization request.",
        );
    };
    // Not signed in (yet): errors are shown, never sent to the app. No request at all: the
    // sign-in of `GET /auth/sign_in`, which ends on a page of its own.
    let c = if next.trim().is_empty() {
        None
    } else {
        match check(&s, &p, false).await {
            Ok(c) => Some(c),
            Err(resp) => return resp,
        }
    };
    let app = c.as_ref().map(|c| &c.app);
    let username = f
        .username
        .unwrap_or_default()
        .trim()
        .trim_start_matches('@')
        .to_owned();
    let password = f.password.unwrap_or_default();
    let peer = ext
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| a.ip());
    let address = throttle::client_address(s.behind_proxy, &headers, peer);
    // The sign-in page again, saying why, and when to retry where that is known.
    let again = |status: StatusCode, why: &str, retry_after: Option<u64>| {
        let mut resp = sign_in_page(&s, &headers, status, app, &p, &username, Some(why));
        if let Some(seconds) = retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        resp
    };
    // A place among the node's password checks first: when they are all taken, the attempt
    // is refused at once, before it is counted or its account read (R-API; the app
    // check above is one indexed read).
    let Ok(ticket) = s.hashing.admit() else {
        return again(
            StatusCode::SERVICE_UNAVAILABLE,
            "Too many sign-ins at once. Try again in a moment.",
            Some(crate::passwords::BUSY_RETRY_SECONDS),
        );
    };
    // The attempt is counted before the password is checked, so parallel guesses cannot
    // all pass the limit (R-API).
    let reservation = match throttle::reserve(&s.pool, &username, address).await {
        Err(e) => return db_error(&s, e),
        Ok(Ok(r)) => r,
        Ok(Err(wait)) => {
            let minutes = wait.div_ceil(60);
            let msg = format!(
                "Too many failed sign-ins. Try again in {minutes} minute{}.",
                if minutes == 1 { "" } else { "s" }
            );
            return again(StatusCode::TOO_MANY_REQUESTS, &msg, Some(wait));
        }
    };
    let account =
        crate::passwords::sign_in(&s.pool, &s.hashing, &ticket, &username, &password).await;
    drop(ticket);
    let account = match account {
        Ok(a) => a,
        // The reservation stays counted: the check may have run.
        Err(e) => return db_error(&s, e),
    };
    let Some(account) = account else {
        // The reservation is the failure: nothing more to record.
        return again(
            StatusCode::UNAUTHORIZED,
            "Wrong username or password.",
            None,
        );
    };
    let started = async {
        reservation.release(&s.pool).await?;
        throttle::clear_account(&s.pool, &username).await?;
        session::start(&s.pool, account.id).await
    };
    let token = match started.await {
        Ok(t) => t,
        Err(e) => return db_error(&s, e),
    };
    let then = match c {
        Some(_) => see_other(&format!("/oauth/authorize?{}", next_query(&p))),
        None => pages::render(
            StatusCode::OK,
            "signed_in.html",
            context! { host => host(&s), username => &account.username },
        ),
    };
    with_cookie(
        then,
        &s,
        &headers,
        (
            session::SESSION_COOKIE,
            &token,
            session::SESSION_DAYS * 86_400,
        ),
    )
}

#[derive(Deserialize)]
pub struct SignInQuery {
    /// The account the first-run page just created: named on the page.
    created: Option<String>,
}

/// `GET /auth/sign_in` (Mastodon's path): the sign-in page without an app, where the first-run
/// page sends its new owner. Signing in here ends on a page that says so; apps sign in through
/// `/oauth/authorize`.
pub async fn sign_in_form(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<SignInQuery>,
) -> Response {
    let created = q
        .created
        .filter(|name| crate::accounts::valid_username(name));
    let (csrf, new) = session::csrf_token(&headers);
    let page = pages::render(
        StatusCode::OK,
        "sign_in.html",
        context! {
            host => host(&s), csrf => &csrf, next => "",
            username => created.clone().unwrap_or_default(), created,
        },
    );
    with_csrf(page, &s, &headers, &csrf, new)
}

#[derive(Deserialize)]
pub struct DecisionForm {
    csrf: Option<String>,
    decision: Option<String>,
    client_id: Option<String>,
    redirect_uri: Option<String>,
    scope: Option<String>,
    state: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
}

/// `POST /oauth/authorize`: the consent form.
pub async fn decide(
    State(s): State<AppState>,
    headers: HeaderMap,
    Guarded(f): Guarded<DecisionForm>,
) -> Response {
    let p = AuthorizeParams {
        response_type: Some("code".into()),
        client_id: f.client_id,
        redirect_uri: f.redirect_uri,
        scope: f.scope,
        state: f.state,
        code_challenge: f.code_challenge,
        code_challenge_method: f.code_challenge_method,
        force_login: None,
    };
    let (account, c) = match signed_in_and_checked(&s, &headers, &p).await {
        Ok(found) => found,
        Err(resp) => return resp,
    };
    let Some(account) = account else {
        return see_other(&format!("/oauth/authorize?{}", next_query(&p)));
    };
    if f.decision.as_deref() != Some("approve") {
        return refuse(
            &s,
            &c.redirect_uri,
            c.state.as_deref(),
            "access_denied",
            "the resource owner denied the request",
            true,
        );
    }
    let grant = codes::Grant {
        app: c.app.id,
        account: account.id,
        redirect_uri: &c.redirect_uri,
        scopes: &c.scopes,
        code_challenge: c.challenge.as_deref(),
    };
    let code = match codes::create(&s.pool, &grant).await {
        Ok(code) => code,
        Err(e) => return db_error(&s, e),
    };
    if c.redirect_uri == OOB {
        return pages::render(
            StatusCode::OK,
            "code.html",
            context! {
                host => host(&s), app_name => &c.app.name, code, minutes => codes::LIFETIME_SECONDS / 60,
            },
        );
    }
    let mut pairs = vec![("code", code.as_str())];
    if let Some(state) = c.state.as_deref() {
        pairs.push(("state", state));
    }
    redirect_with(&c.redirect_uri, &pairs)
}

#[derive(Deserialize)]
pub struct SignOutForm {
    csrf: Option<String>,
}

/// `POST /auth/sign_out` (Mastodon's path; a form cannot send its `DELETE`): ends this
/// browser's session and clears its cookie. Guarded like every form (a forged sign-out is a
/// nuisance, not harmless: it can be chained with a forged sign-in).
pub async fn sign_out(
    State(s): State<AppState>,
    headers: HeaderMap,
    Guarded(_): Guarded<SignOutForm>,
) -> Response {
    if let Err(e) = session::end(&s.pool, &headers).await {
        return db_error(&s, e);
    }
    let page = pages::render(
        StatusCode::OK,
        "signed_out.html",
        context! { host => host(&s) },
    );
    with_cookie(page, &s, &headers, (session::SESSION_COOKIE, "", 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_query_carries_what_was_asked_and_nothing_else() {
        let p = AuthorizeParams {
            client_id: Some("app 1".into()),
            state: Some("s&t".into()),
            force_login: Some("true".into()),
            ..AuthorizeParams::default()
        };
        assert_eq!(next_query(&p), "client_id=app+1&state=s%26t");
        assert_eq!(next_query(&AuthorizeParams::default()), "");
    }
}
