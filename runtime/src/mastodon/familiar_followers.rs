//! Mastodon's `FamiliarFollowers` entity: of one account, the followers the viewer follows.

use serde::Serialize;

use super::Account;

#[derive(Clone, Debug, Serialize)]
pub struct FamiliarFollowers {
    /// The account whose followers these are.
    pub id: String,
    pub accounts: Vec<Account>,
}
