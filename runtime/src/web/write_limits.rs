//! Per-account write rate limits (R-API): a token bucket per account and action in
//! PostgreSQL, so every web node counts the same writes. A bucket holds up to `limit` tokens
//! and refills at `limit` per `period` (Mastodon's default for statuses: 300 per 3 hours); each
//! write takes one. Taking is one atomic statement: concurrent writes of one account cannot
//! both take the last token. An empty bucket answers 429 with `Retry-After` (seconds until a
//! token is back) and Mastodon's `X-RateLimit-*` headers.

use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use sqlx::PgPool;
use uuid::Uuid;

use crate::config::WriteLimits;

/// A refused write: 429 with the time until the next token.
#[derive(Debug)]
pub struct Limited {
    pub retry_after_seconds: u64,
    pub limit: u32,
}

impl IntoResponse for Limited {
    fn into_response(self) -> Response {
        let mut resp = super::ApiError::too_many_requests(
            "Too many requests: the write rate limit is reached, try again later",
        )
        .into_response();
        let h: &mut HeaderMap = resp.headers_mut();
        for (name, value) in [
            ("retry-after", self.retry_after_seconds.to_string()),
            ("x-ratelimit-limit", self.limit.to_string()),
            ("x-ratelimit-remaining", "0".to_string()),
        ] {
            if let Ok(v) = HeaderValue::from_str(&value) {
                h.insert(name, v);
            }
        }
        resp
    }
}

/// What a write can be.
#[derive(Clone, Copy, Debug)]
pub enum Action {
    /// `POST /api/v1/statuses` (a retried post answered from its `Idempotency-Key` included:
    /// the check runs before the key is looked up, and a client retrying that fast is one to
    /// slow down anyway).
    Status,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Status => "status",
        }
    }
}

/// Takes one token of `account`'s bucket for `action`, or says how long to wait.
pub async fn take(
    pool: &PgPool,
    limits: &WriteLimits,
    account: Uuid,
    action: Action,
) -> Result<Result<(), Limited>, sqlx::Error> {
    let (capacity, per_second) = match action {
        Action::Status => (
            f64::from(limits.statuses),
            f64::from(limits.statuses) / limits.period.as_secs_f64().max(1.0),
        ),
    };
    // The bucket's level now (what was left plus the refill since, capped), less one when
    // that leaves at least nothing; otherwise the row is left alone and the level is
    // returned instead, from the statement's snapshot (one round trip either way).
    let (taken, level): (Option<f64>, Option<f64>) = sqlx::query_as(
        "WITH taken AS (
             INSERT INTO write_limits AS w (account_id, action, tokens, updated_at)
             VALUES ($1, $2, $3 - 1, now())
             ON CONFLICT (account_id, action) DO UPDATE
                SET tokens = LEAST($3, w.tokens + $4 * extract(epoch FROM now() - w.updated_at)::float8) - 1,
                    updated_at = now()
              WHERE LEAST($3, w.tokens + $4 * extract(epoch FROM now() - w.updated_at)::float8) >= 1
             RETURNING tokens)
         SELECT (SELECT tokens FROM taken),
                (SELECT LEAST($3, tokens + $4 * extract(epoch FROM now() - updated_at)::float8)
                   FROM write_limits WHERE account_id = $1 AND action = $2)",
    )
    .bind(account)
    .bind(action.name())
    .bind(capacity)
    .bind(per_second)
    .fetch_one(pool)
    .await?;
    if taken.is_some() {
        return Ok(Ok(()));
    }
    let missing = 1.0 - level.unwrap_or(0.0);
    let wait = (missing.max(0.0) / per_second).ceil().max(1.0);
    Ok(Err(Limited {
        retry_after_seconds: wait as u64,
        limit: limits.statuses,
    }))
}
