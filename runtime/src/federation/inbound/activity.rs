//! An incoming activity as the inbox acts on it. `normalize` has already given every document
//! one shape, so the type is read once here, into a serde enum; everything after dispatches on
//! the variant. A vote (a `Create` of a `Note` with `name` and `inReplyTo`) is recognised here
//! and nowhere else.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::incoming::Incoming;
use crate::federation::actors::actor::id_of;
use crate::federation::vocab;
use crate::polls::remote::Ballot;

/// An activity's `object`: an IRI, or an embedded document that carries its id. A missing or
/// malformed object reads as one without id (the handlers ignore it, saying so).
#[derive(Clone, Debug, Default)]
pub struct Object {
    /// The object's IRI; empty when it has none.
    pub id: String,
    /// The embedded document (`Value::Null` when the object is only a reference).
    pub doc: Value,
}

impl Object {
    /// The embedded document's `type`, if the object is embedded and typed.
    pub fn kind(&self) -> Option<&str> {
        self.doc.get("type").and_then(Value::as_str)
    }

    pub fn has_id(&self) -> bool {
        !self.id.is_empty()
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Object, D::Error> {
        let doc = Value::deserialize(d)?;
        let id = id_of(&doc).unwrap_or_default().to_string();
        Ok(match doc {
            Value::Object(_) => Object { id, doc },
            _ => Object {
                id,
                doc: Value::Null,
            },
        })
    }
}

/// The wire form: the activity types the inbox acts on, each with its object.
#[derive(Deserialize)]
#[serde(tag = "type")]
enum Wire {
    Follow(Envelope),
    Accept(Envelope),
    Reject(Envelope),
    Undo(Envelope),
    Create(Envelope),
    Update(Envelope),
    Delete(Envelope),
    Like(Envelope),
    #[serde(alias = "litepub:EmojiReact")]
    EmojiReact(Envelope),
    Announce(Envelope),
    Block(Envelope),
    Add(Envelope),
    Remove(Envelope),
    Flag(FlagEnvelope),
    QuoteRequest(Envelope),
    #[serde(other)]
    Unsupported,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    object: Object,
    #[serde(default)]
    target: Object,
    /// A reaction's emoji (`EmojiReact`, and Misskey's `Like`).
    #[serde(default)]
    content: Option<Value>,
    #[serde(default, rename = "_misskey_reaction")]
    misskey_reaction: Option<Value>,
    /// A custom emoji's `Emoji` tag.
    #[serde(default)]
    tag: Value,
    /// What an `Accept` made (a `QuoteAuthorization`'s IRI).
    #[serde(default)]
    result: Object,
    /// A `QuoteRequest`'s quoting note.
    #[serde(default)]
    instrument: Object,
}

impl Envelope {
    /// The reaction it carries: `content`, or Misskey's own term; none when empty.
    fn reaction(&self) -> Option<String> {
        [&self.misskey_reaction, &self.content]
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::trim)
            .find(|c| !c.is_empty())
            .map(str::to_string)
    }
}

/// A `Flag`'s objects: the reported actor and statuses, one IRI or a list (embedded objects
/// by their ids), and the reporter's comment.
#[derive(Deserialize)]
struct FlagEnvelope {
    #[serde(default)]
    object: Value,
    #[serde(default)]
    content: Option<String>,
}

impl FlagEnvelope {
    fn objects(&self) -> Vec<String> {
        let one = |v: &Value| id_of(v).map(str::to_string);
        match &self.object {
            Value::Array(items) => items.iter().filter_map(one).collect(),
            v => one(v).into_iter().collect(),
        }
    }
}

/// What an incoming activity asks of us.
#[derive(Clone, Debug)]
pub enum Activity {
    /// Follow `object` (one of our accounts, or nobody we have).
    Follow(Object),
    /// An answer to one of our `Follow`s or `QuoteRequest`s, or to a reply, favourite or boost
    /// of ours that the post's author had to approve, named by its id; an accepted quote's
    /// `result` is the authorization, an accepted interaction's its approval.
    Answer {
        accepted: bool,
        follow: Object,
        result: Object,
    },
    /// A request to quote our post `object` in the note `instrument` (FEP-044f).
    QuoteRequest {
        object: Object,
        instrument: Object,
    },
    /// Take back an earlier activity (a follow, a like, a boost, …).
    Undo(Object),
    /// A post created (or re-sent) or edited by its author.
    Note {
        create: bool,
        note: Object,
    },
    /// An actor's own document, changed: how key rotation and profile edits reach us.
    ActorUpdate(Object),
    /// A vote on a poll. Not a post when the poll is ours; otherwise stored as the note it is.
    Vote {
        ballot: Ballot,
        note: Object,
    },
    /// The actor itself, or one of its posts, deleted.
    Delete(Object),
    Like(Object),
    /// An emoji reaction (`EmojiReact`, or a `Like` with `content` as Misskey sends one):
    /// the emoji as sent, and the activity's tags (a custom emoji's image).
    React {
        object: Object,
        emoji: String,
        tags: Value,
    },
    Announce(Object),
    Block(Object),
    /// A post added to (`added`) or removed from a collection of the actor's: a pin or an
    /// unpin when `target` is its `featured` collection.
    Feature {
        added: bool,
        object: Object,
        target: Object,
    },
    /// A report from another server about accounts and statuses named in `objects`.
    Flag {
        objects: Vec<String>,
        comment: String,
    },
    /// A type the inbox does not act on.
    Unsupported(String),
}

impl Activity {
    /// Reads a stored activity.
    pub fn of(inc: &Incoming) -> Activity {
        let Ok(wire) = Wire::deserialize(&inc.body) else {
            return Activity::Unsupported(inc.ty.clone());
        };
        match wire {
            Wire::Follow(e) => Activity::Follow(e.object),
            Wire::Accept(e) => Activity::Answer {
                accepted: true,
                follow: e.object,
                result: e.result,
            },
            Wire::Reject(e) => Activity::Answer {
                accepted: false,
                follow: e.object,
                result: e.result,
            },
            Wire::QuoteRequest(e) => Activity::QuoteRequest {
                object: e.object,
                instrument: e.instrument,
            },
            Wire::Undo(e) => Activity::Undo(e.object),
            Wire::Create(e) => match ballot(&e.object) {
                Some(ballot) => Activity::Vote {
                    ballot,
                    note: e.object,
                },
                None => Activity::Note {
                    create: true,
                    note: e.object,
                },
            },
            Wire::Update(e) if e.object.kind().is_some_and(vocab::is_actor) => {
                Activity::ActorUpdate(e.object)
            }
            Wire::Update(e) => Activity::Note {
                create: false,
                note: e.object,
            },
            Wire::Delete(e) => Activity::Delete(e.object),
            Wire::Like(e) | Wire::EmojiReact(e) if e.reaction().is_some() => Activity::React {
                emoji: e.reaction().unwrap_or_default(),
                object: e.object,
                tags: e.tag,
            },
            Wire::Like(e) => Activity::Like(e.object),
            // An `EmojiReact` without an emoji reacts with nothing.
            Wire::EmojiReact(_) => Activity::Unsupported(inc.ty.clone()),
            Wire::Announce(e) => Activity::Announce(e.object),
            Wire::Block(e) => Activity::Block(e.object),
            Wire::Add(e) => Activity::Feature {
                added: true,
                object: e.object,
                target: e.target,
            },
            Wire::Remove(e) => Activity::Feature {
                added: false,
                object: e.object,
                target: e.target,
            },
            Wire::Flag(e) => Activity::Flag {
                objects: e.objects(),
                comment: e.content.unwrap_or_default(),
            },
            Wire::Unsupported => Activity::Unsupported(inc.ty.clone()),
        }
    }

    /// Whether applying it shows its actor as an Account (a post, a boost, a like): the actor
    /// must be stored first, not only its key. A vote is counted, never shown.
    pub fn shows_actor(&self) -> bool {
        match self {
            // An `Update` of a bare reference changes nothing we would show.
            Activity::Note { create, note } => *create || note.kind().is_some(),
            Activity::Like(_) | Activity::Announce(_) | Activity::React { .. } => true,
            _ => false,
        }
    }
}

/// A `Note` with `name` (the option's title) and `inReplyTo` (the poll's status) is how
/// Mastodon sends a vote, whoever's poll it names.
fn ballot(object: &Object) -> Option<Ballot> {
    if object.kind() != Some("Note") {
        return None;
    }
    let doc = &object.doc;
    Some(Ballot {
        option: doc.get("name").and_then(Value::as_str)?.to_string(),
        poll: doc.get("inReplyTo").and_then(id_of)?.to_string(),
        attributed_to: doc.get("attributedTo").and_then(id_of).map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn incoming(body: Value) -> Incoming {
        Incoming {
            id: body["id"].as_str().unwrap_or_default().to_string(),
            ty: body["type"].as_str().unwrap_or_default().to_string(),
            actor: "https://r.example/users/a".into(),
            account_id: None,
            body,
            processed_at: None,
        }
    }

    #[test]
    fn a_vote_is_recognised_once_and_keeps_its_note() {
        let inc = incoming(json!({
            "id": "https://r.example/v/1", "type": "Create", "actor": "https://r.example/users/a",
            "object": {"id": "https://r.example/n/1", "type": "Note", "name": "left",
                       "inReplyTo": "https://h.example/users/x/statuses/1",
                       "attributedTo": "https://r.example/users/a"},
        }));
        match Activity::of(&inc) {
            Activity::Vote { ballot, note } => {
                assert_eq!(ballot.option, "left");
                assert_eq!(ballot.poll, "https://h.example/users/x/statuses/1");
                assert_eq!(note.id, "https://r.example/n/1");
                assert!(!Activity::of(&inc).shows_actor());
            }
            other => panic!("not a vote: {other:?}"),
        }
        // The same note without `name` is a reply.
        let mut reply = inc.body.clone();
        reply["object"].as_object_mut().unwrap().remove("name");
        assert!(matches!(
            Activity::of(&incoming(reply)),
            Activity::Note { create: true, .. }
        ));
    }

    #[test]
    fn updates_of_actors_and_of_notes_differ() {
        let actor = incoming(json!({"id": "u", "type": "Update",
            "object": {"id": "https://r.example/users/a", "type": "Person"}}));
        assert!(matches!(Activity::of(&actor), Activity::ActorUpdate(_)));
        let reference =
            incoming(json!({"id": "u", "type": "Update", "object": "https://r.example/n/1"}));
        match Activity::of(&reference) {
            a @ Activity::Note { create: false, .. } => assert!(!a.shows_actor()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn objects_are_references_or_documents_and_unknown_types_are_named() {
        let like = incoming(json!({"id": "l", "type": "Like", "object": "https://h.example/s/1"}));
        match Activity::of(&like) {
            Activity::Like(o) => {
                assert_eq!(o.id, "https://h.example/s/1");
                assert!(o.doc.is_null());
            }
            other => panic!("{other:?}"),
        }
        let bare = incoming(json!({"id": "b", "type": "Block"}));
        assert!(matches!(Activity::of(&bare), Activity::Block(o) if !o.has_id()));
        let react = incoming(json!({"id": "e", "type": "EmojiReact", "object": "x"}));
        assert!(matches!(Activity::of(&react), Activity::Unsupported(t) if t == "EmojiReact"));
    }
}
