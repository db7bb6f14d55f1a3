//! Reference pages of the book generated from what the code and the charts really are (tests
//! only): the Helm values of both charts from their `values.schema.json` and `values.yaml`
//! (`helm`), and every metric family the runtime and the operator register, with the alerts and
//! dashboard panels of `charts/hollo` that read each (`metrics`). Each page keeps its
//! generated part between two markers; a test regenerates it and fails, naming the command,
//! when the committed text differs. `UPDATE_REFERENCES=1` makes the same tests write it.

mod helm;
mod metrics;

use std::path::{Path, PathBuf};

/// The command that rewrites every generated part of the operator's pages.
pub const REGENERATE: &str =
    "UPDATE_REFERENCES=1 cargo test --workspace --bin hollo-operator reference::";

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the operator crate sits in the repository")
        .to_path_buf()
}

pub fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// One line of Markdown table text: no newlines, no unescaped pipes.
pub fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The markers around the part `name` of a page; the opening one says how to regenerate it.
fn markers(name: &str, regenerate: &str) -> (String, String) {
    (
        format!("<!-- generated: {name} (do not edit; `{regenerate}` rewrites it) -->\n"),
        format!("<!-- end generated: {name} -->"),
    )
}

/// `text` with the part `name` replaced by `generated`; `None` without both markers.
fn with_part(text: &str, name: &str, generated: &str, regenerate: &str) -> Option<String> {
    let (open, close) = markers(name, regenerate);
    let open_prefix = format!("<!-- generated: {name} ");
    let start = text.find(&open_prefix)?;
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
pub fn check_part(path: &str, name: &str, generated: &str, regenerate: &str) {
    let text = read(path);
    let updated = with_part(&text, name, generated, regenerate).unwrap_or_else(|| {
        let (open, close) = markers(name, regenerate);
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
        "{path} is stale: its part `{name}` differs from what the code and charts give. \
         Regenerate it from the repository root with\n    {regenerate}\nand commit the result."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_is_replaced_between_its_markers_only() {
        let (open, close) = markers("x", "run it");
        let page = format!("intro\n{open}old\n{close}\nafter\n");
        assert_eq!(
            with_part(&page, "x", "new\n", "run it").as_deref(),
            Some(format!("intro\n{open}new\n{close}\nafter\n").as_str())
        );
        // An old regeneration command in the marker is rewritten too.
        let page = format!("<!-- generated: x (older text) -->\nold\n{close}\n");
        assert_eq!(
            with_part(&page, "x", "new\n", "run it"),
            Some(format!("{open}new\n{close}\n"))
        );
        assert_eq!(with_part("no markers", "x", "new\n", "run it"), None);
    }
}
