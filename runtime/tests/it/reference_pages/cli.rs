//! `docs/reference/cli.md`: every command of `hollo`, from the clap tree `main` parses
//! (`hollo_runtime::cli::Cli`): a table of the commands, then each one's `--help` as printed.

use clap::CommandFactory;
use hollo_runtime::cli::Cli;

use super::{cell, check_part};

const PAGE: &str = "docs/reference/cli.md";

/// Every command of the tree, depth first, with its words (`["queue", "stats"]`); clap's own
/// `help` subcommands left out.
fn commands(cmd: &clap::Command, words: Vec<String>, out: &mut Vec<(Vec<String>, clap::Command)>) {
    out.push((words.clone(), cmd.clone()));
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let mut w = words.clone();
        w.push(sub.get_name().to_string());
        commands(sub, w, out);
    }
}

/// The reference's generated part: the table of commands and each command's help.
pub fn generated() -> String {
    let mut root = Cli::command();
    root.build();
    let mut all = Vec::new();
    commands(&root, Vec::new(), &mut all);
    let mut out = String::from("| command | what |\n|---|---|\n");
    for (words, cmd) in all.iter().skip(1) {
        let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
        out.push_str(&format!(
            "| `hollo {}` | {} |\n",
            words.join(" "),
            cell(&about)
        ));
    }
    for (words, cmd) in &all {
        let name = std::iter::once("hollo")
            .chain(words.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let help = cmd.clone().render_long_help().to_string();
        let help: Vec<&str> = help.trim_end().lines().map(str::trim_end).collect();
        out.push_str(&format!(
            "\n### `{name}`\n\n```text\n$ {name} --help\n{}\n```\n",
            help.join("\n")
        ));
    }
    out
}

#[test]
fn cli_reference_is_current() {
    check_part(PAGE, "cli", &generated());
}

#[test]
fn help_names_no_requirement_ids_or_issue_numbers() {
    let generated = generated();
    assert!(
        generated.contains("### `hollo account create`") && generated.contains("--password-stdin"),
        "the reference covers every command and its arguments"
    );
    let found = crate::docs::internal_references(&generated);
    assert!(
        found.is_empty(),
        "hollo's help cites requirement ids or issue numbers (keep them in code comments, not \
         in doc comments clap shows): {found:?}"
    );
}
