//! Private notes on accounts (Mastodon's `AccountNote`, R-MAPI-6): what a local account writes
//! about another for itself alone, shown as the `note` of its Relationship with it. Never
//! federated, never shown to anyone else.

use sqlx::PgConnection;
use uuid::Uuid;

/// The longest note, in characters (Mastodon's limit).
pub const MAX_CHARS: usize = 2000;

#[derive(Debug, thiserror::Error)]
pub enum NoteError {
    #[error("comment is too long (at most {MAX_CHARS} characters)")]
    TooLong,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Sets `account`'s note on the actor `target`; an empty (or blank) one removes it.
pub async fn set(
    conn: &mut PgConnection,
    account: Uuid,
    target: &str,
    comment: &str,
) -> Result<(), NoteError> {
    if comment.chars().count() > MAX_CHARS {
        return Err(NoteError::TooLong);
    }
    if comment.trim().is_empty() {
        sqlx::query("DELETE FROM account_notes WHERE account_id = $1 AND target_iri = $2")
            .bind(account)
            .bind(target)
            .execute(conn)
            .await?;
    } else {
        sqlx::query(
            "INSERT INTO account_notes (account_id, target_iri, comment) VALUES ($1, $2, $3)
             ON CONFLICT (account_id, target_iri)
             DO UPDATE SET comment = EXCLUDED.comment, updated_at = now()",
        )
        .bind(account)
        .bind(target)
        .bind(comment)
        .execute(conn)
        .await?;
    }
    Ok(())
}
