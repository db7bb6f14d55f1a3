//! Group commit of successful deliveries (R-AP-2). A fan-out finishes hundreds of deliveries
//! a second per worker; recording each in its own statement cost a commit (a WAL flush) apiece,
//! more server time than everything else a delivery does. Handlers hand their success to one
//! writer task and wait for it: the writer takes whatever has piled up while its previous
//! statement ran and records it all in one `UPDATE … FROM unnest(…)`. A handler returns only
//! once its delivery is durably recorded, exactly as before, so a message that runs again after
//! a crash still finds the delivery done and sends nothing; an idle worker adds no delay
//! (a lone success is written at once).

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

/// Successes written in one statement at most.
const MAX_BATCH: usize = 512;

struct Success {
    activity_id: String,
    inbox: String,
    status: i32,
    done: oneshot::Sender<Result<(), String>>,
}

/// The handle handlers use; the writer task lives as long as one handle does.
#[derive(Clone)]
pub struct Delivered {
    tx: mpsc::UnboundedSender<Success>,
}

impl Delivered {
    /// Starts the writer on `pool` (needs a Tokio runtime).
    pub fn start(pool: PgPool) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_loop(pool, rx));
        Delivered { tx }
    }

    /// Records the delivery of `activity_id` to `inbox` (answered `status`) and returns once it
    /// is committed.
    pub async fn record(&self, activity_id: &str, inbox: &str, status: u16) -> Result<(), String> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Success {
                activity_id: activity_id.to_string(),
                inbox: inbox.to_string(),
                status: i32::from(status),
                done,
            })
            .map_err(|_| "the delivery recorder has stopped".to_string())?;
        wait.await
            .map_err(|_| "the delivery recorder has stopped".to_string())?
    }
}

async fn write_loop(pool: PgPool, mut rx: mpsc::UnboundedReceiver<Success>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let result = write(&pool, &batch).await.map_err(|e| e.to_string());
        for s in batch.drain(..) {
            let _ = s.done.send(result.clone());
        }
    }
}

async fn write(pool: &PgPool, batch: &[Success]) -> Result<(), sqlx::Error> {
    let ids: Vec<&str> = batch.iter().map(|s| s.activity_id.as_str()).collect();
    let inboxes: Vec<&str> = batch.iter().map(|s| s.inbox.as_str()).collect();
    let statuses: Vec<i32> = batch.iter().map(|s| s.status).collect();
    sqlx::query(
        "UPDATE deliveries d SET state = 'delivered', attempts = d.attempts + 1,
                last_status = u.status, last_error = NULL, delivered_at = now(), updated_at = now()
           FROM unnest($1::text[], $2::text[], $3::int[]) AS u(activity_id, inbox, status)
          WHERE d.activity_id = u.activity_id AND d.inbox = u.inbox",
    )
    .bind(&ids)
    .bind(&inboxes)
    .bind(&statuses)
    .execute(pool)
    .await?;
    Ok(())
}
