//! `docs/reference/metrics.md`: every family the runtime (`hollo_runtime::metrics`) and the
//! operator (`telemetry::Metrics`) register — name as scraped, type, labels, help — read from
//! their own registries' exposition, with the alert rules and dashboard panels of
//! `charts/hollo` that read each. Every `hollo_…` name the chart's rules and dashboard use
//! must be one of them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value as Json;

use super::{REGENERATE, cell, check_part, read};

const PAGE: &str = "docs/reference/metrics.md";
const RULES: &str = "charts/hollo/templates/prometheusrule.yaml";
const DASHBOARD: &str = "charts/hollo/files/dashboard.json";

/// One family of an exposition.
#[derive(Debug, Clone, PartialEq)]
struct Family {
    /// The name in `# TYPE` (a counter's samples add `_total`).
    name: String,
    kind: String,
    help: String,
    labels: Vec<String>,
    /// Whether a sample was seen (a family with labels shows none until a series exists).
    sampled: bool,
}

impl Family {
    /// The name a query uses: counters as scraped, with `_total`.
    fn scraped(&self) -> String {
        match self.kind.as_str() {
            "counter" => format!("{}_total", self.name),
            // An OpenMetrics info family's one sample is `<name>_info{…} 1`.
            "info" => format!("{}_info", self.name),
            _ => self.name.clone(),
        }
    }

    /// Whether `token` (a name in a query) reads this family.
    fn is_read_by(&self, token: &str) -> bool {
        let suffixes: &[&str] = match self.kind.as_str() {
            "counter" => &["_total", "_created"],
            "histogram" => &["_bucket", "_sum", "_count", "_created"],
            "info" => &["_info"],
            _ => &[""],
        };
        suffixes
            .iter()
            .any(|s| token == format!("{}{s}", self.name))
    }
}

/// The label names of a sample line `name{a="x",b="y"} 1`.
fn sample_labels(line: &str) -> Vec<String> {
    let Some(open) = line.find('{') else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut rest = &line[open + 1..];
    while let Some(eq) = rest.find("=\"") {
        names.push(rest[..eq].trim_start_matches(',').trim().to_string());
        // Skip the quoted value (escapes included).
        let mut chars = rest[eq + 2..].char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    end = Some(eq + 2 + i + 1);
                    break;
                }
                _ => {}
            }
        }
        let Some(end) = end else { break };
        rest = &rest[end..];
    }
    names
}

/// The families of a Prometheus/OpenMetrics text exposition, in its order.
fn families(exposition: &str) -> Vec<Family> {
    let mut out: Vec<Family> = Vec::new();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push(Family {
                name: name.to_string(),
                kind: String::new(),
                help: help.trim_end_matches('.').to_string(),
                labels: Vec::new(),
                sampled: false,
            });
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(f) = out.last_mut().filter(|f| f.name == name) {
                f.kind = kind.to_string();
            }
        } else if !line.starts_with('#')
            && !line.is_empty()
            && let Some(f) = out.last_mut()
            && !f.sampled
        {
            f.sampled = true;
            f.labels = sample_labels(line)
                .into_iter()
                .filter(|l| l != "le")
                .collect();
        }
    }
    out
}

/// The runtime's registry with one series in every family, so that each shows its labels.
fn runtime_exposition() -> String {
    use hollo_runtime::metrics::{
        MEDIA_PROXY_REQUESTS, Metrics, OutcomeLabels, POLL_ENQUEUE_ATTEMPTS, PREVIEW_CARDS,
        QueueLabels,
    };
    let m = Metrics::new();
    let _ = m.of_kind("task", "example");
    let _ = m
        .enqueued
        .get_or_create(&Metrics::labels("task", "example"));
    let _ = m.depth.get_or_create(&QueueLabels {
        queue: "task".into(),
        state: "ready".into(),
    });
    let outcome = OutcomeLabels {
        outcome: "example".into(),
    };
    for family in [
        &*POLL_ENQUEUE_ATTEMPTS,
        &*MEDIA_PROXY_REQUESTS,
        &*PREVIEW_CARDS,
    ] {
        let _ = family.get_or_create(&outcome);
    }
    m.render()
}

/// The operator's registry with one series in every family (one `Hollo` recorded).
fn operator_exposition() -> String {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    let m = crate::telemetry::Metrics::default();
    m.observe(Duration::from_millis(5), Some("example"));
    let _ = m
        .requests
        .get_or_create(&crate::telemetry::VerbLabels { verb: "get" });
    let key = ("ns".to_string(), "social".to_string());
    let status = crate::crd::HolloStatus {
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "Example".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }],
        ..Default::default()
    };
    let budget = crate::budget::Budget::for_spec(&crate::testutil::spec());
    m.record_hollo(key.clone(), &status, &budget, Some(1.0));
    m.hollo_error(key);
    m.render()
}

/// Where the chart reads metrics: each alert's rule and each dashboard panel, with the text
/// of its queries (a rule's template variables expanded).
fn chart_queries() -> Vec<(String, String)> {
    let rules = read(RULES);
    // `{{- $name := printf "…" … }}`: the template variables a rule's expression uses.
    let definitions: BTreeMap<String, String> = rules
        .lines()
        .filter_map(|l| {
            let l = l.trim().strip_prefix("{{- $")?;
            let (name, text) = l.split_once(":=")?;
            Some((format!("${}", name.trim()), text.to_string()))
        })
        .collect();
    let expand = |text: &str| {
        let mut text = text.to_string();
        // Definitions refer to earlier ones: expand until nothing changes.
        for _ in 0..definitions.len() {
            let before = text.clone();
            for (name, def) in &definitions {
                text = text.replace(name.as_str(), &format!(" {def} "));
            }
            if text == before {
                break;
            }
        }
        text
    };
    let mut queries = Vec::new();
    let mut alert: Option<String> = None;
    for line in rules.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("- alert:") {
            alert = Some(name.trim().to_string());
        } else if let (Some(a), Some(expr)) = (&alert, t.strip_prefix("expr:")) {
            queries.push((format!("alert {a}"), expand(expr)));
        }
    }
    let dashboard: Json = serde_json::from_str(&read(DASHBOARD)).expect("dashboard.json is JSON");
    let mut panels = vec![&dashboard];
    while let Some(p) = panels.pop() {
        for child in p["panels"].as_array().into_iter().flatten() {
            panels.push(child);
        }
        let exprs: Vec<&str> = p["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["expr"].as_str())
            .collect();
        if let (Some(title), false) = (p["title"].as_str(), exprs.is_empty()) {
            queries.push((format!("panel {title}"), exprs.join("\n")));
        }
    }
    queries
}

/// The `hollo_…` names in a query that are not label names.
fn metric_tokens(query: &str, labels: &BTreeSet<String>) -> BTreeSet<String> {
    query
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| t.starts_with("hollo_") && !labels.contains(*t))
        .map(String::from)
        .collect()
}

/// The table of one registry's families, each with the alerts and panels that read it.
fn table(families: &[Family], queries: &[(String, String)], labels: &BTreeSet<String>) -> String {
    let mut out = vec![
        "| family | type | labels | what | alerts | dashboard panels |".to_string(),
        "|---|---|---|---|---|---|".to_string(),
    ];
    for f in families {
        let users = |prefix: &str| {
            let names: Vec<String> = queries
                .iter()
                .filter(|(_, q)| metric_tokens(q, labels).iter().any(|t| f.is_read_by(t)))
                .filter_map(|(who, _)| who.strip_prefix(prefix))
                .map(|w| format!("`{w}`"))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            if names.is_empty() {
                "—".to_string()
            } else {
                names.join(", ")
            }
        };
        let label_list = if f.labels.is_empty() {
            "—".to_string()
        } else {
            f.labels
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(format!(
            "| `{}` | {} | {} | {} | {} | {} |",
            f.scraped(),
            f.kind,
            label_list,
            cell(&f.help),
            users("alert "),
            users("panel ")
        ));
    }
    out.join("\n") + "\n"
}

/// Both registries, checked: every family has a type and shows its labels.
fn registries() -> (Vec<Family>, Vec<Family>) {
    let runtime = families(&runtime_exposition());
    let operator = families(&operator_exposition());
    for f in runtime.iter().chain(&operator) {
        assert!(
            f.sampled && !f.kind.is_empty(),
            "{}: no series in the reference's registry, so its labels are unknown: give it one \
             in reference/metrics.rs",
            f.name
        );
    }
    (runtime, operator)
}

fn all_labels(families: &[&Family]) -> BTreeSet<String> {
    families
        .iter()
        .flat_map(|f| f.labels.iter().cloned())
        .chain(["namespace", "hollo", "pod", "role"].map(String::from))
        .collect()
}

#[test]
fn metrics_reference_is_current() {
    let (runtime, operator) = registries();
    let labels = all_labels(&runtime.iter().chain(&operator).collect::<Vec<_>>());
    let queries = chart_queries();
    check_part(
        PAGE,
        "runtime-metrics",
        &table(&runtime, &queries, &labels),
        REGENERATE,
    );
    check_part(
        PAGE,
        "operator-metrics",
        &table(&operator, &queries, &labels),
        REGENERATE,
    );
}

#[test]
fn the_charts_alerts_and_dashboard_read_only_registered_families() {
    let (runtime, operator) = registries();
    let all: Vec<&Family> = runtime.iter().chain(&operator).collect();
    let labels = all_labels(&all);
    let queries = chart_queries();
    assert!(
        queries
            .iter()
            .filter(|(w, _)| w.starts_with("alert "))
            .count()
            >= 5
            && queries
                .iter()
                .filter(|(w, _)| w.starts_with("panel "))
                .count()
                >= 10,
        "found the chart's alerts and panels: {queries:?}"
    );
    let mut unknown = Vec::new();
    for (who, query) in &queries {
        for token in metric_tokens(query, &labels) {
            if !all.iter().any(|f| f.is_read_by(&token)) {
                unknown.push(format!("{who}: {token}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "the chart reads metrics nothing registers: {unknown:?}"
    );
}

#[test]
fn an_exposition_is_read_family_by_family() {
    let text = "# HELP a Things.\n# TYPE a counter\na_total{queue=\"x,y\",kind=\"k\\\"\"} 1\n\
                # HELP h Time.\n# TYPE h histogram\nh_bucket{le=\"0.1\"} 0\n\
                # HELP g G.\n# TYPE g gauge\n# EOF\n";
    let f = families(text);
    assert_eq!(f.len(), 3);
    assert_eq!(
        (f[0].name.as_str(), f[0].kind.as_str(), f[0].help.as_str()),
        ("a", "counter", "Things")
    );
    assert_eq!(f[0].labels, ["queue", "kind"]);
    assert!(f[1].sampled && f[1].labels.is_empty(), "le is not a label");
    assert!(!f[2].sampled);
    assert!(f[0].is_read_by("a_total") && !f[0].is_read_by("a_totally"));
    let labels = BTreeSet::from(["hollo_namespace".to_string()]);
    assert_eq!(
        metric_tokens("rate(hollo_x_total{hollo_namespace=\"n\"}[5m])", &labels),
        BTreeSet::from(["hollo_x_total".to_string()])
    );
}
