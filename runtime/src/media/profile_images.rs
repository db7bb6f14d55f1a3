//! Avatars and headers of local accounts (R-MAPI-6): an image sent to
//! `update_credentials` goes through the upload checks (`processing::probe`: the type sniffed
//! from the bytes, `MEDIA_MAX_BYTES`, `MEDIA_MAX_PIXELS`), is decoded in a decoding slot and
//! scaled and cropped as Mastodon does (avatar 400×400, header 1500×500, `processing::fill`),
//! and is stored on the drive at `media/<uuid>/avatar.<ext>` / `header.<ext>`.
//!
//! Order of effects, as for uploads: the file is written before the account row that names it
//! commits (with its key registered in `media_files` in that transaction), so a crash in between
//! leaves an unregistered file the media cleanup removes. The file it replaces is unregistered
//! in the same transaction and deleted from the drive after the commit (best effort: the
//! cleanup catches what a failed delete leaves).
//!
//! The row keeps the URL the drive gave when the file was stored, so the Account entity and the
//! actor document are rendered without the drive; a changed `STORAGE_URL_BASE` applies to
//! images uploaded after the change.

use sqlx::PgConnection;
use uuid::Uuid;

use super::processing::{self, Probe};
use super::storage::{Drive, DriveError};
use super::upload::{UploadError, forget};
use crate::config::MediaConfig;

/// Which of the two profile images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Avatar,
    Header,
}

impl Slot {
    /// The form field, the file's name on the drive and the route's last segment.
    pub fn name(self) -> &'static str {
        match self {
            Slot::Avatar => "avatar",
            Slot::Header => "header",
        }
    }

    /// Mastodon's sizes (`400x400#`, `1500x500#`).
    pub fn size(self) -> (u32, u32) {
        match self {
            Slot::Avatar => (400, 400),
            Slot::Header => (1500, 500),
        }
    }

    pub fn from_field(name: &str) -> Option<Slot> {
        match name {
            "avatar" => Some(Slot::Avatar),
            "header" => Some(Slot::Header),
            _ => None,
        }
    }
}

/// A processed image on the drive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredImage {
    pub key: String,
    pub url: String,
    pub media_type: String,
}

/// What the account's row holds: `None` leaves an image as it is, `Some(None)` removes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImagesUpdate {
    pub avatar: Option<Option<StoredImage>>,
    pub header: Option<Option<StoredImage>>,
}

impl ImagesUpdate {
    pub fn is_empty(&self) -> bool {
        self.avatar.is_none() && self.header.is_none()
    }

    pub fn set(&mut self, slot: Slot, image: Option<StoredImage>) {
        match slot {
            Slot::Avatar => self.avatar = Some(image),
            Slot::Header => self.header = Some(image),
        }
    }

    /// The keys of the images this update stores (to forget if the transaction fails).
    pub fn new_keys(&self) -> Vec<String> {
        [&self.avatar, &self.header]
            .into_iter()
            .filter_map(|i| i.as_ref()?.as_ref().map(|i| i.key.clone()))
            .collect()
    }
}

/// The checks every upload gets, from the bytes alone (nothing is decoded or stored): `Err` is
/// the client's 422.
pub fn check(cfg: &MediaConfig, bytes: &[u8]) -> Result<Probe, UploadError> {
    Ok(processing::probe(bytes, cfg.max_bytes, cfg.max_pixels)?)
}

/// Processes a checked image for `slot` in one of the drive's decoding slots and stores it.
pub async fn store(
    drive: &Drive,
    cfg: &MediaConfig,
    slot: Slot,
    bytes: Vec<u8>,
    probe: Probe,
) -> Result<StoredImage, UploadError> {
    if !drive.is_enabled() {
        return Err(DriveError::Disabled.into());
    }
    let (width, height) = slot.size();
    let max_pixels = cfg.max_pixels;
    let filled = drive
        .decode_slots()
        .run(move || processing::fill(&bytes, probe, max_pixels, width, height))
        .await?;
    let key = format!(
        "media/{}/{}.{}",
        Uuid::now_v7(),
        slot.name(),
        filled.format.ext()
    );
    drive.put(&key, filled.bytes, filled.format.mime()).await?;
    Ok(StoredImage {
        url: drive.url(&key),
        media_type: filled.format.mime().to_string(),
        key,
    })
}

/// The account's current image keys (avatar, header), its row locked until the transaction
/// ends so two concurrent changes cannot both miss the file the other replaced.
pub async fn current_keys(
    tx: &mut PgConnection,
    account: Uuid,
) -> Result<(Option<String>, Option<String>), sqlx::Error> {
    sqlx::query_as("SELECT avatar_key, header_key FROM accounts WHERE id = $1 FOR UPDATE")
        .bind(account)
        .fetch_one(&mut *tx)
        .await
}

/// Writes `update` to the account's row inside `tx`: the new files are registered in
/// `media_files`, the replaced ones unregistered. Returns the replaced keys, which the caller
/// deletes from the drive once `tx` has committed.
pub async fn apply(
    tx: &mut PgConnection,
    account: Uuid,
    update: &ImagesUpdate,
) -> Result<Vec<String>, sqlx::Error> {
    if update.is_empty() {
        return Ok(Vec::new());
    }
    let (avatar, header) = current_keys(tx, account).await?;
    let mut replaced = Vec::new();
    for (slot, change, old) in [
        (Slot::Avatar, &update.avatar, avatar),
        (Slot::Header, &update.header, header),
    ] {
        let Some(change) = change else { continue };
        if let Some(img) = change {
            sqlx::query(
                "INSERT INTO media_files (key, account_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            )
            .bind(&img.key)
            .bind(account)
            .execute(&mut *tx)
            .await?;
        }
        // Column names come from the two fixed slots, never from input.
        let sql = match slot {
            Slot::Avatar => {
                "UPDATE accounts SET avatar_key = $2, avatar_url = $3, avatar_media_type = $4
                  WHERE id = $1"
            }
            Slot::Header => {
                "UPDATE accounts SET header_key = $2, header_url = $3, header_media_type = $4
                  WHERE id = $1"
            }
        };
        sqlx::query(sql)
            .bind(account)
            .bind(change.as_ref().map(|i| &i.key))
            .bind(change.as_ref().map(|i| &i.url))
            .bind(change.as_ref().map(|i| &i.media_type))
            .execute(&mut *tx)
            .await?;
        replaced.extend(old);
    }
    sqlx::query("DELETE FROM media_files WHERE key = ANY($1)")
        .bind(&replaced)
        .execute(&mut *tx)
        .await?;
    Ok(replaced)
}

/// Best-effort removal of files no committed row names any more.
pub async fn discard(drive: &Drive, keys: &[String]) {
    forget(drive, keys).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_mastodons_sizes_and_fields() {
        assert_eq!(Slot::Avatar.size(), (400, 400));
        assert_eq!(Slot::Header.size(), (1500, 500));
        assert_eq!(Slot::from_field("avatar"), Some(Slot::Avatar));
        assert_eq!(Slot::from_field("header"), Some(Slot::Header));
        assert_eq!(Slot::from_field("file"), None);
    }

    #[test]
    fn new_keys_are_only_those_stored() {
        let img = StoredImage {
            key: "media/k/avatar.png".into(),
            url: "u".into(),
            media_type: "image/png".into(),
        };
        let mut u = ImagesUpdate::default();
        assert!(u.is_empty());
        u.set(Slot::Avatar, Some(img));
        u.set(Slot::Header, None);
        assert_eq!(u.new_keys(), vec!["media/k/avatar.png".to_string()]);
    }
}
