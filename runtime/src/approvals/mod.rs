//! Our interactions with remote posts whose authors set who may interact (GoToSocial's
//! interaction policies, issue 61): a reply, a favourite or a boost by one of our accounts is
//! allowed, allowed with the author's approval, or refused, as the post's `interactionPolicy`
//! says (`policy`), and an approval is asked and honoured as GoToSocial 0.18 does
//! (`docs/federation/interaction_policy.md` and `internal/federation/federatingdb/accept.go`,
//! `reject.go` there):
//!
//! - Refused (the author's server would drop it — GoToSocial answers a `Like` it refuses with
//!   403 and silently drops a reply or a boost): nothing is stored or sent, and the client gets
//!   GoToSocial's own 403 "you do not have permission to … this status".
//! - With approval: the activity is sent as usual but to the post's author alone, and stored
//!   pending (`pending_approval` of `statuses`, `favourites`, `reblogs`): our account sees it
//!   as done, nobody else sees it, and no count counts it (`statuses::access`,
//!   `mastodon::status`).
//! - The author's `Accept` (`answers`) approves it: the approval's IRI — the `Accept`'s
//!   `result` on the author's server, else the `Accept` itself, as GoToSocial 0.18 sends no
//!   `result` — is kept and served as `approvedBy` on our reply and boost, and a pending reply
//!   or boost then goes to its whole audience. Their `Reject` undoes it here: the favourite and
//!   boost are taken back, the reply deleted (GoToSocial deletes a rejected reply).
//!
//! What a policy allows through a followers or following collection is sent at once, as any
//! interaction: GoToSocial's author server accepts it without its author (and answers with an
//! `Accept`, whose approval is then recorded the same way).
//!
//! The other way round — remote interactions with our followers-only statuses, which GoToSocial
//! holds until we approve them — is `granted`.

pub mod answers;
pub mod granted;
pub mod policy;

use serde_json::Value;
use sqlx::PgConnection;

use crate::accounts::Account;
use crate::federation::Federation;
use policy::{Permission, Standing};

/// An interaction a policy rules on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Like,
    Reply,
    Announce,
}

impl Kind {
    /// Its sub-policy in `interactionPolicy`.
    fn key(self) -> &'static str {
        match self {
            Kind::Like => "canLike",
            Kind::Reply => "canReply",
            Kind::Announce => "canAnnounce",
        }
    }

    /// GoToSocial's word for it in its refusal.
    fn verb(self) -> &'static str {
        match self {
            Kind::Like => "fave",
            Kind::Reply => "reply to",
            Kind::Announce => "boost",
        }
    }
}

/// The author's consent to one interaction, as their post's policy gives it. Only [`ask`]
/// makes one, so nothing is favourited, boosted or replied to without asking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Consent {
    pending: bool,
}

impl Consent {
    /// Consent for a post that sets no policy, or one of ours.
    const GIVEN: Consent = Consent { pending: false };

    /// Whether the author must still approve: the interaction goes to them alone, pending.
    pub fn pending(self) -> bool {
        self.pending
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The post's policy does not let the account do it (403).
    #[error("you do not have permission to {} this status", .0.verb())]
    Refused(Kind),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// A remote post as a policy decision reads it.
#[derive(sqlx::FromRow)]
struct Target {
    actor: String,
    policy: Option<Value>,
    mentions: Value,
    in_reply_to: Option<String>,
    followers: Option<String>,
    following: Option<String>,
}

/// What the post at `post_uri` lets `account` do of `kind`: its consent, given or pending, or
/// `Refused`. A post of ours, or one setting no policy for `kind`, consents.
pub async fn ask(
    conn: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post_uri: &str,
    kind: Kind,
) -> Result<Consent, AskError> {
    let target: Option<Target> = sqlx::query_as(
        "SELECT r.actor, r.body->'interactionPolicy' AS policy, r.mentions, r.in_reply_to,
                a.document->>'followers' AS followers, a.document->>'following' AS following
           FROM remote_posts r LEFT JOIN remote_actors a ON a.iri = r.actor
          WHERE r.iri = $1 AND r.deleted_at IS NULL",
    )
    .bind(post_uri)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(t) = target else {
        return Ok(Consent::GIVEN);
    };
    let Some(rules) = policy::sub_policy(t.policy.as_ref(), kind.key()) else {
        return Ok(Consent::GIVEN);
    };
    let me = fed.actor_iri(&account.username);
    // Whoever a post mentions or answers may always reply to it (GoToSocial's first implicit
    // rule), whatever its policy says.
    if kind == Kind::Reply && addresses(&t, &me) {
        return Ok(Consent::GIVEN);
    }
    let mut who = Standing {
        me: &me,
        author_followers: t.followers.as_deref(),
        author_following: t.following.as_deref(),
        follows_author: false,
        followed_by_author: false,
    };
    if policy::names_collection(&rules, &who) {
        (who.follows_author, who.followed_by_author) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM follows
                             WHERE account_id = $1 AND target_iri = $2 AND state = 'accepted'),
                    EXISTS (SELECT 1 FROM followers WHERE account_id = $1 AND actor_iri = $2)",
        )
        .bind(account.id)
        .bind(&t.actor)
        .fetch_one(&mut *conn)
        .await?;
    }
    match policy::permission(&rules, &who) {
        Permission::Automatic => Ok(Consent::GIVEN),
        Permission::Manual => Ok(Consent { pending: true }),
        Permission::Denied => Err(AskError::Refused(kind)),
    }
}

/// Whether the post mentions our actor `me`, or replies to one of its statuses (whose IRIs
/// are `<actor>/statuses/<id>`).
fn addresses(t: &Target, me: &str) -> bool {
    let mentioned = t.mentions.as_array().is_some_and(|m| {
        m.iter()
            .any(|m| m.get("href").and_then(Value::as_str) == Some(me))
    });
    let answers = t
        .in_reply_to
        .as_deref()
        .and_then(|p| p.strip_prefix(me))
        .is_some_and(|rest| rest.starts_with("/statuses/"));
    mentioned || answers
}
