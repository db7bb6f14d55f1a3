//! Media uploads: limits, the drive files are stored on, the public URL base of files.

use super::{ConfigError, Env, Secret};

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
    /// `MEDIA_MAX_BYTES` (default 16 MiB).
    pub max_bytes: usize,
    /// `MEDIA_MAX_PIXELS` (default 33,177,600: Mastodon's 7680×4320).
    pub max_pixels: u64,
    /// `MEDIA_SYNC_MAX_BYTES` (default 1 MiB): larger v2 uploads are answered 202 and processed
    /// by the `hollo.media.process.v1` task.
    pub sync_max_bytes: usize,
    /// `MEDIA_DECODE_CONCURRENCY` (default 2, 1–64): images decoded at once per process (web
    /// uploads and the worker's processing together); more wait. Decoding is CPU work and
    /// each decode may hold up to `MEDIA_MAX_PIXELS` × 4 bytes plus the decoder's buffers, so
    /// this bounds a node's decoding memory (R-API).
    pub decode_concurrency: usize,
    /// `MEDIA_PROXY_CACHE_MB` (default 64, 0–4096; 0: no cache): remote images the media proxy
    /// keeps in memory per web node for an hour, so a busy post's images are fetched once, not
    /// once per reader.
    pub proxy_cache_bytes: usize,
    /// `MEDIA_PROXY_CONCURRENCY` (default 32, 1–1024): remote images the media proxy fetches at
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
            max_bytes: 16 * 1024 * 1024,
            max_pixels: 33_177_600,
            sync_max_bytes: 1024 * 1024,
            decode_concurrency: 2,
            proxy_cache_bytes: 64 * 1024 * 1024,
            proxy_concurrency: 32,
            drive: DriveConfig::None,
            url_base: "http://localhost:3000".into(),
        }
    }
}

impl MediaConfig {
    pub fn from_env(env: &Env, public_url: &url::Url) -> Result<Self, ConfigError> {
        let d = MediaConfig::default();
        let max_bytes = env.count("MEDIA_MAX_BYTES", d.max_bytes as u32, 1, 1 << 30)? as usize;
        let max_pixels = env.count("MEDIA_MAX_PIXELS", d.max_pixels as u32, 1, u32::MAX)? as u64;
        let sync_max_bytes = env.count(
            "MEDIA_SYNC_MAX_BYTES",
            (d.sync_max_bytes as u32).min(max_bytes as u32),
            0,
            max_bytes as u32,
        )? as usize;
        let decode_concurrency = env.count(
            "MEDIA_DECODE_CONCURRENCY",
            d.decode_concurrency as u32,
            1,
            64,
        )? as usize;
        let proxy_cache_bytes = env.count(
            "MEDIA_PROXY_CACHE_MB",
            (d.proxy_cache_bytes >> 20) as u32,
            0,
            4096,
        )? as usize
            * 1024
            * 1024;
        let proxy_concurrency = env.count(
            "MEDIA_PROXY_CONCURRENCY",
            d.proxy_concurrency as u32,
            1,
            1024,
        )? as usize;
        let fs_path = env
            .get("FS_STORAGE_PATH")
            .map(|p| std::path::PathBuf::from(p.trim()));
        let drive = match env.get("DRIVE_DISK").map(str::trim) {
            None => fs_path.map_or(DriveConfig::None, |path| DriveConfig::Fs { path }),
            Some("fs") => DriveConfig::Fs {
                path: fs_path.ok_or_else(|| {
                    ConfigError::Inconsistent(
                        "DRIVE_DISK=fs needs FS_STORAGE_PATH (the directory media files go to)"
                            .into(),
                    )
                })?,
            },
            Some("s3") => DriveConfig::S3(S3Config::from_env(env)?),
            Some(other) => {
                return Err(ConfigError::Invalid {
                    var: "DRIVE_DISK",
                    value: other.to_string(),
                    expected: "fs or s3".into(),
                });
            }
        };
        let url_base = match env.get("STORAGE_URL_BASE").map(str::trim) {
            Some(raw) => {
                let ok = url::Url::parse(raw).is_ok_and(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.host_str().is_some()
                        && u.query().is_none()
                        && u.fragment().is_none()
                });
                if !ok {
                    return Err(ConfigError::Invalid {
                        var: "STORAGE_URL_BASE",
                        value: raw.to_string(),
                        expected: "an http(s) URL without query, e.g. https://media.example.com"
                            .into(),
                    });
                }
                raw.trim_end_matches('/').to_string()
            }
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
            max_pixels,
            decode_concurrency,
            sync_max_bytes,
            proxy_cache_bytes,
            proxy_concurrency,
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

impl S3Config {
    fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let bucket = env
            .get("S3_BUCKET")
            .map(str::trim)
            .ok_or_else(|| ConfigError::Inconsistent("DRIVE_DISK=s3 needs S3_BUCKET".into()))?;
        let endpoint_url = match env.get("S3_ENDPOINT_URL").map(str::trim) {
            None => None,
            Some(raw)
                if url::Url::parse(raw).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) =>
            {
                Some(raw.trim_end_matches('/').to_string())
            }
            Some(raw) => {
                return Err(ConfigError::Invalid {
                    var: "S3_ENDPOINT_URL",
                    value: raw.to_string(),
                    expected: "an http(s) URL such as https://s3.example.com".into(),
                });
            }
        };
        let access_key_id = env.get("AWS_ACCESS_KEY_ID").map(|s| s.trim().to_string());
        let secret_access_key = env.get("AWS_SECRET_ACCESS_KEY").map(Secret::new);
        if access_key_id.is_some() != secret_access_key.is_some() {
            return Err(ConfigError::Inconsistent(
                "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither".into(),
            ));
        }
        Ok(S3Config {
            bucket: bucket.to_string(),
            region: env
                .get("S3_REGION")
                .unwrap_or("us-east-1")
                .trim()
                .to_string(),
            endpoint_url,
            force_path_style: env.bool("S3_FORCE_PATH_STYLE", false)?,
            access_key_id,
            secret_access_key,
        })
    }
}
