//! A consumer's slot bookkeeping: which handlers run, which lane each holds, and the per-kind
//! counts the heartbeat reports. The claim loop and the drain loop both go through it, so a
//! handler's slot is given back in exactly one place whichever loop sees it finish.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::task::{Id, JoinError, JoinSet};
use uuid::Uuid;

use super::registry::Lane;

/// Counts of what a consumer is running, shared with the heartbeat.
#[derive(Clone, Default)]
pub struct InFlight(Arc<Mutex<HashMap<&'static str, usize>>>);

impl InFlight {
    /// `kind` is the registry's name of the kind (static: no allocation per message).
    pub(super) fn add(&self, kind: &'static str, delta: isize) {
        if let Ok(mut m) = self.0.lock() {
            let e = m.entry(kind).or_default();
            *e = e.saturating_add_signed(delta);
            if *e == 0 {
                m.remove(kind);
            }
        }
    }
    pub fn snapshot(&self) -> HashMap<String, usize> {
        self.0
            .lock()
            .map(|m| m.iter().map(|(k, n)| (k.to_string(), *n)).collect())
            .unwrap_or_default()
    }
}

struct Slot {
    msg: Uuid,
    lane: Option<&'static str>,
    kind: &'static str,
}

pub(super) struct Slots {
    limit: usize,
    running: JoinSet<()>,
    slots: HashMap<Id, Slot>,
    lane_busy: HashMap<&'static str, usize>,
    in_flight: InFlight,
}

impl Slots {
    pub fn new(limit: usize, in_flight: InFlight) -> Self {
        Slots {
            limit,
            running: JoinSet::new(),
            slots: HashMap::new(),
            lane_busy: HashMap::new(),
            in_flight,
        }
    }

    pub fn len(&self) -> usize {
        self.running.len()
    }

    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    pub fn free(&self) -> usize {
        self.limit.saturating_sub(self.running.len())
    }

    /// Slots a lane may still take (its own limit, within the consumer's free slots).
    pub fn lane_room(&self, lane: &Lane) -> usize {
        lane.limit
            .saturating_sub(self.lane_busy.get(lane.name).copied().unwrap_or(0))
    }

    /// Runs `handler` for message `msg` of `kind` in a slot (and in `lane`'s, if any).
    pub fn spawn(
        &mut self,
        msg: Uuid,
        kind: &'static str,
        lane: Option<&'static str>,
        handler: impl Future<Output = ()> + Send + 'static,
    ) {
        if let Some(l) = lane {
            *self.lane_busy.entry(l).or_default() += 1;
        }
        self.in_flight.add(kind, 1);
        let id = self.running.spawn(handler).id();
        self.slots.insert(id, Slot { msg, lane, kind });
    }

    /// Waits for the next handler to finish and frees its slot; `None` when none runs.
    /// Returns whether it held a lane slot (freeing one may unblock lane work).
    pub async fn join_next(&mut self) -> Option<bool> {
        let done = self.running.join_next_with_id().await?;
        Some(self.free_slot(done))
    }

    /// Frees the slots of every handler that has already finished, without waiting; returns
    /// how many and whether any held a lane slot.
    pub fn reap_finished(&mut self) -> (usize, bool) {
        let (mut n, mut lane) = (0, false);
        while let Some(done) = self.running.try_join_next_with_id() {
            n += 1;
            lane |= self.free_slot(done);
        }
        (n, lane)
    }

    fn free_slot(&mut self, done: Result<(Id, ()), JoinError>) -> bool {
        let id = match &done {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        let Some(slot) = self.slots.remove(&id) else {
            return false;
        };
        self.in_flight.add(slot.kind, -1);
        match slot.lane {
            Some(l) => {
                self.lane_busy
                    .entry(l)
                    .and_modify(|n| *n = n.saturating_sub(1));
                true
            }
            None => false,
        }
    }

    /// Aborts every running handler and returns the messages they held (to hand back).
    pub async fn abort_all(&mut self) -> Vec<Uuid> {
        self.running.abort_all();
        while self.running.join_next().await.is_some() {}
        self.lane_busy.clear();
        self.slots
            .drain()
            .map(|(_, slot)| {
                self.in_flight.add(slot.kind, -1);
                slot.msg
            })
            .collect()
    }
}
