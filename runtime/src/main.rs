//! `hollo`: serve | migrate | version | queue | probe | account | cleanup | maintenance-page |
//! local-db. The commands and their help are declared in `hollo_runtime::cli`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use hollo_runtime::accounts;
use hollo_runtime::cli::{
    AccountCommand, CleanupCommand, Cli, Command, LocalDbCommand, ProbeCommand, QueueCommand,
};
use hollo_runtime::config::{Config, ConfigError, DbConfig, Env, LogFormat, vars};
use hollo_runtime::federation::Federation;
use hollo_runtime::queue::{QueueName, stats};
use hollo_runtime::{db, logging, node, tasks, version_json};
use tokio_util::sync::CancellationToken;

/// glibc's malloc serves a large block with an mmap of its own and unmaps it when freed —
/// until one is freed: then it raises its mmap threshold to that size (up to 32 MiB), and
/// later large blocks (argon2's 19 MiB, big bodies and documents) come from per-thread arenas,
/// which keep freed memory. A threshold set once turns that adjustment off, so large blocks
/// always go back to the system (R-API; measured with bench/signin, see README). An
/// operator who tunes malloc (`GLIBC_TUNABLES`, `MALLOC_MMAP_THRESHOLD_`) is left alone.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn fix_malloc_mmap_threshold() {
    if std::env::var_os("GLIBC_TUNABLES").is_some()
        || std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
    {
        return;
    }
    // glibc's default initial threshold, now fixed.
    const THRESHOLD: libc::c_int = 128 * 1024;
    // SAFETY: mallopt only sets a parameter of glibc's allocator, which is thread-safe; it is
    // called first thing in main, before this process starts any thread of its own.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD);
    }
}

fn main() -> ExitCode {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fix_malloc_mmap_threshold();
    let cli = Cli::parse();
    let env = Env::from_process();
    // A LOG_FORMAT that does not parse is refused where the configuration is read; the
    // logs until then, and those of commands that read no more than the database's
    // settings, are text.
    let format = LogFormat::from_env(&env).unwrap_or(LogFormat::Text);
    if let Err(e) = logging::init(format, &env) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli.command, &env)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, env: &Env) -> Result<()> {
    match command {
        Command::Serve => {
            let mut config = Config::from_env(env).map_err(config_error)?;
            config
                .fill_local_secret_key()
                .context("creating the local SECRET_KEY")?;
            config.fill_local_media_drive();
            node::serve(config).await
        }
        Command::Cleanup { command } => {
            let config = Config::from_env(env).map_err(config_error)?;
            let (kind, days) = match command {
                CleanupCommand::RemotePosts { older_than_days } => {
                    ("remote_posts", Some(older_than_days))
                }
                CleanupCommand::Media => {
                    let drive = matches!(
                        config.media.drive,
                        hollo_runtime::config::DriveConfig::S3(_)
                    );
                    anyhow::ensure!(
                        config.storage_path.is_some() || drive,
                        "media cleanup needs FS_STORAGE_PATH (the media storage directory) or an S3 drive"
                    );
                    ("media", None)
                }
            };
            let pool = connect(env).await?;
            let created = tasks::cleanups::start(&pool, &config.environment, kind, days).await?;
            let (id, new) = match created {
                tasks::jobs::Created::New(id) => (id, true),
                tasks::jobs::Created::Existing(id) => (id, false),
            };
            println!(
                "{}",
                serde_json::json!({"id": id, "kind": kind, "new": new})
            );
            Ok(())
        }
        Command::MaintenancePage => {
            use hollo_runtime::maintenance_page as page;
            let port: u16 = env.int(&vars::PORT).map_err(config_error)?;
            let retry_after = page::retry_after_from(env);
            let shutdown = hollo_runtime::shutdown::Shutdown::new();
            shutdown.install(page::DRAIN)?;
            let stop = shutdown.stop.clone();
            let pre_stop = page::pre_stop_from(env);
            let addr = std::net::SocketAddr::from(([0, 0, 0, 0], port));
            let stopped = async move {
                stop.cancelled().await;
                tokio::time::sleep(pre_stop).await;
            };
            page::serve(addr, retry_after, stopped).await?;
            Ok(())
        }
        Command::Migrate { pre, post } => {
            let pool = connect(env).await?;
            match (pre, post) {
                (true, _) => db::migrate_pre(&pool).await?,
                (_, true) => db::migrate_post(&pool).await?,
                _ => db::migrate(&pool).await?,
            };
            let (v, p) = (
                db::schema_version(&pool).await?,
                db::post_schema_version(&pool).await?,
            );
            println!("schema is at version {v} (post-deploy {p})");
            Ok(())
        }
        Command::Version {
            json,
            termination_log,
        } => {
            let v = version_json(None);
            if json {
                println!("{v}");
                if let Some(path) = termination_log {
                    std::fs::write(&path, v.to_string())
                        .with_context(|| format!("writing {}", path.display()))?;
                }
            } else {
                println!(
                    "hollo {} (schema {}, post-deploy {}, runs on schema {} and newer, task definitions {})",
                    hollo_runtime::VERSION,
                    v["schemaVersion"],
                    v["postSchemaVersion"],
                    v["minSchemaVersion"],
                    tasks::TASK_DEFINITION_VERSION
                );
            }
            Ok(())
        }
        Command::Queue {
            command: QueueCommand::Stats { json },
        } => {
            let pool = connect(env).await?;
            let mut all = Vec::new();
            for q in QueueName::ALL {
                all.push(stats::queue_stats(&pool, q).await?);
            }
            if json {
                println!("{}", serde_json::to_string(&all)?);
            } else {
                println!(
                    "{:<9} {:>8} {:>8} {:>8} {:>9} {:>7}",
                    "queue", "queued", "ready", "delayed", "in-flight", "failed"
                );
                for s in all {
                    println!(
                        "{:<9} {:>8} {:>8} {:>8} {:>9} {:>7}",
                        s.queue.as_str(),
                        s.queued,
                        s.ready,
                        s.delayed,
                        s.in_flight,
                        s.failed
                    );
                }
            }
            Ok(())
        }
        Command::Probe { command } => probe(command, env).await,
        Command::Account {
            command: AccountCommand::SetPassword { name },
        } => {
            let password = read_password()?;
            hollo_runtime::passwords::check_rules(&password)?;
            let pool = connect(env).await?;
            db::check_schema(&pool).await?;
            let account = hollo_runtime::passwords::set(&pool, &name, &password).await?;
            eprintln!("password of {} set", account.username);
            Ok(())
        }
        Command::Account {
            command:
                AccountCommand::Create {
                    name,
                    admin,
                    password_stdin,
                    password_env,
                    if_absent,
                    no_token,
                },
        } => {
            let password = match (password_stdin, password_env) {
                (true, _) => Some(read_password()?),
                (false, Some(var)) => Some(password_from_env(env, &var)?),
                (false, None) => None,
            };
            let new = NewAccountArgs {
                name,
                admin,
                password,
                if_absent,
                token: !no_token,
            };
            create_account(new, env).await
        }
        Command::LocalDb { command, dir } => {
            let cfg = DbConfig::from_env(env).map_err(config_error)?;
            let dir = dir.unwrap_or_else(|| format!("{}/postgres", cfg.home));
            let pg = db::local::LocalPostgres::new(dir)?;
            match command {
                LocalDbCommand::Start => {
                    let url = tokio::task::spawn_blocking(move || pg.ensure_started()).await??;
                    println!("{url}");
                }
                LocalDbCommand::Stop => tokio::task::spawn_blocking(move || pg.stop()).await??,
            }
            Ok(())
        }
    }
}

/// What `hollo account create` was asked for.
struct NewAccountArgs {
    name: String,
    admin: bool,
    password: Option<String>,
    if_absent: bool,
    token: bool,
}

/// `hollo account create`.
async fn create_account(new: NewAccountArgs, env: &Env) -> Result<()> {
    // Check the password before anything is created: a refused one leaves nothing behind.
    if let Some(p) = &new.password {
        hollo_runtime::passwords::check_rules(p)?;
    }
    let mut config = Config::from_env(env).map_err(config_error)?;
    config
        .fill_local_secret_key()
        .context("creating the local SECRET_KEY")?;
    let fed = Federation::from_config(&config.federation)?.ok_or_else(|| {
        anyhow::anyhow!(
            "SECRET_KEY is required to create accounts (their private keys are encrypted with it)"
        )
    })?;
    let pool = connect(env).await?;
    db::check_schema(&pool).await?;
    let name = new.name.as_str();
    let exists = |name: &str| {
        if new.if_absent {
            eprintln!("account {name} exists; left as it is");
            Ok(())
        } else {
            Err(anyhow::anyhow!("account {name:?} already exists"))
        }
    };
    // Before the password's hashing and the key pair: both cost time, and neither is needed.
    if let Some(existing) = accounts::by_username(&pool, name).await? {
        return exists(&existing.username);
    }
    let password_hash = match &new.password {
        Some(p) => Some(hollo_runtime::passwords::hash(p).await?),
        None => None,
    };
    let request = accounts::NewAccount {
        username: name,
        admin: new.admin,
        password_hash: password_hash.as_deref(),
        token: new.token,
    };
    let Some((account, token)) =
        accounts::create_unless_taken(&pool, fed.cipher(), request).await?
    else {
        return exists(name);
    };
    eprintln!(
        "created {}{} ({}){}",
        account.username,
        if new.admin { " (admin)" } else { "" },
        fed.actor_iri(&account.username),
        if token.is_some() {
            "; its bearer token follows (shown only once)"
        } else {
            ""
        }
    );
    if let Some(token) = token {
        println!("{token}");
    }
    Ok(())
}

/// A password from the environment variable `var` (`--password-env`); like one from standard
/// input, one trailing line break is dropped (a Secret made from a file often ends with one).
fn password_from_env(env: &Env, var: &str) -> Result<String> {
    let text = env.user_named(var).with_context(|| {
        format!("--password-env {var}: the environment variable {var} is unset or empty")
    })?;
    Ok(hollo_runtime::passwords::from_stdin_text(text).to_owned())
}

/// A password from standard input (`--password-stdin`, `set-password`).
fn read_password() -> Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("reading the password from standard input")?;
    Ok(hollo_runtime::passwords::from_stdin_text(&text).to_owned())
}

async fn probe(command: ProbeCommand, env: &Env) -> Result<()> {
    let pool = connect(env).await?;
    match command {
        ProbeCommand::Enqueue {
            count,
            sleep_ms,
            fail_times,
            delay_seconds,
            queue,
            prefix,
        } => {
            if !(0.0..=365.0 * 86400.0).contains(&delay_seconds) {
                anyhow::bail!("--delay-seconds must be between 0 and one year");
            }
            let prefix =
                prefix.unwrap_or_else(|| format!("probe-{}", uuid::Uuid::new_v4().simple()));
            let n = tasks::probe::enqueue(
                &pool,
                queue,
                &prefix,
                count,
                sleep_ms,
                fail_times,
                Duration::from_secs_f64(delay_seconds),
            )
            .await?;
            println!(
                "{}",
                serde_json::json!({ "enqueued": n, "prefix": prefix, "queue": queue })
            );
        }
        ProbeCommand::Stats { json } => {
            let s = tasks::probe::stats(&pool).await?;
            if json {
                println!("{}", serde_json::to_string(&s)?);
            } else {
                println!(
                    "enqueued {} completed {} pending {} failed {} duplicates {}",
                    s.enqueued, s.completed, s.pending, s.failed, s.duplicates
                );
            }
        }
    }
    Ok(())
}

/// A pool for one-shot commands; `hollo migrate` uses the direct URL (poolers break the
/// migrator's advisory lock). With DATABASE_URL unset, the local PostgreSQL is used and
/// migrated on first use.
async fn connect(env: &Env) -> Result<sqlx::PgPool> {
    let cfg = DbConfig::from_env(env).map_err(config_error)?;
    let (urls, local) = db::resolve_urls(&cfg).await?;
    let stop = CancellationToken::new();
    let pool = tokio::time::timeout(cfg.wait, db::connect_pool(&urls.direct, 4, "cli", &stop))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "database unreachable for {} s, giving up (DATABASE_WAIT_SECONDS; the log above has each attempt's error)",
                cfg.wait.as_secs()
            )
        })??;
    if local.is_some() {
        db::migrate(&pool).await?;
    }
    Ok(pool)
}

fn config_error(e: ConfigError) -> anyhow::Error {
    anyhow::anyhow!("configuration: {e}")
}
