//! `LISTEN` for wake-ups (R-Q-1). One connection listens on both channels; a lost connection
//! is re-established with back-off, and every consumer is woken after a reconnect because
//! notifications sent meanwhile are gone. The consumers' own 5 s poll covers the gap. A queue
//! may have several consumers (its own slots and its pools): a notification wakes each.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::message::QueueName;
use super::retry::Backoff;

pub enum Source {
    /// Take the connection from the general pool.
    Pool(PgPool),
    /// Connect directly (`DATABASE_DIRECT_URL`), bypassing a transaction-mode pooler.
    Direct(String),
}

pub async fn run(
    source: Source,
    wakes: HashMap<QueueName, Vec<Arc<Notify>>>,
    stop: CancellationToken,
) {
    let channels: Vec<&str> = wakes.keys().map(|q| q.channel()).collect();
    let wake_all = || wakes.values().flatten().for_each(|n| n.notify_one());
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
    loop {
        let connected = match &source {
            Source::Pool(pool) => PgListener::connect_with(pool).await,
            Source::Direct(url) => PgListener::connect(url).await,
        };
        let mut listener = match connected {
            Ok(l) => l,
            Err(e) => {
                let delay = backoff.next_wait();
                tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "LISTEN connection failed; polling meanwhile");
                tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(delay) => {} }
                continue;
            }
        };
        if let Err(e) = listener.listen_all(channels.iter().copied()).await {
            tracing::warn!(error = %e, "LISTEN failed; reconnecting");
            tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(backoff.next_wait()) => {} }
            continue;
        }
        backoff.reset();
        wake_all();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                n = listener.try_recv() => match n {
                    Ok(Some(n)) => {
                        if let Some(ws) = QueueName::from_channel(n.channel()).and_then(|q| wakes.get(&q)) {
                            ws.iter().for_each(|w| w.notify_one());
                        }
                    }
                    Ok(None) => {
                        // Connection lost; the next try_recv reconnects and re-listens.
                        tracing::warn!("LISTEN connection lost; reconnecting");
                        wake_all();
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "LISTEN connection broken; reconnecting");
                        wake_all();
                        break;
                    }
                }
            }
        }
        tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(backoff.next_wait()) => {} }
    }
}
