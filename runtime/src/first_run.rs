//! First contact: `hollo serve` on the local default (no `DATABASE_URL`) with no account yet
//! says where it listens and the exact command that creates the first account — written the
//! way this very process was started (`cargo run …`, a path, or `hollo` on `PATH`), so it
//! works when pasted into the same directory.

use std::net::SocketAddr;
use std::path::Path;

use sqlx::PgPool;

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
        let non_empty = |var| std::env::var(var).ok().filter(|v| !v.trim().is_empty());
        Invocation {
            argv0: std::env::args().next().unwrap_or_else(|| "hollo".into()),
            cargo_package: non_empty("CARGO_PKG_NAME"),
            exe: std::env::current_exe().ok(),
            hollo_home: non_empty("HOLLO_HOME"),
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
pub fn greeting(listening: SocketAddr, public_url: &str, cli: &str) -> String {
    format!(
        "\nHollo is running: it listens on {listening}; its public address is {public_url}.\n\
         No account exists yet. Create the first one (the owner, an administrator) from this\n\
         directory, in another terminal:\n\n\
         \x20   read -rs PASSWORD   # the password to sign in with, 8 characters or more\n\
         \x20   printf '%s\\n' \"$PASSWORD\" | {cli} account create alice --admin --password-stdin\n\n\
         (any name instead of alice). It prints a bearer token for the API; a Mastodon app signs\n\
         in at {public_url} with the name and the password.\n"
    )
}

/// Prints [`greeting`] on standard error when no account exists. Errors are only logged: a
/// failed look-up must not stop a node that serves.
pub async fn greet_when_new(pool: &PgPool, listening: SocketAddr, public_url: &str) {
    let any: Result<bool, sqlx::Error> =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM accounts)")
            .fetch_one(pool)
            .await;
    match any {
        Ok(true) => {}
        Ok(false) => {
            let cli = Invocation::of_this_process().cli();
            eprintln!("{}", greeting(listening, public_url, &cli));
        }
        Err(e) => tracing::warn!(error = %e, "could not count the accounts"),
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
        );
        assert!(g.contains("listens on 127.0.0.1:3000"), "{g}");
        assert!(g.contains("public address is http://localhost:3000"), "{g}");
        assert!(
            g.contains(
                "printf '%s\\n' \"$PASSWORD\" | hollo account create alice --admin --password-stdin"
            ),
            "{g}"
        );
    }
}
