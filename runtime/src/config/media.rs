//! Media uploads: limits, the drive files are stored on, the public URL base of files.

use super::{ConfigError, Env, Secret, vars};

/// Where media files are stored (`DRIVE_DISK`, upstream Hollo's variable names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveConfig {
    /// Neither `DRIVE_DISK` nor `FS_STORAGE_PATH` is set: uploads are refused (503).
    None,
    /// `DRIVE_DISK=fs` (or unset with `FS_STORAGE_PATH`): files under `FS_STORAGE_PATH`,
    /// served by web nodes under `/media/`.
    Fs { path: std::path::PathBuf },
    /// `DRIVE_DISK=s3`: a bucket of S3 or an S3-compatible server.
    S3(S3Config),
}

/// `S3_*` and `AWS_*`. Without the two keys, object_store's usual credential chain applies
/// (instance metadata, web identity), as with upstream Hollo's SDK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Config {
    pub bucket: String,
    pub region: String,
    pub endpoint_url: Option<String>,
    pub force_path_style: bool,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<Secret>,
}

/// Media uploads (R-MAPI-3): size and pixel limits (over them: 422, nothing stored), the size
/// above which a v2 upload is processed by a worker, the drive and the public URL base of its
/// files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaConfig {
    /// `MEDIA_MAX_BYTES`.
    pub max_bytes: usize,
    /// `MEDIA_MAX_PIXELS` (by default Mastodon's 7680×4320).
    pub max_pixels: u64,
    /// `MEDIA_SYNC_MAX_BYTES`: larger v2 uploads are answered 202 and processed
    /// by the `hollo.media.process.v1` task.
    pub sync_max_bytes: usize,
    /// `MEDIA_DECODE_CONCURRENCY`: images decoded at once per process (web
    /// uploads and the worker's processing together); more wait. Decoding is CPU work and
    /// each decode may hold up to `MEDIA_MAX_PIXELS` × 4 bytes plus the decoder's buffers, so
    /// this bounds a node's decoding memory (R-API).
    pub decode_concurrency: usize,
    /// `MEDIA_PROXY_CACHE_MB` (0: no cache): remote images the media proxy
    /// keeps in memory per web node for an hour, so a busy post's images are fetched once, not
    /// once per reader.
    pub proxy_cache_bytes: usize,
    /// `MEDIA_PROXY_CONCURRENCY`: remote images the media proxy fetches at
    /// once per web node (at most 8 of them from one remote host); a reader waits up to 5 s
    /// for a place, then gets 503. Each fetch holds at most 1 MiB of the image (larger ones
    /// stream through), so this bounds the proxy's memory besides its cache (R-API).
    pub proxy_concurrency: usize,
    pub drive: DriveConfig,
    /// `STORAGE_URL_BASE`: the public URL files are reachable under (`<base>/<key>`). Default
    /// for `fs`: `PUBLIC_URL` (the web node serves `/media/…`); required for `s3`.
    pub url_base: String,
}

impl Default for MediaConfig {
    fn default() -> Self {
        MediaConfig {
            max_bytes: vars::MEDIA_MAX_BYTES.int_default() as usize,
            max_pixels: vars::MEDIA_MAX_PIXELS.int_default() as u64,
            sync_max_bytes: vars::MEDIA_SYNC_MAX_BYTES.int_default() as usize,
            decode_concurrency: vars::MEDIA_DECODE_CONCURRENCY.int_default() as usize,
            proxy_cache_bytes: (vars::MEDIA_PROXY_CACHE_MB.int_default() as usize) << 20,
            proxy_concurrency: vars::MEDIA_PROXY_CONCURRENCY.int_default() as usize,
            drive: DriveConfig::None,
            url_base: format!("http://localhost:{}", vars::PORT.int_default()),
        }
    }
}

impl MediaConfig {
    pub fn from_env(env: &Env, public_url: &url::Url) -> Result<Self, ConfigError> {
        let max_bytes: usize = env.int(&vars::MEDIA_MAX_BYTES)?;
        let cap = i64::try_from(max_bytes).unwrap_or(i64::MAX);
        let sync_default = vars::MEDIA_SYNC_MAX_BYTES.int_default().min(cap);
        let drive = DriveConfig::from_env(env)?;
        let url_base = match env.url(&vars::STORAGE_URL_BASE)? {
            Some(base) => base,
            None if matches!(drive, DriveConfig::S3(_)) => {
                return Err(ConfigError::Inconsistent(
                    "DRIVE_DISK=s3 needs STORAGE_URL_BASE (the public URL of the bucket's files)"
                        .into(),
                ));
            }
            None => public_url.as_str().trim_end_matches('/').to_string(),
        };
        Ok(MediaConfig {
            max_bytes,
            max_pixels: env.int(&vars::MEDIA_MAX_PIXELS)?,
            sync_max_bytes: env.int_with(&vars::MEDIA_SYNC_MAX_BYTES, sync_default, cap)?,
            decode_concurrency: env.int(&vars::MEDIA_DECODE_CONCURRENCY)?,
            proxy_cache_bytes: env.int::<usize>(&vars::MEDIA_PROXY_CACHE_MB)? << 20,
            proxy_concurrency: env.int(&vars::MEDIA_PROXY_CONCURRENCY)?,
            drive,
            url_base,
        })
    }

    /// The storage root of the `fs` drive (what the media cleanup scans).
    pub fn fs_path(&self) -> Option<&std::path::Path> {
        match &self.drive {
            DriveConfig::Fs { path } => Some(path),
            _ => None,
        }
    }
}

impl DriveConfig {
    /// `DRIVE_DISK`, or `fs` when only `FS_STORAGE_PATH` is set.
    fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let fs_path = env.path(&vars::FS_STORAGE_PATH);
        Ok(match env.choice(&vars::DRIVE_DISK)? {
            None => fs_path.map_or(DriveConfig::None, |path| DriveConfig::Fs { path }),
            Some("s3") => DriveConfig::S3(S3Config::from_env(env)?),
            // `fs`: the table allows no other word.
            Some(_) => DriveConfig::Fs {
                path: fs_path.ok_or_else(|| {
                    ConfigError::Inconsistent(
                        "DRIVE_DISK=fs needs FS_STORAGE_PATH (the directory media files go to)"
                            .into(),
                    )
                })?,
            },
        })
    }
}

impl S3Config {
    fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let bucket = env
            .text(&vars::S3_BUCKET)
            .ok_or_else(|| ConfigError::Inconsistent("DRIVE_DISK=s3 needs S3_BUCKET".into()))?;
        let access_key_id = env.text(&vars::AWS_ACCESS_KEY_ID);
        let secret_access_key = env.secret(&vars::AWS_SECRET_ACCESS_KEY)?;
        if access_key_id.is_some() != secret_access_key.is_some() {
            return Err(ConfigError::Inconsistent(
                "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither".into(),
            ));
        }
        Ok(S3Config {
            bucket,
            region: env.text(&vars::S3_REGION).unwrap_or_default(),
            endpoint_url: env.url(&vars::S3_ENDPOINT_URL)?,
            force_path_style: env.bool(&vars::S3_FORCE_PATH_STYLE)?,
            access_key_id,
            secret_access_key,
        })
    }
}
