//! Liberal in what we accept (R-AP-1): an incoming document may use any valid compaction
//! of the same data, and every server picks its own. Before an activity is stored (inbox) or
//! a note is kept (inbox, reply collection), it is brought to the one shape the rest of the
//! code reads:
//!
//! - `@id`/`@type` as `id`/`type`; ActivityStreams terms written as `as:term` or as full IRIs
//!   as the bare term; a `type` array reduced to the first type we know;
//! - public addressing (`…#Public`, `as:Public`, `Public`) as the full IRI, `to`/`cc`/`bto`/
//!   `bcc`/`audience` always arrays of IRIs (embedded actors by their id);
//! - properties we read as one value (`actor`, `attributedTo`, `inReplyTo`, `object`, `url`,
//!   `content`, `summary`, `name`, `published`, `replies`) taken from a one-element array — an
//!   `attributedTo` array by its first actor (PeerTube lists the channel too), a `url` array by
//!   its first `text/html` link;
//! - `url` as a `Link` object by its `href`; `content`/`summary`/`name` from their `…Map` when
//!   only the map is given; `tag`, `oneOf`, `anyOf`, `attachment` always arrays.
//!
//! Everything else is kept as it came. This is not JSON-LD expansion: contexts are not fetched
//! (a remote context is an outbound request per activity and a way to make us fetch), so a
//! document that renames ActivityStreams terms in its own context is read by the names above.

use serde_json::{Map, Value};

use crate::federation::vocab::PUBLIC;

const AS_NS: &str = "https://www.w3.org/ns/activitystreams#";

/// The types the inbox acts on; a `type` array is read as the first of these it lists.
const KNOWN_TYPES: [&str; 27] = [
    "Create",
    "Flag",
    "Update",
    "Delete",
    "Follow",
    "Accept",
    "Reject",
    "Undo",
    "Like",
    "Announce",
    "Block",
    "Note",
    "Article",
    "Question",
    "Page",
    "Tombstone",
    "Person",
    "Service",
    "Application",
    "Group",
    "Organization",
    "Link",
    "Mention",
    "Hashtag",
    "Collection",
    "OrderedCollection",
    "CollectionPage",
];

/// Who an `attributedTo` array is read as: the first actor of these types (PeerTube lists
/// the video's channel, a `Group`, beside its author), else the first entry.
const AUTHOR_TYPES: [&str; 3] = ["Person", "Service", "Application"];

const ADDRESSING: [&str; 5] = ["to", "cc", "bto", "bcc", "audience"];
const SINGLE: [&str; 10] = [
    "actor",
    "attributedTo",
    "inReplyTo",
    "object",
    "url",
    "content",
    "summary",
    "name",
    "published",
    "replies",
];
const ARRAYS: [&str; 4] = ["tag", "oneOf", "anyOf", "attachment"];

/// A term without its ActivityStreams prefix (`as:Note`, `https://…/activitystreams#Note`).
fn bare(term: &str) -> &str {
    term.strip_prefix(AS_NS)
        .or_else(|| term.strip_prefix("as:"))
        .unwrap_or(term)
}

fn is_public(iri: &str) -> bool {
    matches!(iri, "as:Public" | "Public") || iri == PUBLIC
}

/// How deep the walk goes: below this many levels a value is kept as it came. The walk
/// recurses once per level; documents are parsed by serde_json, whose recursion limit (128)
/// already bounds them, but the walk does not rely on where its input came from (R-API
/// item 3). No activity we read nests terms anywhere near this deep.
pub const MAX_DEPTH: usize = 32;

/// An incoming document in the shape the rest of the code reads (see the module doc).
pub fn normalize(doc: Value) -> Value {
    at(doc, 0)
}

fn at(doc: Value, depth: usize) -> Value {
    if depth >= MAX_DEPTH {
        return doc;
    }
    match doc {
        Value::Object(o) => Value::Object(object(o, depth + 1)),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| at(v, depth + 1)).collect()),
        other => other,
    }
}

fn object(o: Map<String, Value>, depth: usize) -> Map<String, Value> {
    // A `Flag` names several objects (the account and its statuses): its list is kept.
    let flag = o
        .get("type")
        .or_else(|| o.get("@type"))
        .is_some_and(|t| type_of(t.clone()) == "Flag");
    let mut out = Map::with_capacity(o.len());
    for (key, value) in o {
        if key == "@context" {
            out.insert(key, value);
            continue;
        }
        let key = match key.as_str() {
            "@id" => "id".to_string(),
            "@type" => "type".to_string(),
            k => bare(k).to_string(),
        };
        // The first spelling of a term wins (`content` over an `as:content` beside it).
        if out.contains_key(&key) {
            continue;
        }
        let value = match key.as_str() {
            "type" => type_of(value),
            k if ADDRESSING.contains(&k) => addressing(value),
            k if ARRAYS.contains(&k) => as_array(value).into_iter().map(|v| at(v, depth)).collect(),
            "url" => url(value, depth),
            "attributedTo" => attributed_to(value, depth),
            "object" if flag => as_array(value).into_iter().map(|v| at(v, depth)).collect(),
            k if SINGLE.contains(&k) => one(value, depth),
            _ => at(value, depth),
        };
        out.insert(key, value);
    }
    // Only a language map given: its first value is the text.
    for term in ["content", "summary", "name"] {
        if !out.contains_key(term)
            && let Some(text) = out
                .get(&format!("{term}Map"))
                .and_then(Value::as_object)
                .and_then(|m| m.values().find_map(Value::as_str))
        {
            let text = Value::String(text.to_string());
            out.insert(term.to_string(), text);
        }
    }
    out
}

fn as_array(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        one => vec![one],
    }
}

fn type_of(v: Value) -> Value {
    let types: Vec<String> = as_array(v)
        .iter()
        .filter_map(Value::as_str)
        .map(|t| bare(t).to_string())
        .collect();
    let pick = types
        .iter()
        .find(|t| KNOWN_TYPES.contains(&t.as_str()))
        .or_else(|| types.first());
    pick.map_or(Value::Null, |t| Value::String(t.clone()))
}

fn addressing(v: Value) -> Value {
    let iris = as_array(v).into_iter().filter_map(|a| match a {
        Value::String(s) => Some(s),
        Value::Object(o) => o
            .get("id")
            .or_else(|| o.get("@id"))
            .and_then(Value::as_str)
            .map(str::to_string),
        _ => None,
    });
    Value::Array(
        iris.map(|s| Value::String(if is_public(&s) { PUBLIC.to_string() } else { s }))
            .collect(),
    )
}

/// One value from a value or an array of them (the first), normalized.
fn one(v: Value, depth: usize) -> Value {
    match v {
        Value::Array(a) => a.into_iter().next().map_or(Value::Null, |v| at(v, depth)),
        other => at(other, depth),
    }
}

fn attributed_to(v: Value, depth: usize) -> Value {
    let all: Vec<Value> = as_array(v).into_iter().map(|v| at(v, depth)).collect();
    let actor = all
        .iter()
        .position(|a| {
            a.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| AUTHOR_TYPES.contains(&t))
        })
        .unwrap_or(0);
    all.into_iter().nth(actor).unwrap_or(Value::Null)
}

/// `url` as a string: a `Link` by its `href`, an array by its first `text/html` link (else its
/// first).
fn url(v: Value, depth: usize) -> Value {
    let links: Vec<Value> = as_array(v).into_iter().map(|v| at(v, depth)).collect();
    let href = |l: &Value| -> Option<String> {
        match l {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => o
                .get("href")
                .or_else(|| o.get("id"))
                .and_then(Value::as_str)
                .map(str::to_string),
            _ => None,
        }
    };
    let html = links
        .iter()
        .find(|l| l.get("mediaType").and_then(Value::as_str) == Some("text/html"))
        .and_then(href);
    html.or_else(|| links.iter().find_map(href))
        .map_or(Value::Null, Value::String)
}

/// Why a document's `@context` cannot be a JSON-LD context: `None` when it is absent or has
/// a valid shape (IRIs, context objects, or an array of them).
pub fn malformed_context(doc: &Value) -> Option<String> {
    let ok = |c: &Value| matches!(c, Value::String(_) | Value::Object(_) | Value::Null);
    match doc.get("@context") {
        None => None,
        Some(Value::Array(a)) if a.iter().all(ok) => None,
        Some(c) if !c.is_array() && ok(c) => None,
        Some(c) => Some(format!(
            "malformed @context: {} is not an IRI, a context object or an array of them",
            short(c)
        )),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn public_addressing_in_every_compaction_is_the_full_iri() {
        for public in [
            json!("as:Public"),
            json!("Public"),
            json!(PUBLIC),
            json!(["as:Public"]),
        ] {
            let n = normalize(json!({"to": public, "cc": "https://m.example/f"}));
            assert_eq!(n["to"], json!([PUBLIC]));
            assert_eq!(n["cc"], json!(["https://m.example/f"]));
        }
    }

    #[test]
    fn a_flag_keeps_every_object_it_names() {
        let n = normalize(json!({
            "type": "as:Flag", "actor": "https://m.example/actor",
            "object": ["https://h.example/users/a", {"id": "https://h.example/users/a/statuses/1"}],
        }));
        assert_eq!(n["type"], "Flag");
        assert_eq!(
            n["object"],
            json!(["https://h.example/users/a", {"id": "https://h.example/users/a/statuses/1"}])
        );
        // Any other activity still reads one object.
        let n = normalize(
            json!({"type": "Like", "object": ["https://h.example/1", "https://h.example/2"]}),
        );
        assert_eq!(n["object"], "https://h.example/1");
    }

    #[test]
    fn single_values_arrays_iris_and_links() {
        let n = normalize(json!({
            "@id": "https://m.example/a", "@type": ["as:Create"],
            "as:actor": [{"id": "https://m.example/u", "type": "Person"}],
            "object": {
                "type": ["Note", "misskey:Thing"], "id": "https://m.example/n",
                "attributedTo": [{"type": "Group", "id": "https://m.example/g"},
                                 {"type": "Person", "id": "https://m.example/u"}],
                "url": [{"type": "Link", "mediaType": "application/x-mpegURL", "href": "https://m.example/n.m3u8"},
                        {"type": "Link", "mediaType": "text/html", "href": "https://m.example/@u/n"}],
                "contentMap": {"en": "<p>hi</p>"},
                "tag": {"type": "Hashtag", "name": "#x", "href": "https://m.example/tags/x"},
                "https://www.w3.org/ns/activitystreams#inReplyTo": ["https://m.example/p"],
            },
        }));
        assert_eq!(n["id"], "https://m.example/a");
        assert_eq!(n["type"], "Create");
        assert_eq!(n["actor"]["id"], "https://m.example/u");
        let o = &n["object"];
        assert_eq!(o["type"], "Note");
        assert_eq!(o["attributedTo"]["id"], "https://m.example/u");
        assert_eq!(o["url"], "https://m.example/@u/n");
        assert_eq!(o["content"], "<p>hi</p>");
        assert_eq!(o["tag"][0]["name"], "#x");
        assert_eq!(o["inReplyTo"], "https://m.example/p");
        let link = normalize(json!({"url": {"type": "Link", "href": "https://m.example/x"}}));
        assert_eq!(link["url"], "https://m.example/x");
    }

    #[test]
    fn the_walk_stops_at_its_depth_bound() {
        // A value nested far deeper than serde_json would ever parse, built without recursion,
        // walked on a small stack: the walk stops at MAX_DEPTH and keeps the rest as it came.
        let deep = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let mut v = json!({"as:content": "x"});
                for _ in 0..10_000 {
                    // Moved in, not through `json!` (which would serialize `v`: a recursion).
                    v = Value::Object(Map::from_iter([("as:object".to_string(), v)]));
                }
                let mut n = normalize(v);
                let mut levels = 0;
                while let Some(inner) = n.get_mut("object").map(Value::take) {
                    n = inner;
                    levels += 1;
                }
                // Taken apart level by level: dropping it whole would recurse 10 000 deep.
                let mut rest = n.get_mut("as:object").map(Value::take);
                while let Some(mut v) = rest {
                    rest = v.get_mut("as:object").map(Value::take);
                }
                levels
            })
            .expect("thread")
            .join()
            .expect("no stack overflow");
        assert_eq!(deep, MAX_DEPTH);
    }

    #[test]
    fn malformed_contexts_are_named() {
        assert_eq!(malformed_context(&json!({"id": "x"})), None);
        assert_eq!(
            malformed_context(
                &json!({"@context": ["https://www.w3.org/ns/activitystreams", {"a": "b"}]})
            ),
            None
        );
        for bad in [json!(5), json!(true), json!([1]), json!([["x"]])] {
            assert!(
                malformed_context(&json!({"@context": bad})).is_some(),
                "{bad}"
            );
        }
    }
}
