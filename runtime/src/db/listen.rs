//! The node's one `LISTEN` connection (R-Q-1, R-MAPI-5): the queues' wake-ups and the
//! streaming API's events arrive on it, so a node holds one listening connection whatever
//! its role. A lost connection is re-established with back-off; notifications sent meanwhile
//! are gone, so after every (re)connect each subscriber is told ([`Heard::Connected`]): a
//! queue consumer is woken (its own poll covers the gap anyway), the streaming feed catches up
//! from its table.
//!
//! Subscribers only ever wait on cheap hand-offs here (a `Notify`, a bounded channel), so the
//! streaming feed's reads never delay a queue's wake-up.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::queue::retry::Backoff;

/// Where the listening connection comes from.
pub enum Source {
    /// Take the connection from the general pool.
    Pool(PgPool),
    /// Connect directly (`DATABASE_DIRECT_URL`), bypassing a transaction-mode pooler.
    Direct(String),
}

/// What a feed subscriber is told, in the order it happened on the connection.
#[derive(Debug)]
pub enum Heard {
    /// Listening (again): anything notified before this may have been missed.
    Connected,
    /// The payloads of a burst of notifications on the feed's channel.
    Payloads(Vec<String>),
}

enum Subscriber {
    /// Woken once per burst (and after a reconnect); the payload does not matter.
    Wake(Arc<Notify>),
    /// Woken by a burst with a payload naming one of `kinds` or an empty one (and after a
    /// reconnect): a queue consumer that runs only some of the queue's kinds.
    WakeFor(Arc<Notify>, HashSet<String>),
    /// Handed every payload.
    Feed(mpsc::Sender<Heard>),
}

/// Most notifications read off the connection before they are handed on.
const BURST: usize = 1000;

/// A feed's channel capacity, in bursts: a feed that falls this far behind holds the
/// connection's reader back (and with it the wake-ups, which the consumers' poll covers)
/// rather than buffering without bound.
const FEED_BACKLOG: usize = 256;

/// The channels a node listens on and who hears each.
#[derive(Default)]
pub struct Subscriptions {
    by_channel: HashMap<String, Channel>,
}

#[derive(Default)]
struct Channel {
    subscribers: Vec<Subscriber>,
    /// Whether a feed hears it: only then are its payloads kept (a wake-up needs none).
    fed: bool,
}

impl Subscriptions {
    /// `wake` is notified whenever `channel` is.
    pub fn wake(&mut self, channel: &str, wake: Arc<Notify>) {
        self.add(channel, Subscriber::Wake(wake));
    }

    /// `wake` is notified when `channel` is with a payload that is one of `kinds`, or empty.
    /// A queue's wake-up names the kind it enqueued (`queue::enqueue`); a consumer that runs
    /// other kinds would claim for nothing (R-Q-1). An empty payload, as an older node sends,
    /// wakes every consumer of the channel.
    pub fn wake_for(&mut self, channel: &str, kinds: HashSet<String>, wake: Arc<Notify>) {
        self.add(channel, Subscriber::WakeFor(wake, kinds));
    }

    /// Every payload on `channel`, and each (re)connect, arrive on the returned receiver.
    pub fn feed(&mut self, channel: &str) -> mpsc::Receiver<Heard> {
        let (tx, rx) = mpsc::channel(FEED_BACKLOG);
        self.add(channel, Subscriber::Feed(tx));
        rx
    }

    fn add(&mut self, channel: &str, s: Subscriber) {
        let c = self.by_channel.entry(channel.to_string()).or_default();
        c.fed |= matches!(s, Subscriber::Feed(_) | Subscriber::WakeFor(..));
        c.subscribers.push(s);
    }

    async fn tell_all_connected(&self) {
        for s in self.by_channel.values().flat_map(|c| &c.subscribers) {
            match s {
                Subscriber::Wake(w) | Subscriber::WakeFor(w, _) => w.notify_one(),
                // A feed that has stopped (its node is stopping) needs nothing.
                Subscriber::Feed(f) => drop(f.send(Heard::Connected).await),
            }
        }
    }

    async fn hand_on(channel: &Channel, payloads: Vec<String>) {
        for s in &channel.subscribers {
            match s {
                Subscriber::Wake(w) => w.notify_one(),
                Subscriber::WakeFor(w, kinds) => {
                    if payloads.iter().any(|p| p.is_empty() || kinds.contains(p)) {
                        w.notify_one();
                    }
                }
                Subscriber::Feed(f) => drop(f.send(Heard::Payloads(payloads.clone())).await),
            }
        }
    }
}

/// Listens until `stop`, reconnecting with back-off.
pub async fn run(source: Source, subs: Subscriptions, stop: CancellationToken) {
    let channels: Vec<&str> = subs.by_channel.keys().map(String::as_str).collect();
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
    loop {
        let connected = match &source {
            Source::Pool(pool) => PgListener::connect_with(pool).await,
            Source::Direct(url) => PgListener::connect(url).await,
        };
        let listened = match connected {
            Ok(mut l) => l.listen_all(channels.iter().copied()).await.map(|()| l),
            Err(e) => Err(e),
        };
        let mut listener = match listened {
            Ok(l) => l,
            Err(e) => {
                let delay = backoff.next_wait();
                tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64,
                    "LISTEN connection failed; consumers poll meanwhile, retrying");
                tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(delay) => {} }
                continue;
            }
        };
        backoff.reset();
        // Listening before telling: whatever commits from here on is notified, and whatever
        // a subscriber reads on `Connected` includes everything before.
        subs.tell_all_connected().await;
        loop {
            let first = tokio::select! {
                _ = stop.cancelled() => return,
                n = listener.try_recv() => n,
            };
            let first = match first {
                Ok(Some(n)) => n,
                // Lost: reconnect here, not inside sqlx, so that subscribers hear `Connected`.
                Ok(None) => {
                    tracing::warn!("LISTEN connection lost; reconnecting");
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "LISTEN connection broken; reconnecting");
                    break;
                }
            };
            // A burst (one commit notifying many times) is handed on per channel at once,
            // keyed by the subscription's own name so that reading allocates only payloads.
            let mut burst: HashMap<&str, (&Channel, Vec<String>)> = HashMap::new();
            let mut n = Some(first);
            let mut read = 0;
            while let Some(note) = n {
                if let Some((name, channel)) = subs.by_channel.get_key_value(note.channel()) {
                    let (_, payloads) = burst.entry(name).or_insert((channel, Vec::new()));
                    if channel.fed {
                        payloads.push(note.payload().to_string());
                    }
                }
                read += 1;
                n = if read < BURST {
                    listener.next_buffered()
                } else {
                    None
                };
            }
            for (channel, payloads) in burst.into_values() {
                Subscriptions::hand_on(channel, payloads).await;
            }
        }
        drop(listener);
        tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(backoff.next_wait()) => {} }
    }
}
