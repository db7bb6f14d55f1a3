//! Media attachments of the Mastodon client API (R-MAPI-3).
//!
//! - `processing`: sniffing, limits, thumbnail and BlurHash (JPEG, PNG, GIF, WebP only).
//! - `storage`: the [`Drive`] (`DRIVE_DISK=fs|s3` through object_store) and public URLs.
//! - `entity`: Mastodon's `MediaAttachment` and the ActivityPub `Document`.
//! - `upload`: creating, reading, editing and deleting an account's uploads.
//! - `deferred`: processing an upload stored raw, on a worker (`tasks::media`).
//! - `profile_images`: local accounts' avatars and headers (R-MAPI-6).
//! - `attach`: what statuses call — [`attach`], [`documents_for`] (the client API's entities are `mastodon::media`).
//!
//! Routes are in `web::mastodon::media`; files of the fs drive are served by
//! `web::media_files`; unattached uploads older than a day go with the media cleanup
//! (`tasks::cleanups`).

pub mod attach;
pub mod deferred;
pub mod entity;
pub mod processing;
pub mod profile_images;
pub mod proxy;
pub mod storage;
pub mod upload;

pub use attach::{AttachError, MAX_PER_STATUS, attach, documents_for};
pub use entity::{MediaRow, document};
pub use storage::{Drive, DriveError, DriveKind};
