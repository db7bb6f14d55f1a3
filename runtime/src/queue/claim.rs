//! Claiming with a lease, renewing leases, and handing messages back.
//!
//! A claim does not delete: it moves the row's `due` (and `delay`, so `created + delay` keeps
//! meaning "due") to the end of the lease and records the owner and a fencing token. If the
//! owner dies, the row simply becomes due again when the lease ends (R-Q-2); if it lives, one
//! statement per queue renews every lease it holds.

use sqlx::AssertSqlSafe;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::message::{Claimed, QueueName, fence};

/// One branch of a claim: up to `limit` due messages of these kinds.
#[derive(Clone, Debug)]
pub struct ClaimBranch {
    pub kinds: Vec<String>,
    pub limit: usize,
}

/// Claims up to `total` due messages in one statement, at most `branch.limit` from each branch
/// (lanes with a sub-limit get their own branch). Only *ready* rows are considered, so delayed
/// messages never take a slot (R-Q-3), and only kinds this process can run.
pub async fn claim(
    pool: &PgPool,
    queue: QueueName,
    node: Uuid,
    lease: Duration,
    total: usize,
    branches: &[ClaimBranch],
) -> Result<Vec<Claimed>, sqlx::Error> {
    claim_and_complete(pool, queue, node, lease, total, branches, &[]).await
}

/// [`claim`], and in the same statement (so the same transaction and the same commit) deletes
/// the listed finished messages, fenced on their claim exactly like the completion batcher.
/// One commit instead of two per refill; if the statement fails, nothing of it happened and
/// the caller hands the completions back to the batcher.
pub async fn claim_and_complete<'c>(
    db: impl sqlx::PgExecutor<'c>,
    queue: QueueName,
    node: Uuid,
    lease: Duration,
    total: usize,
    branches: &[ClaimBranch],
    done: &[(Uuid, i32)],
) -> Result<Vec<Claimed>, sqlx::Error> {
    let branches: Vec<&ClaimBranch> = branches
        .iter()
        .filter(|b| b.limit > 0 && !b.kinds.is_empty())
        .collect();
    if total == 0 || branches.is_empty() {
        // Nothing to claim, but the completions still have to be written.
        if !done.is_empty() {
            super::complete::delete_done(db, queue, node, done).await?;
        }
        return Ok(Vec::new());
    }
    let sql = statement(queue, total, &branches)?;
    let mut q = sqlx::query_as::<
        _,
        (
            Uuid,
            String,
            Option<serde_json::Value>,
            i32,
            i32,
            DateTime<Utc>,
            DateTime<Utc>,
        ),
    >(AssertSqlSafe(sql))
    .bind(total as i64)
    .bind(node)
    .bind(lease.as_secs_f64())
    .bind(done.iter().map(|d| d.0).collect::<Vec<Uuid>>())
    .bind(done.iter().map(|d| d.1).collect::<Vec<i32>>());
    for b in &branches {
        q = q.bind(b.limit.min(total) as i64);
    }
    for b in branches.iter().filter(|b| shares_a_scan(b)) {
        q = q.bind(&b.kinds);
    }
    let rows = q.fetch_all(db).await?;
    Ok(rows
        .into_iter()
        .map(
            |(id, kind, data, attempts, claims, created, ready_at)| Claimed {
                id,
                queue,
                kind,
                data: data.unwrap_or(serde_json::Value::Null),
                attempts,
                claims,
                created,
                ready_at,
            },
        )
        .collect())
}

/// The statement [`claim_and_complete`] runs for these (non-empty) branches. Parameters: $1
/// `total` (bigint), $2 the node (uuid), $3 the lease in seconds (float8), $4/$5 the finished
/// ids (uuid[]) and their claims (int[]), then each branch's limit (bigint), then the kinds
/// (text[]) of each branch of more than [`SCANS_PER_BRANCH`] kinds. Public so that a test (or
/// an operator) can EXPLAIN it.
pub fn statement(
    queue: QueueName,
    total: usize,
    branches: &[&ClaimBranch],
) -> Result<String, sqlx::Error> {
    if let Some(bad) = branches
        .iter()
        .flat_map(|b| &b.kinds)
        .find(|k| !is_plain_kind(k))
    {
        return Err(sqlx::Error::InvalidArgument(format!(
            "kind name {bad:?}: a claim names kinds in its SQL, so only letters, digits, \
             '.', '_', ':' and '-' are allowed"
        )));
    }
    let t = queue.table();
    // Each scan is its own CTE: PostgreSQL refuses FOR UPDATE directly under UNION. The
    // `done` CTE runs whether or not it is read (PostgreSQL always executes data-modifying
    // CTEs); it touches only rows leased to us, which the scans (due rows only) see only when
    // a lease ran out before its completion was written: then `pick` leaves the row out, so
    // the completion wins and the row is not modified twice.
    let mut ctes = vec![format!(
        "done AS (DELETE FROM {t} d USING unnest($4::uuid[], $5::int[]) AS f(id, claims)
                   WHERE {} RETURNING d.id)",
        fence("d", "f.id", "f.claims", "$2")
    )];
    let mut union = Vec::with_capacity(branches.len());
    let mut kinds_param = 6 + branches.len();
    for (i, b) in branches.iter().enumerate() {
        let limit = 6 + i;
        // The row-locking scan's LIMIT is a literal (see `scan_limit`): with a literal,
        // PostgreSQL's estimates for the cached generic plan match the custom ones and it
        // stops re-planning this statement after five runs, which was half the server time of
        // a small claim. A parameter LIMIT makes the generic plan look costlier, so every run
        // was planned anew. The branch's exact limit is applied on top.
        let scan = scan_limit(b.limit.min(total));
        let filters = if shares_a_scan(b) {
            kinds_param += 1;
            vec![format!("kind = ANY(${}::text[])", kinds_param - 1)]
        } else {
            b.kinds.iter().map(|k| format!("kind = '{k}'")).collect()
        };
        let scans: Vec<String> = filters
            .into_iter()
            .enumerate()
            .map(|(j, filter)| {
                ctes.push(format!(
                    "b{i}_{j} AS (SELECT id, due FROM {t} WHERE due <= now() AND {filter}
                              ORDER BY due LIMIT {scan} FOR UPDATE SKIP LOCKED)"
                ));
                format!("SELECT id, due FROM b{i}_{j}")
            })
            .collect();
        union.push(format!(
            "(SELECT id, due FROM ({}) b ORDER BY due LIMIT ${limit})",
            scans.join(" UNION ALL ")
        ));
    }
    Ok(format!(
        "WITH {}, pick AS (SELECT id FROM ({}) cand WHERE id NOT IN (SELECT id FROM done)
                   ORDER BY due LIMIT $1)
         UPDATE {t} m
            SET lease_owner = $2, claims = m.claims + 1,
                due = now() + $3 * interval '1 second',
                delay = (now() + $3 * interval '1 second') - m.created
           FROM pick WHERE m.id = pick.id
         RETURNING m.id, m.kind, m.message -> 'data', m.attempts, m.claims, m.created, m.ready_at",
        ctes.join(", "),
        union.join(" UNION ALL ")
    ))
}

/// Whether a branch's kinds share one scan, `kind = ANY($n)`. Up to [`SCANS_PER_BRANCH`] kinds,
/// each has a scan of its own, `kind = '…'`: it reads the `(kind, due)` index in `due` order
/// and never sees another kind's rows, however many are due (deliveries behind 200 000 due
/// inbox activities, or the other way round). Those kinds are literals, not parameters, so
/// that the plan PostgreSQL caches is made from each kind's own statistics: with a parameter,
/// a generic plan assumes every kind is equally common and reads `due` alone, filtering — the
/// walk this avoids. A branch of more kinds (the task queue's general slots: every task kind
/// but the lanes') keeps one parameterized scan: it takes most of what is due anyway, so
/// reading `due` in order is right for it, and a cached plan that does not depend on each
/// kind's statistics cannot flip to sorting a whole backlog when they are stale.
fn shares_a_scan(branch: &ClaimBranch) -> bool {
    branch.kinds.len() > SCANS_PER_BRANCH
}

/// One scan per kind up to this many kinds in a branch (each scan locks up to the branch's
/// limit, and a statement of many CTEs costs planning time).
const SCANS_PER_BRANCH: usize = 4;

/// Whether `kind` may stand in SQL as a literal as it is: registered kind names are constants
/// like `hollo.deliver.v1`, and nothing else reaches a claim.
fn is_plain_kind(kind: &str) -> bool {
    !kind.is_empty()
        && kind
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}

/// The LIMIT literal of a claim branch's row-locking scan for a branch of `limit` messages.
/// Exact up to [`EXACT_SCAN_LIMIT`] (a worker's slot counts: 10 activity, 4 task slots by
/// default), so a connection caches at most that many variants of a branch's statement;
/// above it rounded up to a power of two, which keeps the variants few. Rows locked beyond
/// the limit are wasted work: each lock is a tuple header write and a WAL record, and the
/// other workers' `SKIP LOCKED` scans step over them. Rounding 10 free slots up to 16 locked
/// 60 % more rows than a claim could take.
fn scan_limit(limit: usize) -> usize {
    if limit <= EXACT_SCAN_LIMIT {
        limit
    } else {
        limit.next_power_of_two()
    }
}

const EXACT_SCAN_LIMIT: usize = 32;

/// Extends the lease of every listed message this node still owns, in one statement. Returns
/// how many leases were extended (fewer than asked means some were lost to expiry).
pub async fn renew(
    pool: &PgPool,
    queue: QueueName,
    node: Uuid,
    lease: Duration,
    ids: &[Uuid],
) -> Result<u64, sqlx::Error> {
    update_owned(
        pool,
        queue,
        node,
        ids,
        "due = now() + $3 * interval '1 second', delay = (now() + $3 * interval '1 second') - created",
        Some(lease.as_secs_f64()),
    )
    .await
}

/// Hands messages back at once without recording a failure (drain deadline passed): another
/// worker may claim them immediately instead of waiting for the lease to end.
pub async fn release(
    pool: &PgPool,
    queue: QueueName,
    node: Uuid,
    ids: &[Uuid],
) -> Result<u64, sqlx::Error> {
    update_owned(
        pool,
        queue,
        node,
        ids,
        "lease_owner = NULL, due = now(), delay = now() - created, ready_at = now()",
        None,
    )
    .await
}

/// Sets `set` on the listed messages this node still owns (`seconds`, when given, bound at
/// `$3`), in one statement. Returns how many it changed.
async fn update_owned(
    pool: &PgPool,
    queue: QueueName,
    node: Uuid,
    ids: &[Uuid],
    set: &str,
    seconds: Option<f64>,
) -> Result<u64, sqlx::Error> {
    if ids.is_empty() {
        return Ok(0);
    }
    let sql = format!(
        "UPDATE {} SET {set}
          WHERE lease_owner = $1 AND id = ANY($2)",
        queue.table()
    );
    let mut query = sqlx::query(AssertSqlSafe(sql)).bind(node).bind(ids);
    if let Some(seconds) = seconds {
        query = query.bind(seconds);
    }
    Ok(query.execute(pool).await?.rows_affected())
}
