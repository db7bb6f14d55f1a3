//! One open WebSocket stream: its subscriptions, the events it gets, and the bound on what it
//! may owe its client.
//!
//! Events come from the node's [`Hub`]; each is checked against the subscriptions
//! ([`Stream::wants`]), rendered for the viewer ([`render`]) and queued for the socket's writer
//! task in a channel of [`BUFFER`] messages. Queuing never waits: a client that does not read
//! fills its socket, then the writer stalls, then the channel fills, and the stream is closed
//! at once (`hollo_streaming_dropped_clients`). So a slow client costs at most [`BUFFER`]
//! rendered messages plus the socket buffers, and never slows anyone else: the hub's channel is
//! a ring every stream reads at its own pace, and a stream that falls a whole ring behind
//! (its renders slower than the event rate) is closed the same way.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use futures::stream::SplitSink;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::streams::{MAX_SUBSCRIPTIONS, Stream, StreamError};
use super::{Event, Hub, render};
use crate::federation::Federation;

/// Rendered messages one connection may have queued for its socket before it is dropped.
pub const BUFFER: usize = 128;

/// What a stream's token allows (scopes checked once, at the handshake).
#[derive(Clone, Copy, Debug)]
pub struct Grants {
    /// `read:statuses`: the timelines (user, public, hashtag).
    pub statuses: bool,
    /// `read:notifications`: notifications, on `user` and `user:notification`.
    pub notifications: bool,
}

impl Grants {
    /// Whether the token may subscribe to `s`.
    pub fn allow(&self, s: &Stream) -> bool {
        match s {
            Stream::UserNotification => self.notifications,
            _ => self.statuses,
        }
    }
}

/// An authenticated stream about to start.
pub struct Session {
    pub viewer: Uuid,
    pub grants: Grants,
    pub streams: Vec<Stream>,
    pub pool: PgPool,
    pub fed: Arc<Federation>,
    pub hub: Arc<Hub>,
    /// How often the server pings: less than the node's idle timeout, so a quiet stream whose
    /// client answers pings stays open, and one whose client is gone is noticed.
    pub ping_every: Duration,
}

/// Why a stream ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The client closed, or its socket failed.
    Gone,
    /// The node is stopping.
    Closing,
    /// The client did not keep up.
    Slow,
}

impl Session {
    /// Runs the stream until the client leaves, lags, or the node stops.
    pub async fn run(self, socket: WebSocket) {
        let hub = self.hub.clone();
        hub.track(self.serve(socket)).await;
    }

    async fn serve(mut self, socket: WebSocket) {
        // Subscribed before anything else: events from now on are this stream's.
        let mut events = self.hub.subscribe();
        let (sink, mut incoming) = socket.split();
        let (out, queue) = mpsc::channel::<Message>(BUFFER);
        let mut writer = tokio::spawn(write(sink, queue, self.ping_every));
        let closing = self.hub.closing().clone();
        let end = loop {
            // Biased: the client's commands apply before events already waiting, so one that
            // subscribes and then causes an event gets it.
            tokio::select! {
                biased;
                _ = closing.cancelled() => break End::Closing,
                _ = &mut writer => break End::Gone,
                m = incoming.next() => match m {
                    Some(Ok(Message::Text(t))) => {
                        if let Some(reply) = self.command(t.as_str())
                            && let Err(end) = offer(&out, reply)
                        {
                            break end;
                        }
                    }
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break End::Gone,
                    // Pongs answer our pings; tungstenite answers the client's.
                    Some(Ok(_)) => {}
                },
                e = events.recv() => match e {
                    Ok(e) => {
                        if let Err(end) = self.deliver(&e, &out).await {
                            break end;
                        }
                    }
                    Err(RecvError::Lagged(_)) => break End::Slow,
                    Err(RecvError::Closed) => break End::Closing,
                },
            }
        };
        match end {
            End::Slow => {
                // Nothing more is written to a socket that is not read: it is closed now.
                self.hub.dropped();
                writer.abort();
                tracing::info!(account = %self.viewer, "streaming client too slow; disconnected");
            }
            End::Closing => {
                // "Going away": clients reconnect, through the load balancer, to another node.
                let bye = Message::Close(Some(CloseFrame {
                    code: close_code::AWAY,
                    reason: "server shutting down".into(),
                }));
                if out.try_send(bye).is_err() {
                    writer.abort();
                }
                drop(out);
                let _ = tokio::time::timeout(Duration::from_secs(2), &mut writer).await;
                writer.abort();
            }
            End::Gone => {
                drop(out);
                writer.abort();
            }
        }
    }

    /// A client's `subscribe` / `unsubscribe`; the answer to send, if any (Mastodon's error
    /// shape for what it cannot do).
    fn command(&mut self, text: &str) -> Option<Message> {
        let error = |e: &str| {
            Some(Message::Text(
                json!({ "error": e, "status": 400 }).to_string().into(),
            ))
        };
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            return error("Invalid JSON");
        };
        let name = v["stream"].as_str().unwrap_or_default();
        let stream = match Stream::parse(name, v["tag"].as_str()) {
            Ok(s) => s,
            Err(e) => return error(&e.to_string()),
        };
        match v["type"].as_str() {
            Some("subscribe") => {
                if !self.grants.allow(&stream) {
                    return error("Access token does not have the required scopes");
                }
                if !self.streams.contains(&stream) {
                    if self.streams.len() >= MAX_SUBSCRIPTIONS {
                        return error("Too many subscriptions");
                    }
                    self.streams.push(stream);
                }
                None
            }
            Some("unsubscribe") => {
                self.streams.retain(|s| *s != stream);
                None
            }
            _ => error(&StreamError::Unknown.to_string()),
        }
    }

    /// Sends `e` on every subscribed stream that wants it, rendered once for the viewer.
    async fn deliver(&self, e: &Event, out: &mpsc::Sender<Message>) -> Result<(), End> {
        if e.kind == "notification" && !self.grants.notifications {
            return Ok(());
        }
        let targets: Vec<&Stream> = self
            .streams
            .iter()
            .filter(|s| s.wants(e, self.viewer))
            .collect();
        if targets.is_empty() {
            return Ok(());
        }
        let payload = match self.payload(e).await {
            Ok(Some(p)) => p,
            // Gone meanwhile, or not the viewer's to see.
            Ok(None) => return Ok(()),
            Err(err) => {
                // This event is lost for this stream only; the stream goes on.
                tracing::warn!(error = %err, event = e.id, "rendering a streaming event failed");
                return Ok(());
            }
        };
        for s in targets {
            let m = json!({ "stream": s.names(), "event": e.event, "payload": payload });
            offer(out, Message::Text(m.to_string().into()))?;
        }
        Ok(())
    }

    /// The event's `payload`: a JSON string of the entity, or the deleted id.
    async fn payload(&self, e: &Event) -> Result<Option<String>, sqlx::Error> {
        let entity = match (e.event.as_str(), e.post_id, e.notification_id) {
            ("delete", Some(id), _) => return Ok(Some(id.to_string())),
            ("update" | "status.update", Some(id), _) => {
                render::status(&self.pool, &self.fed, self.viewer, id).await?
            }
            ("notification", _, Some(id)) => {
                render::notification(&self.pool, &self.fed, self.viewer, id).await?
            }
            _ => None,
        };
        Ok(entity.map(|v| v.to_string()))
    }
}

/// Queues a message for the socket without waiting: a full queue is a client that does not
/// read, a closed one a socket that failed.
fn offer(out: &mpsc::Sender<Message>, m: Message) -> Result<(), End> {
    out.try_send(m).map_err(|e| match e {
        mpsc::error::TrySendError::Full(_) => End::Slow,
        mpsc::error::TrySendError::Closed(_) => End::Gone,
    })
}

/// The socket's writer: queued messages, and a ping every `ping_every`; ends after a close
/// frame, when the queue is dropped, or when the socket fails.
async fn write(
    mut sink: SplitSink<WebSocket, Message>,
    mut queue: mpsc::Receiver<Message>,
    ping_every: Duration,
) {
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
    loop {
        let m = tokio::select! {
            m = queue.recv() => match m {
                Some(m) => m,
                None => break,
            },
            _ = ping.tick() => Message::Ping(Default::default()),
        };
        let last = matches!(m, Message::Close(_));
        if sink.send(m).await.is_err() || last {
            return;
        }
    }
    let _ = sink.close().await;
}
