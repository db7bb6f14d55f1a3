//! The poll-expiry standard (R-POLL-2) for any timed task: a worker process SIGKILLed while it
//! runs the task loses nothing and does nothing twice. The task is held on a row lock the test
//! takes, so the kill lands inside the handler; once the lease lapses another worker runs it,
//! once. Mute expiry and filter expiry (R-MAPI-6) are checked with it.

use super::api::WAIT;
use super::eventually;
use super::node::{Instance, SECRET};
use super::process::Hollo;

/// What to hold and what to watch: `lock` (a `SELECT … FOR UPDATE` the task blocks on), the
/// task's `kind`, and `done` (a `count(*)` that reads `before` until the task has run and
/// `after` once it has).
pub struct KilledMidTask<'a> {
    pub lock: &'a str,
    pub kind: &'a str,
    pub done: &'a str,
    pub before: i64,
    pub after: i64,
}

impl KilledMidTask<'_> {
    pub async fn check(&self, inst: &Instance) {
        let mut holder = inst.pool.begin().await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(self.lock.to_string()))
            .execute(&mut *holder)
            .await
            .unwrap();
        let env = [
            ("DATABASE_URL", inst.url.as_str()),
            ("SECRET_KEY", SECRET),
            ("PUBLIC_URL", inst.base.as_str()),
            ("NODE_TYPE", "worker"),
            ("QUEUE_LEASE_SECONDS", "3"),
            ("QUEUE_POLL_MS", "100"),
            ("HEALTH_PORT", "0"),
        ];
        let victim = Hollo::serve(&env);
        let leased = format!(
            "SELECT count(*) FROM hollo_task_message_v1
              WHERE kind = '{}' AND lease_owner IS NOT NULL",
            self.kind
        );
        eventually(WAIT, "the worker runs the task", || async {
            (inst.count(&leased).await == 1).then_some(())
        })
        .await;
        drop(victim); // SIGKILL while the task waits on the row
        holder.rollback().await.unwrap();
        assert_eq!(
            inst.count(self.done).await,
            self.before,
            "the killed task did nothing"
        );
        let _second = Hollo::serve(&env);
        eventually(WAIT, "another worker runs the task", || async {
            (inst.count(self.done).await == self.after).then_some(())
        })
        .await;
        let queued = format!(
            "SELECT count(*) FROM hollo_task_message_v1 WHERE kind = '{}'",
            self.kind
        );
        eventually(WAIT, "the message is completed", || async {
            (inst.count(&queued).await == 0).then_some(())
        })
        .await;
    }
}
