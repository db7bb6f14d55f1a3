//! Task kinds, one module each. `registry` wires every kind this binary can run.

pub mod actor_counts;
pub mod cleanups;
pub mod delivered;
pub mod delivery;
pub mod filter_expiry;
pub mod imports;
pub mod inbox;
pub mod jobs;
pub mod media;
pub mod mute_expiry;
pub mod poll_notification;
pub mod preview_card;
pub mod probe;
pub mod replies;
pub mod republish;
pub mod scheduled_status;
pub mod verify_links;

use std::sync::Arc;

use crate::federation::Federation;

use crate::config::{Config, QueueConfig};
use crate::queue::{QueueName, Registry};
use tokio_util::sync::CancellationToken;

/// Bumped whenever a queued message's format or a handler's contract changes (R-ROLE-6): the
/// operator allows a rolling upgrade only between versions that report the same number.
/// 2: `hollo.mute-expiry.v1`, which an older worker cannot run. 3: `hollo.filter-expiry.v1`
/// and `hollo.actor-counts.v1`. 4: `hollo.scheduled-status.v1` (and, not yet released,
/// `hollo.preview-card.v1`, `hollo.verify-links.v1`, `hollo.quote-update.v1` and
/// `hollo.approved-reply.v1`: no image has reported 4 yet, so they join it rather than bump
/// it).
#[cfg(not(feature = "e2e-next-tasks"))]
pub const TASK_DEFINITION_VERSION: i32 = 4;
/// The end-to-end suite's next version (feature `e2e-next-tasks`): the same handlers under a
/// higher number, so the operator's different-task-definitions path runs for real.
#[cfg(feature = "e2e-next-tasks")]
pub const TASK_DEFINITION_VERSION: i32 = 5;

/// The lane of remote reply collections: at most `REPLY_CONCURRENCY` of the task slots.
pub const REPLY_LANE: &str = "replies";

/// The slot pool of outgoing deliveries: `DELIVERY_CONCURRENCY` slots beside the activity slots.
pub const DELIVERY_POOL: &str = "deliveries";

/// The slot pool of link previews: `PREVIEW_CARD_CONCURRENCY` slots beside the task slots, so
/// pages that answer slowly or never hold only card fetches (issue 61, F5).
pub const CARD_POOL: &str = "cards";

/// Every kind this node can run. Federation kinds need `SECRET_KEY` (account keys); without
/// it they are not registered and their messages wait for a node that has it.
pub fn registry(q: &QueueConfig, fed: Option<Arc<Federation>>) -> Registry {
    let mut reg = Registry::new()
        .lane(REPLY_LANE, QueueName::Task, q.reply_concurrency)
        .slot_pool(DELIVERY_POOL, QueueName::Activity, q.delivery_concurrency);
    probe::register(&mut reg);
    poll_notification::register(&mut reg, q.poll_wakeup_chunk, fed.clone());
    mute_expiry::register(&mut reg);
    filter_expiry::register(&mut reg);
    if let Some(fed) = fed {
        inbox::register(&mut reg, fed.clone());
        actor_counts::register(&mut reg, fed.clone());
        verify_links::register(&mut reg, fed.clone());
        delivery::register(&mut reg, fed);
    }
    reg
}

/// Every task kind a consuming node runs, registered in this one place: `registry`'s, the
/// import and cleanup jobs, and reply collection, which hands running jobs back when `stop`
/// fires (R-RPL-6).
pub fn registry_for_node(
    config: &Config,
    fed: Option<Arc<Federation>>,
    stop: &CancellationToken,
) -> Registry {
    let mut reg = registry_with_jobs(config, fed.clone());
    if let Some(f) = fed {
        replies::register(&mut reg, f, config.replies.clone(), stop.clone());
    }
    reg
}

/// `registry` plus the import and cleanup jobs (R-JOB), which need this node's environment
/// and storage path, and media processing, which needs its drive. Imports resolve and follow
/// accounts, so they need federation too.
pub fn registry_with_jobs(config: &Config, fed: Option<Arc<Federation>>) -> Registry {
    let mut reg = registry(&config.queue, fed.clone()).slot_pool(
        CARD_POOL,
        QueueName::Task,
        config.federation.preview_card_concurrency,
    );
    // The configuration was validated at start; a drive object_store still refuses leaves
    // uploads waiting for a worker that has one (and says so).
    let full = match crate::media::Drive::from_config(&config.media) {
        Ok(d) => Some(Arc::new(d)),
        Err(e) => {
            tracing::error!(error = %e, "media drive unusable: media processing and scheduled statuses are not registered");
            None
        }
    };
    let drive = full.clone().filter(|d| d.is_enabled());
    if let Some(d) = &full {
        // A scheduled status is published with the media URLs this node's drive makes.
        scheduled_status::register(
            &mut reg,
            scheduled_status::Deps {
                fed: fed.clone(),
                drive: d.clone(),
                poll_chunk: config.queue.poll_wakeup_chunk,
            },
        );
    }
    if let Some(d) = &drive {
        media::register(&mut reg, d.clone(), Arc::new(config.media.clone()));
    }
    if let (Some(f), Some(d)) = (&fed, &full) {
        // An approved quote's note goes out again with its media's URLs, and so does a reply
        // its remote parent's author approved.
        republish::register(&mut reg, f.clone(), d.clone());
        // Card images go to the drive; with it off, cards come without an image.
        preview_card::register(
            &mut reg,
            preview_card::Deps {
                fed: f.clone(),
                drive: d.clone(),
                media: Arc::new(config.media.clone()),
                enabled: config.federation.preview_cards,
                timeout: config.federation.preview_card_timeout,
                pacing: Arc::default(),
            },
        );
    }
    let jobs = jobs::JobsConfig {
        environment: config.environment.clone(),
        storage_path: config.storage_path.clone(),
        drive,
    };
    cleanups::register(&mut reg, jobs.clone());
    if let Some(fed) = fed {
        imports::register(&mut reg, fed, jobs);
    }
    reg
}

/// The task kind of an expiry (mute, filter): retried up to 5 times from a second on, a
/// minute at most a run.
pub(crate) fn expiry_spec(kind: &'static str) -> crate::queue::KindSpec {
    crate::queue::KindSpec::new(kind, QueueName::Task)
        .retry(crate::queue::RetryPolicy::exponential(
            std::time::Duration::from_secs(1),
            5,
        ))
        .timeout(std::time::Duration::from_secs(60))
}

/// Queues the next wakeup of an expiry task (`kind` with `payload`, coalesced under `key`)
/// whose end is `left` seconds ahead: then, or after [`crate::queue::LONGEST_WAIT`] for a far
/// end, when it looks again.
pub(crate) async fn expiry_wake_again(
    conn: &mut sqlx::PgConnection,
    kind: &'static str,
    payload: &impl serde::Serialize,
    left: f64,
    key: String,
) -> Result<(), sqlx::Error> {
    let delay =
        std::time::Duration::from_secs_f64(left.min(crate::queue::LONGEST_WAIT.as_secs_f64()));
    let data = serde_json::to_value(payload).unwrap_or_default();
    crate::queue::enqueue(
        conn,
        QueueName::Task,
        &crate::queue::NewMessage::new(kind, data)
            .delay(delay)
            .coalesce(key),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::TASK_DEFINITION_VERSION;

    /// The image label is how the operator can learn the task-definition version without
    /// running the image; it must not drift from the code.
    #[test]
    fn the_image_label_carries_the_task_definition_version() {
        let dockerfile = include_str!("../../Dockerfile");
        let want = format!("ARG TASK_DEFINITION_VERSION={TASK_DEFINITION_VERSION}");
        assert!(
            dockerfile.contains(&want),
            "runtime/Dockerfile must declare `{want}`"
        );
        assert!(
            dockerfile
                .contains("social.hollo.task-definition-version=\"${TASK_DEFINITION_VERSION}\"")
        );
    }
}
