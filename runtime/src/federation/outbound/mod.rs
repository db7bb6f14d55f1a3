//! What local accounts send: statuses, follows, likes and boosts, relationship changes and
//! mentions, each queued as an activity in the transaction that makes the change, and delivered
//! by `tasks::delivery` through `delivery`.

pub mod delivery;
pub mod domain_blocks;
pub mod featured;
pub mod follows;
pub mod interactions;
pub mod mentions;
pub mod policy;
pub mod polls;
pub mod quotes;
pub mod relationships;
pub mod statuses;
