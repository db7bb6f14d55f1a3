//! The user documentation stays readable (issue 62): README.md short enough to read before
//! deciding, no requirement ids (`R-…`) or issue numbers in what users read (README.md and the
//! book in `docs/`), and every link of the book's table of contents (and every relative link
//! of the README and the book) pointing at a file that exists; and every environment variable
//! the runtime reads in the configuration's table (and so in its reference), none read beside
//! it. It reads files, and the table itself.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use std::path::{Path, PathBuf};

/// The README's budget: what it is, the two commands, where to go next. Everything else
/// belongs in the book.
const README_MAX_LINES: usize = 150;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the runtime crate sits in the repository")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// README.md and every Markdown file under docs/, as (path relative to the repo, text).
fn user_docs() -> Vec<(PathBuf, String)> {
    let root = repo();
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = read(&p);
            (
                p.strip_prefix(&root).expect("under the repo").to_path_buf(),
                text,
            )
        })
        .collect()
}

/// Requirement ids (`R-` then a capital letter, not inside a longer word) and issue numbers
/// (`issue 12`, any case) in `text`, as "line: excerpt".
pub(crate) fn internal_references(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let bytes = line.as_bytes();
        let requirement_id = (0..bytes.len().saturating_sub(2)).any(|i| {
            bytes[i] == b'R'
                && bytes[i + 1] == b'-'
                && bytes[i + 2].is_ascii_uppercase()
                && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric())
        });
        let lower = line.to_ascii_lowercase();
        let issue_number = lower.match_indices("issue ").any(|(i, _)| {
            lower[i + "issue ".len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        });
        if requirement_id || issue_number {
            found.push(format!("{}: {}", n + 1, line.trim()));
        }
    }
    found
}

/// The targets of Markdown links `[text](target)` in `text`, without their `#anchor`.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split('#').next().unwrap_or_default().trim();
        if !target.is_empty() {
            targets.push(target.to_string());
        }
        rest = &rest[end..];
    }
    targets
}

/// A link to another site, or a mail address: not a file of this repository.
fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

#[test]
fn readme_stays_short() {
    let readme = read(&repo().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail into a \
         chapter of the book (docs/) and link it"
    );
}

#[test]
fn user_docs_cite_no_requirement_ids_or_issue_numbers() {
    let mut offending = Vec::new();
    for (path, text) in user_docs() {
        for hit in internal_references(&text) {
            offending.push(format!("{}:{hit}", path.display()));
        }
    }
    assert!(
        offending.is_empty(),
        "requirement ids or issue numbers in user documentation (keep them in commits, code \
         comments and tests):\n{}",
        offending.join("\n")
    );
}

#[test]
fn the_book_summary_links_existing_chapters() {
    let docs = repo().join("docs");
    let summary = read(&docs.join("SUMMARY.md"));
    let targets = link_targets(&summary);
    assert!(
        targets.len() > 20,
        "docs/SUMMARY.md lists the book's chapters"
    );
    let missing: Vec<&String> = targets
        .iter()
        .filter(|t| is_external(t) || !docs.join(t.as_str()).is_file())
        .collect();
    assert!(
        missing.is_empty(),
        "docs/SUMMARY.md links chapters that do not exist: {missing:?}"
    );
}

#[test]
fn relative_links_in_user_docs_resolve() {
    let root = repo();
    let mut broken = Vec::new();
    for (path, text) in user_docs() {
        let dir = root
            .join(&path)
            .parent()
            .expect("a file's folder")
            .to_path_buf();
        for target in link_targets(&text) {
            if !is_external(&target) && !dir.join(&target).exists() {
                broken.push(format!("{}: {target}", path.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Names quoted in `source` as a whole string literal of capitals, digits and underscores
/// (`"DATABASE_URL"`), at least three characters long.
fn quoted_capitals(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in source.match_indices('"') {
        let rest = &source[at + 1..];
        let len = rest
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        if len >= 3
            && rest[len..].starts_with('"')
            && rest.starts_with(|c: char| c.is_ascii_uppercase())
        {
            names.push(rest[..len].to_string());
        }
    }
    names
}

/// The runtime's source files (`runtime/src`, binaries included) as (path relative to the
/// repo, text), test modules left in.
fn runtime_sources() -> Vec<(PathBuf, String)> {
    let root = repo();
    let mut files = Vec::new();
    let mut dirs = vec![root.join("runtime/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("runtime/src") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = read(&path);
                files.push((
                    path.strip_prefix(&root).expect("in the repo").to_path_buf(),
                    text,
                ));
            }
        }
    }
    files.sort();
    files
}

/// Variables of the system or of other programs the runtime reads directly: not settings.
const SYSTEM: [&str; 5] = [
    "PATH",
    "USER",
    "GLIBC_TUNABLES",
    "MALLOC_MMAP_THRESHOLD_",
    "CARGO_PKG_NAME",
];

/// Every setting is read through the configuration's table (`config::Env`, whose getters take
/// a `&vars::Var`): a direct `std::env::var("…")` anywhere else names a variable of the
/// system, never one of ours, so none escapes the table and the reference generated from it.
#[test]
fn the_runtime_reads_its_settings_only_through_the_table() {
    let mut direct = Vec::new();
    for (path, text) in runtime_sources() {
        if path.ends_with("config/env.rs") {
            continue; // Env::from_process
        }
        for call in ["env::var(", "env::var_os(", "env::vars(", "env::vars_os("] {
            for (at, _) in text.match_indices(call) {
                let rest = &text[at + call.len() - 1..];
                let end = rest.char_indices().nth(64).map_or(rest.len(), |(i, _)| i);
                let name = quoted_capitals(&rest[..end])
                    .into_iter()
                    .next()
                    .filter(|n| rest[1..].trim_start().starts_with(&format!("\"{n}\"")));
                if !name.is_some_and(|n| SYSTEM.contains(&n.as_str())) {
                    let line = text[..at].lines().count();
                    direct.push(format!("{}:{line}: {call}…", path.display()));
                }
            }
        }
    }
    // A variable the user names at run time (`--password-env VAR`) is read by name; a name
    // written in the code is a setting, read from the table.
    for (path, text) in runtime_sources() {
        for (at, _) in text.match_indices("user_named(") {
            let arg = text[at + "user_named(".len()..].trim_start();
            if arg.starts_with('"') {
                let line = text[..at].lines().count();
                direct.push(format!("{}:{line}: user_named(\"…\")", path.display()));
            }
        }
    }
    assert!(
        direct.is_empty(),
        "environment reads outside the configuration's table (add the variable to \
         runtime/src/config/vars.rs and read it through config::Env):\n{}",
        direct.join("\n")
    );
}

/// Each variable of the table is read somewhere (`vars::NAME` outside the table itself), so
/// the reference lists nothing a node ignores.
#[test]
fn every_variable_of_the_table_is_read() {
    let sources: Vec<(PathBuf, String)> = runtime_sources()
        .into_iter()
        .filter(|(path, _)| !path.ends_with("config/vars.rs"))
        .collect();
    let unread: Vec<&str> = hollo_runtime::config::vars::all()
        .map(|v| v.name)
        .filter(|name| {
            let used = format!("vars::{name}");
            !sources.iter().any(|(_, text)| {
                text.match_indices(&used).any(|(at, _)| {
                    !text[at + used.len()..]
                        .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                })
            })
        })
        .collect();
    assert!(unread.is_empty(), "in the table but never read: {unread:?}");
}

#[test]
fn every_environment_variable_is_in_the_configuration_reference() {
    let reference = read(&repo().join("docs/reference/configuration.md"));
    let names: Vec<&str> = hollo_runtime::config::vars::all()
        .flat_map(|v| std::iter::once(v.name).chain(v.alias))
        .collect();
    assert!(names.len() > 70, "the table's variables: {names:?}");
    let missing: Vec<&&str> = names
        .iter()
        .filter(|n| !reference.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "environment variables the runtime reads but docs/reference/configuration.md does \
         not list: {missing:?}"
    );
}

#[test]
fn the_checks_catch_what_they_look_for() {
    assert_eq!(
        quoted_capitals(r#"env.get("PORT") "Bad name" "A_B2" x("no") "X""#),
        ["PORT", "A_B2"]
    );
    assert_eq!(internal_references("see R-MAPI-6 and (R-OP-UPG)").len(), 1);
    assert_eq!(internal_references("fixed in issue 35 item 2").len(), 1);
    assert_eq!(internal_references("Issue 7").len(), 1);
    assert!(internal_references("an issue with PKCE; FOR-BAR; X-Request-Id; issue35_x").is_empty());
    assert_eq!(
        link_targets("[a](one.md) [b](../two.md#part) [c](https://x.org) [d](#here)"),
        ["one.md", "../two.md", "https://x.org"]
    );
}
