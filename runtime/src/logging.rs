//! Logging: human text by default, JSON lines with `LOG_FORMAT=json` (for Kubernetes).
//! `RUST_LOG` / `LOG_LEVEL` choose the level (default `info`).

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the subscriber. A `RUST_LOG`/`LOG_LEVEL` that is not a valid filter is an error
/// (R-Q-6: a bad value is a startup error): silently falling back to `info` would hide the debug logs someone asked for.
pub fn init(format: LogFormat) -> Result<(), String> {
    let filter = match ["RUST_LOG", "LOG_LEVEL"]
        .into_iter()
        .find_map(|var| Some((var, std::env::var(var).ok()?)))
    {
        Some((var, value)) => EnvFilter::try_new(&value)
            .map_err(|e| format!("{var}={value:?} is not a valid log filter: {e}"))?,
        None => EnvFilter::new("info,sqlx=warn"),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
    Ok(())
}
