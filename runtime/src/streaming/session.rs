//! One open WebSocket stream: its subscriptions, the events it gets, and the bound on what it
//! may owe its client.
//!
//! Events come from the node's [`Hub`]; each is checked against the subscriptions
//! ([`Stream::wants`]), rendered for the viewer ([`render`]) and queued in its [`Outbox`] of
//! `BUFFER` messages, which the same task writes to the socket. Queuing never waits: a
//! client that does not read fills its socket, then the outbox fills, and the stream is closed
//! at once (`hollo_streaming_dropped_clients`): what is queued is dropped and a close 1013
//! ("try again later", reason `too slow`) follows what the socket already holds, if the socket
//! takes it within [`SLOW_CLOSE`]; then the connection ends either way. So a slow client costs
//! at most `BUFFER` rendered messages plus the socket buffers, and never slows anyone else:
//! the hub puts events into each stream's own mailbox without waiting, and a stream whose
//! mailbox fills (its renders slower than the event rate) is closed the same way.
//!
//! A stream holds its [`Admission`] (its place under `STREAMS_PER_TOKEN` / `STREAMS_MAX`) and
//! its connection's place under `HTTP_MAX_CONNECTIONS` until it ends, and ends with a policy
//! close (1008) when a `revoke` event names its token — heard by every node, whichever
//! revoked it — or when the token is found gone right after the stream subscribed (revoked
//! between the handshake's check and the subscription).

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use futures::FutureExt;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use super::SharedStatus;
use super::hub::{Admission, Subscription};
use super::mailbox::Received;
use super::outbox::{Full, Outbox};
use super::streams::{MAX_SUBSCRIPTIONS, Stream, StreamError};
use super::{Event, Hub, message, render};
use crate::filters::Context;
use crate::filters::active::Active;
use crate::statuses::hidden::Hidden;

/// How long a stream dropped for being too slow may take to send its close (1013).
pub const SLOW_CLOSE: Duration = Duration::from_secs(1);

/// How long a stream ending otherwise (node stopping, token revoked) may take to send what is
/// queued and its close.
const GOODBYE: Duration = Duration::from_secs(2);

/// Authors whose domain a stream remembers before it starts over.
const AUTHOR_CACHE: usize = 10_000;

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
    /// `PUBLIC_URL` and the media drive, which the payloads' entities are rendered with.
    pub origin: String,
    pub drive: Arc<crate::media::Drive>,
    /// Remote images shown through the node's media proxy (as the API shows them).
    pub media_proxy: Option<Arc<crate::media::proxy::MediaProxy>>,
    pub hub: Arc<Hub>,
    /// How often the server pings: less than the node's idle timeout, so a quiet stream whose
    /// client answers pings stays open, and one whose client is gone is noticed.
    pub ping_every: Duration,
    /// SHA-256 of the stream's access token: `revoke` events name tokens by it.
    pub token_hash: Vec<u8>,
    /// Held until the stream ends: its place under the stream limits and under the node's
    /// connection cap (`None` only when served outside `web::server`, as in unit tests).
    pub admission: Admission,
    /// The connection's place under the node's cap (`web::server::ConnectionSlot`), only
    /// held, never looked at: type-erased so the domain needs nothing of the HTTP server.
    pub slot: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// The accounts the viewer mutes or blocks, whose statuses (and notifications, as the
    /// mute says) this stream leaves out; reloaded when a `relationship` event names the
    /// viewer.
    pub hidden: Hidden,
    /// The viewer's filters, applied to every status and notification it is sent; reloaded
    /// when a `filters` event names the viewer.
    pub filters: Active,
    /// Whether each author seen so far is on a blocked domain (only asked when the viewer
    /// blocks domains: one lookup per author per stream, then this answers).
    pub author_domains: std::sync::Mutex<std::collections::HashMap<Uuid, bool>>,
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
    /// The stream's token was revoked.
    Revoked,
}

impl Session {
    fn site(&self) -> crate::mastodon::Site<'_> {
        crate::mastodon::Site::new(&self.origin, &self.drive, self.media_proxy.as_deref())
    }

    /// Runs the stream until the client leaves, lags, or the node stops.
    ///
    /// The session is boxed: every level of the stream's future (axum's upgrade task, `run`,
    /// `serve`) keeps its own copy of its arguments, a pointer instead of ~400 bytes each.
    pub async fn run(self: Box<Self>, socket: WebSocket) {
        let hub = self.hub.clone();
        hub.track(self.serve(socket)).await;
    }

    async fn serve(mut self: Box<Self>, socket: WebSocket) {
        // Subscribed before anything else: events from now on are this stream's.
        let events = self.hub.subscribe(self.viewer, &self.streams);
        let mut out = Outbox::new(socket);
        // The timer is looked at only when nothing else is waiting (`next_wake`): ticks missed
        // while events kept the stream busy are one ping later, not a burst of them.
        let mut ping = Pinger::new(self.ping_every);
        // Revoked between the handshake's check and the subscription: no `revoke` event is
        // coming for it any more. A database error here is no reason to refuse the stream
        // (the event would still come if it were revoked now).
        if let Ok(false) = Box::pin(self.token_exists()).await {
            self.hub.revoked();
            Box::pin(out.finish(revoked_close(), GOODBYE)).await;
            return;
        }
        let mut streak = 0;
        // The rare or heavy steps (commands, reloads, a delivery's render and its queries)
        // are boxed: an async fn's future is as large as its largest await, and this one
        // lives as long as the connection. Inline they made it 6.2 KB per open stream; boxed
        // it is 1.5 KB, and the render's state exists only while it runs.
        let end = loop {
            match poll_fn(|cx| next_wake(cx, &mut out, &events, &mut ping, &mut streak)).await {
                Wake::Written(r) => {
                    if r.is_err() {
                        break End::Gone;
                    }
                }
                Wake::Incoming(m) => match m {
                    Some(Ok(Message::Text(t))) => {
                        let before = self.streams.clone();
                        let reply = Box::pin(self.command(t.as_str())).await;
                        if self.streams != before {
                            events.follow(&self.streams);
                        }
                        if let Some(reply) = reply
                            && out.offer(reply).is_err()
                        {
                            break End::Slow;
                        }
                    }
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break End::Gone,
                    // Pongs answer our pings; tungstenite answers the client's.
                    Some(Ok(_)) => {}
                },
                Wake::Ping => {
                    if out.offer(Message::Ping(Default::default())).is_err() {
                        break End::Slow;
                    }
                }
                Wake::Event(Received::Event(e)) => {
                    if e.kind == "revoke" {
                        if e.tokens.contains(&self.token_hash) {
                            break End::Revoked;
                        }
                        continue;
                    }
                    if e.kind == "relationship" {
                        if e.accounts.contains(&self.viewer) {
                            Box::pin(self.reload_hidden()).await;
                        }
                        continue;
                    }
                    if e.kind == "filters" {
                        if e.accounts.contains(&self.viewer) {
                            Box::pin(self.reload_filters()).await;
                            if let Some(m) = self.filters_changed()
                                && out.offer(m).is_err()
                            {
                                break End::Slow;
                            }
                        }
                        continue;
                    }
                    if Box::pin(self.deliver(&e, &mut out)).await.is_err() {
                        break End::Slow;
                    }
                    // Written at once when the socket takes it (it nearly always does): one
                    // pass of this loop per delivered event instead of two. If the socket is
                    // busy, the next pass finishes the write when it can.
                    if out.pending()
                        && let Some(Err(_)) = out.write().now_or_never()
                    {
                        break End::Gone;
                    }
                }
                Wake::Event(Received::Lagged) => break End::Slow,
                Wake::Event(Received::Closed) => break End::Closing,
            }
        };
        match end {
            End::Slow => {
                // Nothing queued is written to a socket that is not read: the close (1013)
                // follows what the socket holds if it takes it within SLOW_CLOSE, and the
                // connection ends.
                self.hub.dropped();
                let bye = Message::Close(Some(CloseFrame {
                    code: close_code::AGAIN,
                    reason: "too slow".into(),
                }));
                Box::pin(out.abandon(bye, SLOW_CLOSE)).await;
                tracing::info!(account = %self.viewer, "streaming client too slow; disconnected");
            }
            End::Closing => {
                // "Going away": clients reconnect, through the load balancer, to another node.
                let bye = Message::Close(Some(CloseFrame {
                    code: close_code::AWAY,
                    reason: "server shutting down".into(),
                }));
                Box::pin(out.finish(bye, GOODBYE)).await;
            }
            End::Revoked => {
                self.hub.revoked();
                tracing::info!(account = %self.viewer, "stream closed: its access token was revoked");
                // What is queued was rendered before the revocation committed (events come in
                // commit order); the close follows it and nothing else does.
                Box::pin(out.finish(revoked_close(), GOODBYE)).await;
            }
            End::Gone => {}
        }
    }

    async fn token_exists(&self) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM account_tokens WHERE token_hash = $1)")
            .bind(&self.token_hash)
            .fetch_one(&self.pool)
            .await
    }

    /// Whether any of `authors` is an actor on a domain the viewer blocks. A lookup that fails
    /// counts as not blocked (the status was readable; the block is a preference).
    async fn on_blocked_domain(&self, authors: &[Uuid]) -> bool {
        if self.hidden.domains.is_empty() {
            return false;
        }
        for author in authors {
            let known = self
                .author_domains
                .lock()
                .ok()
                .and_then(|m| m.get(author).copied());
            let blocked = match known {
                Some(b) => b,
                None => {
                    let b: bool = sqlx::query_scalar(
                        "SELECT coalesce((SELECT hollo_host_in(hollo_iri_host(iri), $2)
                                            FROM remote_actors WHERE id = $1), false)",
                    )
                    .bind(author)
                    .bind(&self.hidden.domains)
                    .fetch_one(&self.pool)
                    .await
                    .unwrap_or(false);
                    if let Ok(mut m) = self.author_domains.lock() {
                        if m.len() >= AUTHOR_CACHE {
                            m.clear();
                        }
                        m.insert(*author, b);
                    }
                    b
                }
            };
            if blocked {
                return true;
            }
        }
        false
    }

    /// What the viewer hides, read again (a mute or block changed). On a database error the
    /// stream keeps what it had: the next `relationship` event tries again.
    async fn reload_hidden(&mut self) {
        let urls = crate::mastodon::Urls::new(&self.origin);
        match Hidden::of(&self.pool, urls, Some(self.viewer)).await {
            Ok(h) => {
                self.hidden = h;
                // The blocked domains may have changed: what was decided per author too.
                if let Ok(mut m) = self.author_domains.lock() {
                    m.clear();
                }
            }
            Err(err) => tracing::warn!(error = %err, "reloading a stream's mutes failed"),
        }
    }

    /// The viewer's filters, read again (changed, or one ran out). On a database error the
    /// stream keeps what it had: the next `filters` event tries again.
    async fn reload_filters(&mut self) {
        match Active::of(&self.pool, Some(self.viewer)).await {
            Ok(f) => self.filters = f,
            Err(err) => tracing::warn!(error = %err, "reloading a stream's filters failed"),
        }
    }

    /// Mastodon's `filters_changed` (no payload), for a connection with a `user` stream.
    fn filters_changed(&self) -> Option<Message> {
        let user = self.streams.iter().find(|s| **s == Stream::User)?;
        let m = json!({ "stream": user.names(), "event": "filters_changed" });
        Some(Message::Text(m.to_string().into()))
    }

    /// `sh` as this viewer is shown it in `context`: `None` when a `hide` filter takes it
    /// out (or the filters could not be applied), `sh` itself (its JSON and messages as
    /// rendered) when no filter matches. Keywords are matched off the async workers.
    async fn filtered(&self, context: Context, sh: &Arc<SharedStatus>) -> Option<Payload> {
        if self.filters.is_empty() {
            return Some(Payload::Shared(sh.clone()));
        }
        let s = self
            .filters
            .apply(context, vec![sh.status.clone()])
            .await
            .ok()?
            .pop()?;
        if s.filtered.is_empty() {
            Some(Payload::Shared(sh.clone()))
        } else {
            Some(Payload::Own(render::json(&s).into()))
        }
    }

    /// A client's `subscribe` / `unsubscribe`; the answer to send, if any (Mastodon's error
    /// shape for what it cannot do).
    async fn command(&mut self, text: &str) -> Option<Message> {
        let error = |e: &str| {
            Some(Message::Text(
                json!({ "error": e, "status": 400 }).to_string().into(),
            ))
        };
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            return error("Invalid JSON");
        };
        let name = v["stream"].as_str().unwrap_or_default();
        let stream = match Stream::parse(name, v["tag"].as_str(), v["list"].as_str()) {
            Ok(s) => s,
            Err(e) => return error(&e.to_string()),
        };
        match v["type"].as_str() {
            Some("subscribe") => {
                if !self.grants.allow(&stream) {
                    return error("Access token does not have the required scopes");
                }
                if let Stream::List(list) = stream {
                    match crate::lists::owned_by(&self.pool, list, self.viewer).await {
                        Ok(true) => {}
                        Ok(false) => return error("Not authorized to stream this list"),
                        Err(_) => return error("Could not check the list"),
                    }
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
    async fn deliver(&self, e: &Event, out: &mut Outbox) -> Result<(), Full> {
        if e.kind == "notification" && !self.grants.notifications {
            return Ok(());
        }
        // Muted and blocked accounts' statuses and (as the mute says) notifications.
        let by_hidden = match e.kind.as_str() {
            "notification" => e.authors.iter().any(|a| self.hidden.quiet.contains(a)),
            "delete" => false,
            _ => e.authors.iter().any(|a| self.hidden.ids.contains(a)),
        };
        if by_hidden || (e.kind != "delete" && self.on_blocked_domain(&e.authors).await) {
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
            let text = match &payload {
                Payload::Shared(sh) => sh.frame(s, &e.event),
                Payload::Own(p) => message(&s.names(), &e.event, p).into(),
            };
            out.offer(Message::Text(text))?;
        }
        Ok(())
    }

    /// The event's `payload`: a JSON string of the entity, or the deleted id. A public
    /// stream's status is rendered once per node and event, by whichever stream sends it
    /// first (the others wait for that render and reuse it): 300 streams cost one render of
    /// a public post, not 300 (R-API). A home or list status is rendered once per node,
    /// event and viewer the same way (the viewer's streams that send it at once share it).
    /// The renders are boxed: a `OnceCell` init future is part of every waiter's future, and
    /// while a post goes out every stream of the node waits on one (7 KB each inline).
    async fn payload(&self, e: &Event) -> Result<Option<Payload>, sqlx::Error> {
        match (
            e.kind.as_str(),
            e.event.as_str(),
            e.post_id,
            e.notification_id,
        ) {
            (_, "delete", Some(id), _) => Ok(Some(Payload::Own(id.to_string().into()))),
            ("public", "update" | "status.update", Some(id), _) => {
                let shared = e
                    .shared
                    .get_or_try_init(|| {
                        Box::pin(async {
                            self.hub.rendered_shared();
                            let s = render::public_status(&self.pool, self.site(), id).await?;
                            Ok::<_, sqlx::Error>(
                                s.map(|status| Arc::new(SharedStatus::new(status))),
                            )
                        })
                    })
                    .await?;
                Ok(match shared.as_ref() {
                    Some(sh) => Box::pin(self.filtered(Context::Public, sh)).await,
                    None => None,
                })
            }
            // Home and list events: the home context, as Mastodon applies it to both.
            (_, "update" | "status.update", Some(id), _) => {
                let mine = e.viewer_render(self.viewer);
                let shared = mine
                    .get_or_try_init(|| {
                        Box::pin(async {
                            let s =
                                render::status(&self.pool, self.site(), self.viewer, id).await?;
                            Ok::<_, sqlx::Error>(
                                s.map(|status| Arc::new(SharedStatus::new(status))),
                            )
                        })
                    })
                    .await
                    .cloned();
                drop(mine);
                e.viewer_done(self.viewer);
                Ok(match shared?.as_ref() {
                    Some(sh) => Box::pin(self.filtered(Context::Home, sh)).await,
                    None => None,
                })
            }
            (_, "notification", _, Some(id)) => {
                let n = Box::pin(render::notification(
                    &self.pool,
                    self.site(),
                    self.viewer,
                    id,
                ))
                .await?;
                let Some(n) = n else { return Ok(None) };
                let shown = Box::pin(self.filters.apply_notifications(vec![n])).await;
                Ok(shown
                    .ok()
                    .and_then(|mut n| n.pop())
                    .map(|n| Payload::Own(render::json(&n).into())))
            }
            _ => Ok(None),
        }
    }
}

/// What woke a stream, in the order [`next_wake`] looks.
enum Wake {
    /// What was queued went to the socket (or the socket failed).
    Written(Result<(), axum::Error>),
    /// An event from the hub.
    Event(Received),
    /// A message from the client, or the end of its socket.
    Incoming(Option<Result<Message, axum::Error>>),
    Ping,
}

/// Events in a row looked at before the client's messages when both are waiting.
const EVENTS_FIRST: u32 = 16;

/// One poll of everything a stream waits on, by hand rather than `select!`: every event wakes
/// a stream, and a `select!` builds and polls each branch's future in order on every wake
/// (the socket's read side, the ping timer) before it reaches the mailbox. Here the mailbox
/// comes first while it has events — the read side and the timer are only polled once it is
/// empty, to wait — except that after [`EVENTS_FIRST`] events in a row the client's messages
/// come first, so a stream of events never starves a client's commands or close.
///
/// A subscription takes effect when the stream reads it: events published before that are
/// not sent, as with Mastodon, whose streaming server subscribes on reading the command too.
fn next_wake(
    cx: &mut std::task::Context<'_>,
    out: &mut Outbox,
    events: &Subscription,
    ping: &mut Pinger,
    streak: &mut u32,
) -> Poll<Wake> {
    // What is queued goes out before anything else is read, all of it in one flush.
    if out.pending()
        && let Poll::Ready(r) = out.poll_write(cx)
    {
        return Poll::Ready(Wake::Written(r));
    }
    let events_first = *streak < EVENTS_FIRST;
    if events_first && let Poll::Ready(r) = events.poll_recv(cx) {
        *streak += 1;
        return Poll::Ready(Wake::Event(r));
    }
    if let Poll::Ready(m) = out.poll_incoming(cx) {
        *streak = 0;
        return Poll::Ready(Wake::Incoming(m));
    }
    // Looked at above unless the streak skipped it: then its waker is registered and an
    // event put since wakes the task again.
    if !events_first && let Poll::Ready(r) = events.poll_recv(cx) {
        *streak = 0;
        return Poll::Ready(Wake::Event(r));
    }
    *streak = 0;
    if ping.poll(cx).is_ready() {
        return Poll::Ready(Wake::Ping);
    }
    Poll::Pending
}

/// A stream's ping timer, polled only when it may have fired. Every delivered event wakes the
/// stream, which then waits again on all it waits on; a tokio `Sleep` polled on each of those
/// waits re-registers the task in the timer and takes from the task's cooperative budget,
/// for nothing until its deadline (`perf` of a node walking 10 000 streams: a few per cent of
/// its CPU). Once polled and pending it wakes the task by itself when it fires, so until the
/// deadline passes a look at the clock is enough.
struct Pinger {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    every: Duration,
    /// The sleep was polled (its waker is registered) since it was last reset.
    armed: bool,
}

impl Pinger {
    fn new(every: Duration) -> Pinger {
        Pinger {
            sleep: Box::pin(tokio::time::sleep(every)),
            every,
            armed: false,
        }
    }

    /// Ready when a ping is due; the next one is due `every` after this (missed ticks are
    /// not made up).
    fn poll(&mut self, cx: &mut std::task::Context<'_>) -> Poll<()> {
        if self.armed && tokio::time::Instant::now() < self.sleep.deadline() {
            return Poll::Pending;
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                let next = tokio::time::Instant::now() + self.every;
                self.sleep.as_mut().reset(next);
                self.armed = false;
                Poll::Ready(())
            }
            Poll::Pending => {
                self.armed = true;
                Poll::Pending
            }
        }
    }
}

/// What a stream sends for an event: a status it shares with other sockets (its messages
/// too), or a payload of its own.
enum Payload {
    Shared(Arc<SharedStatus>),
    Own(Arc<str>),
}

/// The close of a stream whose token was revoked: policy violation, as the token no longer
/// authorizes it.
fn revoked_close() -> Message {
    Message::Close(Some(CloseFrame {
        code: close_code::POLICY,
        reason: "access token revoked".into(),
    }))
}
