//! Task kinds, one module each. `registry` wires every kind this binary can run.

pub mod delivery;
pub mod inbox;
pub mod poll_notification;
pub mod probe;

use std::sync::Arc;

use crate::federation::Federation;

use crate::config::QueueConfig;
use crate::queue::{QueueName, Registry};

/// Bumped whenever a queued message's format or a handler's contract changes (R-ROLE-6): the
/// operator allows a rolling upgrade only between versions that report the same number.
pub const TASK_DEFINITION_VERSION: i32 = 1;

/// The lane of remote reply collections: at most `REPLY_CONCURRENCY` of the task slots.
pub const REPLY_LANE: &str = "replies";

/// Every kind this node can run. Federation kinds need `SECRET_KEY` (account keys); without
/// it they are not registered and their messages wait for a node that has it.
pub fn registry(q: &QueueConfig, fed: Option<Arc<Federation>>) -> Registry {
    let mut reg = Registry::new().lane(REPLY_LANE, QueueName::Task, q.reply_concurrency);
    probe::register(&mut reg);
    poll_notification::register(&mut reg, q.poll_wakeup_chunk);
    if let Some(fed) = fed {
        inbox::register(&mut reg, fed.clone());
        delivery::register(&mut reg, fed);
    }
    reg
}
