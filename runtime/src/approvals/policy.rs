//! Reading a remote post's `interactionPolicy` (GoToSocial's extension: `canLike`, `canReply`,
//! `canAnnounce`, `canQuote`) and deciding what it lets one of our accounts do — the same
//! decision GoToSocial's own server makes when our interaction reaches it
//! (`internal/filter/interaction/interactable.go` in GoToSocial 0.18.3), so that we never send
//! what it would drop.
//!
//! A sub-policy lists audiences twice: approved automatically (`automaticApproval`, GoToSocial
//! 0.18's `always`) and with the author's approval (`manualApproval`, 0.18's
//! `approvalRequired`); both generations are read and merged. An audience is the public
//! collection, the author's followers or following collection, or one actor. A list is one IRI
//! or an array (JSON-LD allows both); only http(s) IRIs and the public collection's names are
//! kept, at most [`MAX_AUDIENCES`] of each list, however long the remote made it.
//!
//! The decision: naming our account itself beats naming a collection it is in, and, at the
//! same precision, automatic beats manual — so `always: [us]` with `approvalRequired: [Public]`
//! is automatic for us, and `always: [Public]` with `approvalRequired: [us]` asks approval of us
//! alone. A sub-policy that is absent, `null` or `{}` sets nothing, and GoToSocial documents
//! the default as "anyone who can see the post".

use serde_json::Value;

use crate::federation::actors::actor::id_of;
use crate::federation::vocab::PUBLIC;
use crate::html;

/// How many audiences of one list are read. GoToSocial's own lists name the author, their
/// followers and following collections and the mentioned actors; a post mentions at most a
/// few dozen.
pub const MAX_AUDIENCES: usize = 64;

/// One sub-policy: who is approved automatically, and who may ask.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    pub automatic: Vec<String>,
    pub manual: Vec<String>,
}

impl Rules {
    /// The lists of the sub-policy object `sub`, under both generations of names.
    pub fn of(sub: &Value) -> Rules {
        Rules {
            automatic: both(sub, "automaticApproval", "always"),
            manual: both(sub, "manualApproval", "approvalRequired"),
        }
    }
}

/// The sub-policy `key` (`canLike`, `canReply`, `canAnnounce`) of the `interactionPolicy`
/// value `policy`; `None` when it sets none (no policy, or the sub-policy absent, `null` or
/// `{}`): then anyone who can see the post may.
pub fn sub_policy(policy: Option<&Value>, key: &str) -> Option<Rules> {
    match policy?.get(key)? {
        sub @ Value::Object(o) if !o.is_empty() => Some(Rules::of(sub)),
        _ => None,
    }
}

/// Whether `audience` names the public collection (as IRI, or compacted).
pub fn is_public(audience: &str) -> bool {
    audience == PUBLIC || audience == "as:Public" || audience == "Public"
}

/// The audiences of `sub`'s list `key`: one IRI or an array, embedded objects by their id.
fn listed(sub: &Value, key: &str) -> Vec<String> {
    let keep = |v: &Value| {
        id_of(v)
            .filter(|a| is_public(a) || html::http_url(a).is_some())
            .map(str::to_string)
    };
    match sub.get(key) {
        Some(Value::Array(a)) => a.iter().filter_map(keep).take(MAX_AUDIENCES).collect(),
        Some(v) => keep(v).into_iter().collect(),
        None => Vec::new(),
    }
}

/// The list under its newer name and its GoToSocial 0.18 name, once each, capped.
fn both(sub: &Value, new: &str, old: &str) -> Vec<String> {
    let mut l = listed(sub, new);
    for a in listed(sub, old) {
        if l.len() == MAX_AUDIENCES {
            break;
        }
        if !l.contains(&a) {
            l.push(a);
        }
    }
    l
}

/// Where our account stands with the post's author, as far as a policy can name it.
#[derive(Clone, Copy, Debug)]
pub struct Standing<'a> {
    /// Our account's actor IRI.
    pub me: &'a str,
    /// The author's followers and following collections, as their actor document names them.
    pub author_followers: Option<&'a str>,
    pub author_following: Option<&'a str>,
    /// Our account follows the author (accepted).
    pub follows_author: bool,
    /// The author follows our account.
    pub followed_by_author: bool,
}

/// What a sub-policy lets our account do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Permission {
    /// Approved without asking.
    Automatic,
    /// Only with the author's approval.
    Manual,
    /// Not at all: the author's server would drop it.
    Denied,
}

/// How precisely a list names our account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Match {
    No,
    /// Through a collection it is in (the public one, the author's followers or following).
    Collection,
    /// By its own IRI.
    Itself,
}

fn matched(list: &[String], who: &Standing) -> Match {
    if list.iter().any(|a| a == who.me) {
        return Match::Itself;
    }
    let in_collection = |a: &String| {
        is_public(a)
            || (who.follows_author && who.author_followers == Some(a.as_str()))
            || (who.followed_by_author && who.author_following == Some(a.as_str()))
    };
    if list.iter().any(in_collection) {
        Match::Collection
    } else {
        Match::No
    }
}

/// What `rules` let the account standing as `who` do.
pub fn permission(rules: &Rules, who: &Standing) -> Permission {
    match (matched(&rules.automatic, who), matched(&rules.manual, who)) {
        (Match::Itself, _) => Permission::Automatic,
        (_, Match::Itself) => Permission::Manual,
        (Match::Collection, _) => Permission::Automatic,
        (_, Match::Collection) => Permission::Manual,
        (Match::No, Match::No) => Permission::Denied,
    }
}

/// Whether `policy` names any audience that only a follow relationship can put our account
/// in (so the relationships are worth asking for).
pub fn names_collection(rules: &Rules, who: &Standing) -> bool {
    rules.automatic.iter().chain(&rules.manual).any(|a| {
        Some(a.as_str()) == who.author_followers || Some(a.as_str()) == who.author_following
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ME: &str = "https://hollo.test/users/alice";
    const BOB: &str = "https://gts.test/users/bob";
    const FOLLOWERS: &str = "https://gts.test/users/bob/followers";
    const FOLLOWING: &str = "https://gts.test/users/bob/following";

    fn standing(follows_author: bool, followed_by_author: bool) -> Standing<'static> {
        Standing {
            me: ME,
            author_followers: Some(FOLLOWERS),
            author_following: Some(FOLLOWING),
            follows_author,
            followed_by_author,
        }
    }

    fn decide(sub: Value, who: Standing) -> Permission {
        permission(&Rules::of(&sub), &who)
    }

    #[test]
    fn absent_null_and_empty_sub_policies_set_nothing() {
        assert_eq!(sub_policy(None, "canLike"), None);
        let p = json!({ "canQuote": { "automaticApproval": [PUBLIC] }, "canReply": null,
                        "canAnnounce": {} });
        for key in ["canLike", "canReply", "canAnnounce"] {
            assert_eq!(sub_policy(Some(&p), key), None, "{key}");
        }
        // An object with empty lists names nobody: only the author.
        let closed = json!({ "canLike": { "always": [] } });
        let rules = sub_policy(Some(&closed), "canLike").expect("set");
        assert_eq!(
            permission(&rules, &standing(true, true)),
            Permission::Denied
        );
    }

    #[test]
    fn both_generations_are_read_as_one_or_many_and_only_iris_are_kept() {
        let r = Rules::of(&json!({
            "always": BOB, "automaticApproval": [FOLLOWERS, { "id": BOB }],
            "approvalRequired": ["as:Public", "javascript:alert(1)", 7], "manualApproval": [],
        }));
        assert_eq!(r.automatic, vec![FOLLOWERS.to_string(), BOB.to_string()]);
        assert_eq!(r.manual, vec!["as:Public".to_string()]);
    }

    #[test]
    fn lists_are_capped() {
        let many: Vec<String> = (0..500)
            .map(|i| format!("https://x.test/users/{i}"))
            .collect();
        let r = Rules::of(&json!({ "always": many, "automaticApproval": many }));
        assert_eq!(r.automatic.len(), MAX_AUDIENCES);
        // Ours named after the cap is not read.
        let mut late = many.clone();
        late.push(ME.to_string());
        let r = Rules::of(&json!({ "always": late }));
        assert_eq!(permission(&r, &standing(false, false)), Permission::Denied);
    }

    #[test]
    fn collections_count_only_with_the_relationship_they_name() {
        let followers_only = json!({ "always": [BOB, FOLLOWERS] });
        assert_eq!(
            decide(followers_only.clone(), standing(false, true)),
            Permission::Denied
        );
        assert_eq!(
            decide(followers_only, standing(true, false)),
            Permission::Automatic
        );
        let following = json!({ "automaticApproval": [FOLLOWING] });
        assert_eq!(
            decide(following.clone(), standing(true, false)),
            Permission::Denied
        );
        assert_eq!(
            decide(following, standing(false, true)),
            Permission::Automatic
        );
        let public = json!({ "always": [BOB], "approvalRequired": [PUBLIC] });
        assert_eq!(decide(public, standing(false, false)), Permission::Manual);
    }

    #[test]
    fn naming_us_beats_a_collection_and_automatic_beats_manual_at_the_same_precision() {
        // GoToSocial's documented examples.
        let us_always = json!({ "always": [ME], "approvalRequired": [PUBLIC] });
        assert_eq!(
            decide(us_always, standing(false, false)),
            Permission::Automatic
        );
        let us_asked = json!({ "always": [PUBLIC], "approvalRequired": [ME] });
        assert_eq!(decide(us_asked, standing(false, false)), Permission::Manual);
        let both_lists = json!({ "always": [ME], "approvalRequired": [ME] });
        assert_eq!(
            decide(both_lists, standing(false, false)),
            Permission::Automatic
        );
        let both_public = json!({ "always": [FOLLOWERS], "approvalRequired": [PUBLIC] });
        assert_eq!(
            decide(both_public, standing(true, false)),
            Permission::Automatic
        );
    }

    #[test]
    fn relationships_are_asked_only_when_a_collection_is_named() {
        let who = standing(false, false);
        assert!(!names_collection(
            &Rules::of(&json!({ "always": [PUBLIC, BOB] })),
            &who
        ));
        assert!(names_collection(
            &Rules::of(&json!({ "approvalRequired": FOLLOWING })),
            &who
        ));
    }
}
