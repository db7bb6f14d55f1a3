//! The HTTP/1 server of a node: hyper's connection builder with the limits `axum::serve`
//! cannot set (R-API). A client has `HTTP_HEADER_TIMEOUT_SECONDS` to send each request head
//! (keep-alive waits included), a socket whose reads or writes stall for
//! `HTTP_IDLE_TIMEOUT_SECONDS` is closed, a head is at most [`MAX_HEAD_BUFFER`], and past
//! `HTTP_MAX_CONNECTIONS` open connections a new one gets a 503 and is closed, so held
//! connections cannot starve `/healthz` for longer than these timeouts. Bodies are bounded
//! where they are read (`web::body`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_io_timeout::TimeoutStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::Layer;

use crate::config::HttpLimits;

/// Read buffer of a connection, so the largest request head hyper parses. Heads that fit but
/// exceed the limits of `web::edge` get a JSON 414/431 from there; bigger ones get hyper's
/// bare 431.
pub const MAX_HEAD_BUFFER: usize = 64 * 1024;

/// What a connection over the cap is told before it is closed.
const REFUSAL: &str = "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
content-length: 45\r\nretry-after: 1\r\nconnection: close\r\n\r\n\
{\"error\":\"too many connections, retry later\"}";

/// A connection's place under `HTTP_MAX_CONNECTIONS`, on every request of the connection (an
/// extension). The place is given back when the last holder drops it: the connection when it
/// ends, or a streaming WebSocket that took it at the upgrade, so an upgraded socket counts
/// against the cap for as long as it is open (R-API: streams that escaped the cap
/// exhausted a node's descriptors).
#[derive(Clone)]
pub struct ConnectionSlot {
    _permit: Arc<OwnedSemaphorePermit>,
}

/// Time a refused connection gets to take its 503.
const REFUSAL_WINDOW: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` until `stop` resolves, then stops accepting and lets open
/// connections finish their requests (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Refusals are cheap but not free: at most as many in flight as there are slots.
    let refusals = Arc::new(Semaphore::new(limits.max_connections));
    // Graceful shutdown by hand: hyper-util's `GracefulShutdown` cannot watch a connection
    // that may upgrade. Each connection is told to finish at `draining` and tracked until done.
    let draining = CancellationToken::new();
    let connections = TaskTracker::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BUFFER);
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "accepting an HTTP connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            if let Ok(permit) = refusals.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    refuse(stream).await;
                    drop(permit);
                });
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let mut io = TimeoutStream::new(stream);
        io.set_read_timeout(Some(limits.idle_timeout));
        io.set_write_timeout(Some(limits.idle_timeout));
        // The peer address rides on every request of the connection (`ConnectInfo`, as
        // axum::serve provides it): sign-in limits count failures per address.
        let slot = ConnectionSlot {
            _permit: Arc::new(permit),
        };
        let service = TowerToHyperService::new(
            axum::Extension(axum::extract::ConnectInfo(peer))
                .layer(axum::Extension(slot.clone()).layer(app.clone())),
        );
        // Upgrades for the streaming API's WebSocket; the upgraded socket keeps the idle
        // timeouts (its pings keep a live one busy) and, through the stream's copy of `slot`,
        // its place under the cap.
        let conn = builder
            .serve_connection(TokioIo::new(Box::pin(io)), service)
            .with_upgrades();
        let draining = draining.clone();
        connections.spawn(async move {
            let mut conn = std::pin::pin!(conn);
            let ended = tokio::select! {
                r = conn.as_mut() => r,
                _ = draining.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = ended {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    draining.cancel();
    connections.close();
    connections.wait().await;
    Ok(())
}

/// Answers 503 and closes. What the client sent is read and dropped for a moment first, so
/// closing does not reset the connection before the client has read the answer.
async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(REFUSAL_WINDOW, async {
        stream.write_all(REFUSAL.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        std::io::Result::Ok(())
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_json_response() {
        let (head, body) = REFUSAL.split_once("\r\n\r\n").expect("head and body");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert!(v["error"].is_string());
    }
}
