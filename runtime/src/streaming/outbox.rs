//! A stream's messages on their way to its socket: a queue of at most [`BUFFER`] and the
//! socket, written (and read) by the stream's own task.
//!
//! One task per stream, not a session task plus a writer task joined by a channel: at 10 000
//! streams a second task, its channel and its wake per message were a third of a stream's
//! memory and of its CPU per delivered message (R-API). What is queued while the socket is busy
//! goes out in one flush, so a burst of events is one write, not one per message. The socket
//! is not split into halves: one task uses both, and the halves' shared lock was taken on
//! every poll of either.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use futures::{SinkExt, StreamExt};

/// Rendered messages one connection may have queued for its socket before it is dropped.
pub const BUFFER: usize = 128;

/// The queue is full: the client does not read.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

pub struct Outbox {
    socket: WebSocket,
    queue: VecDeque<Message>,
    /// Messages handed to the socket since its last flush.
    unflushed: bool,
}

impl Outbox {
    pub fn new(socket: WebSocket) -> Outbox {
        Outbox {
            socket,
            queue: VecDeque::new(),
            unflushed: false,
        }
    }

    /// Queues `m` without waiting.
    pub fn offer(&mut self, m: Message) -> Result<(), Full> {
        if self.queue.len() >= BUFFER {
            return Err(Full);
        }
        self.queue.push_back(m);
        Ok(())
    }

    /// Whether [`Outbox::write`] has anything to do.
    pub fn pending(&self) -> bool {
        !self.queue.is_empty() || self.unflushed
    }

    /// Hands what is queued to the socket and flushes it; an error is a socket that failed.
    /// Cancel-safe: a message leaves the queue only when the socket has taken it, so this
    /// can be one branch of the stream's `select!` and lose nothing when another wins.
    pub async fn write(&mut self) -> Result<(), axum::Error> {
        poll_fn(|cx| self.poll_write(cx)).await
    }

    pub fn poll_write(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), axum::Error>> {
        while !self.queue.is_empty() {
            ready!(self.socket.poll_ready_unpin(cx))?;
            if let Some(m) = self.queue.pop_front() {
                self.socket.start_send_unpin(m)?;
                self.unflushed = true;
            }
        }
        if self.unflushed {
            ready!(self.socket.poll_flush_unpin(cx))?;
            self.unflushed = false;
        }
        Poll::Ready(Ok(()))
    }

    /// The client's next message (`None`: the socket ended).
    pub fn poll_incoming(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Message, axum::Error>>> {
        self.socket.poll_next_unpin(cx)
    }

    /// For a client that does not read: what is queued is dropped, and `bye` follows what the
    /// socket already holds if the socket takes it `within`.
    pub async fn abandon(mut self, bye: Message, within: Duration) {
        self.queue.clear();
        let _ = tokio::time::timeout(within, self.socket.send(bye)).await;
    }

    /// Sends what is queued, then `bye`, then closes the socket, for at most `within` in all.
    pub async fn finish(mut self, bye: Message, within: Duration) {
        self.queue.push_back(bye);
        let _ = tokio::time::timeout(within, async {
            self.write().await?;
            self.socket.close().await
        })
        .await;
    }
}
