//! The typed task registry: each kind has a name (`hollo.<kind>.v1`), a queue, a payload type,
//! a handler, a retry policy, a time limit and optionally a *lane* (a sub-limit inside the
//! queue's slots, e.g. at most 2 reply collections of the 4 task slots) or a *slot pool* (slots of
//! its own beside the queue's, run by a consumer of its own: deliveries, which wait on the
//! network and would otherwise take every activity slot during a large fan-out).

use sqlx::AssertSqlSafe;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use sqlx::{PgConnection, PgPool};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::message::{Claimed, QueueName, fence};
use super::retry::RetryPolicy;

/// Why a run did not succeed. Both are *recorded* failures; a process exit never produces one.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// Worth retrying under the kind's policy.
    #[error("{0}")]
    Transient(String),
    /// Retrying cannot help (bad payload, 4xx from a remote): fail at once.
    #[error("{0}")]
    Permanent(String),
}

impl TaskError {
    pub fn transient(e: impl std::fmt::Display) -> Self {
        TaskError::Transient(e.to_string())
    }
}

impl From<sqlx::Error> for TaskError {
    fn from(e: sqlx::Error) -> Self {
        TaskError::Transient(format!("database: {e}"))
    }
}

impl From<anyhow::Error> for TaskError {
    fn from(e: anyhow::Error) -> Self {
        TaskError::Transient(format!("{e:#}"))
    }
}

/// What a handler gets: the message, the pools and the means to complete the message inside
/// its own transaction (so a database effect and the message's removal commit together).
#[derive(Clone)]
pub struct JobContext {
    /// Shared, not copied: a message's payload can be a whole ActivityPub document.
    pub msg: Arc<Claimed>,
    pub pool: PgPool,
    /// Connections reserved for item locks (R-DB-1); `None` on nodes that do not consume.
    pub item_locks: Option<PgPool>,
    pub node_id: Uuid,
    /// Fires when the node is shutting down and the drain window has run out.
    pub cancel: CancellationToken,
    completed: Arc<AtomicBool>,
}

impl JobContext {
    pub(crate) fn new(
        msg: Arc<Claimed>,
        pool: PgPool,
        item_locks: Option<PgPool>,
        node_id: Uuid,
        cancel: CancellationToken,
    ) -> Self {
        JobContext {
            msg,
            pool,
            item_locks,
            node_id,
            cancel,
            completed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Deletes the message inside the caller's transaction, fenced on this claim. Returns
    /// `false` when the lease was lost (another worker owns the message now): the caller must
    /// roll back instead of committing its effects.
    pub async fn complete_in(&self, conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
        let sql = format!(
            "DELETE FROM {} m WHERE {}",
            self.msg.queue.table(),
            fence("m", "$1", "$2", "$3")
        );
        let done = sqlx::query(AssertSqlSafe(sql))
            .bind(self.msg.id)
            .bind(self.msg.claims)
            .bind(self.node_id)
            .execute(&mut *conn)
            .await?
            .rows_affected()
            == 1;
        if done {
            self.completed.store(true, Ordering::SeqCst);
        }
        Ok(done)
    }

    /// [`complete_in`](Self::complete_in) as a CTE for a statement of the handler's own, so
    /// the completion costs no round trip of its own: `done AS (DELETE … RETURNING 1)`, fenced
    /// on this claim with parameters `$first`, `$first + 1` and `$first + 2` (bind
    /// [`completion_args`](Self::completion_args) there) and on `also`, an SQL condition of
    /// the caller (it may name its own CTEs, e.g. to lock its rows before this one). The caller
    /// reports whether `done` deleted the row with [`completed`](Self::completed).
    pub fn completion_cte(&self, first: usize, also: &str) -> String {
        format!(
            "done AS (DELETE FROM {} m WHERE {} AND {also} RETURNING 1)",
            self.msg.queue.table(),
            fence(
                "m",
                &format!("${first}"),
                &format!("${}", first + 1),
                &format!("${}", first + 2)
            )
        )
    }

    /// The id, claim count and owner that [`completion_cte`](Self::completion_cte)'s
    /// parameters take, in that order.
    pub fn completion_args(&self) -> (Uuid, i32, Uuid) {
        (self.msg.id, self.msg.claims, self.node_id)
    }

    /// Records what the handler's [`completion_cte`](Self::completion_cte) did: `true` when
    /// it deleted the message (the consumer then writes no completion of its own), `false`
    /// when the lease was lost and the caller must roll back. Returns `done`.
    pub fn completed(&self, done: bool) -> bool {
        if done {
            self.completed.store(true, Ordering::SeqCst);
        }
        done
    }

    pub(crate) fn completed_in_tx(&self) -> bool {
        self.completed.load(Ordering::SeqCst)
    }
}

pub type HandlerFn =
    Arc<dyn Fn(JobContext) -> BoxFuture<'static, Result<(), TaskError>> + Send + Sync>;

/// A registered kind: its static facts and the handler that runs its messages.
#[derive(Clone)]
pub struct TaskKind {
    pub spec: KindSpec,
    pub handler: HandlerFn,
}

/// A sub-limit inside one queue's slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lane {
    pub name: &'static str,
    pub queue: QueueName,
    pub limit: usize,
}

/// Slots of their own for some kinds of one queue, beside the queue's slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotPool {
    pub name: &'static str,
    pub queue: QueueName,
    pub limit: usize,
}

#[derive(Clone, Default)]
pub struct Registry {
    kinds: BTreeMap<&'static str, TaskKind>,
    lanes: Vec<Lane>,
    slot_pools: Vec<SlotPool>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn lane(mut self, name: &'static str, queue: QueueName, limit: usize) -> Self {
        self.lanes.retain(|l| l.name != name);
        self.lanes.push(Lane { name, queue, limit });
        self
    }

    /// Declares a pool of `limit` slots of its own on `queue` (see the module doc).
    pub fn slot_pool(mut self, name: &'static str, queue: QueueName, limit: usize) -> Self {
        self.slot_pools.retain(|p| p.name != name);
        self.slot_pools.push(SlotPool { name, queue, limit });
        self
    }

    /// Registers a kind whose payload is `P`. A payload that does not parse is a permanent
    /// failure: no retry can fix it.
    pub fn register<P, F, Fut>(&mut self, spec: KindSpec, handler: F)
    where
        P: DeserializeOwned + Send + 'static,
        F: Fn(JobContext, P) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), TaskError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let name = spec.name;
        let f: HandlerFn = Arc::new(move |ctx: JobContext| {
            let handler = handler.clone();
            Box::pin(async move {
                // Read from the stored value without copying it first.
                let payload = P::deserialize(&ctx.msg.data)
                    .map_err(|e| TaskError::Permanent(format!("malformed {name} payload: {e}")))?;
                handler(ctx, payload).await
            })
        });
        self.kinds.insert(spec.name, TaskKind { spec, handler: f });
    }

    pub fn get(&self, name: &str) -> Option<&TaskKind> {
        self.kinds.get(name)
    }

    pub fn kinds_of(&self, queue: QueueName) -> impl Iterator<Item = &TaskKind> {
        self.kinds.values().filter(move |k| k.spec.queue == queue)
    }

    /// The kinds one consumer runs: those of `queue` in `slot_pool` (`None`: the queue's own
    /// slots). A kind whose slot pool was never declared runs in the queue's slots.
    pub fn kinds_in(
        &self,
        queue: QueueName,
        slot_pool: Option<&'static str>,
    ) -> impl Iterator<Item = &TaskKind> {
        self.kinds_of(queue)
            .filter(move |k| self.slot_pool_of(k).map(|p| p.name) == slot_pool)
    }

    fn slot_pool_of(&self, kind: &TaskKind) -> Option<&SlotPool> {
        let name = kind.spec.slot_pool?;
        self.slot_pools
            .iter()
            .find(|p| p.name == name && p.queue == kind.spec.queue)
    }

    /// The slot pools declared on `queue` (each gets a consumer of its own).
    pub fn slot_pools_of(&self, queue: QueueName) -> Vec<SlotPool> {
        self.slot_pools
            .iter()
            .filter(|p| p.queue == queue)
            .cloned()
            .collect()
    }

    pub fn lanes_of(&self, queue: QueueName) -> Vec<Lane> {
        self.lanes
            .iter()
            .filter(|l| l.queue == queue)
            .cloned()
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }
}

/// Static facts of a kind, separate from its handler.
#[derive(Clone, Debug)]
pub struct KindSpec {
    pub name: &'static str,
    pub queue: QueueName,
    pub retry: RetryPolicy,
    pub timeout: Duration,
    pub lane: Option<&'static str>,
    pub slot_pool: Option<&'static str>,
}

impl KindSpec {
    pub fn new(name: &'static str, queue: QueueName) -> Self {
        KindSpec {
            name,
            queue,
            retry: RetryPolicy::fixed(Duration::from_secs(5), 5),
            timeout: Duration::from_secs(600),
            lane: None,
            slot_pool: None,
        }
    }
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    pub fn lane(mut self, lane: &'static str) -> Self {
        self.lane = Some(lane);
        self
    }
    /// Runs in the slots of `pool` (declared with [`Registry::slot_pool`]).
    pub fn slot_pool(mut self, pool: &'static str) -> Self {
        self.slot_pool = Some(pool);
        self
    }
}
