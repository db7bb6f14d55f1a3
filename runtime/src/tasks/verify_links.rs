//! `hollo.verify-links.v1 {accountId}` (R-MAPI-6): verifies the `rel="me"` links of a local
//! account's profile fields (`federation::actors::links` has the rules and why).
//!
//! Pages are fetched outside any transaction (each through the guarded fetcher, one at a time,
//! at most four fields). Then one transaction re-reads the fields with the account row locked
//! (a concurrent `update_credentials` waits, or has committed and is seen), stores what was
//! found only for values still in the profile, completes the message fenced on this lease, and
//! — when the fields changed while the pages were fetched — queues the account again (a change
//! made while this message ran was coalesced into it, so it must not be lost). Idempotent: a
//! redelivered message fetches again and writes the same rows.

use std::sync::Arc;
use std::time::Duration;

use crate::federation::Federation;
use crate::federation::actors::links::{self, KIND, Payload};
use crate::federation::actors::profiles::Field;
use crate::queue::{JobContext, KindSpec, QueueName, Registry, RetryPolicy, TaskError};

pub fn spec() -> KindSpec {
    KindSpec::new(KIND, QueueName::Task)
        .retry(RetryPolicy::exponential(Duration::from_secs(5), 3))
        // Four pages, each bounded by the fetcher's own timeouts (20 s).
        .timeout(Duration::from_secs(120))
}

pub fn register(reg: &mut Registry, fed: Arc<Federation>) {
    reg.register(spec(), move |ctx: JobContext, p: Payload| {
        let fed = fed.clone();
        async move { handle(ctx, &fed, p).await }
    });
}

/// What one page said about one value.
enum Outcome {
    Verified,
    /// Read in full, without a link back.
    NotLinked,
    /// Not read (unreachable, refused, too large, not HTML): nothing changes.
    Unknown,
}

async fn fields_of(
    conn: &mut sqlx::PgConnection,
    account: uuid::Uuid,
    lock: bool,
) -> Result<Option<(String, Vec<Field>)>, sqlx::Error> {
    let row: Option<(String, sqlx::types::Json<Vec<Field>>)> = sqlx::query_as(if lock {
        "SELECT username, fields FROM accounts WHERE id = $1 FOR UPDATE"
    } else {
        "SELECT username, fields FROM accounts WHERE id = $1"
    })
    .bind(account)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map(|(u, f)| (u, f.0)))
}

async fn handle(ctx: JobContext, fed: &Federation, p: Payload) -> Result<(), TaskError> {
    let mut conn = ctx.pool.acquire().await?;
    let before = fields_of(&mut conn, p.account_id, false).await?;
    drop(conn);
    let mut found: Vec<(String, Outcome)> = Vec::new();
    if let Some((username, fields)) = &before {
        let targets = [
            format!("{}/@{username}", fed.origin),
            fed.actor_iri(username),
        ];
        for f in fields {
            let Some(url) = links::verifiable(&f.value) else {
                continue;
            };
            if found.iter().any(|(v, _)| v == &f.value) {
                continue;
            }
            let outcome = match fed
                .fetch
                .get_page(url.as_str(), links::MAX_PAGE_BYTES)
                .await
            {
                Ok((served, html)) if links::links_back(&html, &served, &targets) => {
                    Outcome::Verified
                }
                Ok(_) => Outcome::NotLinked,
                Err(e) => {
                    tracing::info!(account = %p.account_id, url = %url, error = %e, "a profile link could not be read");
                    Outcome::Unknown
                }
            };
            found.push((f.value.clone(), outcome));
        }
    }
    let mut tx = ctx.pool.begin().await?;
    let now = fields_of(&mut tx, p.account_id, true).await?;
    if !ctx.complete_in(&mut tx).await? {
        // Our lease was lost: another worker runs this message now; write nothing.
        return Ok(());
    }
    let Some((_, current)) = now else {
        // The account is gone (its rows went with it).
        return Ok(tx.commit().await?);
    };
    for (value, outcome) in &found {
        if !current.iter().any(|f| &f.value == value) {
            continue;
        }
        match outcome {
            Outcome::Verified => {
                sqlx::query(
                    "INSERT INTO account_field_verifications (account_id, value) VALUES ($1, $2)
                     ON CONFLICT (account_id, value) DO NOTHING",
                )
                .bind(p.account_id)
                .bind(value)
                .execute(&mut *tx)
                .await?;
            }
            Outcome::NotLinked => {
                sqlx::query(
                    "DELETE FROM account_field_verifications WHERE account_id = $1 AND value = $2",
                )
                .bind(p.account_id)
                .bind(value)
                .execute(&mut *tx)
                .await?;
            }
            Outcome::Unknown => {}
        }
    }
    let checked = before.map(|(_, f)| f).unwrap_or_default();
    if checked != current {
        links::request(&mut tx, p.account_id).await?;
    }
    tx.commit().await?;
    tracing::debug!(account = %p.account_id, checked = found.len(), "profile links verified");
    Ok(())
}
