//! Remote actors' FEP-8b32 proof keys: the `assertionMethod` Multikeys their actor documents
//! list, fetched from the actor's own id (never from where a key URL redirects) and cached in
//! `remote_proof_keys`. A proof that fails against a cached key refetches it once, so a
//! rotated key is picked up; a key of one actor never verifies another actor's activity.

use ed25519_dalek::VerifyingKey;
use sqlx::PgPool;

use crate::federation::Federation;
use crate::federation::actors::actor::ActorError;
use crate::federation::crypto::proofs::{self, Claim, ProofError};
use crate::federation::iri::{same_origin, without_fragment};
use crate::federation::transport::signature::SigningKey;

#[derive(Debug, thiserror::Error)]
pub enum ProofCheckError {
    #[error("{0}")]
    Proof(#[from] ProofError),
    #[error("the proof's key: {0}")]
    Key(#[from] ActorError),
    #[error("the proof's key {key} does not belong to the activity's actor {actor}")]
    NotTheActors { key: String, actor: String },
}

/// Verifies `claim` over `document` as made by `actor`: the key must be one `actor` lists.
pub async fn check(
    pool: &PgPool,
    fed: &Federation,
    document: &serde_json::Value,
    claim: &Claim,
    actor: &str,
    signer: Option<&SigningKey>,
) -> Result<(), ProofCheckError> {
    let vm = &claim.verification_method;
    // Mastodon-style and Fedify-style key ids are fragments (or paths) of the actor's origin;
    // a key elsewhere cannot be the actor's.
    if !same_origin(vm, actor) {
        return Err(ProofCheckError::NotTheActors {
            key: vm.clone(),
            actor: actor.into(),
        });
    }
    if let Some(key) = cached(pool, vm, actor).await? {
        if proofs::verify(document, claim, &key).is_ok() {
            return Ok(());
        }
        tracing::debug!(key = %vm, "proof failed with the cached key; refetching it");
    }
    let key = fetch(pool, fed, vm, actor, signer).await?;
    proofs::verify(document, claim, &key)?;
    Ok(())
}

async fn cached(pool: &PgPool, vm: &str, actor: &str) -> Result<Option<VerifyingKey>, ActorError> {
    let row: Option<(String, Vec<u8>)> =
        sqlx::query_as("SELECT controller, public_key FROM remote_proof_keys WHERE id = $1")
            .bind(vm)
            .fetch_optional(pool)
            .await?;
    Ok(row
        .filter(|(controller, _)| controller == actor)
        .and_then(|(_, bytes)| <[u8; 32]>::try_from(bytes.as_slice()).ok())
        .and_then(|raw| VerifyingKey::from_bytes(&raw).ok()))
}

async fn fetch(
    pool: &PgPool,
    fed: &Federation,
    vm: &str,
    actor: &str,
    signer: Option<&SigningKey>,
) -> Result<VerifyingKey, ProofCheckError> {
    if without_fragment(vm) != actor {
        // A key document of its own (not a fragment of the actor) is still trusted only as
        // the actor's document lists it, so the actor is what we fetch.
        tracing::debug!(key = %vm, actor, "proof key is not a fragment of its actor");
    }
    let doc = fed
        .fetch
        .get_canonical(actor, signer)
        .await
        .map_err(ActorError::from)?;
    let key = proofs::listed_key(&doc, vm)?;
    sqlx::query(
        "INSERT INTO remote_proof_keys (id, controller, public_key) VALUES ($1, $2, $3)
         ON CONFLICT (id) DO UPDATE SET controller = EXCLUDED.controller,
                public_key = EXCLUDED.public_key, fetched_at = now()",
    )
    .bind(vm)
    .bind(actor)
    .bind(key.as_bytes().as_slice())
    .execute(pool)
    .await
    .map_err(ActorError::from)?;
    Ok(key)
}
