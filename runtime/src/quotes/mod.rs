//! Quote posts (R-MAPI-6) as Mastodon 4.5 has them, with FEP-044f's consent: a post
//! (ours or remote) may quote another by IRI, and the quote is shown only once the quoted
//! author agreed — by their post's policy, or by a `QuoteAuthorization` they serve.
//!
//! - `local`: a status of ours quoting something (`quoted_status_id` on create), the
//!   `QuoteRequest` it sends, and revoking someone's quote of our status.
//! - `inbound`: remote notes that quote, in every form the fediverse sends (`quote`,
//!   `quoteUrl`, `quoteUri`, `_misskey_quote`), `QuoteRequest`s for our statuses, the answers to
//!   ours, and revoked authorizations.
//! - `authorization`: the approvals we grant, the documents we serve for them, and the check
//!   of one another server claims.
//!
//! Who may quote a status of ours (`statuses.quote_policy`): anyone, its author's followers,
//! or nobody; its author always; never someone who may not read it (only public and unlisted
//! statuses are quotable by others). A remote note that advertises no quote policy
//! (`interactionPolicy.canQuote`) comes from software that predates FEP-044f and is treated
//! as quotable, as Misskey and Hollo 0.6 treat each other's posts.

pub mod authorization;
pub mod inbound;
pub mod local;

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::federation::actors::actor::id_of;
use crate::federation::vocab::PUBLIC;
use crate::html;

/// A quote's standing with the quoted author.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Asked, not answered (or not answerable: a remote quote of ours our policy refuses).
    Pending,
    Accepted,
    Rejected,
    /// Accepted once, withdrawn by the quoted author.
    Revoked,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Accepted => "accepted",
            State::Rejected => "rejected",
            State::Revoked => "revoked",
        }
    }

    pub fn parse(s: &str) -> State {
        match s {
            "accepted" => State::Accepted,
            "rejected" => State::Rejected,
            "revoked" => State::Revoked,
            _ => State::Pending,
        }
    }
}

/// Who may quote a status of ours (Mastodon's `quote_approval_policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Public,
    Followers,
    Nobody,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Public => "public",
            Policy::Followers => "followers",
            Policy::Nobody => "nobody",
        }
    }

    pub fn parse(s: &str) -> Option<Policy> {
        match s {
            "public" => Some(Policy::Public),
            "followers" => Some(Policy::Followers),
            "nobody" => Some(Policy::Nobody),
            _ => None,
        }
    }
}

/// The properties a quoting note names its quoted post by, in the order we trust them:
/// FEP-044f's `quote`, Misskey's `_misskey_quote`, Fedibird's `quoteUri`, and `quoteUrl`
/// (Misskey's and Akkoma's older term).
const QUOTE_TERMS: [&str; 4] = ["quote", "_misskey_quote", "quoteUri", "quoteUrl"];

/// The http(s) IRI a note quotes, if it quotes one.
pub fn quoted_iri(note: &Value) -> Option<&str> {
    QUOTE_TERMS
        .iter()
        .filter_map(|k| note.get(*k))
        .filter_map(id_of)
        .find_map(html::http_url)
}

/// `html` without its quote fallback paragraphs (`<p class="quote-inline">RE: …</p>`, as
/// Mastodon 4.5 and we send them): a note whose quote is shown needs no link to it, and the
/// sanitizer would keep the paragraph but drop the class clients hide it by.
pub fn without_fallback(html: &str) -> String {
    const OPEN: &str = "<p class=\"quote-inline\">";
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(start) = rest.find(OPEN) {
        let Some(len) = rest[start..].find("</p>") else {
            break;
        };
        out.push_str(&rest[..start]);
        rest = &rest[start + len + "</p>".len()..];
    }
    out.push_str(rest);
    out
}

/// The authorization a quoting note claims (`quoteAuthorization`), if any.
pub fn claimed_authorization(note: &Value) -> Option<&str> {
    note.get("quoteAuthorization")
        .and_then(id_of)
        .and_then(html::http_url)
}

/// What a remote note's `interactionPolicy.canQuote` says of who may quote it without asking:
/// `None` when it advertises no policy (software before FEP-044f).
pub fn remote_policy(note: &Value) -> Option<RemotePolicy> {
    let can_quote = note.get("interactionPolicy")?.get("canQuote")?;
    let listed = |k: &str| -> Vec<String> {
        match can_quote.get(k) {
            Some(Value::Array(a)) => a.iter().filter_map(id_of).map(str::to_string).collect(),
            Some(v) => id_of(v).map(str::to_string).into_iter().collect(),
            None => Vec::new(),
        }
    };
    // GoToSocial 0.18 names the two lists `always` and `approvalRequired`.
    let both = |new: &str, old: &str| -> Vec<String> {
        let mut l = listed(new);
        for a in listed(old) {
            if !l.contains(&a) {
                l.push(a);
            }
        }
        l
    };
    Some(RemotePolicy {
        automatic: both("automaticApproval", "always"),
        manual: both("manualApproval", "approvalRequired"),
    })
}

/// A remote note's quote policy: the audiences approved automatically, and those who may ask.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemotePolicy {
    pub automatic: Vec<String>,
    pub manual: Vec<String>,
}

impl RemotePolicy {
    /// Mastodon's names for the audiences (`public`, `followers`); other entries (single
    /// actors) are not shown.
    pub fn names(list: &[String], followers: Option<&str>) -> Vec<String> {
        let mut out = Vec::new();
        if list.iter().any(|a| vocab_public(a)) {
            out.push("public".to_string());
        }
        if followers.is_some_and(|f| list.iter().any(|a| a == f)) {
            out.push("followers".to_string());
        }
        out
    }
}

fn vocab_public(a: &str) -> bool {
    a == PUBLIC || a == "as:Public" || a == "Public"
}

/// One of our statuses as the quote rules read it.
#[derive(sqlx::FromRow)]
pub struct QuotedStatus {
    pub id: Uuid,
    pub uri: String,
    pub account_id: Uuid,
    pub username: String,
    pub visibility: String,
    pub quote_policy: String,
}

/// Our status at `uri`, if it is one.
pub async fn our_status(
    conn: &mut PgConnection,
    uri: &str,
) -> Result<Option<QuotedStatus>, sqlx::Error> {
    sqlx::query_as(
        "SELECT s.id, s.uri, s.account_id, a.username, s.visibility, s.quote_policy
           FROM statuses s JOIN accounts a ON a.id = s.account_id WHERE s.uri = $1",
    )
    .bind(uri)
    .fetch_optional(conn)
    .await
}

/// Who asks to quote one of our statuses: one of our accounts, or a remote actor.
#[derive(Clone, Copy, Debug)]
pub enum Quoter<'a> {
    Local(Uuid),
    Remote(&'a str),
}

/// Whether `quoter` may quote `status` under its policy and visibility: its author always;
/// anyone else only a public or unlisted status, as the policy says.
pub async fn allowed(
    conn: &mut PgConnection,
    actor_iri: &str,
    status: &QuotedStatus,
    quoter: Quoter<'_>,
) -> Result<bool, sqlx::Error> {
    if matches!(quoter, Quoter::Local(a) if a == status.account_id) {
        return Ok(true);
    }
    if !matches!(status.visibility.as_str(), "public" | "unlisted") {
        return Ok(false);
    }
    match Policy::parse(&status.quote_policy).unwrap_or(Policy::Nobody) {
        Policy::Public => Ok(true),
        Policy::Nobody => Ok(false),
        Policy::Followers => match quoter {
            Quoter::Local(a) => {
                sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM follows
                      WHERE account_id = $1 AND target_iri = $2 AND state = 'accepted')",
                )
                .bind(a)
                .bind(actor_iri)
                .fetch_one(conn)
                .await
            }
            Quoter::Remote(iri) => sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM followers WHERE account_id = $1 AND actor_iri = $2)",
            )
            .bind(status.account_id)
            .bind(iri)
            .fetch_one(conn)
            .await,
        },
    }
}

/// Records (or re-records, on an edit) that `post` quotes `quoted_uri`, in `state`.
/// Returns whether the quote became accepted by this call (the quoted author is notified
/// once, then).
pub async fn record(
    conn: &mut PgConnection,
    post: Uuid,
    quoted_uri: &str,
    state: State,
    authorization: Option<&str>,
    request_id: Option<&str>,
) -> Result<bool, sqlx::Error> {
    let before: Option<(String, String)> =
        sqlx::query_as("SELECT quoted_uri, state FROM quotes WHERE post_id = $1 FOR UPDATE")
            .bind(post)
            .fetch_optional(&mut *conn)
            .await?;
    sqlx::query(
        "INSERT INTO quotes (post_id, quoted_uri, state, authorization_iri, request_id)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (post_id) DO UPDATE SET quoted_uri = EXCLUDED.quoted_uri,
             state = EXCLUDED.state, authorization_iri = EXCLUDED.authorization_iri,
             request_id = coalesce(EXCLUDED.request_id, quotes.request_id), updated_at = now()",
    )
    .bind(post)
    .bind(quoted_uri)
    .bind(state.as_str())
    .bind(authorization)
    .bind(request_id)
    .execute(&mut *conn)
    .await?;
    let was_accepted = before.is_some_and(|(u, s)| u == quoted_uri && s == "accepted");
    Ok(state == State::Accepted && !was_accepted)
}

/// Forgets that `post` quotes anything (an edit that dropped the quote).
pub async fn forget(conn: &mut PgConnection, post: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM quotes WHERE post_id = $1")
        .bind(post)
        .execute(conn)
        .await?;
    Ok(())
}

/// The local author of the post at `uri` (for a `quote` notification).
pub async fn local_author_of(
    conn: &mut PgConnection,
    uri: &str,
) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar("SELECT account_id FROM statuses WHERE uri = $1")
        .bind(uri)
        .fetch_optional(conn)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_form_of_quote_is_read_and_only_http_iris_are_taken() {
        for key in QUOTE_TERMS {
            let note = json!({ key: "https://q.example/notes/1" });
            assert_eq!(
                quoted_iri(&note),
                Some("https://q.example/notes/1"),
                "{key}"
            );
        }
        let embedded = json!({ "quote": { "id": "https://q.example/notes/2", "type": "Note" } });
        assert_eq!(quoted_iri(&embedded), Some("https://q.example/notes/2"));
        assert_eq!(
            quoted_iri(&json!({ "quoteUrl": "javascript:alert(1)" })),
            None
        );
        assert_eq!(quoted_iri(&json!({ "content": "no quote" })), None);
        // FEP-044f's term wins over the older ones.
        let both = json!({ "quoteUrl": "https://old.example/1", "quote": "https://new.example/1" });
        assert_eq!(quoted_iri(&both), Some("https://new.example/1"));
    }

    #[test]
    fn the_fallback_paragraph_goes_and_nothing_else() {
        let html = r#"<p class="quote-inline">RE: <a href="https://q.example/1">x</a></p><p>mine</p><p class="quote-inline">RE: y</p>"#;
        assert_eq!(without_fallback(html), "<p>mine</p>");
        assert_eq!(without_fallback("<p>plain</p>"), "<p>plain</p>");
        // Unclosed: left as it is (the sanitizer closes it).
        let open = r#"<p>a</p><p class="quote-inline">RE: z"#;
        assert_eq!(without_fallback(open), open);
    }

    #[test]
    fn a_remote_policy_is_read_when_advertised() {
        assert_eq!(remote_policy(&json!({ "type": "Note" })), None);
        let p = remote_policy(&json!({ "interactionPolicy": { "canQuote": {
            "automaticApproval": PUBLIC, "manualApproval": ["https://r.example/users/a/followers"],
        }}}))
        .expect("a policy");
        assert_eq!(p.automatic, vec![PUBLIC.to_string()]);
        assert_eq!(
            RemotePolicy::names(&p.manual, Some("https://r.example/users/a/followers")),
            vec!["followers"]
        );
        assert_eq!(RemotePolicy::names(&p.automatic, None), vec!["public"]);
    }

    /// GoToSocial 0.18 writes `always` and `approvalRequired` for the same two lists.
    #[test]
    fn gotosocial_0_18_names_are_read_too() {
        let followers = "https://gts.example/users/a/followers";
        let p = remote_policy(&json!({ "interactionPolicy": { "canQuote": {
            "always": [followers], "approvalRequired": [PUBLIC],
        }}}))
        .expect("a policy");
        assert_eq!(p.automatic, vec![followers.to_string()]);
        assert_eq!(p.manual, vec![PUBLIC.to_string()]);
    }
}
