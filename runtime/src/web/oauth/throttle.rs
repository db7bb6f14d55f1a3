//! Limits on failed sign-ins, per account and per client address, counted in PostgreSQL so
//! every web node enforces the same numbers. Past a limit, sign-in answers 429 with
//! `Retry-After` — even with the right password, or the limit would not stop guessing — until
//! the oldest failure in the window ages out. A successful sign-in clears its account's count.
//!
//! Each attempt is counted *before* its password is checked: [`reserve`] takes the attempt
//! under a per-subject advisory lock (check the count, insert the row, in one transaction),
//! so parallel guesses cannot all pass the check before any is recorded — 40 parallel wrong
//! guesses were all checked against a limit of 5 (R-API). A reservation stays as a
//! failure unless the password was right ([`Reservation::release`]); an attempt the node is
//! too busy to check is refused before it reserves anything.

use std::net::IpAddr;

use axum::http::HeaderMap;
use sqlx::PgPool;

/// The window failures are counted in.
pub const WINDOW_SECONDS: i64 = 15 * 60;
/// Failed sign-ins one account may take per window.
pub const PER_ACCOUNT: i64 = 5;
/// Failed sign-ins one address may make per window (several people may share one).
pub const PER_ADDRESS: i64 = 20;

pub fn account_subject(username: &str) -> String {
    format!("account:{}", username.to_lowercase())
}

pub fn address_subject(addr: IpAddr) -> String {
    format!("address:{addr}")
}

/// The client address: the peer, or behind a proxy the last `X-Forwarded-For` entry (the one
/// our proxy appended; earlier ones are whatever the client claimed).
pub fn client_address(
    behind_proxy: bool,
    headers: &HeaderMap,
    peer: Option<IpAddr>,
) -> Option<IpAddr> {
    if behind_proxy {
        // Only the very last entry is the proxy's: a garbled one is no address, never an
        // earlier (client-written) entry.
        return headers
            .get_all("x-forwarded-for")
            .iter()
            .next_back()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .and_then(|a| a.trim().parse().ok())
            .or(peer);
    }
    peer
}

/// Seconds until `subject` may try again, when it is over `limit`.
async fn wait_for(
    conn: &mut sqlx::PgConnection,
    subject: &str,
    limit: i64,
) -> Result<Option<u64>, sqlx::Error> {
    let (count, retry): (i64, Option<f64>) = sqlx::query_as(
        "SELECT count(*), EXTRACT(EPOCH FROM min(at) + make_interval(secs => $2) - now())::float8
           FROM sign_in_failures WHERE subject = $1 AND at > now() - make_interval(secs => $2)",
    )
    .bind(subject)
    .bind(WINDOW_SECONDS as f64)
    .fetch_one(&mut *conn)
    .await?;
    Ok((count >= limit).then(|| retry.unwrap_or(1.0).ceil().max(1.0) as u64))
}

/// One attempt, counted as a failure of its account and address until released.
#[derive(Debug)]
#[must_use = "an attempt is released, refunded or left counted as a failure"]
pub struct Reservation {
    ids: Vec<i64>,
}

impl Reservation {
    /// The password was right: the attempt is no failure (the account's count is then
    /// cleared by [`clear_account`]; the address keeps only its real failures).
    pub async fn release(self, pool: &PgPool) -> Result<(), sqlx::Error> {
        sqlx::query("DELETE FROM sign_in_failures WHERE id = ANY($1)")
            .bind(&self.ids)
            .execute(pool)
            .await?;
        Ok(())
    }
}

/// Takes one attempt for the account and the address, or says how many seconds to wait when
/// either is at its limit. Atomic across nodes: the subjects' advisory locks (taken in one
/// order, so two attempts cannot deadlock) are held from the count to the insert.
pub async fn reserve(
    pool: &PgPool,
    account: &str,
    address: Option<IpAddr>,
) -> Result<Result<Reservation, u64>, sqlx::Error> {
    let mut limits = vec![(account_subject(account), PER_ACCOUNT)];
    limits.extend(address.map(|a| (address_subject(a), PER_ADDRESS)));
    let subjects: Vec<String> = limits.iter().map(|(s, _)| s.clone()).collect();
    let mut tx = pool.begin().await?;
    // The inner ORDER BY fixes the order the locks are taken in (released at commit).
    sqlx::query(
        "SELECT count(pg_advisory_xact_lock(k)) FROM (
             SELECT DISTINCT hashtextextended('sign-in:' || s, 0) AS k
               FROM unnest($1::text[]) AS s ORDER BY k) AS ordered",
    )
    .bind(&subjects)
    .execute(&mut *tx)
    .await?;
    for (subject, limit) in &limits {
        if let Some(wait) = wait_for(&mut tx, subject, *limit).await? {
            tx.rollback().await?;
            return Ok(Err(wait));
        }
    }
    let ids: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO sign_in_failures (subject) SELECT unnest($1::text[]) RETURNING id",
    )
    .bind(&subjects)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    // Old rows go as new ones come.
    sqlx::query("DELETE FROM sign_in_failures WHERE at < now() - make_interval(secs => $1)")
        .bind(WINDOW_SECONDS as f64)
        .execute(pool)
        .await?;
    Ok(Ok(Reservation { ids }))
}

pub async fn clear_account(pool: &PgPool, account: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM sign_in_failures WHERE subject = $1")
        .bind(account_subject(account))
        .execute(pool)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_proxy_appended_address_counts_only_behind_a_proxy() {
        let peer: IpAddr = "10.0.0.9".parse().expect("ip");
        let mut h = HeaderMap::new();
        h.insert(
            "x-forwarded-for",
            HeaderValue::from_static("1.2.3.4, 5.6.7.8"),
        );
        assert_eq!(client_address(false, &h, Some(peer)), Some(peer));
        assert_eq!(client_address(true, &h, Some(peer)), "5.6.7.8".parse().ok());
        assert_eq!(
            client_address(true, &HeaderMap::new(), Some(peer)),
            Some(peer)
        );
    }
}
