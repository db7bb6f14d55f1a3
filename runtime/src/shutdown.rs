//! SIGTERM/SIGINT → a two-step stop (R-SHUT): `stop` fires at once (stop claiming, readiness
//! goes false), `abort` fires when the drain window has run out.

use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

#[derive(Clone)]
pub struct Shutdown {
    pub stop: CancellationToken,
    pub abort: CancellationToken,
}

impl Shutdown {
    pub fn new() -> Self {
        Shutdown {
            stop: CancellationToken::new(),
            abort: CancellationToken::new(),
        }
    }

    /// Watches for the signals. A second signal skips the rest of the drain window.
    pub fn install(&self, drain: Duration) -> std::io::Result<()> {
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let me = self.clone();
        tokio::spawn(async move {
            tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
            tracing::info!(
                drain_seconds = drain.as_secs(),
                "shutdown requested: no new work is claimed"
            );
            me.stop.cancel();
            tokio::select! {
                _ = tokio::time::sleep(drain) => {},
                _ = term.recv() => tracing::warn!("second signal: ending the drain now"),
                _ = int.recv() => tracing::warn!("second signal: ending the drain now"),
            }
            me.abort.cancel();
        });
        Ok(())
    }

    /// What a SIGTERM does, asked for in-process (tests, embedders): stop now, abort once the
    /// drain window has run out.
    pub fn begin(&self, drain: Duration) {
        self.stop.cancel();
        let abort = self.abort.clone();
        tokio::spawn(async move {
            tokio::time::sleep(drain).await;
            abort.cancel();
        });
    }
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}
