//! Direct conversations (R-MAPI-4): every direct post, ours or one arriving
//! through the inbox, joins its thread's conversation for each local participant (its
//! author, if local, and the local accounts it addresses), keyed by the thread's root so a
//! reply continues the conversation it answers. The author's copy is read, the others'
//! unread. Deleting a post takes it out; a conversation left empty goes.

use sqlx::PgConnection;
use uuid::Uuid;

use super::access::visible_sql;
use crate::federation::Federation;

/// Records the direct post `post` (already stored) in the conversations of its local
/// participants. `author` is its local author, if any; `participants` every actor IRI of the
/// exchange (the author and whom it addresses), each once.
pub async fn record(
    tx: &mut PgConnection,
    fed: &Federation,
    post: Uuid,
    author: Option<Uuid>,
    participants: &[String],
) -> Result<(), sqlx::Error> {
    let names: Vec<String> = participants
        .iter()
        .filter_map(|p| fed.local_username(p).map(str::to_lowercase))
        .collect();
    let local: Vec<(Uuid, String)> =
        sqlx::query_as("SELECT id, username FROM accounts WHERE lower(username) = ANY($1)")
            .bind(&names)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|(id, name): (Uuid, String)| (id, fed.actor_iri(&name)))
            .collect();
    if local.is_empty() {
        return Ok(());
    }
    let root = root_of(&mut *tx, post).await?;
    for (account, own_iri) in &local {
        let others: Vec<&String> = participants.iter().filter(|p| *p != own_iri).collect();
        let conversation: i64 = sqlx::query_scalar(
            "INSERT INTO conversations (account_id, root_uri, last_status_id, participants, unread)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (account_id, root_uri) DO UPDATE
                SET last_status_id = greatest(conversations.last_status_id, EXCLUDED.last_status_id),
                    participants = ARRAY(SELECT DISTINCT unnest(conversations.participants
                                                                || EXCLUDED.participants)),
                    -- the author has just read it; everyone else has something new
                    unread = EXCLUDED.unread
             RETURNING id",
        )
        .bind(account)
        .bind(&root)
        .bind(post)
        .bind(&others)
        .bind(author != Some(*account))
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO conversation_posts (conversation_id, post_id) VALUES ($1, $2)
             ON CONFLICT DO NOTHING",
        )
        .bind(conversation)
        .bind(post)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

/// The IRI of the topmost post we know above `post` (its own when it replies to nothing we
/// have).
async fn root_of(tx: &mut PgConnection, post: Uuid) -> Result<String, sqlx::Error> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "{} SELECT uri FROM up ORDER BY depth DESC LIMIT 1",
        super::conversation_mutes::up_the_thread()
    )))
    .bind(post)
    .fetch_one(tx)
    .await
}

/// Takes the deleted post `post` out of every conversation: each one's last status becomes
/// its newest remaining post, and a conversation with none left is removed.
pub async fn remove_post(tx: &mut PgConnection, post: Uuid) -> Result<(), sqlx::Error> {
    let touched: Vec<i64> = sqlx::query_scalar(
        "DELETE FROM conversation_posts WHERE post_id = $1 RETURNING conversation_id",
    )
    .bind(post)
    .fetch_all(&mut *tx)
    .await?;
    if touched.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "DELETE FROM conversations c WHERE c.id = ANY($1)
            AND NOT EXISTS (SELECT 1 FROM conversation_posts p WHERE p.conversation_id = c.id)",
    )
    .bind(&touched)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE conversations c
            SET last_status_id = (SELECT p.post_id FROM conversation_posts p
                                   WHERE p.conversation_id = c.id
                                   ORDER BY p.post_id DESC LIMIT 1)  -- uuid has no max()
          WHERE c.id = ANY($1)",
    )
    .bind(&touched)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// One conversation row of an account.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Conversation {
    pub id: i64,
    pub last_status_id: Uuid,
    pub participants: Vec<String>,
    pub unread: bool,
}

/// The account's conversations whose last status it may still read (`page` is the SQL of
/// the pagination clause on `c.last_status_id`, its binds starting at `$2`).
pub fn page_sql(page_clause: &str) -> String {
    format!(
        "SELECT c.id, c.last_status_id, c.participants, c.unread
           FROM conversations c JOIN posts p ON p.id = c.last_status_id
          WHERE c.account_id = $1 AND {} AND {page_clause}",
        visible_sql("p", 1)
    )
}
