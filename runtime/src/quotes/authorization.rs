//! FEP-044f `QuoteAuthorization`s: the approvals we grant for quotes of our statuses (stored,
//! served at `<actor>/quote_authorizations/<id>` while not revoked), and the check of one a
//! remote note claims — the document must come from its own id, be attributed to the quoted
//! post's author and name exactly this note and this quoted post. A claim that fails any of
//! these is treated as no claim: the quote stays unapproved.

use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::QuotedStatus;
use crate::federation::Federation;
use crate::federation::actors::actor::id_of;
use crate::federation::context;
use crate::federation::iri::same_origin;

/// Where the authorizations for `username`'s statuses live.
fn prefix(fed: &Federation, username: &str) -> String {
    format!("{}/quote_authorizations/", fed.actor_iri(username))
}

/// The IRI of our authorization `id` for a status of `username`.
pub fn iri(fed: &Federation, username: &str, id: Uuid) -> String {
    format!("{}{id}", prefix(fed, username))
}

/// Grants `quoting_uri` the right to quote `status`: the authorization's IRI, the same one
/// for a repeated grant; `None` once the quoted author revoked it (revoking is final).
pub async fn grant(
    conn: &mut PgConnection,
    fed: &Federation,
    status: &QuotedStatus,
    quoting_uri: &str,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query(
        "INSERT INTO quote_authorizations (id, status_id, quoting_uri) VALUES ($1, $2, $3)
         ON CONFLICT (status_id, quoting_uri) DO NOTHING",
    )
    .bind(Uuid::now_v7())
    .bind(status.id)
    .bind(quoting_uri)
    .execute(&mut *conn)
    .await?;
    let (id, revoked): (Uuid, bool) = sqlx::query_as(
        "SELECT id, revoked_at IS NOT NULL FROM quote_authorizations
          WHERE status_id = $1 AND quoting_uri = $2",
    )
    .bind(status.id)
    .bind(quoting_uri)
    .fetch_one(&mut *conn)
    .await?;
    Ok((!revoked).then(|| iri(fed, &status.username, id)))
}

/// Whether `claimed` is a live authorization of ours for `note` quoting `status`.
pub async fn is_ours_for(
    conn: &mut PgConnection,
    fed: &Federation,
    claimed: &str,
    note: &str,
    status: &QuotedStatus,
) -> Result<bool, sqlx::Error> {
    let Some(id) = claimed
        .strip_prefix(prefix(fed, &status.username).as_str())
        .and_then(|i| Uuid::parse_str(i).ok())
    else {
        return Ok(false);
    };
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM quote_authorizations
          WHERE id = $1 AND status_id = $2 AND quoting_uri = $3 AND revoked_at IS NULL)",
    )
    .bind(id)
    .bind(status.id)
    .bind(note)
    .fetch_one(conn)
    .await
}

/// The document we serve for authorization `id` of `username`; `None` for one we never
/// granted, granted for another account's status, or revoked.
pub async fn document(
    pool: &PgPool,
    fed: &Federation,
    username: &str,
    id: Uuid,
) -> Result<Option<Value>, sqlx::Error> {
    let row: Option<(String, String)> = sqlx::query_as(
        "SELECT s.uri, q.quoting_uri FROM quote_authorizations q
           JOIN statuses s ON s.id = q.status_id JOIN accounts a ON a.id = s.account_id
          WHERE q.id = $1 AND lower(a.username) = lower($2) AND q.revoked_at IS NULL",
    )
    .bind(id)
    .bind(username)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(target, quoting)| {
        json!({
            "@context": context::ld(),
            "id": iri(fed, username, id),
            "type": "QuoteAuthorization",
            "attributedTo": fed.actor_iri(username),
            "interactingObject": quoting,
            "interactionTarget": target,
        })
    }))
}

/// Revokes our authorizations for `quoting_uri` quoting `status`; the revoked IRIs.
pub async fn revoke(
    conn: &mut PgConnection,
    fed: &Federation,
    status: &QuotedStatus,
    quoting_uri: &str,
) -> Result<Vec<String>, sqlx::Error> {
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "UPDATE quote_authorizations SET revoked_at = now()
          WHERE status_id = $1 AND quoting_uri = $2 AND revoked_at IS NULL RETURNING id",
    )
    .bind(status.id)
    .bind(quoting_uri)
    .fetch_all(conn)
    .await?;
    Ok(ids
        .into_iter()
        .map(|id| iri(fed, &status.username, id))
        .collect())
}

/// Whether `doc` (fetched from `claimed`) authorizes `note` to quote `quoted`, by `author`.
pub fn authorizes(doc: &Value, claimed: &str, note: &str, quoted: &str, author: &str) -> bool {
    let field = |k: &str| doc.get(k).and_then(id_of);
    field("id") == Some(claimed)
        && doc.get("type").and_then(Value::as_str) == Some("QuoteAuthorization")
        && field("attributedTo") == Some(author)
        && field("interactingObject") == Some(note)
        && field("interactionTarget") == Some(quoted)
        && same_origin(claimed, author)
}

/// Fetches `claimed` (as the instance actor, from its own id) and checks it with
/// [`authorizes`]. A fetch that fails is a claim not shown to hold.
/// `check` is (the claimed IRI, the quoting note, the quoted post, the quoted post's author).
pub async fn verify_remote(
    pool: &PgPool,
    fed: &Federation,
    check: (&str, &str, &str, &str),
) -> bool {
    let (claimed, note, quoted, author) = check;
    if !same_origin(claimed, author) {
        return false;
    }
    let signer = match fed.instance_key(pool).await {
        Ok(k) => k,
        Err(e) => {
            tracing::warn!(error = %format_args!("{e:#}"), "no instance key to check a quote");
            return false;
        }
    };
    match fed
        .fetch
        .get_canonical(claimed, Some(&signer.signing))
        .await
    {
        Ok(doc) => authorizes(&doc, claimed, note, quoted, author),
        Err(e) => {
            tracing::info!(authorization = claimed, error = %e, "a claimed quote authorization could not be fetched");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_authorization_must_name_this_note_this_post_and_this_author() {
        let good = json!({
            "id": "https://q.example/users/b/quote_authorizations/1",
            "type": "QuoteAuthorization",
            "attributedTo": "https://q.example/users/b",
            "interactingObject": "https://r.example/notes/9",
            "interactionTarget": "https://q.example/users/b/statuses/1",
        });
        let check = |doc: &Value| {
            authorizes(
                doc,
                "https://q.example/users/b/quote_authorizations/1",
                "https://r.example/notes/9",
                "https://q.example/users/b/statuses/1",
                "https://q.example/users/b",
            )
        };
        assert!(check(&good));
        for (key, forged) in [
            ("interactingObject", "https://r.example/notes/other"),
            ("interactionTarget", "https://q.example/users/b/statuses/2"),
            ("attributedTo", "https://q.example/users/mallory"),
            ("type", "Note"),
            ("id", "https://q.example/users/b/quote_authorizations/2"),
        ] {
            let mut doc = good.clone();
            doc[key] = json!(forged);
            assert!(!check(&doc), "{key} = {forged}");
        }
        // Served from another origin than the quoted author's: never theirs.
        assert!(!authorizes(
            &good,
            "https://evil.example/a/1",
            "https://r.example/notes/9",
            "https://q.example/users/b/statuses/1",
            "https://q.example/users/b"
        ));
    }
}
