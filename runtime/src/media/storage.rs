//! The drive: where media files live (`DRIVE_DISK=fs` under `FS_STORAGE_PATH`, or `s3`), one
//! `object_store` abstraction for both, and the public URL of a stored key. Keys are always
//! `media/<uuid>/<name>.<ext>` (`tasks::cleanups::valid_media_key`), so the fs drive never
//! writes outside its root and the media cleanup recognises every file it owns.

use std::sync::Arc;

use object_store::path::Path as StorePath;
use object_store::{Attribute, Attributes, ObjectStore, ObjectStoreExt, PutOptions, PutPayload};

use super::processing::DecodeSlots;
use crate::config::{DriveConfig, MediaConfig};
use crate::tasks::cleanups::valid_media_key;

/// How long browsers and caches may keep a file: keys are never reused (a new upload is a new
/// UUID), so a file at a key never changes.
pub const CACHE_CONTROL: &str = "public, max-age=31536000, immutable";

#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    #[error("media storage is not configured (set DRIVE_DISK and FS_STORAGE_PATH or S3_*)")]
    Disabled,
    #[error("not a media key: {0:?}")]
    BadKey(String),
    #[error("no such file")]
    NotFound,
    #[error("media storage: {0}")]
    Store(#[from] object_store::Error),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriveKind {
    None,
    Fs,
    S3,
}

/// The storage of this node's media files, shared by the web routes and the processing task.
#[derive(Clone, Debug)]
pub struct Drive {
    store: Option<Arc<dyn ObjectStore>>,
    kind: DriveKind,
    url_base: String,
    /// The `fs` drive's root, so web nodes can stream a file from disk (`web::media_files`)
    /// instead of reading it whole through the store.
    fs_root: Option<std::path::PathBuf>,
    /// This process's decoding slots (`MEDIA_DECODE_CONCURRENCY`), shared like the drive by
    /// the upload routes and the processing task.
    decode: DecodeSlots,
}

impl Drive {
    /// The drive `MEDIA`/`DRIVE_DISK` settings describe. Building one does no I/O (the fs
    /// root is created if missing); a setting object_store refuses is an error.
    pub fn from_config(cfg: &MediaConfig) -> Result<Drive, DriveError> {
        let fs_root = match &cfg.drive {
            DriveConfig::Fs { path } => Some(path.clone()),
            _ => None,
        };
        let (store, kind): (Option<Arc<dyn ObjectStore>>, DriveKind) = match &cfg.drive {
            DriveConfig::None => (None, DriveKind::None),
            DriveConfig::Fs { path } => {
                std::fs::create_dir_all(path).map_err(|e| {
                    DriveError::Store(object_store::Error::Generic {
                        store: "LocalFileSystem",
                        source: Box::new(e),
                    })
                })?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(path)?;
                (Some(Arc::new(fs)), DriveKind::Fs)
            }
            DriveConfig::S3(s3) => {
                install_tls_provider();
                let mut b = object_store::aws::AmazonS3Builder::new()
                    .with_bucket_name(&s3.bucket)
                    .with_region(&s3.region)
                    .with_virtual_hosted_style_request(!s3.force_path_style);
                if let Some(endpoint) = &s3.endpoint_url {
                    b = b
                        .with_endpoint(endpoint)
                        .with_allow_http(endpoint.starts_with("http://"));
                }
                if let (Some(id), Some(secret)) = (&s3.access_key_id, &s3.secret_access_key) {
                    b = b
                        .with_access_key_id(id)
                        .with_secret_access_key(secret.expose());
                }
                (Some(Arc::new(b.build()?)), DriveKind::S3)
            }
        };
        Ok(Drive {
            store,
            kind,
            url_base: cfg.url_base.clone(),
            fs_root,
            decode: DecodeSlots::new(cfg.decode_concurrency),
        })
    }

    /// No storage: uploads are refused; URLs of existing rows still resolve under `url_base`.
    pub fn disabled(url_base: impl Into<String>) -> Drive {
        Drive {
            store: None,
            kind: DriveKind::None,
            url_base: url_base.into(),
            fs_root: None,
            decode: DecodeSlots::new(1),
        }
    }

    pub fn kind(&self) -> DriveKind {
        self.kind
    }

    pub fn decode_slots(&self) -> &DecodeSlots {
        &self.decode
    }

    pub fn is_enabled(&self) -> bool {
        self.store.is_some()
    }

    /// The public URL of `key`: `STORAGE_URL_BASE/<key>` (for `fs`, `PUBLIC_URL/media/…`,
    /// which web nodes serve).
    pub fn url(&self, key: &str) -> String {
        format!("{}/{key}", self.url_base)
    }

    /// Where the `fs` drive keeps `key` on disk; `None` for other drives and for anything that
    /// is not one of our media keys (so no path outside the root is ever formed).
    pub fn local_path(&self, key: &str) -> Option<std::path::PathBuf> {
        let root = self.fs_root.as_ref()?;
        valid_media_key(key).then(|| root.join(key))
    }

    fn store(&self) -> Result<&Arc<dyn ObjectStore>, DriveError> {
        self.store.as_ref().ok_or(DriveError::Disabled)
    }

    fn path(key: &str) -> Result<StorePath, DriveError> {
        if !valid_media_key(key) {
            return Err(DriveError::BadKey(key.to_string()));
        }
        StorePath::parse(key).map_err(|_| DriveError::BadKey(key.to_string()))
    }

    /// Stores `bytes` at `key`. S3 objects carry their type and cache policy; the fs drive's
    /// files get theirs from the route that serves them.
    pub async fn put(
        &self,
        key: &str,
        bytes: Vec<u8>,
        content_type: &str,
    ) -> Result<(), DriveError> {
        let store = self.store()?;
        let path = Self::path(key)?;
        let mut opts = PutOptions::default();
        if self.kind == DriveKind::S3 {
            let mut attrs = Attributes::new();
            attrs.insert(Attribute::ContentType, content_type.to_string().into());
            attrs.insert(Attribute::CacheControl, CACHE_CONTROL.into());
            opts.attributes = attrs;
        }
        store.put_opts(&path, PutPayload::from(bytes), opts).await?;
        Ok(())
    }

    pub async fn get(&self, key: &str) -> Result<Vec<u8>, DriveError> {
        let store = self.store()?;
        let path = Self::path(key)?;
        match store.get(&path).await {
            Ok(r) => Ok(r.bytes().await?.to_vec()),
            Err(object_store::Error::NotFound { .. }) => Err(DriveError::NotFound),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes `key`; a missing file is not an error (deleting is idempotent).
    pub async fn delete(&self, key: &str) -> Result<(), DriveError> {
        let store = self.store()?;
        let path = Self::path(key)?;
        match store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// rustls needs a process-wide crypto provider when none is bundled (object_store's reqwest is
/// built with `rustls-no-provider` so the tree has ring only). Installing twice is harmless.
fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
