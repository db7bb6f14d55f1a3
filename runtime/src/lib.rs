//! The Hollo workload runtime: one binary, three roles (`NODE_TYPE`), a PostgreSQL-backed
//! activity queue and task queue, and the HTTP endpoints that feed them.

// The JSON-LD `@context` (`federation::context`) is one `json!` literal deeper than the
// default macro recursion limit.
#![recursion_limit = "256"]

pub mod account_notes;
pub mod accounts;
pub mod approvals;
pub mod cards;
pub mod cli;
pub mod config;
pub mod content;
pub mod db;
pub mod emojis;
pub mod endorsements;
pub mod exports;
pub mod federation;
pub mod filters;
pub mod first_run;
pub mod html;
pub mod lists;
pub mod logging;
pub mod maintenance_page;
pub mod mastodon;
pub mod media;
pub mod metrics;
pub mod mutes;
pub mod node;
pub mod passwords;
pub mod polls;
pub mod queue;
pub mod quotes;
pub mod reactions;
pub mod recovery;
pub mod reports;
pub mod scopes;
pub mod shutdown;
pub mod statuses;
pub mod streaming;
pub mod suggestions;
pub mod tags;
pub mod tasks;
pub mod trends;
pub mod web;

#[cfg(not(feature = "e2e-next"))]
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The end-to-end suite's "next version" build (feature `e2e-next`): another version string,
/// one more migration (db::MIGRATOR).
#[cfg(all(feature = "e2e-next", not(feature = "e2e-next-tasks")))]
pub const VERSION: &str = "0.1.1-e2e";
/// The e2e "next version" with another task-definition version (feature `e2e-next-tasks`).
#[cfg(feature = "e2e-next-tasks")]
pub const VERSION: &str = "0.1.1-e2e-tasks";

/// `hollo version --json` and `GET /api/version` (R-ROLE-6). What the operator's version
/// probes read to choose an upgrade path (R-OP-ZD): `schemaVersion` (the newest
/// pre-deploy migration, also `preSchemaVersion`), `postSchemaVersion`, `minSchemaVersion`
/// (the oldest pre-deploy schema this binary runs on; newer ones by pre-deploy migrations
/// only are fine) and `taskDefinitionVersion`.
pub fn version_json(database_schema: Option<i64>) -> serde_json::Value {
    let mut v = serde_json::json!({
        "version": VERSION,
        "schemaVersion": db::expected_schema_version(),
        "preSchemaVersion": db::expected_schema_version(),
        "postSchemaVersion": db::expected_post_schema_version(),
        "minSchemaVersion": db::min_schema_version(),
        "taskDefinitionVersion": tasks::TASK_DEFINITION_VERSION,
    });
    if let Some(s) = database_schema {
        v["databaseSchemaVersion"] = serde_json::json!(s);
    }
    v
}
