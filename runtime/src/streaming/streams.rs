//! Mastodon's stream names and which events each receives. A connection subscribes to any
//! number of them; an event goes out once per subscribed stream that wants it, named by that
//! stream (`"stream": ["hashtag", "rust"]`), as Mastodon's streaming server does, so a client
//! that multiplexes timelines over one socket routes each copy to its timeline.

use uuid::Uuid;

use super::Event;

/// Most subscriptions one connection may hold: each costs a filter check per event, and a
/// client needs a handful (user, a public timeline, some tags).
pub const MAX_SUBSCRIPTIONS: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stream {
    /// The account's home timeline and notifications.
    User,
    /// The account's notifications.
    UserNotification,
    Public,
    PublicLocal,
    PublicRemote,
    /// A hashtag, lowercased without `#`.
    Hashtag(String),
    HashtagLocal(String),
    /// One of the viewer's lists (ownership is checked where it is subscribed).
    List(Uuid),
}

/// Where the hub files a connection for its public, hashtag and list streams (every connection
/// is also filed under its viewer, for its home timeline, notifications and what it hides).
/// A filing only narrows which connections are woken for an event: each still checks
/// [`Stream::wants`] and who may see the status.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Audience {
    Public,
    PublicLocal,
    PublicRemote,
    Tag(String),
    TagLocal(String),
    List(Uuid),
}

/// Which connections an event may concern.
#[derive(Debug, PartialEq, Eq)]
pub enum Reach<'a> {
    /// Every connection (an unrestricted deletion, a revoked token, a kind this node does not
    /// know).
    All,
    /// The connections of these viewers.
    Viewers(&'a [Uuid]),
    /// The connections filed under any of these.
    Audiences(Vec<Audience>),
}

/// The connections `e` may concern: a superset of those with a stream that
/// [`Stream::wants`] it.
pub fn reach(e: &Event) -> Reach<'_> {
    match e.kind.as_str() {
        "public" => {
            let mut a = vec![
                Audience::Public,
                if e.local {
                    Audience::PublicLocal
                } else {
                    Audience::PublicRemote
                },
            ];
            for t in &e.tags {
                a.push(Audience::Tag(t.clone()));
                if e.local {
                    a.push(Audience::TagLocal(t.clone()));
                }
            }
            Reach::Audiences(a)
        }
        "list" => Reach::Audiences(e.lists.iter().copied().map(Audience::List).collect()),
        "home" | "notification" | "relationship" | "filters" => Reach::Viewers(&e.accounts),
        "delete" if e.restricted => Reach::Viewers(&e.accounts),
        _ => Reach::All,
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("Unknown stream type")]
    Unknown,
    #[error("No tag for hashtag stream")]
    NoTag,
    #[error("No list for list stream")]
    NoList,
}

impl Stream {
    /// A stream as a client names it (`stream` and, for hashtags, `tag`, for lists `list`).
    pub fn parse(name: &str, tag: Option<&str>, list: Option<&str>) -> Result<Stream, StreamError> {
        let tag = || {
            tag.map(|t| t.trim().trim_start_matches('#').to_lowercase())
                .filter(|t| !t.is_empty())
                .ok_or(StreamError::NoTag)
        };
        Ok(match name {
            "user" => Stream::User,
            "user:notification" => Stream::UserNotification,
            "public" => Stream::Public,
            "public:local" => Stream::PublicLocal,
            "public:remote" => Stream::PublicRemote,
            "hashtag" => Stream::Hashtag(tag()?),
            "hashtag:local" => Stream::HashtagLocal(tag()?),
            "list" => Stream::List(
                list.and_then(|l| Uuid::parse_str(l.trim()).ok())
                    .ok_or(StreamError::NoList)?,
            ),
            _ => return Err(StreamError::Unknown),
        })
    }

    /// The `stream` of a message: the name, and the tag of a hashtag stream.
    pub fn names(&self) -> Vec<String> {
        let one = |n: &str| vec![n.to_string()];
        match self {
            Stream::User => one("user"),
            Stream::UserNotification => one("user:notification"),
            Stream::Public => one("public"),
            Stream::PublicLocal => one("public:local"),
            Stream::PublicRemote => one("public:remote"),
            Stream::Hashtag(t) => vec!["hashtag".into(), t.clone()],
            Stream::HashtagLocal(t) => vec!["hashtag:local".into(), t.clone()],
            Stream::List(id) => vec!["list".into(), id.to_string()],
        }
    }

    /// Where the hub files a connection for this stream; `None` for the viewer's own streams
    /// (every connection is filed under its viewer).
    pub fn audience(&self) -> Option<Audience> {
        Some(match self {
            Stream::User | Stream::UserNotification => return None,
            Stream::Public => Audience::Public,
            Stream::PublicLocal => Audience::PublicLocal,
            Stream::PublicRemote => Audience::PublicRemote,
            Stream::Hashtag(t) => Audience::Tag(t.clone()),
            Stream::HashtagLocal(t) => Audience::TagLocal(t.clone()),
            Stream::List(id) => Audience::List(*id),
        })
    }

    /// Whether `e` goes out on this stream of `viewer`'s connection. Who may read the status
    /// is checked when the payload is rendered; this is only which streams it belongs to.
    pub fn wants(&self, e: &Event, viewer: Uuid) -> bool {
        let tagged = |t: &String| e.tags.iter().any(|x| x == t);
        match e.kind.as_str() {
            "home" => *self == Stream::User && e.accounts.contains(&viewer),
            "list" => matches!(self, Stream::List(id) if e.lists.contains(id)),
            "notification" => {
                matches!(self, Stream::User | Stream::UserNotification)
                    && e.accounts.contains(&viewer)
            }
            "public" => match self {
                Stream::Public => true,
                Stream::PublicLocal => e.local,
                Stream::PublicRemote => !e.local,
                Stream::Hashtag(t) => tagged(t),
                Stream::HashtagLocal(t) => e.local && tagged(t),
                Stream::User | Stream::UserNotification | Stream::List(_) => false,
            },
            // A deletion concerns every timeline that may show the status; a followers-only
            // or direct one's only those of the accounts that could read it (R-MAPI-VIS).
            "delete" => {
                *self != Stream::UserNotification && (!e.restricted || e.accounts.contains(&viewer))
            }
            // `revoke` closes the connection and `relationship` reloads what it hides
            // (`session`); no stream shows them.
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, accounts: Vec<Uuid>, local: bool, tags: &[&str]) -> Event {
        let mut e = Event::for_test(kind, accounts, local, tags);
        e.post_id = Some(Uuid::nil());
        e
    }

    #[test]
    fn names_parse_and_round_trip() {
        assert_eq!(Stream::parse("user", None, None), Ok(Stream::User));
        assert_eq!(
            Stream::parse("hashtag", Some("#Rust"), None),
            Ok(Stream::Hashtag("rust".into()))
        );
        assert_eq!(
            Stream::parse("hashtag", None, None),
            Err(StreamError::NoTag)
        );
        assert_eq!(
            Stream::parse("hashtag", Some(" "), None),
            Err(StreamError::NoTag)
        );
        assert_eq!(Stream::parse("list", None, None), Err(StreamError::NoList));
        assert_eq!(
            Stream::parse("list", None, Some("7")),
            Err(StreamError::NoList)
        );
        assert_eq!(
            Stream::parse("lists", None, None),
            Err(StreamError::Unknown)
        );
        let id = Uuid::from_u128(5);
        assert_eq!(
            Stream::parse("list", None, Some(&id.to_string())).map(|s| s.names()),
            Ok(vec!["list".to_string(), id.to_string()])
        );
        assert_eq!(
            Stream::parse("hashtag:local", Some("a"), None).map(|s| s.names()),
            Ok(vec!["hashtag:local".to_string(), "a".to_string()])
        );
    }

    /// The hub wakes only the connections an event reaches: every stream that wants an event
    /// must be reached by it, or the filing would lose events.
    #[test]
    fn every_stream_that_wants_an_event_is_reached_by_it() {
        let (me, other) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let (mine, theirs) = (Uuid::from_u128(11), Uuid::from_u128(12));
        let streams = [
            Stream::User,
            Stream::UserNotification,
            Stream::Public,
            Stream::PublicLocal,
            Stream::PublicRemote,
            Stream::Hashtag("rust".into()),
            Stream::HashtagLocal("rust".into()),
            Stream::Hashtag("go".into()),
            Stream::List(mine),
        ];
        let mut events = vec![];
        for kind in [
            "home",
            "list",
            "notification",
            "public",
            "delete",
            "revoke",
            "relationship",
            "filters",
            "something-new",
        ] {
            for local in [false, true] {
                for accounts in [vec![], vec![me], vec![other, me]] {
                    for restricted in [false, true] {
                        let mut e = event(kind, accounts.clone(), local, &["rust", "zig"]);
                        e.restricted = restricted;
                        e.lists = vec![theirs, mine];
                        events.push(e);
                    }
                }
            }
        }
        let mut wanted = 0;
        for e in &events {
            for s in &streams {
                if !s.wants(e, me) {
                    continue;
                }
                wanted += 1;
                let reached = match reach(e) {
                    Reach::All => true,
                    Reach::Viewers(v) => v.contains(&me),
                    Reach::Audiences(a) => s.audience().is_some_and(|x| a.contains(&x)),
                };
                assert!(reached, "{s:?} wants {} {:?} but is not reached", e.kind, e);
            }
        }
        assert!(wanted > 100, "the cases cover the wanted pairs ({wanted})");
        // And the filing narrows: a public post does not reach a home-only connection, a
        // home entry only its viewers.
        let public = event("public", vec![], true, &["rust"]);
        assert!(matches!(reach(&public), Reach::Audiences(a) if !a.is_empty()));
        assert_eq!(Stream::User.audience(), None);
        let home = event("home", vec![other], false, &[]);
        assert_eq!(reach(&home), Reach::Viewers(&[other]));
    }

    #[test]
    fn each_stream_takes_only_its_events() {
        let me = Uuid::now_v7();
        let other = Uuid::now_v7();
        let home = event("home", vec![me], false, &[]);
        assert!(Stream::User.wants(&home, me));
        assert!(!Stream::User.wants(&home, other));
        assert!(!Stream::Public.wants(&home, me));
        let n = event("notification", vec![me], false, &[]);
        assert!(Stream::UserNotification.wants(&n, me));
        assert!(Stream::User.wants(&n, me));
        assert!(!Stream::UserNotification.wants(&n, other));
        let local = event("public", vec![], true, &["rust"]);
        let remote = event("public", vec![], false, &["go"]);
        assert!(Stream::Public.wants(&local, me) && Stream::Public.wants(&remote, me));
        assert!(Stream::PublicLocal.wants(&local, me) && !Stream::PublicLocal.wants(&remote, me));
        assert!(!Stream::PublicRemote.wants(&local, me) && Stream::PublicRemote.wants(&remote, me));
        assert!(Stream::Hashtag("rust".into()).wants(&local, me));
        assert!(!Stream::Hashtag("rust".into()).wants(&remote, me));
        assert!(!Stream::HashtagLocal("go".into()).wants(&remote, me));
        assert!(
            !Stream::User.wants(&local, me),
            "public posts reach user streams via home"
        );
        let mut listed = event("list", vec![], false, &[]);
        let (mine, theirs) = (Uuid::from_u128(11), Uuid::from_u128(12));
        listed.lists = vec![mine];
        assert!(Stream::List(mine).wants(&listed, me));
        assert!(!Stream::List(theirs).wants(&listed, me));
        assert!(!Stream::User.wants(&listed, me) && !Stream::Public.wants(&listed, me));
        assert!(!Stream::List(mine).wants(&home, me) && !Stream::List(mine).wants(&local, me));
        let gone = event("delete", vec![], false, &[]);
        assert!(Stream::User.wants(&gone, me) && Stream::Hashtag("x".into()).wants(&gone, me));
        assert!(!Stream::UserNotification.wants(&gone, me));
        // A direct message's deletion: its readers' streams only (R-MAPI-VIS).
        let reader = Uuid::from_u128(7);
        let mut dm_gone = event("delete", vec![reader], false, &[]);
        dm_gone.restricted = true;
        assert!(Stream::User.wants(&dm_gone, reader) && Stream::Public.wants(&dm_gone, reader));
        for stream in [Stream::User, Stream::Public, Stream::Hashtag("x".into())] {
            assert!(!stream.wants(&dm_gone, me), "{stream:?}");
        }
    }
}
