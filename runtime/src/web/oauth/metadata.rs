//! `/.well-known/oauth-authorization-server` (RFC 8414): where the endpoints are and what
//! they support, with Mastodon's `app_registration_endpoint` extension.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::web::AppState;

pub async fn metadata(State(s): State<AppState>) -> Json<Value> {
    let base = &s.public_origin;
    Json(json!({
        "issuer": format!("{base}/"),
        "authorization_endpoint": format!("{base}/oauth/authorize"),
        "token_endpoint": format!("{base}/oauth/token"),
        "revocation_endpoint": format!("{base}/oauth/revoke"),
        "app_registration_endpoint": format!("{base}/api/v1/apps"),
        "scopes_supported": crate::scopes::KNOWN,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "client_credentials"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
        "service_documentation": "https://docs.joinmastodon.org/methods/oauth/",
    }))
}
