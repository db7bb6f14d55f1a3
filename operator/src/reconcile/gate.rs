//! Which reconcile runs next when every slot is taken (`RECONCILE_CONCURRENCY`).
//!
//! kube-runtime's own bound keeps the wake-ups it cannot start yet in a hash set and starts
//! them in no particular order: in a burst of spec edits, the first reconcile of an edited
//! `Hollo` (the one that scales its Deployment) waited behind the wake-ups of `Hollo`s already
//! done, whose Deployments' pods were becoming ready. Here the controller starts every
//! reconcile at once and each waits at this gate for a slot: a `Hollo` whose spec has a change
//! not yet carried out (`metadata.generation` ≠ `status.observedGeneration`: an edit, a new
//! `Hollo`) goes before every other wake-up; within each class, first come first served.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

/// At most `limit` holders of a [`Permit`] at once; waiters served urgent first, then in order.
pub struct Gate {
    inner: Arc<Inner>,
    /// The generation each `Hollo` (by uid) was last reconciled at without an error: the
    /// cached `Hollo` shows that status write only when its watch event has come, and a
    /// wake-up meanwhile is not a change still to carry out.
    done: Mutex<Done>,
}

#[derive(Default)]
struct Done {
    generations: HashMap<String, i64>,
    /// Entries left by the last pruning.
    after_prune: usize,
}

/// Below this many entries the generation map is never pruned.
const PRUNE_ABOVE: usize = 64;

struct Inner {
    limit: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Permits held (a permit handed to a waiter is counted from the hand-over).
    held: usize,
    urgent: VecDeque<oneshot::Sender<()>>,
    other: VecDeque<oneshot::Sender<()>>,
}

/// A slot, released on drop (to the next waiter, if any).
pub struct Permit {
    inner: Arc<Inner>,
}

impl Gate {
    /// `limit` 0: no bound.
    pub fn new(limit: u16) -> Self {
        let limit = if limit == 0 {
            usize::MAX
        } else {
            usize::from(limit)
        };
        Self {
            inner: Arc::new(Inner {
                limit,
                state: Mutex::new(State::default()),
            }),
            done: Mutex::default(),
        }
    }

    /// Whether generation `generation` of the `Hollo` `uid` is still to be carried out by
    /// this process (the cached status may not show the last write yet).
    pub fn pending(&self, uid: &str, generation: Option<i64>) -> bool {
        let done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        done.generations.get(uid).copied() != generation
    }

    /// Generation `generation` of the `Hollo` `uid` has been carried out (`None`: it is gone).
    /// `live` lists the uids of the `Hollo`s that exist: a deleted `Hollo` is not always
    /// reconciled again, so its entry could stay; the entries of gone `Hollo`s are dropped
    /// whenever the map has doubled since it was last pruned.
    pub fn done(
        &self,
        uid: &str,
        generation: Option<i64>,
        live: impl FnOnce() -> std::collections::HashSet<String>,
    ) {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        match generation {
            Some(g) => {
                done.generations.insert(uid.to_string(), g);
            }
            None => {
                done.generations.remove(uid);
            }
        }
        // Amortized: the map at least doubles between two prunings.
        if done.generations.len() > PRUNE_ABOVE.max(2 * done.after_prune) {
            let live = live();
            done.generations.retain(|uid, _| live.contains(uid));
            done.after_prune = done.generations.len();
        }
    }

    /// Waits for a slot.
    pub async fn enter(&self, urgent: bool) -> Permit {
        let rx = {
            let mut s = self.inner.lock();
            if s.held < self.inner.limit && s.urgent.is_empty() && s.other.is_empty() {
                s.held += 1;
                return Permit {
                    inner: self.inner.clone(),
                };
            }
            let (tx, rx) = oneshot::channel();
            if urgent {
                s.urgent.push_back(tx);
            } else {
                s.other.push_back(tx);
            }
            rx
        };
        let mut waiting = Waiting {
            rx: Some(rx),
            inner: self.inner.clone(),
        };
        if let Some(rx) = waiting.rx.as_mut() {
            // The sender is only dropped unsent with the gate itself.
            let _ = rx.await;
        }
        waiting.rx = None;
        Permit {
            inner: self.inner.clone(),
        }
    }

    /// Permits held and waiters (urgent, other).
    #[cfg(test)]
    fn counts(&self) -> (usize, usize, usize) {
        let s = self.inner.lock();
        (s.held, s.urgent.len(), s.other.len())
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands a held slot to the next waiter still waiting, or frees it.
    fn release(&self) {
        let mut s = self.lock();
        while let Some(tx) = s.urgent.pop_front().or_else(|| s.other.pop_front()) {
            if tx.send(()).is_ok() {
                return;
            }
        }
        s.held = s.held.saturating_sub(1);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.inner.release();
    }
}

/// A waiter given up (its reconcile dropped): a slot handed to it meanwhile is passed on.
struct Waiting {
    rx: Option<oneshot::Receiver<()>>,
    inner: Arc<Inner>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if rx.try_recv().is_ok() {
                self.inner.release();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[tokio::test]
    async fn urgent_waiters_go_first_then_in_order() {
        let gate = Arc::new(Gate::new(1));
        let first = gate.enter(false).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = vec![];
        for (name, urgent) in [("a", false), ("b", true), ("c", false), ("d", true)] {
            let (g, order) = (gate.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _p = g.enter(urgent).await;
                order.lock().expect("order").push(name);
                tokio::task::yield_now().await;
            }));
            // Queued in this order.
            while gate.counts().1 + gate.counts().2 < tasks.len() {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(gate.counts(), (1, 2, 2));
        drop(first);
        for t in tasks {
            t.await.expect("task");
        }
        assert_eq!(*order.lock().expect("order"), ["b", "d", "a", "c"]);
        assert_eq!(gate.counts(), (0, 0, 0));
    }

    #[tokio::test]
    async fn a_waiter_given_up_passes_its_slot_on() {
        let gate = Gate::new(1);
        let held = gate.enter(false).await;
        // Given up before its turn.
        let mut gone = Box::pin(gate.enter(true));
        assert!((&mut gone).now_or_never().is_none());
        let mut next = Box::pin(gate.enter(false));
        assert!((&mut next).now_or_never().is_none());
        drop(gone);
        drop(held);
        let p = next.now_or_never().expect("the slot passed on");
        assert_eq!(gate.counts(), (1, 0, 0));
        drop(p);
        assert_eq!(gate.counts(), (0, 0, 0));
        // Given up after the slot was handed to it: not lost.
        let held = gate.enter(false).await;
        let mut handed = Box::pin(gate.enter(false));
        assert!((&mut handed).now_or_never().is_none());
        drop(held);
        drop(handed);
        assert_eq!(gate.counts(), (0, 0, 0));
        assert!(gate.enter(false).now_or_never().is_some());
    }

    #[test]
    fn generations_of_gone_hollos_are_pruned_once_the_map_doubles() {
        let gate = Gate::new(1);
        let live = |n: usize| move || (0..n).map(|i| format!("live-{i}")).collect();
        for i in 0..PRUNE_ABOVE {
            gate.done(&format!("gone-{i}"), Some(1), live(0));
        }
        assert_eq!(
            gate.done.lock().expect("done").generations.len(),
            PRUNE_ABOVE
        );
        // One more: every gone uid is dropped, the live one kept.
        gate.done("live-0", Some(3), live(1));
        assert_eq!(gate.done.lock().expect("done").generations.len(), 1);
        assert!(!gate.pending("live-0", Some(3)));
    }

    #[tokio::test]
    async fn no_bound_with_zero() {
        let gate = Gate::new(0);
        let permits: Vec<Permit> = (0..100)
            .map(|_| gate.enter(false).now_or_never().expect("free"))
            .collect();
        assert_eq!(gate.counts(), (100, 0, 0));
        drop(permits);
        assert_eq!(gate.counts(), (0, 0, 0));
    }
}
