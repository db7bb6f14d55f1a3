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
//!   only the map is given; `tag`, `oneOf`, `anyOf`, `attachment`, `alsoKnownAs` always arrays.
//!
//! Everything else is kept as it came. This is not JSON-LD expansion: contexts are not fetched
//! (a remote context is an outbound request per activity and a way to make us fetch), so a
//! document that renames ActivityStreams terms in its own context is read by the names above.
//!
//! The same walk bounds the document (`bounds`): every list and every string of every object
//! is cut to its cap, so no stored post or actor holds more than the caps allow, whichever way
//! it came. Every remote document passes here: the inbox's activities, every object the fetch
//! client returns (`FetchClient::get_object`) and every collected reply.

use serde_json::{Map, Value};

use crate::federation::bounds::{self, cut};
use crate::federation::vocab::{self, PUBLIC};

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
/// Language maps of the terms read as one text (`content`, `summary`, `name`).
const LANGUAGE_MAPS: [&str; 3] = ["contentMap", "summaryMap", "nameMap"];

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

/// An incoming document in the shape the rest of the code reads, bounded (see the module doc).
pub fn normalize(doc: Value) -> Value {
    at(doc, 0, Place::TOP)
}

/// Where a value sits, for its bounds: how long its strings may be, and whether it is (in) a
/// `tag` entry, whose strings are all short, or a poll option (`oneOf`, `anyOf`), whose
/// `name` is.
#[derive(Clone, Copy)]
struct Place {
    string: usize,
    in_tag: bool,
    in_option: bool,
}

impl Place {
    const TOP: Place = Place {
        string: bounds::MAX_STRING_BYTES,
        in_tag: false,
        in_option: false,
    };

    /// The place of the value of `key` in an object at `self`.
    fn of(self, key: &str) -> Place {
        let string = match key {
            _ if self.in_tag => bounds::MAX_TAG_STRING_BYTES,
            "name" if self.in_option => bounds::MAX_POLL_OPTION_BYTES,
            "content" => bounds::MAX_CONTENT_BYTES,
            "summary" => bounds::MAX_SUMMARY_BYTES,
            "name" | "value" => bounds::MAX_NAME_BYTES,
            "publicKeyPem" => bounds::MAX_PEM_BYTES,
            _ => bounds::MAX_STRING_BYTES,
        };
        Place {
            string,
            in_tag: self.in_tag || key == "tag",
            in_option: self.in_option || matches!(key, "oneOf" | "anyOf"),
        }
    }
}

fn at(doc: Value, depth: usize, place: Place) -> Value {
    if depth >= MAX_DEPTH {
        return doc;
    }
    match doc {
        Value::Object(o) => Value::Object(object(o, depth + 1, place)),
        Value::Array(a) => Value::Array(
            a.into_iter()
                .take(bounds::MAX_LIST)
                .map(|v| at(v, depth + 1, place))
                .collect(),
        ),
        Value::String(s) => Value::String(cut(s, place.string)),
        other => other,
    }
}

/// The type an object names, read before its properties are (`type`, `@type` or `as:type`).
fn type_in(o: &Map<String, Value>) -> Option<String> {
    let t = ["type", "@type", "as:type"]
        .iter()
        .find_map(|k| o.get(*k))?;
    type_of(t.clone()).as_str().map(str::to_string)
}

fn object(o: Map<String, Value>, depth: usize, place: Place) -> Map<String, Value> {
    let ty = type_in(&o);
    // A `Flag` names several objects (the account and its statuses): its list is kept.
    let flag = ty.as_deref() == Some("Flag");
    // An actor's `attachment` holds its profile fields, a post's its media.
    let attachments = match ty.as_deref() {
        Some(t) if vocab::is_actor(t) => bounds::MAX_FIELDS,
        _ => bounds::MAX_ATTACHMENTS,
    };
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
        // The first spelling of a term wins (`content` over an `as:content` beside it); a name
        // longer than any term is not one we read.
        if out.contains_key(&key) || key.len() > bounds::MAX_KEY_BYTES {
            continue;
        }
        let at_key = place.of(&key);
        let list = |value: Value, max: usize| -> Value {
            as_array(value)
                .into_iter()
                .take(max)
                .map(|v| at(v, depth, at_key))
                .collect()
        };
        let value = match key.as_str() {
            "type" => type_of(value),
            k if ADDRESSING.contains(&k) => addressing(value),
            "tag" => tags(value, depth, at_key),
            "attachment" => list(value, attachments),
            "oneOf" | "anyOf" => list(value, bounds::MAX_POLL_OPTIONS),
            "alsoKnownAs" => list(value, bounds::MAX_ALIASES),
            k if LANGUAGE_MAPS.contains(&k) => language_map(value, place.of(&k[..k.len() - 3])),
            "url" => url(value, depth, at_key),
            "attributedTo" => attributed_to(value, depth, at_key),
            "object" if flag => list(value, bounds::MAX_LIST),
            k if SINGLE.contains(&k) => one(value, depth, at_key),
            _ => at(value, depth, at_key),
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
        .take(bounds::MAX_LIST)
        .filter_map(Value::as_str)
        .map(|t| bare(t).to_string())
        .collect();
    let pick = types
        .iter()
        .find(|t| KNOWN_TYPES.contains(&t.as_str()))
        .or_else(|| types.first());
    pick.map_or(Value::Null, |t| {
        Value::String(cut(t.clone(), bounds::MAX_STRING_BYTES))
    })
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
        iris.take(bounds::MAX_ADDRESSEES)
            .map(|s| {
                Value::String(if is_public(&s) {
                    PUBLIC.to_string()
                } else {
                    cut(s, bounds::MAX_STRING_BYTES)
                })
            })
            .collect(),
    )
}

/// A `tag` list: the first `MAX_TAGS_PER_KIND` entries of each kind (`Mention`, `Hashtag`,
/// `Emoji`, anything else), in their order, so a flood of one kind cannot push out another.
fn tags(v: Value, depth: usize, place: Place) -> Value {
    const KINDS: [&str; 3] = ["Mention", "Hashtag", "Emoji"];
    let mut taken = [0usize; KINDS.len() + 1];
    let mut out = Vec::new();
    for t in as_array(v) {
        if taken.iter().all(|n| *n >= bounds::MAX_TAGS_PER_KIND) {
            break;
        }
        let t = at(t, depth, place);
        let ty = t.get("type").and_then(Value::as_str);
        let kind = KINDS
            .iter()
            .position(|k| Some(*k) == ty)
            .unwrap_or(KINDS.len());
        if taken[kind] < bounds::MAX_TAGS_PER_KIND {
            taken[kind] += 1;
            out.push(t);
        }
    }
    Value::Array(out)
}

/// A language map (`contentMap`): at most `MAX_LANGUAGES` languages, each text bounded as
/// its term is (`place`).
fn language_map(v: Value, place: Place) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(lang, _)| lang.len() <= bounds::MAX_KEY_BYTES)
                .take(bounds::MAX_LANGUAGES)
                .map(|(lang, text)| match text {
                    Value::String(s) => (lang, Value::String(cut(s, place.string))),
                    _ => (lang, Value::Null),
                })
                .collect(),
        ),
        _ => Value::Null,
    }
}

/// One value from a value or an array of them (the first), normalized.
fn one(v: Value, depth: usize, place: Place) -> Value {
    match v {
        Value::Array(a) => a
            .into_iter()
            .next()
            .map_or(Value::Null, |v| at(v, depth, place)),
        other => at(other, depth, place),
    }
}

fn attributed_to(v: Value, depth: usize, place: Place) -> Value {
    let all: Vec<Value> = as_array(v)
        .into_iter()
        .take(bounds::MAX_LIST)
        .map(|v| at(v, depth, place))
        .collect();
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
fn url(v: Value, depth: usize, place: Place) -> Value {
    let links: Vec<Value> = as_array(v)
        .into_iter()
        .take(bounds::MAX_LIST)
        .map(|v| at(v, depth, place))
        .collect();
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
        .map_or(Value::Null, |u| Value::String(cut(u, place.string)))
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

    /// Issue 61 F1: every list and string of every object is cut to its bound, whichever
    /// object holds it (the activity, its note, a tag entry).
    #[test]
    fn every_list_and_string_is_bounded() {
        let many = |n: usize, f: &dyn Fn(usize) -> Value| -> Value { (0..n).map(f).collect() };
        let mut tags: Vec<Value> = Vec::new();
        for i in 0..100 {
            tags.push(json!({"type": "Hashtag", "name": format!("#t{i}")}));
        }
        tags.push(
            json!({"type": "Mention", "href": "https://m.example/u", "name": "x".repeat(5000)}),
        );
        tags.push(json!({"type": "as:Emoji", "name": ":e:", "icon": {"url": "y".repeat(5000)}}));
        let mut activity = json!({
            "type": "Create",
            "to": many(5000, &|i| json!(format!("https://m.example/u/{i}"))),
            "object": {
                "type": "Question",
                "content": "c".repeat(100_000),
                "summary": "s".repeat(100_000),
                "contentMap": Value::Object((0..40).map(|i| (format!("l{i}"), json!("é".repeat(40_000)))).collect()),
                "attachment": many(100, &|i| json!({"type": "Document", "url": format!("https://m.example/{i}"), "name": "n".repeat(9000)})),
                "tag": tags,
                "oneOf": many(100, &|i| json!({"type": "Note", "name": format!("o{i}").repeat(2000),
                                               "nameMap": {"en": "m".repeat(2000)}})),
                "alsoKnownAs": "https://m.example/one",
                "custom": many(1000, &|i| json!(i)),
                "url": "u".repeat(5000),
            },
        });
        activity["x".repeat(300)] = json!("a property name no term has");
        let n = normalize(activity);
        let len = |v: &Value| v.as_array().map_or(0, Vec::len);
        assert_eq!(len(&n["to"]), bounds::MAX_ADDRESSEES);
        assert!(
            n.as_object()
                .unwrap()
                .keys()
                .all(|k| k.len() <= bounds::MAX_KEY_BYTES)
        );
        let o = &n["object"];
        assert_eq!(
            o["content"].as_str().unwrap().len(),
            bounds::MAX_CONTENT_BYTES
        );
        assert_eq!(
            o["summary"].as_str().unwrap().len(),
            bounds::MAX_SUMMARY_BYTES
        );
        let map = o["contentMap"].as_object().unwrap();
        assert_eq!(map.len(), bounds::MAX_LANGUAGES);
        // Cut at a character boundary: "é" is two bytes.
        assert!(
            map.values()
                .all(|t| t.as_str().unwrap().len() == bounds::MAX_CONTENT_BYTES)
        );
        assert_eq!(len(&o["attachment"]), bounds::MAX_ATTACHMENTS);
        assert_eq!(
            o["attachment"][0]["name"].as_str().unwrap().len(),
            bounds::MAX_NAME_BYTES
        );
        let tags = o["tag"].as_array().unwrap();
        assert_eq!(
            tags.len(),
            bounds::MAX_TAGS_PER_KIND + 2,
            "a flood of hashtags keeps the rest"
        );
        assert_eq!(
            tags[bounds::MAX_TAGS_PER_KIND]["name"]
                .as_str()
                .unwrap()
                .len(),
            bounds::MAX_TAG_STRING_BYTES
        );
        assert_eq!(tags[bounds::MAX_TAGS_PER_KIND + 1]["type"], "Emoji");
        assert_eq!(
            tags[bounds::MAX_TAGS_PER_KIND + 1]["icon"]["url"]
                .as_str()
                .unwrap()
                .len(),
            bounds::MAX_TAG_STRING_BYTES
        );
        assert_eq!(len(&o["oneOf"]), bounds::MAX_POLL_OPTIONS);
        assert_eq!(
            o["oneOf"][0]["name"].as_str().unwrap().len(),
            bounds::MAX_POLL_OPTION_BYTES
        );
        assert_eq!(
            o["oneOf"][0]["nameMap"]["en"].as_str().unwrap().len(),
            bounds::MAX_POLL_OPTION_BYTES
        );
        assert_eq!(o["alsoKnownAs"], json!(["https://m.example/one"]));
        assert_eq!(len(&o["custom"]), bounds::MAX_LIST);
        assert_eq!(o["url"].as_str().unwrap().len(), bounds::MAX_STRING_BYTES);
        // An actor's `attachment` is its profile fields.
        let actor = normalize(json!({
            "type": "Person",
            "attachment": many(100, &|i| json!({"type": "PropertyValue", "name": format!("f{i}"), "value": "v"})),
            "alsoKnownAs": many(100, &|i| json!(format!("https://m.example/a{i}"))),
            "publicKey": {"id": "https://m.example/u#main-key", "publicKeyPem": "k".repeat(5000)},
        }));
        assert_eq!(len(&actor["attachment"]), bounds::MAX_FIELDS);
        assert_eq!(len(&actor["alsoKnownAs"]), bounds::MAX_ALIASES);
        assert_eq!(
            actor["publicKey"]["publicKeyPem"].as_str().unwrap().len(),
            5000
        );
    }

    #[test]
    fn a_bounded_document_is_its_own_normal_form() {
        let doc = json!({
            "type": "Note", "content": "c".repeat(100_000), "tag": {"type": "Hashtag", "name": "#x"},
            "url": [{"type": "Link", "href": "https://m.example/n"}],
            "attachment": [{"type": "Document", "url": "https://m.example/a.png"}],
        });
        let once = normalize(doc);
        assert_eq!(normalize(once.clone()), once);
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
