//! Mastodon's `Relationship` entity: the viewer's standing with one account.

use serde::Serialize;

use crate::federation::outbound::relationships::Standing;

#[derive(Clone, Debug, Serialize)]
pub struct Relationship {
    pub id: String,
    pub following: bool,
    pub showing_reblogs: bool,
    pub notifying: bool,
    pub languages: Option<Vec<String>>,
    pub followed_by: bool,
    pub blocking: bool,
    pub blocked_by: bool,
    pub muting: bool,
    pub muting_notifications: bool,
    pub requested: bool,
    pub requested_by: bool,
    pub domain_blocking: bool,
    /// The viewer features the account on its profile.
    pub endorsed: bool,
    /// The viewer's private note on the account.
    pub note: String,
}

impl Relationship {
    pub fn new(id: String, s: &Standing) -> Self {
        Relationship {
            id,
            following: s.following,
            showing_reblogs: s.showing_reblogs,
            notifying: s.notifying,
            languages: s.languages.clone(),
            followed_by: s.followed_by,
            blocking: s.blocking,
            blocked_by: s.blocked_by,
            muting: s.muting,
            muting_notifications: s.muting_notifications,
            requested: s.requested,
            requested_by: s.requested_by,
            domain_blocking: s.domain_blocking,
            endorsed: s.endorsed,
            note: s.note.clone(),
        }
    }
}
