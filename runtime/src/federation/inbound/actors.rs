//! A remote actor changing or deleting itself. Only the actor may do either: an `Update` of
//! another actor's document, or a `Delete` naming someone else, is not about an actor.

use sqlx::PgConnection;

use super::activity::Object;
use super::incoming::Incoming;
use super::outcome::Outcome;
use crate::federation::actors::actor;

/// `Update` of the actor's own document: how key rotation and profile edits reach us.
pub async fn update(
    tx: &mut PgConnection,
    inc: &Incoming,
    document: &Object,
) -> Result<Outcome, sqlx::Error> {
    if document.id != inc.actor {
        return Ok(Outcome::ignored("Update of another actor"));
    }
    Ok(match actor::parse_actor(&document.doc, &inc.actor) {
        Ok(a) => {
            actor::store_actor_in(&mut *tx, &a, &document.doc, None).await?;
            Outcome::applied("actor updated")
        }
        Err(e) => Outcome::ignored(e.to_string()),
    })
}

/// The actor deleted itself: forget the relationships, keep the record of it.
pub async fn delete(tx: &mut PgConnection, inc: &Incoming) -> Result<Outcome, sqlx::Error> {
    sqlx::query("UPDATE remote_actors SET gone_at = now() WHERE iri = $1")
        .bind(&inc.actor)
        .execute(&mut *tx)
        .await?;
    for sql in [
        "DELETE FROM followers WHERE actor_iri = $1",
        "DELETE FROM follow_requests WHERE actor_iri = $1",
    ] {
        sqlx::query(sql).bind(&inc.actor).execute(&mut *tx).await?;
    }
    Ok(Outcome::applied("actor deleted"))
}
