//! The shared in-process instance: nodes started by `Node::builder` — the same wiring as
//! `hollo serve` — on a fresh database. A web node serves on a port bound first, so
//! `PUBLIC_URL` names it; workers are more nodes on the same database, started and stopped at
//! will.

use std::sync::Arc;

use hollo_runtime::accounts::{self, Account};
use hollo_runtime::config::{Config, Env};
use hollo_runtime::federation::Federation;
use hollo_runtime::node::{Node, NodeHandle};
use sqlx::PgPool;

use super::fresh_db;

fn config_of(shared: &[(String, String)], node_type: &str, extra: &[(&str, &str)]) -> Config {
    let mut pairs: Vec<(&str, &str)> = shared
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    pairs.push(("NODE_TYPE", node_type));
    for (k, v) in extra {
        pairs.retain(|(key, _)| key != k);
        pairs.push((k, v));
    }
    Config::from_env(&Env::from_pairs(pairs)).expect("test node configuration")
}

/// The `SECRET_KEY` of every test instance.
pub const SECRET: &str = "shared-test-secret-0123456789abcdef01";

pub struct Instance {
    pub pool: PgPool,
    pub url: String,
    /// `PUBLIC_URL`: `http://127.0.0.1:<port>` of the web node.
    pub base: String,
    /// The web node's federation (its keys and IRIs).
    pub fed: Arc<Federation>,
    /// Settings every node of this instance gets (tests add their own).
    env: Vec<(String, String)>,
    web: Option<NodeHandle>,
    workers: Vec<NodeHandle>,
}

impl Instance {
    /// A web node (`NODE_TYPE=web`, or `all` when `node_type` says so) on a fresh database,
    /// with `ALLOW_PRIVATE_ADDRESS=true` (test peers live on 127.0.0.0/8) unless `env` says
    /// otherwise; `env` applies to every node of the instance.
    pub async fn start(node_type: &str, env: &[(&str, &str)]) -> Instance {
        let db = fresh_db().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let mut shared: Vec<(String, String)> = [
            ("DATABASE_URL", db.url.as_str()),
            ("PUBLIC_URL", base.as_str()),
            ("SECRET_KEY", SECRET),
            ("ALLOW_PRIVATE_ADDRESS", "true"),
            ("BIND", "127.0.0.1"),
            ("HEALTH_PORT", "0"),
            // No NOTIFY is lost in tests, but a short poll keeps delayed work prompt.
            ("QUEUE_POLL_MS", "100"),
            ("SHUTDOWN_DRAIN_SECONDS", "10"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (k, v) in env {
            shared.retain(|(key, _)| key != k);
            shared.push((k.to_string(), v.to_string()));
        }
        let web = Node::builder(config_of(&shared, node_type, &[]))
            .listener(listener)
            .start()
            .await
            .expect("start the web node");
        Instance {
            pool: db.pool,
            url: db.url,
            base,
            fed: web.federation().expect("federation").clone(),
            env: shared,
            web: Some(web),
            workers: Vec::new(),
        }
    }

    /// An `all` node whose disk drive (`FS_STORAGE_PATH`) is `dir`; `extra` adds settings.
    pub async fn on_disk(dir: &std::path::Path, extra: &[(&str, &str)]) -> Instance {
        let dir = dir.to_str().expect("a UTF-8 path");
        let mut env = vec![("FS_STORAGE_PATH", dir)];
        env.extend_from_slice(extra);
        Instance::start("all", &env).await
    }

    /// The configuration of one node of this instance.
    pub fn config(&self, node_type: &str, extra: &[(&str, &str)]) -> Config {
        config_of(&self.env, node_type, extra)
    }

    /// The settings of a `hollo` process of this instance (`Hollo::serve`, `process::run`):
    /// its database, secret key and public URL, `NODE_TYPE=node_type` and a free health port;
    /// `extra` adds or overrides.
    pub fn process_env<'a>(
        &'a self,
        node_type: &'a str,
        extra: &[(&'a str, &'a str)],
    ) -> Vec<(&'a str, &'a str)> {
        let shared = |key: &str| {
            self.env
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
                .expect("an instance setting")
        };
        let mut env = vec![
            ("DATABASE_URL", self.url.as_str()),
            ("SECRET_KEY", shared("SECRET_KEY")),
            ("PUBLIC_URL", self.base.as_str()),
            ("NODE_TYPE", node_type),
            ("HEALTH_PORT", "0"),
        ];
        for (k, v) in extra {
            env.retain(|(key, _)| key != k);
            env.push((k, v));
        }
        env
    }

    /// Starts a worker node on the instance's database; `extra` adds or overrides settings.
    pub async fn worker(&mut self, extra: &[(&str, &str)]) -> &NodeHandle {
        let node = Node::builder(self.config("worker", extra))
            .start()
            .await
            .expect("start a worker node");
        self.workers.push(node);
        self.workers.last().expect("just pushed")
    }

    /// The web node's address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.web.as_ref().expect("web node").addr()
    }

    /// `http://<health address>` of the web node: `/healthz`, `/readyz`, `/metrics`.
    pub fn health_base(&self) -> String {
        format!(
            "http://{}",
            self.web.as_ref().expect("web node").health_addr()
        )
    }

    /// The worker nodes started so far, oldest first.
    pub fn workers(&self) -> &[NodeHandle] {
        &self.workers
    }

    /// Drains and stops the most recently started worker, as SIGTERM would.
    pub async fn stop_worker(&mut self) {
        if let Some(w) = self.workers.pop() {
            w.shutdown().await.expect("worker stops cleanly");
        }
    }

    pub async fn account(&self, name: &str) -> (Account, String) {
        accounts::create(&self.pool, self.fed.cipher(), name, false)
            .await
            .expect("create account")
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
            .fetch_one(&self.pool)
            .await
            .expect("count")
    }

    /// Waits (within `api::WAIT`) until what the count `sql` gives satisfies `done`; `what` names it.
    pub async fn until_count(&self, what: &str, sql: &str, done: impl Fn(i64) -> bool) {
        super::eventually(super::api::WAIT, what, || async {
            done(self.count(sql).await).then_some(())
        })
        .await
    }

    /// A custom emoji `:shortcode:` of this instance whose image is at `url` (its row only: no
    /// file is stored, which reactions and federation tests do not need).
    pub async fn custom_emoji(&self, shortcode: &str, url: &str) {
        sqlx::query(
            "INSERT INTO custom_emojis (id, shortcode, file_key, url, media_type)
             VALUES ($1, $2, $3, $4, 'image/png')",
        )
        .bind(uuid::Uuid::now_v7())
        .bind(shortcode)
        .bind(format!("media/{}/emoji.png", uuid::Uuid::now_v7()))
        .bind(url)
        .execute(&self.pool)
        .await
        .expect("custom emoji");
    }

    /// Drains every node (workers first) and waits until they have stopped.
    /// `shutdown`, then removes `dir` (the node's disk drive, or any scratch directory).
    pub async fn shutdown_removing(self, dir: impl AsRef<std::path::Path>) {
        self.shutdown().await;
        let _ = std::fs::remove_dir_all(dir);
    }

    pub async fn shutdown(mut self) {
        for w in std::mem::take(&mut self.workers) {
            w.shutdown().await.expect("worker stops cleanly");
        }
        if let Some(web) = self.web.take() {
            web.shutdown().await.expect("web node stops cleanly");
        }
    }
}
