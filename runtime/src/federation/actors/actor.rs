//! Actor documents: the ones we serve for local accounts, and the remote ones (with their keys)
//! we fetch through the guard and cache in PostgreSQL.

use serde_json::Value;
use sqlx::PgPool;

use crate::federation::Federation;
use crate::federation::iri::{same_origin, without_fragment};
use crate::federation::transport::fetch::FetchError;
use crate::federation::transport::signature::SigningKey;

pub use crate::federation::context::{AS_CONTEXT, SECURITY_CONTEXT};
pub use crate::federation::vocab::PUBLIC;

/// The id of an ActivityStreams reference: a string, or an object's `id`.
pub fn id_of(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s.as_str()),
        Value::Object(o) => o.get("id").and_then(Value::as_str),
        _ => None,
    }
}

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct RemoteActor {
    pub iri: String,
    pub inbox: String,
    pub shared_inbox: Option<String>,
    pub key_id: Option<String>,
    pub public_key_pem: Option<String>,
}

impl RemoteActor {
    /// Where to deliver: the shared inbox when the actor has one (one POST per server).
    pub fn delivery_inbox(&self) -> &str {
        self.shared_inbox.as_deref().unwrap_or(&self.inbox)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ActorError {
    #[error("{0}")]
    Fetch(#[from] FetchError),
    #[error("invalid actor document: {0}")]
    Invalid(String),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// Extracts what we use from an actor document fetched from `fetched_from`.
pub fn parse_actor(doc: &Value, fetched_from: &str) -> Result<RemoteActor, ActorError> {
    let iri = doc
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| ActorError::Invalid("no id".into()))?;
    if !same_origin(iri, fetched_from) {
        return Err(ActorError::Invalid(format!(
            "{fetched_from} served an actor of another origin ({iri})"
        )));
    }
    let inbox = doc
        .get("inbox")
        .and_then(Value::as_str)
        .filter(|i| same_origin(i, iri))
        .ok_or_else(|| ActorError::Invalid("no inbox on the actor's origin".into()))?;
    let shared_inbox = doc
        .get("endpoints")
        .and_then(|e| e.get("sharedInbox"))
        .and_then(Value::as_str)
        .filter(|i| same_origin(i, iri))
        .map(str::to_string);
    let key = first_key(doc);
    Ok(RemoteActor {
        iri: iri.to_string(),
        inbox: inbox.to_string(),
        shared_inbox,
        key_id: key
            .and_then(|k| k.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string),
        public_key_pem: key
            .and_then(|k| k.get("publicKeyPem"))
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// The keys an actor document lists under `publicKey` (one object or an array of them).
fn listed_keys(doc: &Value) -> &[Value] {
    match doc.get("publicKey") {
        Some(Value::Array(a)) => a,
        Some(v @ Value::Object(_)) => std::slice::from_ref(v),
        _ => &[],
    }
}

fn first_key(doc: &Value) -> Option<&Value> {
    listed_keys(doc).first()
}

/// The PEM the actor document lists for exactly `key_id`, if it lists that key.
fn listed_pem<'a>(doc: &'a Value, key_id: &str) -> Option<&'a str> {
    listed_keys(doc)
        .iter()
        .find(|k| k.get("id").and_then(Value::as_str) == Some(key_id))?
        .get("publicKeyPem")
        .and_then(Value::as_str)
}

pub async fn store_actor(
    pool: &PgPool,
    actor: &RemoteActor,
    doc: &Value,
    handle: Option<&str>,
) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    store_actor_in(&mut tx, actor, doc, handle).await?;
    tx.commit().await
}

/// Upserts the actor and its key inside the caller's transaction. A successful fetch or an
/// `Update` from the actor itself also clears an earlier 410 (the account came back).
pub async fn store_actor_in(
    conn: &mut sqlx::PgConnection,
    actor: &RemoteActor,
    doc: &Value,
    handle: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO remote_actors (iri, handle, inbox, shared_inbox, key_id, public_key_pem, document, fetched_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, now())
         ON CONFLICT (iri) DO UPDATE SET handle = COALESCE(EXCLUDED.handle, remote_actors.handle),
            inbox = EXCLUDED.inbox, shared_inbox = EXCLUDED.shared_inbox, key_id = EXCLUDED.key_id,
            public_key_pem = EXCLUDED.public_key_pem, document = EXCLUDED.document, fetched_at = now(),
            gone_at = NULL",
    )
    .bind(&actor.iri)
    .bind(handle)
    .bind(&actor.inbox)
    .bind(&actor.shared_inbox)
    .bind(&actor.key_id)
    .bind(&actor.public_key_pem)
    .bind(doc)
    .execute(&mut *conn)
    .await?;
    if let (Some(key_id), Some(pem)) = (&actor.key_id, &actor.public_key_pem)
        && same_origin(key_id, &actor.iri)
    {
        store_key(conn, key_id, &actor.iri, pem).await?;
    }
    Ok(())
}

async fn store_key(
    conn: &mut sqlx::PgConnection,
    key_id: &str,
    owner: &str,
    pem: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO remote_keys (key_id, owner, public_key_pem, fetched_at) VALUES ($1, $2, $3, now())
         ON CONFLICT (key_id) DO UPDATE SET owner = EXCLUDED.owner,
            public_key_pem = EXCLUDED.public_key_pem, fetched_at = now()",
    )
    .bind(key_id)
    .bind(owner)
    .bind(pem)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Fetches an actor (signed when a key is given) and caches it with its key. The document must
/// be served from its own id (`get_canonical`), so no fetch stores an actor under an id it was
/// not fetched from.
pub async fn fetch_actor(
    pool: &PgPool,
    fed: &Federation,
    iri: &str,
    signer: Option<&SigningKey>,
    handle: Option<&str>,
) -> Result<RemoteActor, ActorError> {
    let doc = fed.fetch.get_canonical(iri, signer).await?;
    let id = doc.get("id").and_then(Value::as_str).unwrap_or_default();
    let actor = parse_actor(&doc, id)?;
    store_actor(pool, &actor, &doc, handle).await?;
    Ok(actor)
}

/// The cached actor, or a fresh fetch when we have none.
pub async fn known_actor(
    pool: &PgPool,
    fed: &Federation,
    iri: &str,
    signer: Option<&SigningKey>,
) -> Result<RemoteActor, ActorError> {
    let row: Option<RemoteActor> = sqlx::query_as(
        "SELECT iri, inbox, shared_inbox, key_id, public_key_pem FROM remote_actors WHERE iri = $1",
    )
    .bind(iri)
    .fetch_optional(pool)
    .await?;
    match row {
        Some(actor) => Ok(actor),
        None => fetch_actor(pool, fed, iri, signer, None).await,
    }
}

/// A remote public key: who owns it and its PEM.
#[derive(Clone, Debug)]
pub struct RemoteKey {
    pub owner: String,
    pub pem: String,
    /// Seconds since it was fetched; a failing signature refetches only keys older than a
    /// minute, so forged requests cannot make us hammer a remote server.
    pub age_seconds: f64,
}

pub async fn cached_key(pool: &PgPool, key_id: &str) -> Result<Option<RemoteKey>, sqlx::Error> {
    let row: Option<(String, String, f64)> = sqlx::query_as(
        "SELECT owner, public_key_pem, EXTRACT(EPOCH FROM now() - fetched_at)::float8
           FROM remote_keys WHERE key_id = $1",
    )
    .bind(key_id)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(owner, pem, age_seconds)| RemoteKey {
        owner,
        pem,
        age_seconds,
    }))
}

/// Fetches `key_id` and caches it once its owner has confirmed it (the class of Mastodon's
/// CVE-2024-23832): a key is trusted only as listed — same id, same PEM — by the actor
/// document its owner serves from the owner's own id, on the key's origin.
///
/// `key_id` may name the actor itself (`…/users/a#main-key` is served by `…/users/a`), a
/// URL that answers with the actor (GoToSocial's `…/main-key`), or a bare key document
/// (`{id, owner, publicKeyPem}`); the last two are confirmed by fetching the owner. Redirects,
/// content type and document ids are checked by `FetchClient::get_object`. Only the key
/// asked for is stored, under its own id.
pub async fn fetch_key(
    pool: &PgPool,
    fed: &Federation,
    key_id: &str,
    signer: Option<&SigningKey>,
) -> Result<RemoteKey, ActorError> {
    let url = without_fragment(key_id);
    let fetched = fed.fetch.get_object(url, signer).await?;
    let doc = &fetched.doc;
    let doc_id = fetched.id();
    let is_actor = doc.get("publicKey").is_some();
    let owner_doc = if is_actor && doc_id == url {
        // The owner itself answered, from its own id.
        fetched.doc.clone()
    } else {
        let owner = if is_actor {
            doc_id
        } else {
            if doc_id != key_id {
                return Err(ActorError::Invalid(format!(
                    "{url} served key {doc_id}, not {key_id}"
                )));
            }
            doc.get("owner")
                .and_then(Value::as_str)
                .ok_or_else(|| ActorError::Invalid("key has no owner".into()))?
        };
        if !same_origin(owner, key_id) {
            return Err(ActorError::Invalid(format!(
                "key {key_id} claims an owner of another origin ({owner})"
            )));
        }
        fed.fetch.get_canonical(owner, signer).await?
    };
    let owner = owner_doc
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let pem = listed_pem(&owner_doc, key_id)
        .ok_or_else(|| ActorError::Invalid(format!("{owner} does not list key {key_id}")))?;
    if !is_actor {
        let claimed = doc.get("publicKeyPem").and_then(Value::as_str);
        if claimed.map(str::trim) != Some(pem.trim()) {
            return Err(ActorError::Invalid(format!(
                "{owner} lists key {key_id} with another PEM than the key document"
            )));
        }
    }
    let actor = parse_actor(&owner_doc, owner)?;
    let mut tx = pool.begin().await?;
    store_actor_in(&mut tx, &actor, &owner_doc, None).await?;
    store_key(&mut tx, key_id, owner, pem).await?;
    tx.commit().await?;
    Ok(RemoteKey {
        owner: owner.to_string(),
        pem: pem.to_string(),
        age_seconds: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn actors_must_live_on_the_host_that_served_them() {
        let doc = json!({
            "id": "https://m.example/users/a", "inbox": "https://m.example/users/a/inbox",
            "endpoints": {"sharedInbox": "https://m.example/inbox"},
            "publicKey": {"id": "https://m.example/users/a#main-key", "publicKeyPem": "PEM"}
        });
        let a = parse_actor(&doc, "https://m.example/users/a").expect("valid");
        assert_eq!(a.delivery_inbox(), "https://m.example/inbox");
        assert_eq!(
            a.key_id.as_deref(),
            Some("https://m.example/users/a#main-key")
        );
        assert!(parse_actor(&doc, "https://evil.example/users/a").is_err());
        // Another port of the same host is another server (R-AP-1: same origin).
        assert!(parse_actor(&doc, "https://m.example:8443/users/a").is_err());
        let bad_inbox =
            json!({"id": "https://m.example/users/a", "inbox": "https://evil.example/inbox"});
        assert!(parse_actor(&bad_inbox, "https://m.example/users/a").is_err());
    }

    #[test]
    fn only_the_key_with_the_exact_id_is_listed() {
        let doc = json!({"publicKey": [
            {"id": "https://m.example/users/a#main-key", "publicKeyPem": "A"},
            {"id": "https://m.example/users/a#other", "publicKeyPem": "B"}
        ]});
        assert_eq!(
            listed_pem(&doc, "https://m.example/users/a#other"),
            Some("B")
        );
        assert_eq!(listed_pem(&doc, "https://m.example/users/a#nope"), None);
        let one = json!({"publicKey": {"id": "https://m/k", "publicKeyPem": "C"}});
        assert_eq!(listed_pem(&one, "https://m/k"), Some("C"));
    }

    #[test]
    fn ids_come_from_strings_or_objects() {
        assert_eq!(id_of(&json!("https://x/1")), Some("https://x/1"));
        assert_eq!(id_of(&json!({"id": "https://x/2"})), Some("https://x/2"));
        assert_eq!(id_of(&json!(3)), None);
    }
}
