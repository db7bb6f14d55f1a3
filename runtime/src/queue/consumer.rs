//! One queue's consumer loop: claim into free slots, run handlers, finish them, drain on stop.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::claim::{self, ClaimBranch};
use super::complete::{self, Completer, Held};
use super::message::{Claimed, QueueName};
use super::registry::{JobContext, Registry, TaskError, TaskKind};
use super::retry::Backoff;
pub use super::slots::InFlight;
use super::slots::Slots;
use crate::metrics::{KindMetrics, Metrics};

/// How long a refill claim may wait for more slots to free up. Handlers that finish together
/// (short or no-op ones) are then refilled by one claim instead of one round trip per slot; the
/// cost is at most this much extra wait for a message that is ready when a slot frees.
const CLAIM_COALESCE: Duration = Duration::from_millis(1);

/// Everything a consumer needs; built by the node for each queue.
#[derive(Clone)]
pub struct Consumer {
    pub queue: QueueName,
    /// The slot pool whose kinds this consumer runs (`None`: the queue's own slots).
    pub slot_pool: Option<&'static str>,
    pub limit: usize,
    pub registry: Registry,
    pub pool: PgPool,
    pub item_locks: Option<PgPool>,
    pub node: Uuid,
    pub lease: Duration,
    pub poll: Duration,
    pub metrics: Arc<Metrics>,
}

impl Consumer {
    /// The kinds this consumer claims: its queue's kinds in its slot pool. Its wake-ups
    /// (`node.rs`) and its claim's branches (by lane) both come from this one set.
    pub fn kinds(&self) -> impl Iterator<Item = &TaskKind> {
        self.registry.kinds_in(self.queue, self.slot_pool)
    }

    /// Runs until `stop` fires (stop claiming at once, R-SHUT-1), then waits for running
    /// handlers until `abort` fires; whatever still runs then is handed back without a
    /// recorded failure (R-SHUT-2).
    pub async fn run(
        self,
        wake: Arc<Notify>,
        stop: CancellationToken,
        abort: CancellationToken,
        in_flight: InFlight,
    ) {
        // Shared by every handler run: cloning the consumer (its registry of every kind) per
        // message was a map copy per message.
        let this = Arc::new(self);
        let held: Held = Default::default();
        let (completer, completer_task) =
            Completer::start(this.pool.clone(), this.queue, this.node, held.clone());
        let renewal_stop = CancellationToken::new();
        let renewal = tokio::spawn(renew_loop(this.clone(), held.clone(), renewal_stop.clone()));
        // Each kind with its metric series, looked up in the registry and the families once.
        let mut runs: HashMap<&'static str, Arc<KindRun>> = HashMap::new();

        let lanes: Vec<_> = this
            .registry
            .lanes_of(this.queue)
            .into_iter()
            .filter(|l| this.kinds().any(|k| k.spec.lane == Some(l.name)))
            .collect();
        let free_kinds: Vec<String> = this
            .kinds()
            .filter(|k| k.spec.lane.is_none())
            .map(|k| k.spec.name.to_string())
            .collect();
        let lane_kinds: HashMap<&'static str, Vec<String>> = lanes
            .iter()
            .map(|l| {
                (
                    l.name,
                    this.kinds()
                        .filter(|k| k.spec.lane == Some(l.name))
                        .map(|k| k.spec.name.to_string())
                        .collect(),
                )
            })
            .collect();
        let mut slots = Slots::new(this.limit, in_flight);
        let mut more = true;
        let mut backoff = Backoff::new(Duration::from_millis(100), this.poll);
        // When slots free up one by one, the refill claim waits until this instant (or until
        // every handler is done) so one query refills several slots instead of one per slot.
        let mut claim_at: Option<tokio::time::Instant> = None;
        // While a claim fills every free slot (the queue has a backlog) the consumer keeps its
        // connection for the next claim instead of returning it to the pool: sqlx checks a
        // connection with a round trip (a Sync and its ReadyForQuery) each time one goes back,
        // in a task of its own, which was one more round trip and two task wake-ups per claim
        // on both sides of the socket, in a loop that otherwise makes one. The first claim that
        // finds fewer messages than free slots (the backlog is gone) gives it back; so does a
        // failed claim (sqlx then discards a broken connection).
        let mut conn: Option<(PoolConnection<Postgres>, std::time::Instant)> = None;

        while !stop.is_cancelled() {
            let free = slots.free();
            let coalescing = match claim_at {
                Some(at) if more && free > 0 && free < this.limit => {
                    tokio::time::Instant::now() < at
                }
                _ => false,
            };
            if more && free > 0 && !coalescing {
                claim_at = None;
                let mut branches = vec![ClaimBranch {
                    kinds: free_kinds.clone(),
                    limit: free,
                }];
                for lane in &lanes {
                    branches.push(ClaimBranch {
                        kinds: lane_kinds.get(lane.name).cloned().unwrap_or_default(),
                        limit: slots.lane_room(lane),
                    });
                }
                // Finished messages ride along: their delete commits with this claim.
                let done = completer.take();
                match this.claim(conn.take(), free, &branches, &done).await {
                    Ok((c, claimed)) => {
                        complete::forget_all(&held, &done.iter().map(|d| d.0).collect::<Vec<_>>());
                        backoff.reset();
                        more = claimed.len() == free;
                        if more {
                            conn = Some((c, std::time::Instant::now()));
                        }
                        if let Ok(mut h) = held.lock() {
                            h.extend(claimed.iter().map(|m| m.id));
                        }
                        for msg in claimed {
                            let Some(run) = this.run_of(&mut runs, &msg.kind) else {
                                // Claims only ask for registered kinds, so this is a bug:
                                // hand it back untouched.
                                let _ =
                                    claim::release(&this.pool, this.queue, this.node, &[msg.id])
                                        .await;
                                forget(&held, msg.id);
                                continue;
                            };
                            let (id, name, lane) = (msg.id, run.kind.spec.name, run.kind.spec.lane);
                            let handler = this.clone().execute(
                                msg,
                                run,
                                completer.clone(),
                                held.clone(),
                                abort.clone(),
                            );
                            slots.spawn(id, name, lane, handler);
                        }
                    }
                    Err(e) => {
                        // Nothing of the statement happened: the batcher writes these instead.
                        completer.give_back(done);
                        tracing::warn!(queue = this.queue.as_str(), error = %e, "claim failed; retrying");
                        tokio::select! {
                            _ = stop.cancelled() => break,
                            _ = tokio::time::sleep(backoff.next_wait()) => {}
                        }
                        continue;
                    }
                }
            }
            // Wake-ups (NOTIFY, poll) claim at once: that is enqueue-to-start latency. Only
            // refills after finished handlers are coalesced, by at most CLAIM_COALESCE.
            let coalesce_until = claim_at.filter(|_| coalescing);
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = wake.notified() => {
                    // A refill already pending (due at most CLAIM_COALESCE from now) claims
                    // what the wake-up announces. Claiming at once as well cost one claim per
                    // NOTIFY — one per enqueued message — whenever the queue was backed up,
                    // with a slot or two free each time, for a start earlier by under
                    // CLAIM_COALESCE.
                    if coalesce_until.is_none() {
                        claim_at = None;
                    }
                    more = true;
                }
                _ = tokio::time::sleep(this.poll) => { more = true; claim_at = None; }
                _ = tokio::time::sleep_until(coalesce_until.unwrap_or_else(tokio::time::Instant::now)), if coalesce_until.is_some() => {
                    claim_at = None;
                }
                Some(lane_freed) = slots.join_next(), if !slots.is_empty() => {
                    // Every other handler that is already done too, so the next claim sees
                    // all the free slots at once.
                    let (others, lanes_freed) = slots.reap_finished();
                    let was_full = slots.len() + 1 + others >= this.limit;
                    // A freed lane slot may unblock lane work even if the queue looked empty.
                    if was_full || lane_freed || lanes_freed {
                        more = true;
                    }
                    if more && claim_at.is_none() {
                        claim_at = Some(tokio::time::Instant::now() + CLAIM_COALESCE);
                    }
                }
            }
        }

        drop(conn);
        // Draining: no new claims; wait for running handlers within the window.
        if !slots.is_empty() {
            tracing::info!(
                queue = this.queue.as_str(),
                running = slots.len(),
                "draining in-flight messages"
            );
        }
        loop {
            tokio::select! {
                done = slots.join_next() => if done.is_none() { break },
                _ = abort.cancelled() => {
                    let cut = slots.abort_all().await;
                    if !cut.is_empty() {
                        match claim::release(&this.pool, this.queue, this.node, &cut).await {
                            Ok(n) => tracing::warn!(queue = this.queue.as_str(), released = n, "drain window over: handed unfinished messages back"),
                            Err(e) => tracing::warn!(queue = this.queue.as_str(), error = %e, "drain window over; unfinished messages return when their lease ends"),
                        }
                        if let Ok(mut h) = held.lock() {
                            for id in &cut {
                                h.remove(id);
                            }
                        }
                    }
                    break;
                }
            }
        }
        drop(completer);
        let _ = completer_task.await;
        renewal_stop.cancel();
        let _ = renewal.await;
    }

    /// One claim (carrying the finished `done`) on the kept connection or a pooled one;
    /// returns the connection with the claimed messages, for the caller to keep or drop.
    async fn claim(
        &self,
        kept: Option<(PoolConnection<Postgres>, std::time::Instant)>,
        free: usize,
        branches: &[ClaimBranch],
        done: &[complete::Done],
    ) -> Result<(PoolConnection<Postgres>, Vec<Claimed>), sqlx::Error> {
        let mut conn = match kept {
            Some(kept) => checked(&self.pool, kept).await?,
            None => self.pool.acquire().await?,
        };
        let claimed = claim::claim_and_complete(
            &mut *conn, self.queue, self.node, self.lease, free, branches, done,
        )
        .await?;
        Ok((conn, claimed))
    }

    /// The registered kind `name` with its metric series, from `runs` or made once into it;
    /// `None` for a kind this node does not know.
    fn run_of(
        &self,
        runs: &mut HashMap<&'static str, Arc<KindRun>>,
        name: &str,
    ) -> Option<Arc<KindRun>> {
        if let Some(run) = runs.get(name) {
            return Some(run.clone());
        }
        let kind = self.registry.get(name)?;
        let run = Arc::new(KindRun {
            kind: kind.clone(),
            metrics: self.metrics.of_kind(self.queue.as_str(), kind.spec.name),
        });
        runs.insert(kind.spec.name, run.clone());
        Some(run)
    }

    /// Runs one message's handler under its time limit and records the outcome.
    async fn execute(
        self: Arc<Self>,
        msg: Claimed,
        run: Arc<KindRun>,
        completer: Completer,
        held: Held,
        abort: CancellationToken,
    ) {
        let KindRun { kind, metrics } = &*run;
        metrics.started.inc();
        metrics.in_flight.inc();
        let waited = (chrono::Utc::now() - msg.ready_at)
            .to_std()
            .unwrap_or_default();
        metrics.latency.observe(waited.as_secs_f64());

        let msg = Arc::new(msg);
        let ctx = JobContext::new(
            msg.clone(),
            self.pool.clone(),
            self.item_locks.clone(),
            self.node,
            abort,
        );
        let outcome =
            match tokio::time::timeout(kind.spec.timeout, (kind.handler)(ctx.clone())).await {
                Ok(r) => r,
                Err(_) => Err(TaskError::Transient(format!(
                    "timed out after {} s",
                    kind.spec.timeout.as_secs()
                ))),
            };
        metrics.in_flight.dec();
        let finish = match outcome {
            Ok(()) => {
                metrics.succeeded.inc();
                if ctx.completed_in_tx() {
                    forget(&held, msg.id);
                } else {
                    completer.complete(&msg);
                }
                return;
            }
            Err(TaskError::Permanent(e)) => {
                tracing::warn!(queue = self.queue.as_str(), kind = %msg.kind, id = %msg.id, error = %e, "message failed permanently");
                metrics.failed.inc();
                complete::fail(&self.pool, &msg, self.node, &e).await
            }
            Err(TaskError::Transient(e)) => {
                let failures = (msg.attempts + 1).max(1) as u32;
                match kind.spec.retry.next_delay(failures, rand::random::<f64>()) {
                    Some(delay) => {
                        tracing::info!(queue = self.queue.as_str(), kind = %msg.kind, id = %msg.id, attempt = failures,
                            retry_in_ms = delay.as_millis() as u64, error = %e, "message failed; will retry");
                        metrics.retried.inc();
                        complete::retry_later(&self.pool, &msg, self.node, delay, &e).await
                    }
                    None => {
                        tracing::warn!(queue = self.queue.as_str(), kind = %msg.kind, id = %msg.id, attempts = failures, error = %e,
                            "message failed; retry policy exhausted");
                        metrics.failed.inc();
                        complete::fail(&self.pool, &msg, self.node, &e).await
                    }
                }
            }
        };
        if let Err(e) = finish {
            // The lease ends and the message runs again; the failure just went unrecorded.
            tracing::warn!(queue = self.queue.as_str(), id = %msg.id, error = %e, "could not record the outcome");
        }
        forget(&held, msg.id);
    }
}

/// A registered kind as the claim loop hands it to [`Consumer::execute`].
struct KindRun {
    kind: TaskKind,
    metrics: KindMetrics,
}

/// A kept claim connection, checked like the pool checks an idle one
/// ([`crate::db::alive_if_idle`]): if that fails it is dropped (sqlx discards it) and another
/// is taken from the pool.
async fn checked(
    pool: &PgPool,
    (mut conn, since): (PoolConnection<Postgres>, std::time::Instant),
) -> Result<PoolConnection<Postgres>, sqlx::Error> {
    if crate::db::alive_if_idle(&mut conn, since.elapsed())
        .await
        .is_ok()
    {
        return Ok(conn);
    }
    drop(conn);
    pool.acquire().await
}

fn forget(held: &Held, id: Uuid) {
    if let Ok(mut h) = held.lock() {
        h.remove(&id);
    }
}

/// Renews every lease this consumer holds, a third of a lease apart, one statement each time.
async fn renew_loop(c: Arc<Consumer>, held: Held, stop: CancellationToken) {
    let every = c.lease / 3;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let ids: Vec<Uuid> = held
            .lock()
            .map(|h| h.iter().copied().collect())
            .unwrap_or_default();
        if ids.is_empty() {
            continue;
        }
        match claim::renew(&c.pool, c.queue, c.node, c.lease, &ids).await {
            Ok(n) if (n as usize) < ids.len() => {
                tracing::debug!(
                    queue = c.queue.as_str(),
                    held = ids.len(),
                    renewed = n,
                    "some leases were already finished or lost"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(queue = c.queue.as_str(), error = %e, "lease renewal failed"),
        }
    }
}
