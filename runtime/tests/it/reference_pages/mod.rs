//! Reference pages of the book generated from the runtime itself: the `hollo` command line
//! from its clap tree (`cli`), the environment variables from the configuration's table
//! (`configuration`) and the HTTP routes from the router (`routes`). Each page keeps
//! its generated part between two markers; a test regenerates it and fails, naming the
//! command, when the committed text differs; `UPDATE_REFERENCES=1` makes the same tests write
//! it. (The operator's tests do the same for the Helm values and the metrics, in
//! `operator/src/reference`.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

mod cli;
mod configuration;
mod routes;

use std::path::{Path, PathBuf};

/// The command that rewrites every generated part of the runtime's pages.
const REGENERATE: &str = "UPDATE_REFERENCES=1 cargo test --workspace --test it reference_pages::";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the runtime crate sits in the repository")
        .to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// One line of Markdown table text: no newlines, no unescaped pipes.
fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The markers around the part `name` of a page; the opening one says how to regenerate it.
fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- generated: {name} (do not edit; `{REGENERATE}` rewrites it) -->\n"),
        format!("<!-- end generated: {name} -->"),
    )
}

/// `text` with the part `name` replaced by `generated`; `None` without both markers.
fn with_part(text: &str, name: &str, generated: &str) -> Option<String> {
    let (open, close) = markers(name);
    let start = text.find(&format!("<!-- generated: {name} "))?;
    let body = start + text[start..].find('\n')? + 1;
    let end = body + text[body..].find(&close)?;
    Some(format!(
        "{}{open}{generated}{}",
        &text[..start],
        &text[end..]
    ))
}

/// Checks that the part `name` of the page `path` is `generated` (Markdown ending in a line
/// break); with `UPDATE_REFERENCES=1`, writes it instead.
fn check_part(path: &str, name: &str, generated: &str) {
    let text = read(path);
    let updated = with_part(&text, name, generated).unwrap_or_else(|| {
        let (open, close) = markers(name);
        panic!("{path} lacks the markers of its generated part {name}:\n{open}…\n{close}")
    });
    if std::env::var_os("UPDATE_REFERENCES").is_some() {
        if updated != text {
            std::fs::write(repo().join(path), &updated)
                .unwrap_or_else(|e| panic!("write {path}: {e}"));
        }
        return;
    }
    assert!(
        updated == text,
        "{path} is stale: its part `{name}` differs from what the code gives. Regenerate it \
         from the repository root with\n    {REGENERATE}\nand commit the result."
    );
}

#[test]
fn a_part_is_replaced_between_its_markers_only() {
    let (open, close) = markers("x");
    let page = format!("intro\n{open}old\n{close}\nafter\n");
    assert_eq!(
        with_part(&page, "x", "new\n"),
        Some(format!("intro\n{open}new\n{close}\nafter\n"))
    );
    assert_eq!(with_part("no markers", "x", "new\n"), None);
}
