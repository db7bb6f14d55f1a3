//! The instance actor, as Mastodon and Fedify have it: one `Application` actor per server at
//! `<PUBLIC_URL>/actor`, whose key signs every fetch that no local account makes. Above all the
//! key fetches of the shared inbox: a server in authorized-fetch mode (GoToSocial by default,
//! Mastodon with `AUTHORIZED_FETCH`) refuses unsigned GETs, so without it activities such servers
//! send to `/inbox` could never be verified.
//!
//! Its key pair is made once per database and stored like an account's (the private half
//! encrypted under `SECRET_KEY`, the row's id as associated data). Creation is race-safe across
//! processes: whoever finds no row generates a pair and inserts it with `ON CONFLICT DO NOTHING`
//! on a single-row table, and everyone then uses the row that won.

use anyhow::{Context, Result, anyhow};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::federation::context;
use crate::federation::transport::signature::SigningKey;
use crate::federation::{Federation, crypto::keys};

/// The instance actor's key: what signs, and the public half its document publishes.
#[derive(Clone)]
pub struct InstanceKey {
    pub signing: SigningKey,
    pub public_key_pem: String,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: Uuid,
    public_key_pem: String,
    private_key_enc: Vec<u8>,
}

async fn stored(pool: &PgPool) -> Result<Option<Row>, sqlx::Error> {
    sqlx::query_as("SELECT id, public_key_pem, private_key_enc FROM instance_actor")
        .fetch_optional(pool)
        .await
}

/// Loads the stored key pair, creating it first when there is none.
pub(in crate::federation) async fn load_or_create(
    fed: &Federation,
    pool: &PgPool,
) -> Result<InstanceKey> {
    let row = match stored(pool).await? {
        Some(row) => row,
        None => {
            // RSA generation is CPU work of a second or so; keep it off the async workers.
            let key = tokio::task::spawn_blocking(keys::generate).await??;
            let id = Uuid::now_v7();
            let inserted = sqlx::query(
                "INSERT INTO instance_actor (id, public_key_pem, private_key_enc)
                 VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            )
            .bind(id)
            .bind(keys::public_key_pem(&key)?)
            .bind(fed.cipher().encrypt(id, &key)?)
            .execute(pool)
            .await?
            .rows_affected();
            if inserted == 1 {
                tracing::info!(actor = %fed.instance_actor_iri(), "created the instance actor's key pair");
            }
            // Another process may have won the race: its row is the one everybody uses.
            stored(pool)
                .await?
                .ok_or_else(|| anyhow!("the instance actor's row vanished after its insert"))?
        }
    };
    let key = fed
        .cipher()
        .decrypt(row.id, &row.private_key_enc)
        .context("the instance actor's private key")?;
    Ok(InstanceKey {
        signing: SigningKey::new(fed.instance_key_id(), &key).map_err(anyhow::Error::msg)?,
        public_key_pem: row.public_key_pem,
    })
}

/// The instance actor's document, served at `GET /actor`.
pub fn document(fed: &Federation, key: &InstanceKey) -> Value {
    let actor = fed.instance_actor_iri();
    json!({
        "@context": context::ld(),
        "id": actor,
        "type": "Application",
        "preferredUsername": fed.domain,
        "name": fed.domain,
        "url": actor,
        "inbox": fed.instance_inbox(),
        "outbox": fed.instance_outbox(),
        "manuallyApprovesFollowers": true,
        "discoverable": false,
        "endpoints": { "sharedInbox": fed.shared_inbox() },
        "publicKey": {
            "id": fed.instance_key_id(),
            "owner": actor,
            "publicKeyPem": key.public_key_pem,
        },
    })
}
