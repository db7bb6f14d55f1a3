//! Which signature scheme we sign deliveries with, per remote host, and the double knock
//! (R-AP-1): a host known to accept RFC 9421 (it signed to us with it, or took our RFC 9421
//! delivery) gets RFC 9421 first; if it answers 400 or 401 the same delivery is sent again at
//! once with draft-cavage, and the host is remembered as draft-cavage. A host we know nothing
//! of gets draft-cavage, which every server reads today. The knowledge lives in PostgreSQL
//! (`host_signature_schemes`), so every node learns from every other.

use std::time::Duration;

use sqlx::PgPool;
use url::Url;

use crate::federation::Federation;
use crate::federation::transport::fetch::{FetchError, PostOutcome};
use crate::federation::transport::signature::{Scheme, SigningKey, host_header};
use crate::federation::transport::ttl::TtlMap;

/// `host[:port]` of a URL, as the table keys it.
pub fn host_of(url: &str) -> Option<String> {
    Url::parse(url)
        .ok()
        .map(|u| host_header(&u).to_ascii_lowercase())
}

/// How long this process trusts what it read of a host's scheme.
const CACHE_TTL: Duration = Duration::from_secs(60);
/// Hosts remembered at most.
const CACHE_MAX: usize = 20_000;

/// What this process knows of hosts' schemes, for a minute: a fan-out to a thousand hosts
/// reads each host's row once a minute instead of once per delivery (R-AP-2). `remember`
/// writes through, so this process sees its own lessons at once and other nodes' within the
/// minute; until then a delivery knocks as before, and the double knock still gets it through.
pub struct SchemeCache(TtlMap<Option<Scheme>>);

impl Default for SchemeCache {
    fn default() -> Self {
        SchemeCache(TtlMap::new(CACHE_TTL, CACHE_MAX))
    }
}

/// The host's scheme, from this process's cache or PostgreSQL.
pub async fn known(
    pool: &PgPool,
    fed: &Federation,
    host: &str,
) -> Result<Option<Scheme>, sqlx::Error> {
    if let Some(s) = fed.schemes.0.get(host) {
        return Ok(s);
    }
    let s = read(pool, host).await?;
    fed.schemes.0.insert(host, s);
    Ok(s)
}

async fn read(pool: &PgPool, host: &str) -> Result<Option<Scheme>, sqlx::Error> {
    let s: Option<String> =
        sqlx::query_scalar("SELECT scheme FROM host_signature_schemes WHERE host = $1")
            .bind(host)
            .fetch_optional(pool)
            .await?;
    Ok(s.map(|s| {
        if s == "rfc9421" {
            Scheme::Rfc9421
        } else {
            Scheme::Cavage
        }
    }))
}

pub async fn remember(
    pool: &PgPool,
    fed: &Federation,
    host: &str,
    scheme: Scheme,
) -> Result<(), sqlx::Error> {
    fed.schemes.0.insert(host, Some(scheme));
    sqlx::query(
        "INSERT INTO host_signature_schemes (host, scheme) VALUES ($1, $2)
         ON CONFLICT (host) DO UPDATE SET scheme = EXCLUDED.scheme, updated_at = now()
          WHERE host_signature_schemes.scheme <> EXCLUDED.scheme",
    )
    .bind(host)
    .bind(scheme.as_str())
    .execute(pool)
    .await?;
    Ok(())
}

/// A host that signed an incoming request with RFC 9421 reads it too.
pub async fn learned_from_request(pool: &PgPool, fed: &Federation, key_id: &str) {
    if let Some(host) = host_of(key_id)
        && fed.schemes.0.get(&host) != Some(Some(Scheme::Rfc9421))
        && let Err(e) = remember(pool, fed, &host, Scheme::Rfc9421).await
    {
        tracing::warn!(host, error = %e, "cannot record the host's signature scheme");
    }
}

fn refused(out: &Result<PostOutcome, FetchError>) -> bool {
    matches!(out, Ok(o) if matches!(o.status.as_u16(), 400 | 401))
}

/// Posts a signed activity to an inbox with the double knock; returns the last answer and the
/// scheme it was signed with.
pub async fn post_activity(
    pool: &PgPool,
    fed: &Federation,
    inbox: &str,
    body: &[u8],
    key: &SigningKey,
) -> (Result<PostOutcome, FetchError>, Scheme) {
    let Some(host) = host_of(inbox) else {
        return (
            fed.fetch
                .post_activity(inbox, body, key, Scheme::Cavage)
                .await,
            Scheme::Cavage,
        );
    };
    // A failed look-up is no reason to fail the delivery: knock as for an unknown host.
    let known = known(pool, fed, &host).await.unwrap_or_else(|e| {
        tracing::warn!(host, error = %e, "cannot read the host's signature scheme");
        None
    });
    if known != Some(Scheme::Rfc9421) {
        return (
            fed.fetch
                .post_activity(inbox, body, key, Scheme::Cavage)
                .await,
            Scheme::Cavage,
        );
    }
    let first = fed
        .fetch
        .post_activity(inbox, body, key, Scheme::Rfc9421)
        .await;
    if !refused(&first) {
        return (first, Scheme::Rfc9421);
    }
    let second = fed
        .fetch
        .post_activity(inbox, body, key, Scheme::Cavage)
        .await;
    if matches!(&second, Ok(o) if o.status.is_success()) {
        tracing::info!(
            host,
            "host refused an RFC 9421 signature and took draft-cavage; remembered"
        );
        if let Err(e) = remember(pool, fed, &host, Scheme::Cavage).await {
            tracing::warn!(host, error = %e, "cannot record the host's signature scheme");
        }
    }
    (second, Scheme::Cavage)
}
