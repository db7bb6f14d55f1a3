//! The collector: claim a job and its host, walk the `replies` collection, record the outcome.
//!
//! Every write after the claim is fenced on the job's `claim` token and `status = 'processing'`:
//! a worker whose lease expired (and whose job recovery handed to someone else) finds its writes
//! matching nothing and stops without touching the new owner's run.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{CollectPayload, dispatch};
use crate::config::ReplyConfig;
use crate::federation::Federation;
use crate::federation::actors::actor::{id_of, parse_actor, store_actor};
use crate::federation::inbound::notes::store_note;
use crate::federation::iri::same_origin;
use crate::federation::normalize::normalize;
use crate::federation::transport::fetch::FetchError;
use crate::federation::transport::signature::SigningKey;
use crate::federation::vocab;
use crate::queue::{JobContext, TaskError};

/// While a request is in flight the host row is held this much longer than the interval, so a
/// request that outlives the interval still cannot overlap the next one; the real next time is
/// set from the moment the response is in.
const IN_FLIGHT_HOLD: Duration = Duration::from_secs(30);

pub struct Collector {
    pub fed: Arc<Federation>,
    pub cfg: ReplyConfig,
    pub stop: CancellationToken,
}

/// A claimed job as the walk needs it.
struct Run {
    id: Uuid,
    claim: i32,
    host: String,
    post_iri: String,
    replies_iri: String,
    account: Option<Uuid>,
    max_depth: u32,
    /// Counters recorded by earlier attempts: pages, requests, stored, skipped.
    done: (i32, i32, i32, i32),
    /// Where an earlier attempt stopped, if it did not finish.
    frontier: Option<Frontier>,
}

/// The walk's state — sources still to visit, IRIs already seen (a collection that links back
/// to itself ends, it does not loop until the request cap), items counted — saved with the
/// counters after every fetch, so a walk stopped by a 429, a shutdown or a crash resumes where
/// it was instead of re-walking pages already stored on the job's request cap.
#[derive(Serialize, Deserialize, Debug)]
struct Frontier {
    todo: VecDeque<(Src, u32)>,
    seen: HashSet<String>,
    items: i32,
}

impl Frontier {
    /// A fresh walk: the top of the job's collection, at reply depth 1.
    fn start(replies_iri: &str) -> Frontier {
        Frontier {
            todo: VecDeque::from([(Src::Iri(replies_iri.to_string()), 1)]),
            seen: HashSet::new(),
            items: 0,
        }
    }
}

/// How a walk ended.
enum End {
    Done {
        partial: bool,
    },
    RateLimited(Duration),
    /// Why, as the job shows it to any reader of the API (`GET /api/v1/reply-collections/…`):
    /// what the remote answered, never what our guard, resolver or database found (issue 61
    /// F7: the address an internal name resolves to is an oracle). Details are logged.
    Failed(String),
    /// Shutdown: back to waiting without a recorded failure.
    Stopped,
    /// Our fence no longer matches: someone else owns the job now.
    LostLease,
}

impl End {
    /// A database error ends the attempt; what it said is logged, not shown.
    fn db(e: sqlx::Error) -> End {
        tracing::warn!(error = %e, "reply collection: database error");
        End::Failed("database unavailable".into())
    }
}

#[derive(Default)]
struct Counters {
    pages: i32,
    requests: i32,
    items: i32,
    stored: i32,
    skipped: i32,
    /// Other servers' documents handed to jobs of their own in this attempt.
    handed_off: i32,
}

impl Collector {
    pub async fn handle(&self, ctx: JobContext, p: CollectPayload) -> Result<(), TaskError> {
        let Some(run) = self.claim(&ctx, p.job_id).await? else {
            return Ok(());
        };
        let heartbeat_stop = CancellationToken::new();
        let heartbeat = tokio::spawn(heartbeat(
            ctx.pool.clone(),
            run.id,
            run.claim,
            self.cfg.clone(),
            heartbeat_stop.clone(),
        ));
        // Pages, requests, stores and items seen add up over a job's attempts (the caps bound
        // what one job costs the remote), as the walk itself resumes where it stopped.
        let mut run = run;
        let mut walk = match run.frontier.take() {
            Some(f) => {
                tracing::info!(job = %run.id, "reply collection resumes where its last attempt stopped");
                f
            }
            None => Frontier::start(&run.replies_iri),
        };
        let mut n = Counters {
            pages: run.done.0,
            requests: run.done.1,
            stored: run.done.2,
            skipped: run.done.3,
            items: walk.items,
            handed_off: 0,
        };
        let end = self.walk(&ctx.pool, &run, &mut n, &mut walk).await;
        heartbeat_stop.cancel();
        let _ = heartbeat.await;
        walk.items = n.items;
        self.finish(&ctx.pool, &run, &n, end, &walk).await?;
        Ok(())
    }

    /// One transaction: lock the job, then its host; take both, or explain why not and make
    /// sure the job gets another wake-up when it can run. The queue message completes here.
    async fn claim(&self, ctx: &JobContext, job: Uuid) -> Result<Option<Run>, TaskError> {
        let mut tx = ctx.pool.begin().await?;
        type Job = (String, String, String, String, Option<Uuid>, i32, f64);
        let row: Option<Job> = sqlx::query_as(
            "SELECT status, host, post_iri, replies_iri, account_id, max_depth,
                    GREATEST(EXTRACT(EPOCH FROM next_attempt_at - now()), 0)::float8
               FROM reply_collection_jobs WHERE id = $1 FOR UPDATE",
        )
        .bind(job)
        .fetch_optional(&mut *tx)
        .await?;
        if !ctx.complete_in(&mut tx).await? {
            return Ok(None); // another worker runs this message now
        }
        let Some((status, host, post_iri, replies_iri, account, max_depth, wait)) = row else {
            tx.commit().await?;
            return Ok(None);
        };
        if status != "waiting" {
            // Running elsewhere (its lease guards it) or finished: this wake-up is stale.
            tx.commit().await?;
            return Ok(None);
        }
        if wait > 0.0 {
            dispatch(&mut tx, job, Duration::from_secs_f64(wait)).await?;
            tx.commit().await?;
            return Ok(None);
        }
        sqlx::query(
            "INSERT INTO reply_collection_hosts (host) VALUES ($1) ON CONFLICT (host) DO NOTHING",
        )
        .bind(&host)
        .execute(&mut *tx)
        .await?;
        // Busy = leased to another job that is still processing under a live lease.
        let (busy, cooling): (bool, f64) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM reply_collection_jobs j
                             WHERE j.id = h.processing_job_id AND j.id <> $2
                               AND j.status = 'processing' AND j.lease_until > now()),
                    GREATEST(COALESCE(EXTRACT(EPOCH FROM h.cooldown_until - now()), 0), 0)::float8
               FROM reply_collection_hosts h WHERE h.host = $1 FOR UPDATE",
        )
        .bind(&host)
        .bind(job)
        .fetch_one(&mut *tx)
        .await?;
        if busy {
            // The running job dispatches the host's next waiting job when it ends; recovery
            // is the safety net if it dies.
            sqlx::query(
                "UPDATE reply_collection_jobs SET next_dispatch_at = now(), updated_at = now() WHERE id = $1",
            )
            .bind(job)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            return Ok(None);
        }
        if cooling > 0.0 {
            sqlx::query(
                "UPDATE reply_collection_jobs
                    SET next_attempt_at = now() + $2 * interval '1 second', updated_at = now()
                  WHERE id = $1",
            )
            .bind(job)
            .bind(cooling)
            .execute(&mut *tx)
            .await?;
            dispatch(&mut tx, job, Duration::from_secs_f64(cooling)).await?;
            tx.commit().await?;
            return Ok(None);
        }
        type Claimed = (i32, i32, i32, i32, i32, Option<Value>);
        let (claim, pages, requests, stored, skipped, frontier): Claimed = sqlx::query_as(
            "UPDATE reply_collection_jobs
                SET status = 'processing', attempts = attempts + 1, claim = claim + 1,
                    claimed_by = $2, lease_until = now() + $3 * interval '1 second',
                    heartbeat_at = now(), started_at = COALESCE(started_at, now()),
                    error = NULL, updated_at = now()
              WHERE id = $1
              RETURNING claim, pages_fetched, requests, items_stored, items_skipped, frontier",
        )
        .bind(job)
        .bind(ctx.node_id)
        .bind(self.cfg.lease.as_secs_f64())
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE reply_collection_hosts SET processing_job_id = $2, processing_started_at = now()
              WHERE host = $1",
        )
        .bind(&host)
        .bind(job)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(Run {
            id: job,
            claim,
            host,
            post_iri,
            replies_iri,
            account,
            // The worker's limit applies even when a job asked for more.
            max_depth: (max_depth.max(1) as u32).min(self.cfg.max_depth),
            done: (pages, requests, stored, skipped),
            // A frontier we cannot read (written by another version) only costs a re-walk.
            frontier: frontier.and_then(|f| match serde_json::from_value(f) {
                Ok(f) => Some(f),
                Err(e) => {
                    tracing::warn!(job = %job, error = %e, "unreadable reply-walk frontier; starting from the top");
                    None
                }
            }),
        }))
    }

    /// The local actor whose key signs: the requesting account, else the instance actor
    /// (R-RPL-8: every fetch is signed; a job nobody asked for speaks for the server).
    async fn signer(&self, pool: &PgPool, run: &Run) -> Result<SigningKey, String> {
        match run.account {
            Some(id) => self
                .fed
                .signing_key_of(pool, id)
                .await
                .map_err(|e| format!("signing key: {e:#}")),
            None => self
                .fed
                .instance_key(pool)
                .await
                .map(|k| k.signing.clone())
                .map_err(|e| format!("instance actor's key: {e:#}")),
        }
    }

    /// Breadth-first over collections and pages; `depth` is the reply level of the items a
    /// collection holds (1 = replies to the post).
    async fn walk(&self, pool: &PgPool, run: &Run, n: &mut Counters, w: &mut Frontier) -> End {
        let signer = match self.signer(pool, run).await {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!(job = %run.id, error = %e, "reply collection: no signing key");
                return End::Failed("no usable signing key".into());
            }
        };
        while let Some((src, depth)) = w.todo.pop_front() {
            let fetched = matches!(src, Src::Iri(_));
            let doc = match src {
                // Inline documents came in a page fetched from the job's host.
                Src::Inline(Value::Null) => continue,
                Src::Inline(v) => v,
                Src::Iri(iri) => {
                    if !w.seen.insert(iri.clone()) {
                        continue;
                    }
                    if !same_origin(&iri, &run.replies_iri) {
                        // Another server's document (a thread's replies come from many): a
                        // job of its own, paced by that server's host row (R-RPL-2), with the
                        // depth left below this point. This job stays on its one host.
                        if n.handed_off >= self.cfg.max_items as i32 {
                            n.skipped += 1;
                            continue;
                        }
                        let room = run.max_depth.saturating_sub(depth) + 1;
                        match super::request(pool, &run.post_iri, &iri, run.account, room).await {
                            Ok(_) => n.handed_off += 1,
                            Err(super::RequestError::BadIri(_)) => n.skipped += 1,
                            Err(super::RequestError::Db(e)) => {
                                return End::db(e);
                            }
                        }
                        continue;
                    }
                    if n.requests >= self.cfg.max_requests as i32 {
                        return End::Done { partial: true };
                    }
                    match self.fetch(pool, run, &signer, &iri, n).await {
                        Ok(v) => v,
                        Err(end) => {
                            if matches!(end, End::RateLimited(_) | End::Stopped) {
                                // Not visited after all: first in line for the next attempt.
                                w.seen.remove(&iri);
                                w.todo.push_front((Src::Iri(iri), depth));
                            }
                            return end;
                        }
                    }
                }
            };
            let ty = doc.get("type").and_then(Value::as_str).unwrap_or_default();
            if vocab::is_note(ty) {
                // A reply given by IRI, now fetched.
                if n.items >= self.cfg.max_items as i32 {
                    return End::Done { partial: true };
                }
                match self.author_known(pool, run, &signer, &doc, n).await {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(end) => return end,
                }
                match self.store(pool, run, &doc, n).await {
                    Ok(true) => {}
                    Ok(false) => return End::LostLease,
                    Err(e) => return End::db(e),
                }
                if depth < run.max_depth
                    && let Some(r) = doc.get("replies")
                {
                    w.todo.push_back((source_of(r), depth + 1));
                }
                if fetched && !self.save_progress(pool, run, n, w).await {
                    return End::LostLease;
                }
                continue;
            }
            n.pages += 1;
            let items = doc
                .get("orderedItems")
                .or_else(|| doc.get("items"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for item in items {
                match item {
                    Value::String(iri) => {
                        if w.seen.contains(&iri) {
                            continue;
                        }
                        // Fetched (and counted) when its turn comes.
                        w.todo.push_back((Src::Iri(iri), depth));
                    }
                    Value::Object(_) => {
                        let ty = item.get("type").and_then(Value::as_str).unwrap_or_default();
                        let Some(id) = item.get("id").and_then(Value::as_str) else {
                            n.skipped += 1;
                            continue;
                        };
                        if !vocab::is_note(ty) || !w.seen.insert(id.to_string()) {
                            continue;
                        }
                        if n.items >= self.cfg.max_items as i32 {
                            return End::Done { partial: true };
                        }
                        match self.author_known(pool, run, &signer, &item, n).await {
                            Ok(true) => {}
                            Ok(false) => continue,
                            Err(end) => return end,
                        }
                        match self.store(pool, run, &item, n).await {
                            Ok(true) => {}
                            Ok(false) => return End::LostLease,
                            Err(e) => return End::db(e),
                        }
                        if depth < run.max_depth
                            && let Some(r) = item.get("replies")
                        {
                            w.todo.push_back((source_of(r), depth + 1));
                        }
                    }
                    _ => n.skipped += 1,
                }
            }
            // The collection's first page, or a page's next one: same depth.
            for key in ["first", "next"] {
                if let Some(v) = doc.get(key) {
                    w.todo.push_back((source_of(v), depth));
                }
            }
            if !self.save_progress(pool, run, n, w).await {
                return End::LostLease;
            }
        }
        End::Done { partial: false }
    }

    /// One paced, signed, guarded GET. The host row is the pacer for every worker: a
    /// row-locked upsert either takes the slot (and holds the host while the request is in
    /// flight) or says how long to wait.
    async fn fetch(
        &self,
        pool: &PgPool,
        run: &Run,
        signer: &SigningKey,
        iri: &str,
        n: &mut Counters,
    ) -> Result<Value, End> {
        let db = End::db;
        loop {
            if self.stop.is_cancelled() {
                return Err(End::Stopped);
            }
            let wait = self.take_slot(pool, &run.host).await.map_err(db)?;
            if wait <= 0.0 {
                break;
            }
            tokio::select! {
                _ = self.stop.cancelled() => return Err(End::Stopped),
                _ = tokio::time::sleep(Duration::from_secs_f64(wait.min(60.0))) => {}
            }
        }
        n.requests += 1;
        let result = tokio::select! {
            // Shutdown drops the request: a GET is safe to repeat on the next run.
            _ = self.stop.cancelled() => Err(None),
            r = self.fed.fetch.get_object(iri, Some(signer)) => r.map(|f| f.doc).map_err(Some),
        };
        // The next request to this host waits a full interval from now, the moment the
        // response is in, so the remote sees them at least that far apart.
        sqlx::query(
            "UPDATE reply_collection_hosts
                SET next_request_at = clock_timestamp() + $2 * interval '1 second'
              WHERE host = $1",
        )
        .bind(&run.host)
        .bind(self.cfg.host_interval.as_secs_f64())
        .execute(pool)
        .await
        .map_err(db)?;
        match result {
            Ok(v) => Ok(v),
            Err(None) => Err(End::Stopped),
            Err(Some(FetchError::TooManyRequests(after))) => Err(End::RateLimited(
                after
                    .filter(|d| !d.is_zero())
                    .unwrap_or(self.cfg.retry_after_default),
            )),
            Err(Some(e)) => {
                tracing::info!(job = %run.id, iri, error = %e, "reply collection: a GET failed");
                Err(End::Failed(format!("GET {iri}: {}", e.public_reason())))
            }
        }
    }

    /// The pacing upsert: with the host row locked, either take the next request slot (0) or
    /// return the seconds until it opens. Taking it holds the host for the interval plus the
    /// in-flight hold; `fetch` shortens that once the response is in.
    async fn take_slot(&self, pool: &PgPool, host: &str) -> Result<f64, sqlx::Error> {
        let mut tx = pool.begin().await?;
        sqlx::query(
            "INSERT INTO reply_collection_hosts (host) VALUES ($1) ON CONFLICT (host) DO NOTHING",
        )
        .bind(host)
        .execute(&mut *tx)
        .await?;
        let wait: f64 = sqlx::query_scalar(
            "SELECT GREATEST(EXTRACT(EPOCH FROM next_request_at - clock_timestamp()), 0)::float8
               FROM reply_collection_hosts WHERE host = $1 FOR UPDATE",
        )
        .bind(host)
        .fetch_one(&mut *tx)
        .await?;
        if wait <= 0.0 {
            sqlx::query(
                "UPDATE reply_collection_hosts
                    SET last_request_at = clock_timestamp(),
                        next_request_at = clock_timestamp() + $2 * interval '1 second'
                  WHERE host = $1",
            )
            .bind(host)
            .bind((self.cfg.host_interval + IN_FLIGHT_HOLD).as_secs_f64())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(wait)
    }

    /// Makes sure a reply's author is stored, so the reply can be shown (a status without its
    /// account is no Mastodon entity): an unknown author on the job's host is fetched once,
    /// paced and signed like every other request of the job and counted with them. `false`
    /// (the item is skipped) when the author cannot be read; a stop, a 429 or the database
    /// end the walk as they would for a page.
    async fn author_known(
        &self,
        pool: &PgPool,
        run: &Run,
        signer: &SigningKey,
        obj: &Value,
        n: &mut Counters,
    ) -> Result<bool, End> {
        let db = End::db;
        let Some(author) = obj.get("attributedTo").and_then(id_of) else {
            return Ok(true); // `store` skips it with the rest of its checks
        };
        if !same_origin(author, &run.replies_iri) {
            return Ok(true);
        }
        let known: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM remote_actors WHERE iri = $1)")
                .bind(author)
                .fetch_one(pool)
                .await
                .map_err(db)?;
        if known {
            return Ok(true);
        }
        let doc = match self.fetch(pool, run, signer, author, n).await {
            Ok(doc) => doc,
            Err(End::Failed(e)) => {
                tracing::info!(job = %run.id, author, error = %e, "a reply's author could not be fetched; the reply is skipped");
                n.items += 1;
                n.skipped += 1;
                return Ok(false);
            }
            Err(end) => return Err(end),
        };
        // Stored only as what it was fetched as: a same-origin alias answering with another
        // actor's document does not make this reply's author known.
        let parsed = match doc.get("id").and_then(Value::as_str) {
            Some(id) if id == author => parse_actor(&doc, author),
            other => Err(crate::federation::actors::actor::ActorError::Invalid(
                format!("{author} served the document of {other:?}"),
            )),
        };
        match parsed {
            Ok(actor) => {
                store_actor(pool, &actor, &doc, None).await.map_err(db)?;
                Ok(true)
            }
            Err(e) => {
                tracing::info!(job = %run.id, author, error = %e, "a reply's author is not a usable actor; the reply is skipped");
                n.items += 1;
                n.skipped += 1;
                Ok(false)
            }
        }
    }

    /// Stores one reply once (`remote_posts` is keyed by IRI). It must live on the host of
    /// the document it came in and be attributed to an actor of that host: a collection speaks
    /// only for its own server. Returns `false` when the lease was lost.
    async fn store(
        &self,
        pool: &PgPool,
        run: &Run,
        obj: &Value,
        n: &mut Counters,
    ) -> Result<bool, sqlx::Error> {
        n.items += 1;
        // Any compaction the remote chose, read in one shape (R-AP-1).
        let obj = &normalize(obj.clone());
        let iri = obj.get("id").and_then(Value::as_str).unwrap_or_default();
        let author = obj
            .get("attributedTo")
            .and_then(id_of)
            .unwrap_or_default()
            .to_string();
        // Every document of a job comes from the job's origin (`walk` fetches nothing else, and
        // `get_object` refuses redirects and ids elsewhere); an inline object naming another
        // origin does not speak for it.
        if !same_origin(iri, &run.replies_iri) || !same_origin(&author, &run.replies_iri) {
            n.skipped += 1;
            return Ok(true);
        }
        let mut tx = pool.begin().await?;
        // Fence first: a worker that lost the job stores nothing more.
        let ours: Option<i32> = sqlx::query_scalar(
            "SELECT claim FROM reply_collection_jobs
              WHERE id = $1 AND claim = $2 AND status = 'processing' FOR SHARE",
        )
        .bind(run.id)
        .bind(run.claim)
        .fetch_optional(&mut *tx)
        .await?;
        if ours.is_none() {
            return Ok(false);
        }
        let inserted = store_note(&mut tx, iri, &author, obj, true).await?;
        tx.commit().await?;
        n.stored += inserted as i32;
        Ok(true)
    }

    /// Writes the counters and the frontier, fenced; `false` when the lease was lost.
    async fn save_progress(
        &self,
        pool: &PgPool,
        run: &Run,
        n: &Counters,
        w: &mut Frontier,
    ) -> bool {
        w.items = n.items;
        sqlx::query(
            "UPDATE reply_collection_jobs
                SET pages_fetched = $3, requests = $4, items_stored = $5, items_skipped = $6,
                    frontier = $7, updated_at = now()
              WHERE id = $1 AND claim = $2 AND status = 'processing'",
        )
        .bind(run.id)
        .bind(run.claim)
        .bind(n.pages)
        .bind(n.requests)
        .bind(n.stored)
        .bind(n.skipped)
        .bind(sqlx::types::Json(&*w))
        .execute(pool)
        .await
        .map(|r| r.rows_affected() == 1)
        .unwrap_or(true) // a blip: the final fenced write decides
    }

    /// Records the outcome, releases the host and wakes the host's next waiting job, in one
    /// transaction fenced on our claim.
    async fn finish(
        &self,
        pool: &PgPool,
        run: &Run,
        n: &Counters,
        end: End,
        frontier: &Frontier,
    ) -> Result<(), TaskError> {
        let (status, error, retry_in, cooldown): (&str, Option<String>, Option<Duration>, bool) =
            match &end {
                End::LostLease => {
                    tracing::info!(job = %run.id, "reply collection lost its lease; the new owner carries on");
                    return Ok(());
                }
                End::Done { partial: false } => ("completed", None, None, true),
                End::Done { partial: true } => ("partial", None, None, true),
                End::Failed(e) => ("failed", Some(e.clone()), None, true),
                End::RateLimited(d) => ("waiting", Some("HTTP 429".into()), Some(*d), false),
                End::Stopped => ("waiting", None, Some(Duration::ZERO), false),
            };
        let mut tx = pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE reply_collection_jobs
                SET status = $3, error = $4, pages_fetched = $5, requests = $6, items_stored = $7,
                    items_skipped = $8, claimed_by = NULL, lease_until = NULL, updated_at = now(),
                    next_attempt_at = now() + COALESCE($9, 0) * interval '1 second',
                    next_dispatch_at = now() + COALESCE($9, 0) * interval '1 second',
                    finished_at = CASE WHEN $10 THEN now() END,
                    cooldown_until = CASE WHEN $10 THEN now() + $11 * interval '1 second' ELSE cooldown_until END,
                    frontier = CASE WHEN $10 THEN NULL ELSE $12 END
              WHERE id = $1 AND claim = $2 AND status = 'processing'",
        )
        .bind(run.id)
        .bind(run.claim)
        .bind(status)
        .bind(&error)
        .bind(n.pages)
        .bind(n.requests)
        .bind(n.stored)
        .bind(n.skipped)
        .bind(retry_in.map(|d| d.as_secs_f64()))
        .bind(cooldown)
        .bind(self.cfg.cooldown.as_secs_f64())
        .bind(sqlx::types::Json(frontier))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if updated == 0 {
            return Ok(()); // recovery or another worker took it meanwhile
        }
        if let End::RateLimited(d) = &end {
            // The whole host backs off, for every worker and every job.
            sqlx::query(
                "UPDATE reply_collection_hosts
                    SET cooldown_until = GREATEST(COALESCE(cooldown_until, now()), now() + $2 * interval '1 second')
                  WHERE host = $1",
            )
            .bind(&run.host)
            .bind(d.as_secs_f64())
            .execute(&mut *tx)
            .await?;
        }
        if let Some(d) = retry_in {
            // Shutdown: another worker may take it at once (this one claims no more).
            dispatch(&mut tx, run.id, d).await?;
        }
        sqlx::query(
            "UPDATE reply_collection_hosts SET processing_job_id = NULL, processing_started_at = NULL
              WHERE host = $1 AND processing_job_id = $2",
        )
        .bind(&run.host)
        .bind(run.id)
        .execute(&mut *tx)
        .await?;
        // Hand the host to its next waiting job now rather than at the next recovery scan.
        let next: Option<(Uuid, f64)> = sqlx::query_as(
            "SELECT id, GREATEST(EXTRACT(EPOCH FROM next_attempt_at - now()), 0)::float8
               FROM reply_collection_jobs
              WHERE host = $1 AND status = 'waiting' AND id <> $2
              ORDER BY next_attempt_at, created_at LIMIT 1",
        )
        .bind(&run.host)
        .bind(run.id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((next, wait)) = next {
            dispatch(&mut tx, next, Duration::from_secs_f64(wait)).await?;
        }
        tx.commit().await?;
        match &end {
            End::Failed(e) => tracing::warn!(job = %run.id, error = %e, "reply collection failed"),
            End::RateLimited(d) => tracing::info!(job = %run.id, host = %run.host,
                retry_in_s = d.as_secs_f64(), "reply collection rate limited; back to waiting"),
            End::Stopped => {
                tracing::info!(job = %run.id, "reply collection returned to waiting on shutdown")
            }
            _ => {
                tracing::debug!(job = %run.id, status, items = n.stored, "reply collection finished")
            }
        }
        Ok(())
    }
}

/// Something to walk: an IRI to fetch, or a page or collection that came inline.
#[derive(Serialize, Deserialize, Debug)]
enum Src {
    Iri(String),
    Inline(Value),
}

/// A `first`/`next`/`replies` value: an IRI to fetch, or an inline page or collection.
fn source_of(v: &Value) -> Src {
    match v {
        Value::String(s) => Src::Iri(s.clone()),
        Value::Object(o)
            if o.contains_key("orderedItems")
                || o.contains_key("items")
                || o.contains_key("first")
                || o.contains_key("next") =>
        {
            Src::Inline(v.clone())
        }
        // `{"id": …, "type": "Collection"}` with nothing inline: fetch it.
        other => id_of(other).map_or(Src::Inline(Value::Null), |s| Src::Iri(s.to_string())),
    }
}

/// Refreshes the job's lease every half lease while the walk runs (R-RPL-3), fenced on the
/// claim; ends on its own once the fence stops matching.
async fn heartbeat(pool: PgPool, job: Uuid, claim: i32, cfg: ReplyConfig, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(cfg.heartbeat()) => {}
        }
        match sqlx::query(
            "UPDATE reply_collection_jobs
                SET lease_until = now() + $3 * interval '1 second', heartbeat_at = now()
              WHERE id = $1 AND claim = $2 AND status = 'processing'",
        )
        .bind(job)
        .bind(claim)
        .bind(cfg.lease.as_secs_f64())
        .execute(&pool)
        .await
        {
            Ok(r) if r.rows_affected() == 0 => return,
            Ok(_) => {}
            // The next beat tries again; half a lease of slack covers one missed beat.
            Err(e) => tracing::warn!(job = %job, error = %e, "reply collection heartbeat failed"),
        }
    }
}
