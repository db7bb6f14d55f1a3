//! First contact: `hollo serve` on the local default (no `DATABASE_URL`) with no account yet
//! says where it listens and the exact command that creates the first account — written the
//! way this very process was started (`cargo run …`, a path, or `hollo` on `PATH`), so it
//! works when pasted into the same directory.
//!
//! It also opens the first-run page (`web::oauth::setup`) for the owner: every node that serves
//! HTTP makes a one-time token at start while no account exists and logs the page's link with
//! it; only a SHA-256 of each token is stored (`setup_tokens`), and creating the owner deletes
//! them all.

use std::net::SocketAddr;
use std::path::Path;

use sqlx::PgPool;

use crate::config::{Env, vars};

/// How this process was started, as far as the command to run the CLI again depends on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// `argv[0]` as given.
    pub argv0: String,
    /// `CARGO_PKG_NAME`: set (to `hollo-runtime`) when `cargo run` started this binary.
    pub cargo_package: Option<String>,
    /// The executable's path (`current_exe`): under `target/<profile>/` when built by cargo.
    pub exe: Option<std::path::PathBuf>,
    /// `HOLLO_HOME` when set: the command needs it too, as it may not be exported.
    pub hollo_home: Option<String>,
}

impl Invocation {
    pub fn of_this_process() -> Self {
        // Cargo's own variable, not a setting of the runtime: read directly.
        let cargo_package = std::env::var("CARGO_PKG_NAME")
            .ok()
            .filter(|v| !v.trim().is_empty());
        Invocation {
            argv0: std::env::args().next().unwrap_or_else(|| "hollo".into()),
            cargo_package,
            exe: std::env::current_exe().ok(),
            hollo_home: Env::from_process()
                .get(&vars::HOLLO_HOME)
                .map(|home| home.trim().to_string()),
        }
    }

    /// The shell words that run the `hollo` CLI the way this process was run.
    pub fn cli(&self) -> String {
        let program = if self.cargo_package.as_deref() == Some(env!("CARGO_PKG_NAME")) {
            let profile = self
                .exe
                .as_deref()
                .and_then(Path::parent)
                .and_then(Path::file_name)
                .and_then(|p| p.to_str())
                .unwrap_or("debug");
            let flag = match profile {
                "debug" => String::new(),
                "release" => " --release".into(),
                other => format!(" --profile {}", shell_word(other)),
            };
            format!(
                "cargo run{flag} -p {} --bin hollo --",
                env!("CARGO_PKG_NAME")
            )
        } else if self.argv0.contains('/') {
            shell_word(&self.argv0)
        } else {
            "hollo".into()
        };
        match &self.hollo_home {
            Some(home) => format!("HOLLO_HOME={} {program}", shell_word(home)),
            None => program,
        }
    }
}

/// `word` quoted for a POSIX shell when it needs to be.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The lines `hollo serve` prints on the local default while no account exists.
pub fn greeting(listening: SocketAddr, public_url: &str, cli: &str, setup_url: &str) -> String {
    format!(
        "\nHollo is running: it listens on {listening}; its public address is {public_url}.\n\
         No account exists yet. Create the first one (the owner, an administrator) in a browser\n\
         on this machine at {public_url}/setup, or from anywhere with this link (it works once):\n\n\
         \x20   {setup_url}\n\n\
         or from this directory, in another terminal:\n\n\
         \x20   read -rs PASSWORD   # the password to sign in with, 8 characters or more\n\
         \x20   printf '%s\\n' \"$PASSWORD\" | {cli} account create alice --admin --password-stdin\n\n\
         (any name instead of alice). It prints a bearer token for the API; a Mastodon app signs\n\
         in at {public_url} with the name and the password.\n"
    )
}

/// The first-run page's link carrying `token`.
pub fn setup_url(public_url: &str, token: &str) -> String {
    format!("{}/setup?token={token}", public_url.trim_end_matches('/'))
}

/// Whether any account exists (the first-run page is open only while none does).
pub async fn any_account(pool: &PgPool) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM accounts)")
        .fetch_one(pool)
        .await
}

/// Makes a one-time token of the first-run page and returns it; only its hash is stored.
pub async fn issue_setup_token(pool: &PgPool) -> Result<String, sqlx::Error> {
    let token = crate::accounts::new_token();
    sqlx::query("INSERT INTO setup_tokens (token_hash) VALUES ($1)")
        .bind(crate::accounts::hash_token(&token))
        .execute(pool)
        .await?;
    Ok(token)
}

/// How many of the newest setup tokens are compared: each node start adds one, so the list is
/// bounded however often nodes restart before the owner exists.
const TOKENS_COMPARED: i64 = 100;

/// Whether `given` is a setup token still unused. Each stored hash is compared in constant time
/// with the given token's, all of them, whichever matches.
pub async fn setup_token_ok(pool: &PgPool, given: &str) -> Result<bool, sqlx::Error> {
    if given.is_empty() {
        return Ok(false);
    }
    let stored: Vec<Vec<u8>> =
        sqlx::query_scalar("SELECT token_hash FROM setup_tokens ORDER BY created_at DESC LIMIT $1")
            .bind(TOKENS_COMPARED)
            .fetch_all(pool)
            .await?;
    let wanted = crate::accounts::hash_token(given);
    Ok(stored.iter().fold(false, |found, hash| {
        found | crate::web::oauth::same_bytes(hash, &wanted)
    }))
}

/// While no account exists: makes a setup token and says how to create the owner — the whole
/// greeting on standard error on the local default (`greeting`), a log line with the link
/// elsewhere. Errors are only logged: a failed look-up must not stop a node that serves.
pub async fn greet_when_new(
    pool: &PgPool,
    listening: SocketAddr,
    public_url: &str,
    local_default: bool,
) {
    let token = match any_account(pool).await {
        Ok(true) => {
            // Links printed before an account existed stay dead even if every account is
            // deleted later.
            if let Err(e) = sqlx::query("DELETE FROM setup_tokens").execute(pool).await {
                tracing::warn!(error = %e, "could not clear the setup links");
            }
            return;
        }
        Ok(false) => issue_setup_token(pool).await,
        Err(e) => Err(e),
    };
    let token = match token {
        Ok(token) => token,
        Err(e) => {
            tracing::warn!(error = %e, "could not look for accounts or make a setup link");
            return;
        }
    };
    let link = setup_url(public_url, &token);
    if local_default {
        let cli = Invocation::of_this_process().cli();
        eprintln!("{}", greeting(listening, public_url, &cli, &link));
    } else {
        tracing::info!(
            setup_url = %link,
            "no account exists yet: create the owner at this link (it works once), or with \
             `hollo account create NAME --admin --password-stdin`"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(argv0: &str, cargo: Option<&str>, exe: &str, home: Option<&str>) -> String {
        Invocation {
            argv0: argv0.into(),
            cargo_package: cargo.map(Into::into),
            exe: Some(exe.into()),
            hollo_home: home.map(Into::into),
        }
        .cli()
    }

    #[test]
    fn the_command_is_written_as_this_process_was_started() {
        // The README's path: `cargo run --release -p hollo-runtime --bin hollo -- serve`.
        assert_eq!(
            run(
                "target/release/hollo",
                Some("hollo-runtime"),
                "/src/hollo/target/release/hollo",
                None
            ),
            "cargo run --release -p hollo-runtime --bin hollo --"
        );
        assert_eq!(
            run(
                "target/debug/hollo",
                Some("hollo-runtime"),
                "/src/t/debug/hollo",
                None
            ),
            "cargo run -p hollo-runtime --bin hollo --"
        );
        assert_eq!(
            run(
                "x",
                Some("hollo-runtime"),
                "/src/target/operator/hollo",
                None
            ),
            "cargo run --profile operator -p hollo-runtime --bin hollo --"
        );
        // Installed on PATH, or run by a path.
        assert_eq!(run("hollo", None, "/usr/local/bin/hollo", None), "hollo");
        assert_eq!(
            run("./target/release/hollo", None, "/x/hollo", None),
            "./target/release/hollo"
        );
        assert_eq!(
            run("/opt/my hollo/hollo", None, "/x/hollo", None),
            "'/opt/my hollo/hollo'"
        );
        // Another crate's `cargo run` environment is not ours.
        assert_eq!(run("hollo", Some("other"), "/x/hollo", None), "hollo");
        assert_eq!(
            run("hollo", None, "/x/hollo", Some("/srv/it's")),
            r"HOLLO_HOME='/srv/it'\''s' hollo"
        );
    }

    #[test]
    fn the_greeting_names_the_address_and_the_command() {
        let g = greeting(
            "127.0.0.1:3000".parse().expect("address"),
            "http://localhost:3000",
            "hollo",
            "http://localhost:3000/setup?token=abc",
        );
        assert!(g.contains("listens on 127.0.0.1:3000"), "{g}");
        assert!(g.contains("public address is http://localhost:3000"), "{g}");
        assert!(g.contains("http://localhost:3000/setup?token=abc"), "{g}");
        assert!(
            g.contains(
                "printf '%s\\n' \"$PASSWORD\" | hollo account create alice --admin --password-stdin"
            ),
            "{g}"
        );
    }
}
