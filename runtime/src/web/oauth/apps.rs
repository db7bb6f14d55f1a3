//! Client apps: `POST /api/v1/apps` registers one (name, redirect URIs, scopes, website) and
//! returns its client id and secret — the secret only then, as only its SHA-256 is stored;
//! `GET /api/v1/apps/verify_credentials` names the app of a token.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::form::{FormOrJson, OneOrMany};
use super::{OAuthError, OOB, same_bytes, tokens};
use crate::accounts::{hash_token, new_token};
use crate::scopes::Scopes;
use crate::web::{ApiError, AppState};

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct App {
    pub id: Uuid,
    pub name: String,
    pub website: Option<String>,
    pub redirect_uris: Vec<String>,
    pub scopes: String,
    pub client_id: String,
    pub client_secret_hash: Vec<u8>,
}

impl App {
    /// The registered scopes (a stored list is always valid; an unknown one grants nothing).
    pub fn scopes(&self) -> Scopes {
        Scopes::parse(&self.scopes).unwrap_or_default()
    }

    fn json(&self) -> Value {
        json!({
            "id": self.id.to_string(),
            "name": self.name,
            "website": self.website,
            "scopes": self.scopes().iter().collect::<Vec<_>>(),
            "redirect_uri": self.redirect_uris.join("\n"),
            "redirect_uris": self.redirect_uris,
            // Web Push is a non-goal (SPEC §12); apps read the field, so it is present.
            "vapid_key": "",
        })
    }
}

const COLUMNS: &str = "id, name, website, redirect_uris, scopes, client_id, client_secret_hash";

pub async fn by_client_id(
    pool: &sqlx::PgPool,
    client_id: &str,
) -> Result<Option<App>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM oauth_apps WHERE client_id = $1"
    )))
    .bind(client_id)
    .fetch_optional(pool)
    .await
}

pub async fn by_id(pool: &sqlx::PgPool, id: Uuid) -> Result<Option<App>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM oauth_apps WHERE id = $1"
    )))
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// The app whose credentials the request carries — `Authorization: Basic` or `client_id` and
/// `client_secret` in the body (RFC 6749 §2.3.1) — or `invalid_client` (401).
pub async fn authenticate(
    pool: &sqlx::PgPool,
    headers: &HeaderMap,
    client_id: Option<&str>,
    client_secret: Option<&str>,
) -> Result<App, OAuthError> {
    let (id, secret) = match super::basic_credentials(headers) {
        Some(pair) => pair,
        None => match (client_id, client_secret) {
            (Some(id), Some(secret)) => (id.to_owned(), secret.to_owned()),
            _ => return Err(OAuthError::invalid_client()),
        },
    };
    let app = by_client_id(pool, &id)
        .await?
        .ok_or_else(OAuthError::invalid_client)?;
    if !same_bytes(&hash_token(&secret), &app.client_secret_hash) {
        return Err(OAuthError::invalid_client());
    }
    Ok(app)
}

/// Schemes a browser runs or reads locally rather than hands to an app: a redirect to one is
/// script on our origin or a local file, never a way back to a client (Mastodon forbids
/// `data`, `vbscript` and `javascript` through Doorkeeper's `forbid_redirect_uri`; `file` and
/// the browser-internal ones go too), R-API.
const FORBIDDEN_SCHEMES: [&str; 7] = [
    "javascript",
    "data",
    "vbscript",
    "file",
    "about",
    "blob",
    "filesystem",
];

/// Whether `uri` may be registered: the out-of-band URN, or an absolute URI without a
/// fragment (RFC 6749 §3.1.2) whose scheme is not one of [`FORBIDDEN_SCHEMES`]. Custom
/// schemes (`elk://…`, `com.example.app:/cb`) are how native apps get codes back.
pub fn valid_redirect_uri(uri: &str) -> bool {
    if uri == OOB {
        return true;
    }
    // The URL parser lowercases the scheme and drops tabs and newlines, as browsers do, so
    // `JaVa\tScript:` is caught too.
    url::Url::parse(uri)
        .is_ok_and(|u| u.fragment().is_none() && !FORBIDDEN_SCHEMES.contains(&u.scheme()))
}

#[derive(Deserialize)]
pub struct NewApp {
    client_name: Option<String>,
    redirect_uris: Option<OneOrMany>,
    scopes: Option<String>,
    website: Option<String>,
}

/// Longest app name and website kept (Mastodon's limits are of this order).
const MAX_NAME: usize = 200;
const MAX_URI: usize = 2000;

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::unprocessable(format!("Validation failed: {}", message.into()))
}

pub async fn create(
    State(s): State<AppState>,
    FormOrJson(req): FormOrJson<NewApp>,
) -> Result<Json<Value>, ApiError> {
    let name = req.client_name.unwrap_or_default().trim().to_owned();
    if name.is_empty() {
        return Err(invalid("Application name can't be blank"));
    }
    if name.chars().count() > MAX_NAME {
        return Err(invalid(format!(
            "Application name is longer than {MAX_NAME} characters"
        )));
    }
    let uris = req.redirect_uris.map(|u| u.items()).unwrap_or_default();
    if uris.is_empty() {
        return Err(invalid("Redirect URI can't be blank"));
    }
    if let Some(bad) = uris
        .iter()
        .find(|u| u.len() > MAX_URI || !valid_redirect_uri(u))
    {
        return Err(invalid(format!(
            "Redirect URI {bad:?} must be an absolute URI without a fragment and not of a \
             javascript, data, vbscript or file scheme, or {OOB}"
        )));
    }
    let scopes = Scopes::parse(req.scopes.as_deref().unwrap_or(""))
        .map_err(|e| invalid(format!("Scopes: {e}")))?;
    let website = req
        .website
        .map(|w| w.trim().to_owned())
        .filter(|w| !w.is_empty());
    if let Some(w) = &website
        && (w.len() > MAX_URI
            || !url::Url::parse(w).is_ok_and(|u| matches!(u.scheme(), "http" | "https")))
    {
        return Err(invalid("Website must be an http(s) URL"));
    }
    let (client_id, client_secret) = (new_token(), new_token());
    let app = App {
        id: Uuid::now_v7(),
        name,
        website,
        redirect_uris: uris,
        scopes: scopes.to_string(),
        client_id,
        client_secret_hash: hash_token(&client_secret),
    };
    sqlx::query(
        "INSERT INTO oauth_apps (id, name, website, redirect_uris, scopes, client_id, client_secret_hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(app.id)
    .bind(&app.name)
    .bind(&app.website)
    .bind(&app.redirect_uris)
    .bind(&app.scopes)
    .bind(&app.client_id)
    .bind(&app.client_secret_hash)
    .execute(&s.pool)
    .await?;
    let mut body = app.json();
    body["client_id"] = json!(app.client_id);
    body["client_secret"] = json!(client_secret);
    body["client_secret_expires_at"] = json!(0);
    Ok(Json(body))
}

/// The app of the bearer token (a user's token or the app's own client-credentials token).
pub async fn verify_credentials(
    State(s): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let token = crate::web::auth::bearer_of(&headers)
        .ok_or_else(|| ApiError::unauthorized("The access token is invalid"))?;
    let app_id = tokens::app_of(&s.pool, token)
        .await?
        .ok_or_else(|| ApiError::unauthorized("The access token is invalid"))?;
    let app = by_id(&s.pool, app_id)
        .await?
        .ok_or_else(|| ApiError::unauthorized("The access token is invalid"))?;
    Ok(Json(app.json()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris() {
        for ok in [
            OOB,
            "https://app.example/cb",
            "http://127.0.0.1:8080/cb?x=1",
            "elk://callback",
            "com.tapbots.ivory:/oauth",
            "com.example.app:/cb",
        ] {
            assert!(valid_redirect_uri(ok), "{ok}");
        }
        for bad in [
            "/relative",
            "https://app.example/cb#frag",
            "not a uri",
            "",
            "javascript:alert(1)",
            "JavaScript://%0aalert(1)",
            "java\tscript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "vbscript:msgbox(1)",
            "file:///etc/passwd",
            "com.example.app:/cb#x",
        ] {
            assert!(!valid_redirect_uri(bad), "{bad}");
        }
    }
}
