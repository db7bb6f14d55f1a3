//! Resolving what a user pastes into search: a URL is fetched through the guard (signed by
//! the searching account, for authorized-fetch servers) and stored when it is an actor or a
//! note — the note by the same `inbound::notes::store_note` the inbox uses, and only when it is
//! attributed to an actor of its own origin, whose document is fetched too. A document is only
//! taken from its own id (`get_canonical`).

use serde_json::Value;
use sqlx::PgPool;

use crate::federation::Federation;
use crate::federation::actors::actor::{self, id_of};
use crate::federation::inbound::notes::store_note;
use crate::federation::iri::same_origin;
use crate::federation::transport::signature::SigningKey;
use crate::federation::vocab;

/// What a URL turned out to be, by its IRI (now stored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    Actor(String),
    Note(String),
}

pub async fn resolve_url(
    pool: &PgPool,
    fed: &Federation,
    signer: &SigningKey,
    url: &str,
) -> Result<Resolved, String> {
    let doc = fed
        .fetch
        .get_canonical(url, Some(signer))
        .await
        .map_err(|e| format!("cannot fetch {url}: {e}"))?;
    let id = doc
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let ty = doc.get("type").and_then(Value::as_str).unwrap_or_default();
    if vocab::is_actor(ty) {
        let a = actor::parse_actor(&doc, &id).map_err(|e| e.to_string())?;
        actor::store_actor(pool, &a, &doc, None)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(Resolved::Actor(a.iri));
    }
    if !vocab::is_note(ty) {
        return Err(format!("{url} is neither an account nor a post ({ty})"));
    }
    let author = doc
        .get("attributedTo")
        .and_then(id_of)
        .filter(|a| same_origin(a, &id))
        .ok_or_else(|| format!("{url} is not attributed to an actor of its own server"))?
        .to_string();
    actor::known_actor(pool, fed, &author, Some(signer))
        .await
        .map_err(|e| format!("cannot fetch the author {author}: {e}"))?;
    let mut conn = pool.acquire().await.map_err(|e| e.to_string())?;
    store_note(&mut conn, &id, &author, &doc, true)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Resolved::Note(id))
}
