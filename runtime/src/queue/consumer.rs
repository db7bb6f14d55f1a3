//! One queue's consumer loop: claim into free slots, run handlers, finish them, drain on stop.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::claim::{self, ClaimBranch};
use super::complete::{self, Completer, Held};
use super::message::{Claimed, QueueName};
use super::registry::{JobContext, Registry, TaskError};
use super::retry::Backoff;
pub use super::slots::InFlight;
use super::slots::Slots;
use crate::metrics::Metrics;

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
        let held: Held = Default::default();
        let (completer, completer_task) =
            Completer::start(self.pool.clone(), self.queue, self.node, held.clone());
        let renewal_stop = CancellationToken::new();
        let renewal = tokio::spawn(renew_loop(self.clone(), held.clone(), renewal_stop.clone()));

        let lanes: Vec<_> = self
            .registry
            .lanes_of(self.queue)
            .into_iter()
            .filter(|l| {
                self.registry
                    .kinds_in(self.queue, self.slot_pool)
                    .any(|k| k.lane == Some(l.name))
            })
            .collect();
        let free_kinds: Vec<String> = self
            .registry
            .kinds_in(self.queue, self.slot_pool)
            .filter(|k| k.lane.is_none())
            .map(|k| k.name.to_string())
            .collect();
        let lane_kinds: HashMap<&'static str, Vec<String>> = lanes
            .iter()
            .map(|l| {
                (
                    l.name,
                    self.registry
                        .kinds_in(self.queue, self.slot_pool)
                        .filter(|k| k.lane == Some(l.name))
                        .map(|k| k.name.to_string())
                        .collect(),
                )
            })
            .collect();
        let mut slots = Slots::new(self.limit, in_flight);
        let mut more = true;
        let mut backoff = Backoff::new(Duration::from_millis(100), self.poll);
        // When slots free up one by one, the refill claim waits until this instant (or until
        // every handler is done) so one query refills several slots instead of one per slot.
        let mut claim_at: Option<tokio::time::Instant> = None;

        while !stop.is_cancelled() {
            let free = slots.free();
            let coalescing = match claim_at {
                Some(at) if more && free > 0 && free < self.limit => {
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
                match claim::claim_and_complete(
                    &self.pool, self.queue, self.node, self.lease, free, &branches, &done,
                )
                .await
                {
                    Ok(claimed) => {
                        complete::forget_all(&held, &done.iter().map(|d| d.0).collect::<Vec<_>>());
                        backoff.reset();
                        more = claimed.len() == free;
                        if let Ok(mut h) = held.lock() {
                            h.extend(claimed.iter().map(|m| m.id));
                        }
                        for msg in claimed {
                            let lane = self.registry.get(&msg.kind).and_then(|k| k.lane);
                            let (id, kind) = (msg.id, msg.kind.clone());
                            let handler = self.clone().execute(
                                msg,
                                completer.clone(),
                                held.clone(),
                                abort.clone(),
                            );
                            slots.spawn(id, kind, lane, handler);
                        }
                    }
                    Err(e) => {
                        // Nothing of the statement happened: the batcher writes these instead.
                        completer.give_back(done);
                        tracing::warn!(queue = self.queue.as_str(), error = %e, "claim failed; retrying");
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
                _ = tokio::time::sleep(self.poll) => { more = true; claim_at = None; }
                _ = tokio::time::sleep_until(coalesce_until.unwrap_or_else(tokio::time::Instant::now)), if coalesce_until.is_some() => {
                    claim_at = None;
                }
                Some(lane_freed) = slots.join_next(), if !slots.is_empty() => {
                    // Every other handler that is already done too, so the next claim sees
                    // all the free slots at once.
                    let (others, lanes_freed) = slots.reap_finished();
                    let was_full = slots.len() + 1 + others >= self.limit;
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

        // Draining: no new claims; wait for running handlers within the window.
        if !slots.is_empty() {
            tracing::info!(
                queue = self.queue.as_str(),
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
                        match claim::release(&self.pool, self.queue, self.node, &cut).await {
                            Ok(n) => tracing::warn!(queue = self.queue.as_str(), released = n, "drain window over: handed unfinished messages back"),
                            Err(e) => tracing::warn!(queue = self.queue.as_str(), error = %e, "drain window over; unfinished messages return when their lease ends"),
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

    /// Runs one message's handler under its time limit and records the outcome.
    async fn execute(
        self,
        msg: Claimed,
        completer: Completer,
        held: Held,
        abort: CancellationToken,
    ) {
        let Some(kind) = self.registry.get(&msg.kind).cloned() else {
            // Claims only ask for registered kinds, so this is a bug: hand it back untouched.
            let _ = claim::release(&self.pool, self.queue, self.node, &[msg.id]).await;
            return;
        };
        let labels = Metrics::labels(self.queue.as_str(), &msg.kind);
        self.metrics.started.get_or_create(&labels).inc();
        self.metrics.in_flight.get_or_create(&labels).inc();
        let waited = (chrono::Utc::now() - msg.ready_at)
            .to_std()
            .unwrap_or_default();
        self.metrics
            .latency
            .get_or_create(&labels)
            .observe(waited.as_secs_f64());

        let ctx = JobContext::new(
            msg.clone(),
            self.pool.clone(),
            self.item_locks.clone(),
            self.node,
            abort,
        );
        let outcome = match tokio::time::timeout(kind.timeout, (kind.handler)(ctx.clone())).await {
            Ok(r) => r,
            Err(_) => Err(TaskError::Transient(format!(
                "timed out after {} s",
                kind.timeout.as_secs()
            ))),
        };
        self.metrics.in_flight.get_or_create(&labels).dec();
        let finish = match outcome {
            Ok(()) => {
                self.metrics.succeeded.get_or_create(&labels).inc();
                if ctx.completed_in_tx() {
                    forget(&held, msg.id);
                } else {
                    completer.complete(&msg);
                }
                return;
            }
            Err(TaskError::Permanent(e)) => {
                tracing::warn!(queue = self.queue.as_str(), kind = %msg.kind, id = %msg.id, error = %e, "message failed permanently");
                self.metrics.failed.get_or_create(&labels).inc();
                complete::fail(&self.pool, &msg, self.node, &e).await
            }
            Err(TaskError::Transient(e)) => {
                let failures = (msg.attempts + 1).max(1) as u32;
                match kind.retry.next_delay(failures, rand::random::<f64>()) {
                    Some(delay) => {
                        tracing::info!(queue = self.queue.as_str(), kind = %msg.kind, id = %msg.id, attempt = failures,
                            retry_in_ms = delay.as_millis() as u64, error = %e, "message failed; will retry");
                        self.metrics.retried.get_or_create(&labels).inc();
                        complete::retry_later(&self.pool, &msg, self.node, delay, &e).await
                    }
                    None => {
                        tracing::warn!(queue = self.queue.as_str(), kind = %msg.kind, id = %msg.id, attempts = failures, error = %e,
                            "message failed; retry policy exhausted");
                        self.metrics.failed.get_or_create(&labels).inc();
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

fn forget(held: &Held, id: Uuid) {
    if let Ok(mut h) = held.lock() {
        h.remove(&id);
    }
}

/// Renews every lease this consumer holds, a third of a lease apart, one statement each time.
async fn renew_loop(c: Consumer, held: Held, stop: CancellationToken) {
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
