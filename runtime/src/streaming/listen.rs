//! The streaming events a node hears on its one LISTEN connection (`db::listen`, channel
//! [`CHANNEL`]). Notifications carry event ids; the rows are read by id (a burst is read in one
//! query) and published to the node's [`Hub`]. Notifications sent while the connection was
//! down are lost, so after a reconnect the node reads every row newer than the ids it has seen
//! ([`Seen`]), skipping those it already published. Also the periodic deletion of old rows
//! ([`cleanup_loop`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

#[cfg(doc)]
use super::CHANNEL;
use super::{COLUMNS, Event, Hub};
use crate::db::listen::Heard;
use crate::queue::retry::Backoff;

/// Ids remembered to skip in a catch-up. Ids are assigned before their transactions commit, so
/// they can arrive out of order; an event whose id is older than all of these when it commits
/// during a disconnection is not caught up (it would have to stay uncommitted for this many
/// newer events).
const REMEMBERED: usize = 4096;

/// Most events read per catch-up or per burst.
const BATCH: i64 = 1000;

/// A catch-up reaches back at most this far: an older event is stale for a live stream.
const CATCH_UP_WINDOW_SECONDS: f64 = 300.0;

/// What the node has published: every id above `floor` it published is in `ids`. A catch-up
/// reads only ids above `floor`, so only those can be heard twice (once read, once notified on
/// the same connection); an id at or below it can only come by its one notification.
struct Seen {
    floor: i64,
    ids: BTreeSet<i64>,
}

impl Seen {
    /// Records an id; false if it was published already.
    fn insert(&mut self, id: i64) -> bool {
        if id <= self.floor {
            // Committed late (its id was taken before the floor's): new, and nothing reads
            // it again, so it need not be remembered.
            return true;
        }
        if !self.ids.insert(id) {
            return false;
        }
        while self.ids.len() > REMEMBERED {
            if let Some(first) = self.ids.pop_first() {
                self.floor = first;
            }
        }
        true
    }
}

/// Publishes what the node's LISTEN connection hears on [`CHANNEL`] (`db::listen`) until
/// `stop`. The first `Connected` starts from the newest stored event (a stream shows what
/// happens from now on); each later one, after a lost connection, catches up from the table.
/// A read that fails is retried with back-off as a catch-up: the rows stay until it succeeds.
pub async fn run(
    mut heard: mpsc::Receiver<Heard>,
    pool: PgPool,
    hub: Arc<Hub>,
    stop: CancellationToken,
) {
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
    let mut seen: Option<Seen> = None;
    // When a failed read is retried (as a catch-up).
    let mut retry_at: Option<tokio::time::Instant> = None;
    loop {
        let retry = async {
            match retry_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let heard = tokio::select! {
            _ = stop.cancelled() => return,
            h = heard.recv() => match h {
                Some(h) => h,
                None => return,
            },
            () = retry => Heard::Connected,
        };
        let catching_up = matches!(heard, Heard::Connected);
        let read = match heard {
            Heard::Connected => match &mut seen {
                None => newest(&pool).await.map(|floor| {
                    seen = Some(Seen {
                        floor,
                        ids: BTreeSet::new(),
                    })
                }),
                Some(seen) => catch_up(&pool, &hub, seen).await,
            },
            Heard::Payloads(payloads) => {
                // Not started yet (the newest event could not be read): a stream shows what
                // happens from its start, so these are before it.
                let Some(seen) = seen.as_mut() else { continue };
                let mut ids: Vec<i64> = payloads.iter().filter_map(|p| p.parse().ok()).collect();
                ids.retain(|id| !seen.ids.contains(id));
                if ids.is_empty() {
                    continue;
                }
                by_ids(&pool, &ids)
                    .await
                    .map(|events| publish(&hub, seen, events))
            }
        };
        match read {
            // Only a catch-up that worked covers every read that failed before it.
            Ok(()) if catching_up => {
                retry_at = None;
                backoff.reset();
            }
            Ok(()) => {}
            Err(e) if catching_up || retry_at.is_none() => {
                let delay = backoff.next_wait();
                tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64,
                    "reading streaming events failed; catching up after a wait");
                retry_at = Some(tokio::time::Instant::now() + delay);
            }
            Err(e) => tracing::warn!(error = %e, "reading streaming events failed"),
        }
    }
}

fn publish(hub: &Hub, seen: &mut Seen, events: Vec<Event>) {
    for e in events {
        if seen.insert(e.id) {
            hub.publish(e);
        }
    }
}

async fn newest(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM stream_events")
        .fetch_one(pool)
        .await
}

async fn by_ids(pool: &PgPool, ids: &[i64]) -> Result<Vec<Event>, sqlx::Error> {
    // One id, the usual burst, has a statement of its own: PostgreSQL planned `= ANY($1)`
    // anew on every run (its generic plan, costed for an array of unknown length, never beat
    // a custom one for a single id), and that planning took three times the read itself.
    if let [id] = ids {
        let sql = format!("SELECT {COLUMNS} FROM stream_events WHERE id = $1");
        return sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_all(pool)
            .await;
    }
    let sql = format!("SELECT {COLUMNS} FROM stream_events WHERE id = ANY($1) ORDER BY id");
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(ids)
        .fetch_all(pool)
        .await
}

/// Publishes the events stored above the floor that were not published yet, a batch at a
/// time until none is left.
async fn catch_up(pool: &PgPool, hub: &Hub, seen: &mut Seen) -> Result<(), sqlx::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM stream_events
          WHERE id > $1 AND NOT (id = ANY($2))
            AND created_at > now() - make_interval(secs => $3)
          ORDER BY id LIMIT $4"
    );
    let mut total = 0;
    loop {
        let known: Vec<i64> = seen.ids.iter().copied().collect();
        let events: Vec<Event> = sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(seen.floor)
            .bind(&known)
            .bind(CATCH_UP_WINDOW_SECONDS)
            .bind(BATCH)
            .fetch_all(pool)
            .await?;
        let n = events.len();
        total += n;
        publish(hub, seen, events);
        if n < BATCH as usize {
            break;
        }
    }
    if total > 0 {
        tracing::info!(
            events = total,
            "streaming events caught up after a reconnect"
        );
    }
    Ok(())
}

/// Deletes events older than `keep`: they were delivered or are of no use to a client that
/// was away that long (a reconnecting client reloads its timelines). Returns how many.
pub async fn cleanup(pool: &PgPool, keep: Duration) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query(
        "DELETE FROM stream_events WHERE created_at < now() - make_interval(secs => $1)",
    )
    .bind(keep.as_secs_f64())
    .execute(pool)
    .await?
    .rows_affected())
}

/// Deletes old events every `every` until `stop`. Every web node runs it: deleting twice is
/// harmless, and the table stays small wherever the streams are.
pub async fn cleanup_loop(pool: PgPool, every: Duration, keep: Duration, stop: CancellationToken) {
    loop {
        tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(every) => {} }
        match cleanup(&pool, keep).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(deleted = n, "old streaming events deleted"),
            Err(e) => tracing::warn!(error = %e, "deleting old streaming events failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_publishes_each_id_once_and_stays_bounded() {
        let mut s = Seen {
            floor: 10,
            ids: BTreeSet::new(),
        };
        assert!(
            s.insert(10),
            "at or below the floor: committed late, heard once"
        );
        assert!(s.insert(12));
        assert!(!s.insert(12));
        assert!(s.insert(11), "out of order but new");
        for id in 13..(13 + REMEMBERED as i64 + 5) {
            assert!(s.insert(id));
        }
        assert_eq!(s.ids.len(), REMEMBERED);
        assert!(s.floor > 12);
        assert!(!s.insert(s.floor + 1), "remembered above the floor");
    }
}
