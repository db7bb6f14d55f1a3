//! The runtime's integration tests, one module per concern, in one test binary: each used to be
//! a binary of its own that compiled the support code and linked the whole runtime once more.
//! Run one concern with
//! `cargo test -p hollo-runtime --test it polls::`.
//!
//! `streaming_cost.rs` stays a binary of its own: it counts every SQL statement the process
//! issues through a global tracing subscriber, so it must be alone in its process.

mod support;

mod access;
mod account_stats;
mod client_accounts;
mod client_filters;
mod client_interactions;
mod client_lists_mutes;
mod client_pins_tags;
mod client_statuses;
mod client_timelines;
mod clients;
mod content;
mod docs;
mod dos;
mod emojis;
mod entities;
mod examples;
mod expand_contract;
mod exports;
mod federation;
mod fedify_interop;
mod gotosocial_interop;
mod grouped_notifications;
mod http_edge;
mod inbound_shapes;
mod interaction_policy;
mod jobs;
mod jsonld;
mod media;
mod media_proxy;
mod oauth;
mod polls;
mod post_tags;
mod preferences;
mod preview_cards;
mod process;
mod profile_images;
mod proofs;
mod public_pages;
mod queue_engine;
mod quotes;
mod reactions;
mod reference_pages;
mod release;
mod replies;
mod reports;
mod scheduled_statuses;
mod setup_page;
mod signatures;
mod statuses_model;
mod streaming;
mod trends;
mod visibility;
mod write_limits;
