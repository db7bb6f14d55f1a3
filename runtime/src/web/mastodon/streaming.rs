//! The streaming API's HTTP side (R-MAPI-5): `GET /api/v1/streaming` upgrades
//! to a WebSocket speaking Mastodon's protocol (`streaming::session`), and
//! `GET /api/v1/streaming/health` answers `OK` as Mastodon's streaming server does.
//!
//! The token may come as `Authorization: Bearer`, as `access_token` in the query, or as the
//! `Sec-WebSocket-Protocol` header (browsers cannot set headers on a WebSocket), which is then
//! echoed back as the chosen protocol, as clients expect. As on Mastodon every stream needs a
//! token: without a valid one the answer is 401 before any upgrade. Past `STREAMS_PER_TOKEN`
//! streams of the token or `STREAMS_MAX` of the node the answer is 429, also before the
//! upgrade (R-API).

use std::time::Duration;

use axum::Router;
use axum::extract::ws::{WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::extract::{Extension, RawQuery, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::super::auth::{Need, bearer_of, need};
use super::super::{ApiError, AppState};
use crate::accounts;
use crate::statuses::hidden::Hidden;
use crate::streaming::session::{Grants, Session};
use crate::streaming::streams::Stream;
use crate::web::server::ConnectionSlot;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/streaming", get(stream))
        .route("/api/v1/streaming/health", get(health))
}

/// `Retry-After` (seconds) of a stream refused for the per-token or per-node cap (R-API
/// item 6).
const REFUSED_RETRY_AFTER: &str = "10";

async fn health() -> &'static str {
    "OK"
}

#[derive(Deserialize, Default)]
struct Params {
    access_token: Option<String>,
    stream: Option<String>,
    tag: Option<String>,
    list: Option<String>,
}

/// The token and, if it came as the subprotocol, that protocol to echo.
fn token<'a>(headers: &'a HeaderMap, p: &'a Params) -> Option<(&'a str, bool)> {
    if let Some(t) = bearer_of(headers) {
        return Some((t, false));
    }
    if let Some(t) = p
        .access_token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        return Some((t, false));
    }
    // A client offering several protocols means the first; Mastodon's clients offer one.
    let offered = headers
        .get(header::SEC_WEBSOCKET_PROTOCOL)?
        .to_str()
        .ok()?
        .split(',')
        .map(str::trim)
        .find(|t| !t.is_empty())?;
    Some((offered, true))
}

fn grants_any(scopes: &crate::scopes::Scopes, n: &[&str]) -> bool {
    n.iter().any(|s| scopes.grants(s))
}

async fn stream(
    State(s): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    slot: Option<Extension<ConnectionSlot>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    // A query that does not parse names no token and no stream: the answer is the 401.
    let p: Params = query
        .as_deref()
        .and_then(|q| serde_urlencoded::from_str(q).ok())
        .unwrap_or_default();
    // Who is asking comes first: a request without a valid token is a 401 whether or not it
    // asked for an upgrade.
    let (token, as_protocol) =
        token(&headers, &p).ok_or_else(|| ApiError::unauthorized("Missing access token"))?;
    let (account, scopes) = accounts::by_token(&s.pool, token)
        .await?
        .ok_or_else(|| ApiError::unauthorized("Invalid access token"))?;
    let grants = Grants {
        statuses: grants_any(&scopes, need::ReadStatuses::ANY_OF),
        notifications: grants_any(&scopes, need::ReadNotifications::ANY_OF),
    };
    if !grants.statuses && !grants.notifications {
        return Err(ApiError::unauthorized(
            "Access token does not have the required scopes",
        ));
    }
    let mut streams = Vec::new();
    if let Some(name) = p.stream.as_deref().filter(|n| !n.is_empty()) {
        let st = Stream::parse(name, p.tag.as_deref(), p.list.as_deref())
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        if !grants.allow(&st) {
            return Err(ApiError::unauthorized(
                "Access token does not have the required scopes",
            ));
        }
        // Another account's list, or none: as Mastodon, not found.
        if let Stream::List(list) = st
            && !crate::lists::owned_by(&s.pool, list, account.id).await?
        {
            return Err(ApiError::record_not_found());
        }
        streams.push(st);
    }
    let upgrade = match upgrade {
        Ok(u) => u,
        Err(rejection) => return Ok(rejection.into_response()),
    };
    let hidden = Hidden::of(&s.pool, s.site().urls, Some(account.id)).await?;
    let filters = crate::filters::active::Active::of(&s.pool, Some(account.id)).await?;
    let token_hash = accounts::hash_token(token);
    let admission = match s.streams.admit(&token_hash) {
        Ok(admission) => admission,
        Err(refused) => {
            // A place frees when a stream closes; clients that reconnect in a loop are told
            // to wait rather than retry at once.
            let mut resp = ApiError::too_many_requests(refused.to_string()).into_response();
            resp.headers_mut().insert(
                header::RETRY_AFTER,
                axum::http::HeaderValue::from_static(REFUSED_RETRY_AFTER),
            );
            return Ok(resp);
        }
    };
    let upgrade = if as_protocol {
        upgrade.protocols([token.to_string()])
    } else {
        upgrade
    };
    let session = Box::new(Session {
        viewer: account.id,
        grants,
        streams,
        pool: s.pool.clone(),
        origin: s.public_origin.clone(),
        drive: s.drive.clone(),
        media_proxy: s.media_proxy.clone(),
        hub: s.streams.clone(),
        ping_every: ping_interval(s.http.idle_timeout),
        token_hash,
        admission,
        slot: slot.map(|Extension(slot)| Box::new(slot) as Box<dyn std::any::Any + Send + Sync>),
        hidden,
        filters,
        author_domains: Default::default(),
    });
    // Rendered payloads and the client's commands are small; Mastodon's are too. A client
    // sends only commands and pongs: a read buffer of 1 KiB (a bigger message is read in more
    // chunks, up to the limit) instead of tungstenite's 128 KiB, allocated up front for every
    // socket (at 10 000 streams 4 KiB was still a sixth of the node's heap).
    Ok(upgrade
        .read_buffer_size(1024)
        .max_message_size(64 * 1024)
        .on_upgrade(move |socket| session.run(socket)))
}

/// Pings often enough that a socket idle for the node's `HTTP_IDLE_TIMEOUT_SECONDS` is one
/// whose client is gone (its pongs are reads), at most every 30 s as Mastodon does.
fn ping_interval(idle: Duration) -> Duration {
    (idle / 3).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), v.parse().expect("header value"));
        }
        h
    }

    #[test]
    fn the_token_comes_from_the_header_the_query_or_the_protocol() {
        let none = Params::default();
        let q = Params {
            access_token: Some("q".into()),
            ..Params::default()
        };
        let h = headers(&[(header::AUTHORIZATION, "Bearer h")]);
        assert_eq!(token(&h, &q), Some(("h", false)));
        assert_eq!(token(&HeaderMap::new(), &q), Some(("q", false)));
        let p = headers(&[(header::SEC_WEBSOCKET_PROTOCOL, "tok, other")]);
        assert_eq!(token(&p, &none), Some(("tok", true)));
        assert_eq!(token(&HeaderMap::new(), &none), None);
    }

    #[test]
    fn pings_come_well_within_the_idle_timeout() {
        assert_eq!(
            ping_interval(Duration::from_secs(60)),
            Duration::from_secs(20)
        );
        assert_eq!(
            ping_interval(Duration::from_secs(600)),
            Duration::from_secs(30)
        );
        assert_eq!(
            ping_interval(Duration::from_secs(1)),
            Duration::from_secs(1)
        );
    }
}
