//! What incoming activities do to posts, timelines and notifications (issue 19 item 6,
//! R-MAPI-4); `activity::apply` dispatches here. Each handler runs inside the inbox
//! transaction and is idempotent under redelivery.

pub mod interactions;
pub mod notes;
