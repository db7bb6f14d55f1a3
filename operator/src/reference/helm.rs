//! `docs/reference/helm-values.md`: one table per chart, every value its `values.schema.json`
//! declares (what Helm checks before rendering) with the type and bounds the schema sets, the
//! default `values.yaml` gives and the schema's description.

use serde_json::Value as Json;

use super::{REGENERATE, cell, check_part, read};

const PAGE: &str = "docs/reference/helm-values.md";
const CHARTS: [&str; 2] = ["hollo-operator", "hollo"];
/// Kubernetes' name pattern for namespaces (RFC 1123 labels).
const DNS_LABEL: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// The schema `s` with a `$ref` to the file's `definitions` resolved (its own keys win).
fn resolved(schema: &Json, s: &Json) -> Json {
    let Some(name) = s
        .get("$ref")
        .and_then(Json::as_str)
        .and_then(|r| r.strip_prefix("#/definitions/"))
    else {
        return s.clone();
    };
    let mut out = schema["definitions"][name].clone();
    if let (Some(out), Some(own)) = (out.as_object_mut(), s.as_object()) {
        for (k, v) in own.iter().filter(|(k, _)| *k != "$ref") {
            out.insert(k.clone(), v.clone());
        }
        out.insert("$definition".into(), name.into());
    }
    out
}

fn number(v: &Json) -> String {
    v.to_string()
}

/// What the schema allows, in words: type, enumeration, bounds, pattern.
fn allowed(s: &Json) -> String {
    if let Some(values) = s.get("enum").and_then(Json::as_array) {
        let values: Vec<String> = values
            .iter()
            .map(|v| {
                format!(
                    "`{}`",
                    v.as_str().map_or_else(|| v.to_string(), str::to_string)
                )
            })
            .collect();
        return format!("one of {}", values.join(", "));
    }
    let kind = match s.get("$definition").and_then(Json::as_str) {
        Some("duration") => "duration (`30s`, `15m`, `1h30m`)".to_string(),
        Some("labels") => "map of strings".to_string(),
        _ => match s.get("type").and_then(Json::as_str) {
            Some("object") if s["additionalProperties"].get("type").is_some() => {
                "map of strings".into()
            }
            Some("array") => match s["items"].get("type").and_then(Json::as_str) {
                Some(t) => format!("list of {t}s"),
                None => "list".into(),
            },
            Some(t) => t.to_string(),
            None => "any".into(),
        },
    };
    let mut bounds = Vec::new();
    match (
        s.get("minimum"),
        s.get("exclusiveMinimum"),
        s.get("maximum"),
    ) {
        (Some(lo), _, Some(hi)) => bounds.push(format!("{}–{}", number(lo), number(hi))),
        (_, Some(lo), Some(hi)) => bounds.push(format!("> {} and ≤ {}", number(lo), number(hi))),
        (Some(lo), _, None) => bounds.push(format!("≥ {}", number(lo))),
        (_, Some(lo), None) => bounds.push(format!("> {}", number(lo))),
        (None, None, Some(hi)) => bounds.push(format!("≤ {}", number(hi))),
        (None, None, None) => {}
    }
    if s.get("minLength").and_then(Json::as_u64) == Some(1) {
        bounds.push("not empty".into());
    }
    if let Some(n) = s.get("maxItems") {
        bounds.push(format!("at most {n} item(s)"));
    }
    let item = &s["items"];
    if let Some(p) = item.get("pattern").and_then(Json::as_str) {
        bounds.push(if p == DNS_LABEL {
            "each a DNS-1123 label (a namespace name)".into()
        } else {
            "each matching its pattern in `values.schema.json`".into()
        });
    }
    if let Some(r) = item.get("required").and_then(Json::as_array) {
        let r: Vec<String> = r
            .iter()
            .filter_map(Json::as_str)
            .map(|k| format!("`{k}`"))
            .collect();
        bounds.push(format!("each with {}", r.join(", ")));
    }
    if bounds.is_empty() {
        kind
    } else {
        format!("{kind}, {}", bounds.join(", "))
    }
}

/// A default as the table shows it: scalars as they are, short maps and lists inline.
fn default_text(v: Option<&serde_yaml::Value>) -> String {
    let Some(v) = v else { return "—".into() };
    let json: Json = serde_json::to_value(v).unwrap_or(Json::Null);
    let text = match &json {
        Json::String(s) if s.is_empty() => "\"\"".to_string(),
        Json::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.len() > 60 {
        "see `values.yaml`".into()
    } else {
        format!("`{text}`")
    }
}

/// The rows of `schema` under `path`: every value with a description (objects without one
/// are only the sum of their values), depth first in the schema's order.
fn rows(
    schema: &Json,
    s: &Json,
    values: Option<&serde_yaml::Value>,
    path: &str,
    out: &mut Vec<String>,
) {
    let s = resolved(schema, s);
    let description = s.get("description").and_then(Json::as_str);
    let properties = s.get("properties").and_then(Json::as_object);
    if let Some(d) = description {
        out.push(format!(
            "| `{path}` | {} | {} | {} |",
            cell(&allowed(&s)),
            cell(&default_text(values)),
            cell(d)
        ));
    } else {
        assert!(
            properties.is_some(),
            "{path}: every value of a chart's values.schema.json has a description"
        );
    }
    for (name, child) in properties.into_iter().flatten() {
        let child_values = values.and_then(|v| v.get(name.as_str()));
        let child_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        rows(schema, child, child_values, &child_path, out);
    }
}

/// Every key path of `values.yaml` (maps descended into, as far as the schema declares
/// properties), so that a default the schema does not know fails here as `helm install` would.
fn undeclared(
    schema: &Json,
    s: &Json,
    values: &serde_yaml::Value,
    path: &str,
    out: &mut Vec<String>,
) {
    let s = resolved(schema, s);
    let (Some(properties), Some(map)) = (
        s.get("properties").and_then(Json::as_object),
        values.as_mapping(),
    ) else {
        return;
    };
    for (k, v) in map {
        let k = k.as_str().unwrap_or_default();
        let child = if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        };
        match properties.get(k) {
            Some(ps) => undeclared(schema, ps, v, &child, out),
            None => out.push(child),
        }
    }
}

fn chart_table(chart: &str) -> String {
    let schema: Json = serde_json::from_str(&read(&format!("charts/{chart}/values.schema.json")))
        .expect("values.schema.json is JSON");
    let values: serde_yaml::Value =
        serde_yaml::from_str(&read(&format!("charts/{chart}/values.yaml")))
            .expect("values.yaml is YAML");
    let mut out = vec![
        "| value | allowed | default | meaning |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    rows(&schema, &schema, Some(&values), "", &mut out);
    out.join("\n") + "\n"
}

fn generated() -> String {
    let mut page = String::new();
    for chart in CHARTS {
        page.push_str(&format!("\n## `charts/{chart}`\n\n{}", chart_table(chart)));
    }
    page
}

#[test]
fn helm_values_reference_is_current() {
    check_part(PAGE, "helm-values", &generated(), REGENERATE);
}

#[test]
fn every_default_is_a_value_the_schema_declares() {
    for chart in CHARTS {
        let schema: Json =
            serde_json::from_str(&read(&format!("charts/{chart}/values.schema.json")))
                .expect("JSON");
        let values: serde_yaml::Value =
            serde_yaml::from_str(&read(&format!("charts/{chart}/values.yaml"))).expect("YAML");
        let mut extra = Vec::new();
        undeclared(&schema, &schema, &values, "", &mut extra);
        assert!(
            extra.is_empty(),
            "charts/{chart}/values.yaml sets undeclared values: {extra:?}"
        );
    }
}

#[test]
fn the_table_says_what_the_schema_allows() {
    let s = serde_json::json!({"type": "number", "exclusiveMinimum": 0, "maximum": 1});
    assert_eq!(allowed(&s), "number, > 0 and ≤ 1");
    let s = serde_json::json!({"type": "integer", "minimum": 1, "maximum": 5});
    assert_eq!(allowed(&s), "integer, 1–5");
    let s = serde_json::json!({"enum": ["json", "text"]});
    assert_eq!(allowed(&s), "one of `json`, `text`");
    let schema = serde_json::json!({"definitions": {"duration": {"type": "string"}}});
    let s = resolved(
        &schema,
        &serde_json::json!({"$ref": "#/definitions/duration", "description": "d"}),
    );
    assert_eq!(allowed(&s), "duration (`30s`, `15m`, `1h30m`)");
    assert_eq!(s["description"], "d");
    assert_eq!(
        default_text(Some(&serde_yaml::Value::String(String::new()))),
        "`\"\"`"
    );
    assert_eq!(default_text(None), "—");
}
