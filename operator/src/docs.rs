//! Documentation generated from the code, so it cannot drift from it:
//! `hollo-operator crd-reference` prints `operator/CRD-REFERENCE.md` from the CRD's own
//! OpenAPI schema (every field, its type, default, description and admission rules), and the
//! tests below fail when the committed file, the operator README's RBAC table or its uid differ
//! from what the code and the chart really do.

use serde_json::Value;

use crate::crd::Hollo;
use kube::CustomResourceExt;

/// Fields whose schema is a Kubernetes type: the reference names the type instead of listing
/// its (long, upstream-documented) fields. Keyed by the property name.
const KUBERNETES_TYPES: &[(&str, &str)] = &[
    ("affinity", "core/v1 Affinity"),
    ("behavior", "autoscaling/v2 HorizontalPodAutoscalerBehavior"),
    ("conditions", "[]meta/v1 Condition"),
    ("containerSecurityContext", "core/v1 SecurityContext"),
    ("env", "[]core/v1 EnvVar"),
    ("liveness", "core/v1 Probe"),
    ("pullSecrets", "[]core/v1 LocalObjectReference"),
    ("readiness", "core/v1 Probe"),
    ("resources", "core/v1 ResourceRequirements"),
    ("securityContext", "core/v1 PodSecurityContext"),
    ("startup", "core/v1 Probe"),
    ("tolerations", "[]core/v1 Toleration"),
    (
        "topologySpreadConstraints",
        "[]core/v1 TopologySpreadConstraint",
    ),
    ("volumeMounts", "[]core/v1 VolumeMount"),
    ("volumes", "[]core/v1 Volume"),
];

struct Row {
    path: String,
    type_: String,
    default: String,
    description: String,
}

/// One line of Markdown table text: no newlines, no unescaped pipes.
fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn type_of(name: &str, s: &Value) -> String {
    if let Some((_, k)) = KUBERNETES_TYPES.iter().find(|(n, _)| *n == name) {
        return (*k).to_string();
    }
    if s.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        return "int or string".into();
    }
    let base = match s.get("type").and_then(Value::as_str) {
        Some("array") => format!("[]{}", type_of("", s.get("items").unwrap_or(&Value::Null))),
        Some("object") if s.get("additionalProperties").is_some() => "map[string]string".into(),
        Some(t) => match s.get("format").and_then(Value::as_str) {
            Some(f) => format!("{t} ({f})"),
            None => t.to_string(),
        },
        None => "any".into(),
    };
    match s.get("enum").and_then(Value::as_array) {
        Some(values) => {
            let v: Vec<String> = values.iter().map(|v| format!("`{}`", compact(v))).collect();
            format!("{base}: {}", v.join(", "))
        }
        None => base,
    }
}

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) if s.is_empty() => "\"\"".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The default of `path` below an ancestor whose schema carries a default object (a struct
/// with `#[serde(default = "…")]` states its fields' defaults there).
fn inherited_default(defaults: &[(Vec<String>, Value)], path: &[String]) -> Option<Value> {
    defaults.iter().rev().find_map(|(at, value)| {
        let rest = path.strip_prefix(at.as_slice())?;
        let mut v = value;
        for k in rest {
            v = v.get(k)?;
        }
        Some(v.clone())
    })
}

fn walk(
    schema: &Value,
    path: &mut Vec<String>,
    defaults: &mut Vec<(Vec<String>, Value)>,
    rows: &mut Vec<Row>,
    rules: &mut Vec<(String, String)>,
) {
    let dotted = path.join(".");
    for r in schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let message = r
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| r.get("rule").and_then(Value::as_str))
            .unwrap_or_default();
        rules.push((dotted.clone(), message.to_string()));
    }
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for (name, s) in props {
        path.push(name.clone());
        let own_default = s.get("default").cloned();
        let default = own_default
            .clone()
            .or_else(|| inherited_default(defaults, path));
        let kubernetes = KUBERNETES_TYPES.iter().any(|(n, _)| n == name);
        let default = match default {
            Some(Value::Object(_)) if s.get("properties").is_some() && !kubernetes => {
                "see fields".to_string()
            }
            Some(v) => format!("`{}`", compact(&v)),
            None if required.contains(&name.as_str()) => "required".into(),
            None => "—".into(),
        };
        let description = s
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        rows.push(Row {
            path: path.join("."),
            type_: type_of(name, s),
            default,
            description: cell(description),
        });
        if !kubernetes {
            if let Some(d) = own_default {
                defaults.push((path.clone(), d));
            }
            let pushed = s.get("default").is_some();
            let inner = match s.get("type").and_then(Value::as_str) {
                Some("array") => s.get("items").unwrap_or(&Value::Null),
                _ => s,
            };
            walk(inner, path, defaults, rows, rules);
            if pushed {
                defaults.pop();
            }
        }
        path.pop();
    }
}

/// `operator/CRD-REFERENCE.md`: every field of `Hollo` from the generated schema.
pub fn crd_reference() -> String {
    let crd = Hollo::crd();
    let version = &crd.spec.versions[0];
    let schema = serde_json::to_value(
        version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref()),
    )
    .unwrap_or(Value::Null);
    let mut out = String::new();
    out.push_str(&format!(
        "# `{}` reference ({}/{})\n\n\
         Generated from the CRD's schema by `hollo-operator crd-reference` (do not edit; the test \
         `docs::tests::committed_crd_reference_is_up_to_date` fails when it is stale). Regenerate \
         from the repository root with\n`cargo run -q -p hollo-operator -- crd-reference > \
         operator/CRD-REFERENCE.md`.\n\n\
         A default of `see fields` means the object is filled field by field; `—` means unset. \
         Fields of Kubernetes types are named, not expanded: see the Kubernetes API reference.\n",
        crd.spec.names.kind, crd.spec.group, version.name
    ));
    for part in ["spec", "status"] {
        let mut rows = vec![];
        let mut rules = vec![];
        let mut path = vec![part.to_string()];
        walk(
            &schema["properties"][part],
            &mut path,
            &mut vec![],
            &mut rows,
            &mut rules,
        );
        out.push_str(&format!(
            "\n## `{part}`\n\n| field | type | default | description |\n|---|---|---|---|\n"
        ));
        for r in &rows {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                r.path,
                cell(&r.type_),
                cell(&r.default),
                r.description
            ));
        }
        if !rules.is_empty() {
            out.push_str(&format!(
                "\n### Admission rules on `{part}` (CEL)\n\n| on | rejected with |\n|---|---|\n"
            ));
            for (on, message) in rules {
                out.push_str(&format!("| `{on}` | {} |\n", cell(&message)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const TOP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

    fn read(path: &str) -> String {
        std::fs::read_to_string(format!("{TOP}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The committed reference must be what the binary prints.
    #[test]
    fn committed_crd_reference_is_up_to_date() {
        assert!(
            read("operator/CRD-REFERENCE.md") == crd_reference(),
            "operator/CRD-REFERENCE.md is stale; regenerate with \
             `cargo run -q -p hollo-operator -- crd-reference > operator/CRD-REFERENCE.md`"
        );
    }

    #[test]
    fn the_reference_lists_fields_defaults_and_rules() {
        let r = crd_reference();
        assert!(
            r.contains("| `spec.web.replicas` | integer (int32) | `2` |"),
            "{r}"
        );
        assert!(r.contains("| `spec.version` | string | required |"));
        assert!(r.contains("| `spec.pod.affinity` | core/v1 Affinity | — |"));
        assert!(
            !r.contains("spec.pod.affinity.nodeAffinity"),
            "Kubernetes types are named"
        );
        assert!(r.contains("| `spec.web` | web.replicas must be >= 0 |"));
        assert!(r.contains("| `status.phase` |"));
    }

    type Rule = (String, String, BTreeSet<String>);

    fn rules_of(yaml: &str) -> Vec<Rule> {
        let list: Vec<serde_yaml::Value> = serde_yaml::from_str(yaml).expect("rules parse");
        let mut out = vec![];
        for r in list {
            let strings = |k: &str| -> Vec<String> {
                r[k].as_sequence()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            };
            let verbs: BTreeSet<String> = strings("verbs").into_iter().collect();
            for g in strings("apiGroups") {
                for res in strings("resources") {
                    out.push((g.clone(), res, verbs.clone()));
                }
            }
        }
        out.sort();
        out
    }

    /// The rules the chart grants: the `hollo-operator.rules` template (template comments
    /// removed) and the leader-election Role.
    fn chart_rules() -> Vec<Rule> {
        let helpers = read("charts/hollo-operator/templates/_helpers.tpl");
        let start = helpers
            .find("{{- define \"hollo-operator.rules\" -}}")
            .expect("rules template");
        let body = &helpers[start..];
        let body = &body[body.find('\n').expect("newline") + 1..];
        let body = &body[..body.find("{{- end -}}").expect("end of rules")];
        let mut yaml = String::new();
        let mut rest = body;
        while let Some(i) = rest.find("{{-") {
            yaml.push_str(&rest[..i]);
            let j = rest[i..].find("}}").expect("template closes") + i + 2;
            rest = &rest[j..];
        }
        yaml.push_str(rest);
        let rbac = read("charts/hollo-operator/templates/rbac.yaml");
        let leader = &rbac[rbac.find("-leader-election").expect("leader Role")..];
        let rules = &leader[leader.find("rules:\n").expect("rules") + 7..];
        let rules = &rules[..rules.find("---").expect("end of Role")];
        let mut all = rules_of(&yaml);
        all.extend(rules_of(rules));
        all.sort();
        all
    }

    fn readme_rules() -> Vec<Rule> {
        let readme = read("operator/README.md");
        let section = &readme[readme.find("## RBAC the operator uses").expect("section")..];
        let section = &section[..section[3..].find("\n## ").expect("next section") + 3];
        let unquote = |s: &str| s.trim().trim_matches('`').trim_matches('"').to_string();
        let mut out: Vec<Rule> = section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| {
                let cols: Vec<&str> = l.trim_matches('|').split(" | ").collect();
                let verbs = cols[2].split(" (").next().unwrap_or_default();
                (
                    unquote(cols[0]),
                    unquote(cols[1]),
                    verbs.split(',').map(|v| v.trim().to_string()).collect(),
                )
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn operator_readme_rbac_table_is_the_charts() {
        let chart = chart_rules();
        assert!(chart.len() >= 15, "{chart:?}");
        assert_eq!(readme_rules(), chart);
    }

    /// The images this project publishes; every chart, example, doc and script names these.
    const OUR_IMAGES: [&str; 2] = [
        "ghcr.io/hollo-social/hollo",
        "ghcr.io/hollo-social/hollo-operator",
    ];
    /// Image paths that may appear beside ours: upstream Hollo's image (the `upstream`
    /// profile) and the end-to-end suite's local builds.
    const OTHER_IMAGES: [&str; 3] = [
        "ghcr.io/fedify-dev/hollo",
        "localhost/hollo",
        "localhost/hollo-operator",
    ];

    /// Every file git tracks (else every file under the repository but `target/` and `.git/`).
    fn tracked_files() -> Vec<std::path::PathBuf> {
        let top = std::path::Path::new(TOP);
        if let Ok(out) = std::process::Command::new("git")
            .args(["-C", TOP, "ls-files", "-z"])
            .output()
            && out.status.success()
        {
            return out
                .stdout
                .split(|b| *b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| top.join(String::from_utf8_lossy(p).as_ref()))
                .collect();
        }
        let mut files = vec![];
        let mut dirs = vec![top.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap_or_default();
                if name == "target" || name == ".git" {
                    continue;
                }
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        files
    }

    /// Placeholders (`OWNER/…`) and image paths ending in `/hollo` or `/hollo-operator` that
    /// are neither ours nor in [`OTHER_IMAGES`], as "line: what".
    fn image_name_problems(text: &str) -> Vec<String> {
        let mut found = vec![];
        let boundary = |c: char| c.is_whitespace() || "\"'`=({[,;<>".contains(c);
        for (n, line) in text.lines().enumerate() {
            if line.contains("OWNER/") || line.contains("/OWNER") {
                found.push(format!("{}: placeholder: {}", n + 1, line.trim()));
            }
            for token in line.split(boundary) {
                // Up to a tag, a digest or a closing bracket.
                let path = token
                    .split([':', '@', ')', '}', ']'])
                    .next()
                    .unwrap_or_default();
                let path = path.strip_prefix("docker://").unwrap_or(path);
                let Some((host, _)) = path.split_once('/') else {
                    continue;
                };
                // `host/owner/…/name`, or `localhost/name`: `deployment.apps/hollo-operator`
                // is kubectl's, not an image.
                let registry = host == "localhost"
                    || (host.contains('.')
                        && host.chars().any(|c| c.is_ascii_alphabetic())
                        && path.matches('/').count() >= 2);
                let ours = path.ends_with("/hollo") || path.ends_with("/hollo-operator");
                // A URL (`https://github.com/…/hollo`) is no image path.
                let url = token.contains("://") && !token.starts_with("docker://");
                if registry
                    && ours
                    && !url
                    && !OUR_IMAGES.contains(&path)
                    && !OTHER_IMAGES.contains(&path)
                {
                    found.push(format!("{}: image {path}", n + 1));
                }
            }
        }
        found
    }

    #[test]
    fn image_name_check_catches_what_it_looks_for() {
        for bad in [
            "  repository: ghcr.io/OWNER/hollo-operator",
            "image: {repository: ghcr.io/someone/hollo}",
            "docker build -t quay.io/hollo/hollo:0.1.0 .",
            "\"image\": \"docker.io/hollo-social/hollo-operator@sha256:00\"",
            "see https://github.com/OWNER/hollo-on-kubernetes",
        ] {
            assert!(!image_name_problems(bad).is_empty(), "{bad}");
        }
        for good in [
            "  repository: ghcr.io/hollo-social/hollo-operator",
            "image: {repository: ghcr.io/hollo-social/hollo, pullPolicy: IfNotPresent}",
            "\"ghcr.io/hollo-social/hollo:0.1.0\"",
            "repository: ghcr.io/fedify-dev/hollo",
            "--set image.repository=localhost/hollo-operator",
            "cp target/debug/hollo ../target/debug/hollo",
            "poddisruptionbudget.policy/hollo-operator created (server dry run)",
            "https://github.com/fedify-dev/hollo",
            "CREATE DATABASE {name} OWNER {name}",
        ] {
            assert_eq!(image_name_problems(good), Vec::<String>::new(), "{good}");
        }
    }

    /// One image name everywhere: no placeholder and no other registry path for our images in
    /// any tracked file (charts, examples, docs, Dockerfiles, scripts, the CRD default).
    #[test]
    fn every_file_names_our_images() {
        let files = tracked_files();
        assert!(files.len() > 100, "{} files", files.len());
        let mut problems = vec![];
        // This file holds the bad examples above.
        let this_file = std::path::Path::new(TOP).join("operator/src/docs.rs");
        for file in files.into_iter().filter(|f| *f != this_file) {
            // Binary files and files removed from the work tree but still in the index.
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            for p in image_name_problems(&text) {
                let shown = file.strip_prefix(TOP).unwrap_or(&file);
                problems.push(format!("{}:{p}", shown.display()));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        let defaults = crate::crd::ImageSpec::default();
        assert_eq!(defaults.repository, OUR_IMAGES[0]);
        let chart = read("charts/hollo-operator/values.yaml");
        assert!(chart.contains(&format!("repository: {}\n", OUR_IMAGES[1])));
    }

    /// The chart never turns leader election off, whatever `replicaCount`: a rolling upgrade
    /// briefly runs two operator pods, and only the Lease keeps the new one from reconciling
    /// beside the old one.
    #[test]
    fn the_chart_always_elects_a_leader() {
        let deployment = read("charts/hollo-operator/templates/deployment.yaml");
        assert!(!deployment.contains("DISABLE_LEADER_ELECTION"));
        assert!(deployment.contains("- name: LEASE_NAME"));
        assert!(deployment.contains("- name: POD_NAME"));
    }

    /// The uid the pods run as: the code's, both images' and the chart's, and what the operator
    /// README says.
    #[test]
    fn the_documented_uid_is_the_one_that_runs() {
        use crate::resources::pod::RUN_AS;
        let user = format!("USER {RUN_AS}:{RUN_AS}");
        for dockerfile in ["runtime/Dockerfile", "operator/Dockerfile"] {
            assert!(read(dockerfile).contains(&user), "{dockerfile}: {user}");
        }
        let chart = read("charts/hollo-operator/templates/deployment.yaml");
        assert!(chart.contains(&format!("runAsUser: {RUN_AS}")));
        let readme = read("operator/README.md");
        assert!(
            readme.contains(&format!("runs as uid/gid {RUN_AS}")),
            "operator/README.md must state uid {RUN_AS}"
        );
        assert!(!readme.contains("uid/gid 1000"));
    }
}
