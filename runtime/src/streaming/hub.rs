//! One node's fan-out: events heard by its listener go to the open streams of the node that
//! they may concern. Each connection is filed under its viewer and under the audiences of its
//! public, hashtag and list streams ([`Audience`]); an event is handed only to the connections
//! filed under one of its audiences ([`super::streams::reach`]), each into its own bounded
//! mailbox ([`Mailbox`]). A connection that falls that far behind is closed rather than allowed
//! to hold memory (`session`).
//!
//! Why not one broadcast channel that every connection reads: then every event wakes every
//! connection of the node. A public post is two events (the public one and the followers' home
//! one), so 10 000 open streams were 20 000 task wake-ups per post, half of them only to find
//! the event was not theirs: the wake-ups, not the writes, were most of the node's CPU per
//! delivered message (R-API).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio_util::task::TaskTracker;
use uuid::Uuid;

use super::Event;
use super::mailbox::{Mailbox, Received};
use super::streams::{Audience, Reach, Stream, reach};
use crate::config::StreamLimits;
use crate::metrics::Metrics;

pub struct Hub {
    registry: Mutex<Registry>,
    streams: TaskTracker,
    metrics: Arc<Metrics>,
    limits: StreamLimits,
    open: Mutex<Open>,
}

/// The connections of the node, filed by viewer and by audience.
#[derive(Default)]
struct Registry {
    /// Set when the node stops serving streams: no one is filed any more.
    closed: bool,
    next_id: u64,
    /// Counts publications, so a connection filed under several of an event's audiences gets
    /// it once ([`Member::mark`]).
    generation: u64,
    members: HashMap<u64, Member>,
    by_viewer: HashMap<Uuid, HashSet<u64>>,
    by_audience: HashMap<Audience, HashSet<u64>>,
}

struct Member {
    mailbox: Arc<Mailbox>,
    viewer: Uuid,
    audiences: Vec<Audience>,
    /// The last publication handed to this connection.
    mark: u64,
}

impl Registry {
    fn file(&mut self, id: u64, audiences: &[Audience]) {
        for a in audiences {
            self.by_audience.entry(a.clone()).or_default().insert(id);
        }
    }

    fn unfile(&mut self, id: u64, audiences: &[Audience]) {
        for a in audiences {
            if let Some(set) = self.by_audience.get_mut(a) {
                set.remove(&id);
                if set.is_empty() {
                    self.by_audience.remove(a);
                }
            }
        }
    }

    fn remove(&mut self, id: u64) {
        let Some(m) = self.members.remove(&id) else {
            return;
        };
        self.unfile(id, &m.audiences);
        if let Some(set) = self.by_viewer.get_mut(&m.viewer) {
            set.remove(&id);
            if set.is_empty() {
                self.by_viewer.remove(&m.viewer);
            }
        }
    }

    /// Hands `e` to every connection in `reach`, once each. A full mailbox marks its
    /// connection lagged (it closes itself).
    fn hand_out(&mut self, e: &Arc<Event>, reach: Reach<'_>) {
        self.generation += 1;
        let generation = self.generation;
        let Registry {
            members,
            by_viewer,
            by_audience,
            ..
        } = self;
        let mut give = |id: &u64| {
            if let Some(m) = members.get_mut(id) {
                m.give(e, generation);
            }
        };
        match reach {
            Reach::All => members.values_mut().for_each(|m| m.give(e, generation)),
            Reach::Viewers(viewers) => viewers
                .iter()
                .filter_map(|v| by_viewer.get(v))
                .for_each(|set| set.iter().for_each(&mut give)),
            Reach::Audiences(audiences) => audiences
                .iter()
                .filter_map(|a| by_audience.get(a))
                .for_each(|set| set.iter().for_each(&mut give)),
        }
    }
}

impl Member {
    fn give(&mut self, e: &Arc<Event>, generation: u64) {
        if self.mark == generation {
            return;
        }
        self.mark = generation;
        self.mailbox.put(e);
    }
}

/// A connection's place in the hub: its mailbox, and its filing, which it keeps up to date
/// with its subscriptions ([`Subscription::follow`]). Dropping it takes the connection out.
pub struct Subscription {
    hub: Arc<Hub>,
    id: u64,
    mailbox: Arc<Mailbox>,
}

impl Subscription {
    /// The next event for this connection.
    pub fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Received> {
        self.mailbox.poll_recv(cx)
    }

    /// Files the connection under the audiences of `streams` (its subscriptions changed).
    pub fn follow(&self, streams: &[Stream]) {
        let audiences = audiences(streams);
        let mut reg = self.hub.registry();
        let old = match reg.members.get_mut(&self.id) {
            Some(m) => std::mem::replace(&mut m.audiences, audiences.clone()),
            None => return,
        };
        reg.unfile(self.id, &old);
        reg.file(self.id, &audiences);
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.registry().remove(self.id);
    }
}

/// The audiences `streams` are filed under, each once.
fn audiences(streams: &[Stream]) -> Vec<Audience> {
    let mut v: Vec<Audience> = streams.iter().filter_map(Stream::audience).collect();
    v.sort();
    v.dedup();
    v
}

/// The streams admitted on this node: in all and per token (by the token's hash).
#[derive(Default)]
struct Open {
    total: usize,
    per_token: HashMap<Vec<u8>, usize>,
}

/// Why a stream was not admitted (answered 429).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("too many streams for this access token (at most {0} per token)")]
    Token(usize),
    #[error("too many streams on this server, retry later")]
    Node,
}

/// A stream's place in the node's limits, held from before the upgrade until the stream ends
/// (dropping it gives the place back).
pub struct Admission {
    hub: Arc<Hub>,
    token: Vec<u8>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        // A poisoned lock only means another stream panicked while counting; the counts
        // themselves are still whole.
        let mut open = self.hub.open.lock().unwrap_or_else(|p| p.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.per_token.get_mut(&self.token) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.per_token.remove(&self.token);
            }
        }
    }
}

impl Hub {
    pub fn new(metrics: Arc<Metrics>) -> Arc<Hub> {
        Hub::with_limits(metrics, StreamLimits::default())
    }

    pub fn with_limits(metrics: Arc<Metrics>, limits: StreamLimits) -> Arc<Hub> {
        Arc::new(Hub {
            registry: Mutex::default(),
            streams: TaskTracker::new(),
            metrics,
            limits,
            open: Mutex::new(Open::default()),
        })
    }

    /// A place for one more stream of the token whose hash is `token`, within
    /// `STREAMS_PER_TOKEN` and `STREAMS_MAX`.
    pub fn admit(self: &Arc<Self>, token: &[u8]) -> Result<Admission, Refused> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let mine = open.per_token.get(token).copied().unwrap_or(0);
        let refused = if mine >= self.limits.per_token {
            Some(Refused::Token(self.limits.per_token))
        } else if open.total >= self.limits.max {
            Some(Refused::Node)
        } else {
            None
        };
        if let Some(r) = refused {
            self.metrics.stream_refused.inc();
            return Err(r);
        }
        open.total += 1;
        *open.per_token.entry(token.to_vec()).or_insert(0) += 1;
        Ok(Admission {
            hub: self.clone(),
            token: token.to_vec(),
        })
    }

    /// A poisoned lock only means a connection panicked while filing itself; the registry is
    /// still whole (every change to it is one insert or remove at a time).
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands a heard event to every open stream of this node it may concern.
    pub fn publish(&self, event: Event) {
        self.metrics.stream_events.inc();
        let e = Arc::new(event);
        self.registry().hand_out(&e, reach(&e));
    }

    /// Files a new connection of `viewer` with `streams`: events published from now on that
    /// may concern it reach its [`Subscription`]. After the node stopped serving streams the
    /// subscription is closed at once.
    pub fn subscribe(self: &Arc<Self>, viewer: Uuid, streams: &[Stream]) -> Subscription {
        let mailbox = Arc::new(Mailbox::default());
        let mut reg = self.registry();
        reg.next_id += 1;
        let id = reg.next_id;
        if reg.closed {
            mailbox.close();
        } else {
            let audiences = audiences(streams);
            reg.file(id, &audiences);
            reg.by_viewer.entry(viewer).or_default().insert(id);
            reg.members.insert(
                id,
                Member {
                    mailbox: mailbox.clone(),
                    viewer,
                    audiences,
                    mark: 0,
                },
            );
        }
        Subscription {
            hub: self.clone(),
            id,
            mailbox,
        }
    }

    /// Stops serving streams: every connection is told (its mailbox closes after what it
    /// holds) and none is filed any more.
    pub fn go_away(&self) {
        let mut reg = self.registry();
        reg.closed = true;
        for m in reg.members.values() {
            m.mailbox.close();
        }
        reg.members.clear();
        reg.by_viewer.clear();
        reg.by_audience.clear();
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Runs an open stream, counted as a connection while it runs and waited for by
    /// [`Hub::close`].
    pub async fn track<F: Future<Output = ()>>(&self, stream: F) {
        let gauge = self.metrics.stream_connections.clone();
        gauge.inc();
        self.streams.track_future(stream).await;
        gauge.dec();
    }

    /// A stream closed because its token was revoked.
    pub fn revoked(&self) {
        self.metrics.stream_revoked.inc();
    }

    /// A public payload rendered for every stream of the node.
    pub fn rendered_shared(&self) {
        self.metrics.stream_shared_renders.inc();
    }

    /// A stream closed because it could not keep up.
    pub fn dropped(&self) {
        self.metrics.stream_dropped.inc();
    }

    /// Tells every stream to close and waits (at most `within`) until they have.
    pub async fn close(&self, within: std::time::Duration) {
        self.go_away();
        self.streams.close();
        if tokio::time::timeout(within, self.streams.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                open = self.streams.len(),
                "streams still open when the node stopped"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, accounts: Vec<Uuid>, tags: &[&str]) -> Event {
        Event::for_test(kind, accounts, true, tags)
    }

    /// What `sub` holds: the kinds of its waiting events, or `closed`.
    fn drain(sub: &Subscription) -> Vec<String> {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        let mut got = vec![];
        while let Poll::Ready(r) = sub.poll_recv(&mut cx) {
            match r {
                Received::Event(e) => got.push(e.kind.clone()),
                Received::Lagged => got.push("lagged".into()),
                Received::Closed => {
                    got.push("closed".into());
                    break;
                }
            }
        }
        got
    }

    #[test]
    fn events_reach_only_the_connections_filed_for_them() {
        let hub = Hub::new(Metrics::new());
        let (me, other) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let home_only = hub.subscribe(me, &[Stream::User]);
        let public = hub.subscribe(other, &[Stream::Public, Stream::Hashtag("rust".into())]);
        let theirs = hub.subscribe(other, &[Stream::User]);
        hub.publish(event("public", vec![], &["rust"]));
        hub.publish(event("home", vec![me], &[]));
        hub.publish(event("revoke", vec![], &[]));
        assert_eq!(drain(&home_only), ["home", "revoke"]);
        assert_eq!(
            drain(&public),
            ["public", "revoke"],
            "filed twice for the public post, handed it once"
        );
        assert_eq!(drain(&theirs), ["revoke"]);

        // A subscription changed over the socket changes the filing.
        home_only.follow(&[Stream::User, Stream::HashtagLocal("rust".into())]);
        public.follow(&[Stream::User]);
        hub.publish(event("public", vec![], &["rust"]));
        assert_eq!(drain(&home_only), ["public"]);
        assert_eq!(drain(&public), Vec::<String>::new());

        // A connection that ended is out of the registry.
        drop(theirs);
        assert_eq!(
            hub.registry().by_viewer.get(&other).map(HashSet::len),
            Some(1)
        );

        hub.publish(event("home", vec![me], &[]));
        hub.go_away();
        assert_eq!(
            drain(&home_only),
            ["home", "closed"],
            "what was queued, then the close"
        );
        let late = hub.subscribe(me, &[Stream::Public]);
        assert_eq!(
            drain(&late),
            ["closed"],
            "nothing is filed once the node stops"
        );
        drop((home_only, public, late));
        let reg = hub.registry();
        assert!(reg.members.is_empty() && reg.by_audience.is_empty() && reg.by_viewer.is_empty());
    }

    #[test]
    fn admissions_count_per_token_and_per_node_and_are_given_back() {
        let hub = Hub::with_limits(
            Metrics::new(),
            StreamLimits {
                per_token: 2,
                max: 3,
            },
        );
        let a1 = hub.admit(b"a").expect("first of a");
        let a2 = hub.admit(b"a").expect("second of a");
        assert_eq!(hub.admit(b"a").err(), Some(Refused::Token(2)));
        let b1 = hub.admit(b"b").expect("b");
        assert_eq!(hub.admit(b"c").err(), Some(Refused::Node), "node full");
        drop(a1);
        let c1 = hub.admit(b"c").expect("a place came back");
        drop((a2, b1, c1));
        let open = hub.open.lock().expect("lock");
        assert_eq!((open.total, open.per_token.len()), (0, 0), "nothing leaks");
    }
}
