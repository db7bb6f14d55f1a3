//! `docs/reference/configuration.md`: every environment variable the runtime reads, from the
//! table the configuration is parsed by (`hollo_runtime::config::vars`): its default, what it
//! accepts and what it means. The prose around the two tables stays hand-written.

use hollo_runtime::config::vars::{self, Row};

use super::{cell, check_part};

const PAGE: &str = "docs/reference/configuration.md";

/// The Markdown table of `rows`: variables sharing a meaning share a line, their names,
/// defaults and accepted values joined by ` / `.
fn table(rows: &[Row]) -> String {
    let mut out = String::from("| variable | default | accepts | meaning |\n|---|---|---|---|\n");
    for row in rows {
        let joined = |f: fn(&vars::Var) -> String| {
            row.vars
                .iter()
                .map(|v| f(v))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            cell(&joined(vars::Var::shown_name)),
            cell(&joined(vars::Var::shown_default)),
            cell(&joined(vars::Var::accepts)),
            cell(row.meaning),
        ));
    }
    out
}

#[test]
fn configuration_reference_is_current() {
    let node = table(vars::NODE);
    assert!(
        node.contains("| `DATABASE_POOL_MAX` | `20` | integer 1–10000 | pool of a web node |"),
        "{node}"
    );
    check_part(PAGE, "variables", &node);
    check_part(PAGE, "local-variables", &table(vars::LOCAL));
    // The page's own fallback, written in the prose beside the generated tables.
    let page = super::read(PAGE);
    let pre_stop = hollo_runtime::maintenance_page::PRE_STOP_DEFAULT;
    assert!(
        page.contains(&format!("out of its range is {pre_stop} seconds")),
        "{PAGE} gives the maintenance page's pre-stop delay as {pre_stop} seconds"
    );
}

#[test]
fn meanings_cite_no_requirement_ids_or_issue_numbers() {
    let text = format!("{}{}", table(vars::NODE), table(vars::LOCAL));
    let found = crate::docs::internal_references(&text);
    assert!(
        found.is_empty(),
        "the configuration table cites requirement ids or issue numbers (keep them in code \
         comments): {found:?}"
    );
}
