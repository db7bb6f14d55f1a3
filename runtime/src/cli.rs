//! The `hollo` command line: its commands and arguments, whose doc comments are the help every
//! user reads (`hollo --help`, `hollo <command> --help`) and the CLI reference of the book
//! (`docs/reference/cli.md`, generated from this tree by a test). Help text names no requirement
//! ids or issue numbers (a test checks the generated reference). `main.rs` runs the commands.

use clap::{Parser, Subcommand};

use crate::queue::QueueName;

#[derive(Parser, Debug)]
#[command(
    name = "hollo",
    version,
    about = "Hollo workload runtime: web and worker nodes on one PostgreSQL",
    long_about = "Hollo workload runtime: web and worker nodes on one PostgreSQL.\n\n\
                  Every command reads its configuration from the environment (DATABASE_URL, \
                  SECRET_KEY, PUBLIC_URL, …). With DATABASE_URL unset it uses a local \
                  PostgreSQL under $HOLLO_HOME (.hollo), started and migrated on first use."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a node; the role comes from NODE_TYPE (all, web or worker).
    ///
    /// `all` (the default) serves HTTP and consumes the queues; `web` serves HTTP and
    /// enqueues; `worker` consumes. It refuses a database schema older than this binary (run
    /// `hollo migrate`) and one with a post-deploy migration it does not carry.
    Serve,
    /// Apply the SQL migrations and exit.
    ///
    /// Pre-deploy then post-deploy migrations, or only one kind. Uses DATABASE_DIRECT_URL when
    /// set (a transaction pooler breaks the migrator's lock). A zero-downtime upgrade runs
    /// `--pre` while the old version still serves and `--post` once none of it is left.
    Migrate {
        /// Only the pre-deploy (additive) migrations of `migrations/`.
        #[arg(long, conflicts_with = "post")]
        pre: bool,
        /// Only the post-deploy (contract) migrations of `migrations/post/` (pending
        /// pre-deploy ones first).
        #[arg(long)]
        post: bool,
    },
    /// Print the build, schema and task-definition versions (needs no database).
    Version {
        /// One JSON line: version, schemaVersion, preSchemaVersion, postSchemaVersion,
        /// minSchemaVersion, taskDefinitionVersion.
        #[arg(long)]
        json: bool,
        /// Also write the JSON to this file: Kubernetes' `/dev/termination-log`, which the
        /// operator's version probe reads from the pod status (no log access needed).
        #[arg(long, value_name = "PATH", requires = "json")]
        termination_log: Option<std::path::PathBuf>,
    },
    /// Queue inspection.
    Queue {
        #[command(subcommand)]
        command: QueueCommand,
    },
    /// The probe task: prove that workers consume, drive load.
    Probe {
        #[command(subcommand)]
        command: ProbeCommand,
    },
    /// Local accounts (needs SECRET_KEY: the account's private key is encrypted with it).
    Account {
        #[command(subcommand)]
        command: AccountCommand,
    },
    /// Start a cleanup job; the workers carry it out. Prints the job id.
    ///
    /// The same as `POST /api/v1/admin/cleanups`; what the operator's scheduled maintenance
    /// runs.
    Cleanup {
        #[command(subcommand)]
        command: CleanupCommand,
    },
    /// Answer every request on PORT with 503 and Retry-After.
    ///
    /// What the operator runs in the web Service's place while an upgrade stops the web
    /// nodes (RETRY_AFTER_SECONDS, SHUTDOWN_PRESTOP_SECONDS).
    MaintenancePage,
    /// The local PostgreSQL used when DATABASE_URL is unset (and by the test suite).
    LocalDb {
        #[command(subcommand)]
        command: LocalDbCommand,
        /// Directory of the cluster (default: $HOLLO_HOME/postgres, i.e. .hollo/postgres).
        #[arg(long, global = true)]
        dir: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// Queued, ready, delayed, in-flight and failed messages per queue.
    Stats {
        /// One JSON array, an object per queue.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ProbeCommand {
    /// Enqueue probe tasks, which workers run and count.
    Enqueue {
        /// How many probes.
        #[arg(long, default_value_t = 1)]
        count: u64,
        /// How long each probe's handler sleeps.
        #[arg(long, default_value_t = 0)]
        sleep_ms: u64,
        /// How many times each probe fails before it succeeds (exercises retries).
        #[arg(long, default_value_t = 0)]
        fail_times: u32,
        /// Due this many seconds from now (0 to one year).
        #[arg(long, default_value_t = 0.0)]
        delay_seconds: f64,
        /// The queue the probes go to: task or activity.
        #[arg(long, default_value = "task")]
        queue: QueueName,
        /// Key prefix (default: a fresh random one, so runs never collide).
        #[arg(long)]
        prefix: Option<String>,
    },
    /// Enqueued, completed, pending, failed and duplicate probes.
    Stats {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum AccountCommand {
    /// Create an account with a fresh key pair; prints its API bearer token (shown only once).
    Create {
        /// The account's user name (its handle is @NAME@<PUBLIC_URL's host>).
        name: String,
        /// An administrator.
        #[arg(long)]
        admin: bool,
        /// Read the account's sign-in password from standard input (one trailing line break
        /// is dropped); without it the account signs in with CLI tokens only.
        #[arg(long, group = "password")]
        password_stdin: bool,
        /// Read the account's sign-in password from the environment variable VAR (one
        /// trailing line break is dropped): a variable filled from a Kubernetes Secret keeps
        /// the password out of command lines and pod specs.
        #[arg(long, value_name = "VAR", group = "password")]
        password_env: Option<String>,
        /// When an account of that name exists (in any letter case), leave it exactly as it
        /// is — password and role included — and succeed: what a repeated, declarative
        /// "make sure the first account exists" needs.
        #[arg(long)]
        if_absent: bool,
        /// Make no bearer token and print nothing on standard output: the account signs in
        /// with its password only (so nothing that grants access lands in a log).
        #[arg(long, requires = "password")]
        no_token: bool,
    },
    /// Set or replace an account's sign-in password, read from standard input.
    SetPassword {
        /// The account's user name.
        name: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum CleanupCommand {
    /// Remote posts received more than N days ago that no local account bookmarked.
    RemotePosts {
        /// N: the age in days.
        #[arg(long)]
        older_than_days: i64,
    },
    /// Media files no row names, and uploads no status took within a day (needs
    /// FS_STORAGE_PATH or an S3 drive).
    Media,
}

#[derive(Subcommand, Debug)]
pub enum LocalDbCommand {
    /// Create and start it if needed; print the admin URL.
    Start,
    /// Stop it.
    Stop,
}
