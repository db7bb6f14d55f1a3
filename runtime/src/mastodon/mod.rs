//! Mastodon's client-API entities as types (R-MAPI-3, R-MAPI-VIS): what every client reads,
//! built in one place for the API handlers, the streaming payloads and search alike. Each
//! entity is a `#[derive(Serialize)]` struct whose fields are Mastodon's, in Mastodon's
//! documented order; the batch loaders (`status::render`, `account::locals`, …) read a whole
//! page with a fixed number of queries.
//!
//! Rendering needs no federation: the URLs an entity shows are minted by [`Urls`] from
//! `PUBLIC_URL` alone, and media URLs by the drive — both in a [`Site`]. This module depends on
//! the domain (statuses, polls, media, accounts); nothing here imports `web`.

pub mod account;
pub mod filter;
pub mod instance;
pub mod list;
pub mod media;
pub mod notification;
pub mod poll;
pub mod relationship;
pub mod replies;
pub mod status;
pub mod status_edit;
pub mod tag;
pub mod urls;

pub use account::{Account, CredentialAccount, MutedAccount};
pub use filter::FilterResult;
pub use list::List;
pub use media::MediaAttachment;
pub use notification::Notification;
pub use poll::Poll;
pub use relationship::Relationship;
pub use replies::{Empty, Marker, Preferences, StatusSource, UnreadCount};
pub use status::Status;
pub use status_edit::StatusEdit;
pub use urls::Urls;

use crate::media::Drive;

/// What rendering needs to know about this server: its URLs and where media is served from.
#[derive(Clone, Copy)]
pub struct Site<'a> {
    pub urls: Urls<'a>,
    pub drive: &'a Drive,
}

impl<'a> Site<'a> {
    pub fn new(origin: &'a str, drive: &'a Drive) -> Self {
        Site {
            urls: Urls::new(origin),
            drive,
        }
    }
}

/// A custom emoji (none are served yet; the field is always present, as clients expect).
#[derive(Clone, Debug, serde::Serialize)]
pub struct CustomEmoji {
    pub shortcode: String,
    pub url: String,
    pub static_url: String,
    pub visible_in_picker: bool,
}
