//! A local status's `interactionPolicy` (GoToSocial's extension, which Mastodon 4.5 reads for
//! quotes): who may like, reply to, boost and quote it without the author's approval.
//!
//! Every sub-policy is always published. GoToSocial reads a policy whose `canLike`,
//! `canReply` or `canAnnounce` is absent as "only the author", so a note carrying only
//! `canQuote` made its users' replies, favourites and boosts fail with 403 (R-INTEROP).
//!
//! Each sub-policy names its audiences twice: `automaticApproval`/`manualApproval` (the names
//! GoToSocial 0.19+ and Mastodon 4.5 use) and `always`/`approvalRequired` (the ones GoToSocial
//! 0.18 reads). Nothing here waits for manual approval, so the manual lists are empty.
//!
//! The audiences follow what the post's visibility already allows, as GoToSocial's own
//! defaults do: anyone who can read a public or unlisted post may like, reply and boost it; a
//! followers-only post its author's followers and the people it mentions, a direct one only the
//! people it mentions, and neither may be boosted by anyone but the author. Quotes follow the
//! author's quote policy, and only public and unlisted posts can be quoted by others.

use serde_json::{Value, json};

use crate::federation::vocab::PUBLIC;
use crate::quotes::Policy;
use crate::statuses::Visibility;

/// The actors a policy is written about: the author, their followers collection, and the
/// actors the post mentions.
pub struct Audience<'a> {
    pub author: &'a str,
    pub followers: &'a str,
    pub mentioned: &'a [String],
}

/// The `interactionPolicy` object of a status of `visibility` whose author chose `quotes`.
pub fn interaction_policy(visibility: Visibility, quotes: Policy, who: &Audience) -> Value {
    let public = vec![PUBLIC.to_string()];
    let author = vec![who.author.to_string()];
    let readers: Vec<String> = match visibility {
        Visibility::Public | Visibility::Unlisted => public.clone(),
        Visibility::Private => [who.author, who.followers]
            .into_iter()
            .map(str::to_string)
            .chain(who.mentioned.iter().cloned())
            .collect(),
        Visibility::Direct => std::iter::once(who.author.to_string())
            .chain(who.mentioned.iter().cloned())
            .collect(),
    };
    let shared = matches!(visibility, Visibility::Public | Visibility::Unlisted);
    let boosters = if shared {
        public.clone()
    } else {
        author.clone()
    };
    let quoters = match (shared, quotes) {
        (true, Policy::Public) => public,
        (true, Policy::Followers) => vec![who.followers.to_string()],
        _ => author,
    };
    json!({
        "canLike": automatic(readers.clone()),
        "canReply": automatic(readers),
        "canAnnounce": automatic(boosters),
        "canQuote": automatic(quoters),
    })
}

/// A sub-policy approving `audiences` without asking, under both generations of term names.
fn automatic(audiences: Vec<String>) -> Value {
    json!({
        "automaticApproval": audiences, "always": audiences,
        "manualApproval": [], "approvalRequired": [],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: &str = "https://hollo.test/@alice";
    const FOLLOWERS: &str = "https://hollo.test/@alice/followers";

    fn policy(visibility: Visibility, quotes: Policy, mentioned: &[String]) -> Value {
        let who = Audience {
            author: ALICE,
            followers: FOLLOWERS,
            mentioned,
        };
        interaction_policy(visibility, quotes, &who)
    }

    /// Every sub-policy is present, with both term generations agreeing: a reader that finds
    /// one missing would refuse everyone but the author.
    #[test]
    fn every_sub_policy_is_published_under_both_names() {
        for visibility in [
            Visibility::Public,
            Visibility::Unlisted,
            Visibility::Private,
            Visibility::Direct,
        ] {
            let p = policy(visibility, Policy::Public, &[]);
            for sub in ["canLike", "canReply", "canAnnounce", "canQuote"] {
                let rules = &p[sub];
                assert!(
                    rules["automaticApproval"].is_array(),
                    "{visibility:?} {sub}"
                );
                assert_eq!(
                    rules["automaticApproval"], rules["always"],
                    "{visibility:?} {sub}"
                );
                assert_eq!(rules["manualApproval"], json!([]));
                assert_eq!(rules["approvalRequired"], json!([]));
            }
        }
    }

    #[test]
    fn a_public_post_is_open_to_everyone_but_quotes_follow_the_quote_policy() {
        let p = policy(Visibility::Public, Policy::Followers, &[]);
        for sub in ["canLike", "canReply", "canAnnounce"] {
            assert_eq!(p[sub]["always"], json!([PUBLIC]), "{sub}");
        }
        assert_eq!(p["canQuote"]["always"], json!([FOLLOWERS]));
        let nobody = policy(Visibility::Unlisted, Policy::Nobody, &[]);
        assert_eq!(nobody["canQuote"]["always"], json!([ALICE]));
        assert_eq!(nobody["canAnnounce"]["always"], json!([PUBLIC]));
    }

    #[test]
    fn followers_only_and_direct_posts_reach_only_their_readers_and_are_never_boosted() {
        let bob = vec!["https://gts.test/users/bob".to_string()];
        let private = policy(Visibility::Private, Policy::Public, &bob);
        assert_eq!(
            private["canReply"]["always"],
            json!([ALICE, FOLLOWERS, bob[0]])
        );
        assert_eq!(private["canLike"], private["canReply"]);
        assert_eq!(private["canAnnounce"]["always"], json!([ALICE]));
        assert_eq!(private["canQuote"]["always"], json!([ALICE]));
        let direct = policy(Visibility::Direct, Policy::Public, &bob);
        assert_eq!(direct["canLike"]["always"], json!([ALICE, bob[0]]));
        assert_eq!(direct["canAnnounce"]["always"], json!([ALICE]));
    }
}
