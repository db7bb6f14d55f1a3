//! `POST /oauth/token` (RFC 6749 §4.1.3 authorization code with PKCE, §4.4 client
//! credentials) and `POST /oauth/revoke` (RFC 7009). The client authenticates with HTTP Basic
//! or `client_id` + `client_secret` in the body; bodies are form-encoded or JSON.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::form::FormOrJson;
use super::{OAuthError, apps, codes, tokens};
use crate::scopes::Scopes;
use crate::web::AppState;

#[derive(Deserialize)]
pub struct TokenRequest {
    grant_type: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    code: Option<String>,
    redirect_uri: Option<String>,
    code_verifier: Option<String>,
    scope: Option<String>,
}

fn token_json(token: &str, scopes: &Scopes) -> Json<Value> {
    Json(json!({
        "access_token": token,
        "token_type": "Bearer",
        "scope": scopes.to_string(),
        "created_at": chrono::Utc::now().timestamp(),
    }))
}

pub async fn token(
    State(s): State<AppState>,
    headers: HeaderMap,
    FormOrJson(req): FormOrJson<TokenRequest>,
) -> Result<([(axum::http::HeaderName, &'static str); 1], Json<Value>), OAuthError> {
    let no_store = [(axum::http::header::CACHE_CONTROL, "no-store")];
    let Some(grant_type) = req.grant_type.as_deref() else {
        return Err(OAuthError::invalid_request("grant_type is required"));
    };
    if !matches!(grant_type, "authorization_code" | "client_credentials") {
        return Err(OAuthError::new(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "grant_type must be authorization_code or client_credentials",
        ));
    }
    let app = client(&s, &headers, &req.client_id, &req.client_secret).await?;
    if grant_type == "client_credentials" {
        let scopes = Scopes::parse(req.scope.as_deref().unwrap_or("")).map_err(|e| {
            OAuthError::new(StatusCode::BAD_REQUEST, "invalid_scope", e.to_string())
        })?;
        if !app.scopes().covers(&scopes) {
            return Err(OAuthError::new(
                StatusCode::BAD_REQUEST,
                "invalid_scope",
                "the requested scope is more than the app registered",
            ));
        }
        let token = tokens::issue(&s.pool, None, app.id, &scopes).await?;
        return Ok((no_store, token_json(&token, &scopes)));
    }
    let Some(code) = req.code.as_deref().filter(|c| !c.is_empty()) else {
        return Err(OAuthError::invalid_request("code is required"));
    };
    let (token, scopes) = codes::exchange(
        &s.pool,
        &app,
        code,
        req.redirect_uri.as_deref(),
        req.code_verifier.as_deref(),
    )
    .await?;
    Ok((no_store, token_json(&token, &scopes)))
}

/// The app the request authenticates as: HTTP Basic, or `client_id` and `client_secret`.
async fn client(
    s: &AppState,
    headers: &HeaderMap,
    id: &Option<String>,
    secret: &Option<String>,
) -> Result<apps::App, OAuthError> {
    apps::authenticate(&s.pool, headers, id.as_deref(), secret.as_deref()).await
}

#[derive(Deserialize)]
pub struct RevokeRequest {
    client_id: Option<String>,
    client_secret: Option<String>,
    token: Option<String>,
}

/// Revokes a token of the authenticated app. An unknown token, or another app's, is a 200 with
/// nothing done (RFC 7009 §2.2), so the endpoint tells nobody which tokens exist.
pub async fn revoke(
    State(s): State<AppState>,
    headers: HeaderMap,
    FormOrJson(req): FormOrJson<RevokeRequest>,
) -> Result<Json<Value>, OAuthError> {
    let app = client(&s, &headers, &req.client_id, &req.client_secret).await?;
    let Some(token) = req.token.as_deref().filter(|t| !t.is_empty()) else {
        return Err(OAuthError::invalid_request("token is required"));
    };
    tokens::revoke(&s.pool, app.id, token).await?;
    Ok(Json(json!({})))
}
