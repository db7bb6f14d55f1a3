//! The inbox (R-AP-1, R-MAPI-4): `accept` verifies a POSTed activity and `incoming` stores it
//! once with its processing enqueued; `tasks::inbox` reads it as an `Activity` and `process`
//! applies it inside one transaction, dispatching to its family — `follows`, `notes`,
//! `interactions`, `actors` (and the polls' votes) — and recording an `Outcome`. Each family's
//! handlers are idempotent under redelivery.

pub mod accept;
pub mod activity;
pub mod actors;
pub mod follows;
pub mod incoming;
pub mod interactions;
pub mod notes;
pub mod outcome;
pub mod process;
pub mod resolve;

pub use accept::{Accepted, InboxError, SignedRequest, accept, signer_of_get};
pub use activity::Activity;
pub use outcome::Outcome;
