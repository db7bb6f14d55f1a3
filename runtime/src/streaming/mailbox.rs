//! A connection's mailbox: the events the hub handed it that its task has not read yet.
//!
//! A queue under a lock of its own and one waker, not a channel: the hub pushes into thousands
//! of mailboxes per post, and what a mailbox costs while it is empty — most of its life — is
//! a few words (a channel preallocates a block of slots and a semaphore per connection).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;

use super::Event;

/// Events a connection may have waiting before it is dropped for not keeping up. Only `Arc`s
/// are held, so this bounds what a stuck connection holds; the bound on rendered messages is
/// `outbox::BUFFER`.
pub const CAPACITY: usize = 1024;

#[derive(Default)]
pub struct Mailbox {
    queue: Mutex<VecDeque<Arc<Event>>>,
    waker: AtomicWaker,
    /// An event did not fit: the connection did not keep up.
    lagged: AtomicBool,
    /// The node stops serving streams: nothing more comes after what is queued.
    closed: AtomicBool,
}

/// What a mailbox gives.
pub enum Received {
    Event(Arc<Event>),
    /// The mailbox overflowed: the connection did not keep up.
    Lagged,
    /// The node stops serving streams.
    Closed,
}

impl Mailbox {
    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Arc<Event>>> {
        // A poisoned lock only means a pusher panicked between two whole operations.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `e` and wakes the reader; past [`CAPACITY`] the connection is marked lagged
    /// instead (it closes itself when it next reads).
    pub fn put(&self, e: &Arc<Event>) {
        {
            let mut q = self.queue();
            if q.len() >= CAPACITY {
                self.lagged.store(true, Ordering::Relaxed);
            } else {
                q.push_back(e.clone());
            }
        }
        self.waker.wake();
    }

    /// Nothing more will be put: the reader gets what is queued, then [`Received::Closed`].
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// The next event. The waker is registered before the queue is looked at, so a `put`
    /// between the two still wakes the task.
    pub fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Received> {
        if self.lagged.load(Ordering::Relaxed) {
            return Poll::Ready(Received::Lagged);
        }
        self.waker.register(cx.waker());
        if let Some(e) = self.queue().pop_front() {
            return Poll::Ready(Received::Event(e));
        }
        if self.closed.load(Ordering::Acquire) {
            return Poll::Ready(Received::Closed);
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::task::noop_waker_ref;

    fn event(id: i64) -> Arc<Event> {
        let mut e = Event::for_test("public", vec![], true, &[]);
        e.id = id;
        Arc::new(e)
    }

    fn next(m: &Mailbox) -> Poll<Option<i64>> {
        let mut cx = Context::from_waker(noop_waker_ref());
        m.poll_recv(&mut cx).map(|r| match r {
            Received::Event(e) => Some(e.id),
            Received::Lagged => Some(-1),
            Received::Closed => None,
        })
    }

    #[test]
    fn events_come_in_order_then_the_close() {
        let m = Mailbox::default();
        assert_eq!(next(&m), Poll::Pending);
        m.put(&event(1));
        m.put(&event(2));
        m.close();
        assert_eq!(next(&m), Poll::Ready(Some(1)));
        assert_eq!(next(&m), Poll::Ready(Some(2)));
        assert_eq!(next(&m), Poll::Ready(None), "closed after what was queued");
    }

    #[test]
    fn a_mailbox_that_overflows_reports_its_reader_lagged() {
        let m = Mailbox::default();
        for i in 0..CAPACITY as i64 {
            m.put(&event(i));
        }
        assert_eq!(next(&m), Poll::Ready(Some(0)), "full, not over");
        m.put(&event(-5));
        m.put(&event(-6));
        assert_eq!(next(&m), Poll::Ready(Some(-1)), "lagged at once");
        assert!(
            m.queue().len() <= CAPACITY,
            "never held more than its capacity"
        );
    }
}
