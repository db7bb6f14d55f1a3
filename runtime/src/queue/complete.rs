//! Finishing messages: batched completion, retry scheduling and giving up.
//!
//! Completions wait in a shared backlog. The consumer takes it into its next claim statement
//! (one transaction deletes the finished rows and leases new ones); when no claim comes within
//! a few milliseconds, the batcher writes it in one `DELETE`. Until either commits the row
//! stays leased by us (and its lease keeps being renewed), so a crash in between only means
//! the message runs again (at-least-once), never that it is lost; a statement that fails hands
//! its completions back to the backlog to be written again.

use sqlx::AssertSqlSafe;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::message::{Claimed, QueueName, fence};

/// Ids a node holds leases on: running, or finished and waiting for their batched delete.
pub type Held = Arc<Mutex<HashSet<Uuid>>>;

/// A finished message: its id and the claim (fencing token) it ran under.
pub type Done = (Uuid, i32);

const BATCH_WINDOW: Duration = Duration::from_millis(2);
const BATCH_MAX: usize = 1000;

/// Handle to a queue's completion backlog and its batcher.
#[derive(Clone)]
pub struct Completer {
    backlog: Arc<Mutex<Vec<Done>>>,
    /// Wake-ups for the batcher; it ends once every sender (every `Completer`) is gone.
    tx: mpsc::UnboundedSender<()>,
}

impl Completer {
    /// Starts the batcher; it ends once every `Completer` clone is dropped and the backlog is
    /// written.
    pub fn start(
        pool: PgPool,
        queue: QueueName,
        node: Uuid,
        held: Held,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let backlog: Arc<Mutex<Vec<Done>>> = Default::default();
        let task = tokio::spawn(run(pool, queue, node, held, backlog.clone(), rx));
        (Completer { backlog, tx }, task)
    }

    pub fn complete(&self, msg: &Claimed) {
        self.give_back(vec![(msg.id, msg.claims)]);
    }

    /// Takes the whole backlog, to be written by the caller's own statement. The caller must
    /// `give_back` whatever it could not write.
    pub fn take(&self) -> Vec<Done> {
        self.backlog
            .lock()
            .map(|mut b| std::mem::take(&mut *b))
            .unwrap_or_default()
    }

    /// Puts completions (back) in the backlog and wakes the batcher.
    pub fn give_back(&self, done: Vec<Done>) {
        if done.is_empty() {
            return;
        }
        // Only the first completion into an empty backlog wakes the batcher: it then groups
        // whatever follows within its window anyway, and a wake-up per completion cost a task
        // switch per message for nothing.
        let first = match self.backlog.lock() {
            Ok(mut b) => {
                let first = b.is_empty();
                b.extend(done);
                first
            }
            Err(_) => true,
        };
        if first {
            // The batcher only stops after every sender is gone, so this cannot fail while we
            // hold one.
            let _ = self.tx.send(());
        }
    }
}

async fn run(
    pool: PgPool,
    queue: QueueName,
    node: Uuid,
    held: Held,
    backlog: Arc<Mutex<Vec<Done>>>,
    mut rx: mpsc::UnboundedReceiver<()>,
) {
    let take = || {
        backlog
            .lock()
            .map(|mut b| std::mem::take(&mut *b))
            .unwrap_or_default()
    };
    loop {
        let mut open = rx.recv().await.is_some();
        if open {
            // Group what finishes within the window (a claim may take it all meanwhile). The
            // channel is not polled while the window runs, so the wake-ups sent meanwhile (the
            // first completion after each claim sends one) only queue up instead of waking
            // this task once per claim; they are read after it.
            tokio::time::sleep(BATCH_WINDOW).await;
            loop {
                match rx.try_recv() {
                    Ok(()) => {}
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
        }
        let all = take();
        for batch in all.chunks(BATCH_MAX) {
            write_batch(&pool, queue, node, &held, batch).await;
        }
        if !open {
            return;
        }
    }
}

async fn write_batch(pool: &PgPool, queue: QueueName, node: Uuid, held: &Held, batch: &[Done]) {
    let mut delay = Duration::from_millis(100);
    for attempt in 1..=5 {
        match delete_done(pool, queue, node, batch).await {
            Ok(_) => break,
            Err(e) if attempt < 5 => {
                tracing::warn!(queue = queue.as_str(), error = %e, "completion batch failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(e) => {
                // The rows stay leased and run again after the lease ends: at-least-once.
                tracing::error!(queue = queue.as_str(), error = %e, count = batch.len(),
                    "could not record completions; these messages will run again");
            }
        }
    }
    forget_all(held, &batch.iter().map(|b| b.0).collect::<Vec<_>>());
}

/// Deletes finished messages in one statement, each fenced on the claim it ran under (a row
/// re-claimed since, by us or another worker, is left alone). Returns how many were deleted.
pub async fn delete_done<'c>(
    db: impl sqlx::PgExecutor<'c>,
    queue: QueueName,
    node: Uuid,
    done: &[Done],
) -> Result<u64, sqlx::Error> {
    let sql = format!(
        "DELETE FROM {} m USING unnest($1::uuid[], $2::int[]) AS d(id, claims) WHERE {}",
        queue.table(),
        fence("m", "d.id", "d.claims", "$3")
    );
    Ok(sqlx::query(AssertSqlSafe(sql))
        .bind(done.iter().map(|d| d.0).collect::<Vec<Uuid>>())
        .bind(done.iter().map(|d| d.1).collect::<Vec<i32>>())
        .bind(node)
        .execute(db)
        .await?
        .rows_affected())
}

/// Drops ids from the set whose leases the renewal loop keeps alive.
pub fn forget_all(held: &Held, ids: &[Uuid]) {
    if let Ok(mut h) = held.lock() {
        for id in ids {
            h.remove(id);
        }
    }
}

/// Records a failure and schedules the next run `delay` from now, fenced on the claim.
pub async fn retry_later(
    pool: &PgPool,
    msg: &Claimed,
    node: Uuid,
    delay: Duration,
    error: &str,
) -> Result<bool, sqlx::Error> {
    let sql = format!(
        "UPDATE {} m SET attempts = attempts + 1, lease_owner = NULL,
                due = now() + $4 * interval '1 second', delay = (now() + $4 * interval '1 second') - created,
                ready_at = now() + $4 * interval '1 second',
                message = jsonb_set(message, '{{lastError}}', to_jsonb($5::text))
          WHERE {}",
        msg.queue.table(),
        fence("m", "$1", "$2", "$3")
    );
    let n = sqlx::query(AssertSqlSafe(sql))
        .bind(msg.id)
        .bind(msg.claims)
        .bind(node)
        .bind(delay.as_secs_f64())
        .bind(error)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(n == 1)
}

/// Gives up on a message: moves it to `hollo_failed_message` in one statement, fenced.
pub async fn fail(
    pool: &PgPool,
    msg: &Claimed,
    node: Uuid,
    error: &str,
) -> Result<bool, sqlx::Error> {
    let sql = format!(
        "WITH gone AS (
            DELETE FROM {} m WHERE {}
            RETURNING id, kind, message, attempts, created
         )
         INSERT INTO hollo_failed_message (id, queue, kind, message, attempts, error, created)
         SELECT id, $4, kind, message, attempts + 1, $5, created FROM gone
         ON CONFLICT (id) DO UPDATE SET attempts = EXCLUDED.attempts, error = EXCLUDED.error, failed_at = now()",
        msg.queue.table(),
        fence("m", "$1", "$2", "$3")
    );
    let n = sqlx::query(AssertSqlSafe(sql))
        .bind(msg.id)
        .bind(msg.claims)
        .bind(node)
        .bind(msg.queue.as_str())
        .bind(error)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(n == 1)
}
