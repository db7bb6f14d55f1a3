//! The PostgreSQL queue engine: no domain knowledge, two queues of one shape.
//!
//! Data walk: `enqueue` (row + NOTIFY at commit) → the node's LISTEN connection (`db::listen`) wakes
//! the `consumer` (or its 5 s
//! poll does) → `claim` (one statement, SKIP LOCKED, lease) → `registry` handler → `complete`
//! (batched delete) or `retry`/fail; a dead worker's lease ends and the row is claimable again.

pub mod claim;
pub mod complete;
pub mod consumer;
pub mod enqueue;
pub mod message;
pub mod registry;
pub mod retry;
mod slots;
pub mod stats;

pub use enqueue::{Enqueued, LONGEST_WAIT, NewMessage, enqueue, enqueue_many};
pub use message::{Claimed, QueueName};
pub use registry::{JobContext, KindSpec, Registry, TaskError};
pub use retry::{Backoff, RetryPolicy};
