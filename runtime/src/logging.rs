//! Logging: human text by default, JSON lines with `LOG_FORMAT=json` (for Kubernetes).
//! `RUST_LOG` / `LOG_LEVEL` choose the level (default `info`).

use crate::config::{Env, LogFormat, vars};

/// Installs the subscriber. A `RUST_LOG`/`LOG_LEVEL` that is not a valid filter is an error
/// (R-Q-6: a bad value is a startup error): silently falling back to the default would hide
/// the debug logs someone asked for.
pub fn init(format: LogFormat, env: &Env) -> Result<(), String> {
    let filter = env.log_filter(&vars::RUST_LOG).map_err(|e| e.to_string())?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
    Ok(())
}
