//! Local accounts' profiles: what `update_credentials` changes, the client API shows and the
//! actor document serves (display name, note, locked, bot, profile fields, and the avatar and
//! header as `icon`/`image` — stored by `media::profile_images`, R-MAPI-6). Text is
//! stored as the user typed it and published as escaped HTML (`html::text_to_html`), like
//! statuses.
//!
//! A change is announced to the followers as an `Update` of the actor, queued in the
//! transaction that stores it, so a follower's server never misses a committed change.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use crate::accounts::Account;
use crate::federation::Federation;
use crate::federation::context;
use crate::federation::outbound::delivery::{Recipient, queue_activity};
use crate::federation::vocab::PUBLIC;
use crate::html;
use crate::media::profile_images::{self, ImagesUpdate};

/// Mastodon's limits for profile text (what its own server enforces).
pub const MAX_DISPLAY_NAME_CHARS: usize = 30;
pub const MAX_NOTE_CHARS: usize = 500;
pub const MAX_FIELDS: usize = 4;
pub const MAX_FIELD_NAME_CHARS: usize = 255;
pub const MAX_FIELD_VALUE_CHARS: usize = 255;

/// One profile field ("Website" → "https://…"), plain text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    pub value: String,
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Profile {
    pub display_name: String,
    pub note: String,
    pub locked: bool,
    pub bot: bool,
    #[sqlx(json)]
    pub fields: Vec<Field>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub avatar_url: Option<String>,
    pub avatar_media_type: Option<String>,
    pub header_url: Option<String>,
    pub header_media_type: Option<String>,
}

/// The columns of a [`Profile`].
const PROFILE_COLUMNS: &str = "display_name, note, locked, bot, fields, created_at, updated_at,
    avatar_url, avatar_media_type, header_url, header_media_type";

pub async fn load<'e>(
    exec: impl PgExecutor<'e>,
    account: Uuid,
) -> Result<Option<Profile>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {PROFILE_COLUMNS} FROM accounts WHERE id = $1"
    )))
    .bind(account)
    .fetch_optional(exec)
    .await
}

/// What an `update_credentials` request changes; `None` leaves a value as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileUpdate {
    pub display_name: Option<String>,
    pub note: Option<String>,
    pub locked: Option<bool>,
    pub bot: Option<bool>,
    pub fields: Option<Vec<Field>>,
    /// New or removed avatar and header, already on the drive.
    pub images: ImagesUpdate,
}

impl ProfileUpdate {
    /// Mastodon's rules: bounded lengths, at most four fields; fields with neither name nor
    /// value are dropped (that is how apps remove one). `Err` names the offending value.
    pub fn validate(mut self) -> Result<ProfileUpdate, String> {
        let too_long = |what: &str, s: &str, max: usize| {
            (s.chars().count() > max).then(|| format!("{what} is longer than {max} characters"))
        };
        if let Some(e) = self
            .display_name
            .as_deref()
            .and_then(|d| too_long("display_name", d, MAX_DISPLAY_NAME_CHARS))
        {
            return Err(e);
        }
        if let Some(e) = self
            .note
            .as_deref()
            .and_then(|n| too_long("note", n, MAX_NOTE_CHARS))
        {
            return Err(e);
        }
        if let Some(fields) = self.fields.take() {
            let fields: Vec<Field> = fields
                .into_iter()
                .filter(|f| !(f.name.trim().is_empty() && f.value.trim().is_empty()))
                .collect();
            if fields.len() > MAX_FIELDS {
                return Err(format!("at most {MAX_FIELDS} profile fields"));
            }
            for f in &fields {
                if let Some(e) = too_long("a field name", &f.name, MAX_FIELD_NAME_CHARS)
                    .or_else(|| too_long("a field value", &f.value, MAX_FIELD_VALUE_CHARS))
                {
                    return Err(e);
                }
            }
            self.fields = Some(fields);
        }
        Ok(self)
    }
}

/// What [`update_in`] did: the new profile, and the drive keys of the images it replaced,
/// which the caller deletes once the transaction has committed.
pub struct Updated {
    pub profile: Profile,
    pub replaced_images: Vec<String>,
}

/// Applies a validated update inside `tx` and queues the `Update` of the actor to the
/// followers in the same transaction.
pub async fn update_in(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    update: &ProfileUpdate,
) -> Result<Updated, sqlx::Error> {
    let replaced_images = profile_images::apply(&mut *tx, account.id, &update.images).await?;
    let fields = update.fields.as_ref().map(|f| json!(f));
    let profile: Profile = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE accounts SET display_name = COALESCE($2, display_name), note = COALESCE($3, note),
                locked = COALESCE($4, locked), bot = COALESCE($5, bot),
                fields = COALESCE($6, fields), updated_at = now()
          WHERE id = $1
         RETURNING {PROFILE_COLUMNS}"
    )))
    .bind(account.id)
    .bind(&update.display_name)
    .bind(&update.note)
    .bind(update.locked)
    .bind(update.bot)
    .bind(fields)
    .fetch_one(&mut *tx)
    .await?;
    if let Some(fields) = &update.fields {
        // A changed value loses its verification now; URLs are checked again by a task.
        let values: Vec<String> = fields.iter().map(|f| f.value.clone()).collect();
        super::links::fields_changed(&mut *tx, account.id, &values).await?;
    }
    let to = followers(&mut *tx, account.id).await?;
    if !to.is_empty() {
        let key = fed
            .proof_key(&mut *tx, account.id)
            .await
            .map_err(|e| sqlx::Error::Protocol(format!("the account's proof key: {e:#}")))?;
        let actor = local_actor_document(fed, account, &profile, &key);
        let update = json!({
            "@context": actor["@context"],
            "id": fed.new_activity_id(),
            "type": "Update",
            "actor": fed.actor_iri(&account.username),
            "to": [PUBLIC],
            "cc": [fed.followers(&account.username)],
            "object": actor,
        });
        queue_activity(&mut *tx, fed, account.id, &update, &to).await?;
    }
    Ok(Updated {
        profile,
        replaced_images,
    })
}

/// An actor's `icon`/`image`: an `Image` with its type and URL.
fn image(url: Option<&str>, media_type: Option<&str>) -> Option<Value> {
    let url = url?;
    Some(json!({ "type": "Image", "mediaType": media_type, "url": url }))
}

/// The note as HTML, rendered like a status (escaped text, paragraphs, links, hashtags).
pub fn note_html(fed: &Federation, account: &Account, profile: &Profile) -> String {
    crate::content::render(&profile.note, &fed.actor_iri(&account.username), &[]).html
}

/// The remote followers of an account with a known inbox.
pub async fn followers(
    conn: &mut PgConnection,
    account: Uuid,
) -> Result<Vec<Recipient>, sqlx::Error> {
    sqlx::query_as(
        "SELECT a.iri AS actor_iri, a.inbox, a.shared_inbox FROM followers f
           JOIN remote_actors a ON a.iri = f.actor_iri
          WHERE f.account_id = $1 AND a.gone_at IS NULL",
    )
    .bind(account)
    .fetch_all(&mut *conn)
    .await
}

/// The actor document of a local account, with its profile: display name, note and fields as
/// escaped HTML, `manuallyApprovesFollowers` for a locked account, `Service` for a bot.
/// A local account's actor document, listing its HTTP-signature key (`publicKey`) and its
/// FEP-8b32 proof key (`assertionMethod`).
pub fn local_actor_document(
    fed: &Federation,
    account: &Account,
    profile: &Profile,
    proof_key: &crate::federation::crypto::proofs::ProofKey,
) -> Value {
    let actor = fed.actor_iri(&account.username);
    let name = if profile.display_name.is_empty() {
        &account.username
    } else {
        &profile.display_name
    };
    let attachment: Vec<Value> = profile
        .fields
        .iter()
        .map(|f| {
            json!({ "type": "PropertyValue", "name": f.name,
                    "value": html::escape(&f.value) })
        })
        .collect();
    let mut doc = json!({
        "@context": context::ld(),
        "id": actor,
        "type": if profile.bot { "Service" } else { "Person" },
        "preferredUsername": account.username,
        "name": name,
        "summary": note_html(fed, account, profile),
        "url": actor,
        "published": profile.created_at,
        "inbox": fed.inbox(&account.username),
        "outbox": fed.outbox(&account.username),
        "followers": fed.followers(&account.username),
        "following": fed.following(&account.username),
        "featured": fed.featured(&account.username),
        "featuredTags": fed.featured_tags(&account.username),
        "manuallyApprovesFollowers": profile.locked,
        "discoverable": true,
        "attachment": attachment,
        "endpoints": { "sharedInbox": fed.shared_inbox() },
        "publicKey": {
            "id": fed.key_id(&account.username),
            "owner": actor,
            "publicKeyPem": account.public_key_pem,
        },
        "assertionMethod": crate::federation::crypto::proofs::assertion_method(&actor, proof_key),
    });
    // Absent, not null, when there is none: Mastodon then shows its own placeholder.
    for (key, img) in [
        (
            "icon",
            image(
                profile.avatar_url.as_deref(),
                profile.avatar_media_type.as_deref(),
            ),
        ),
        (
            "image",
            image(
                profile.header_url.as_deref(),
                profile.header_media_type.as_deref(),
            ),
        ),
    ] {
        if let (Some(img), Some(o)) = (img, doc.as_object_mut()) {
            o.insert(key.to_string(), img);
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: &str, v: &str) -> Field {
        Field {
            name: n.into(),
            value: v.into(),
        }
    }

    #[test]
    fn profile_limits_are_mastodons() {
        let ok = ProfileUpdate {
            display_name: Some("x".repeat(30)),
            note: Some("n".repeat(500)),
            fields: Some(vec![field("a", "1"), field("", ""), field("b", "")]),
            ..Default::default()
        }
        .validate()
        .expect("valid");
        assert_eq!(ok.fields.map(|f| f.len()), Some(2), "empty fields dropped");
        for bad in [
            ProfileUpdate {
                display_name: Some("é".repeat(31)),
                ..Default::default()
            },
            ProfileUpdate {
                note: Some("n".repeat(501)),
                ..Default::default()
            },
            ProfileUpdate {
                fields: Some((0..5).map(|i| field(&i.to_string(), "v")).collect()),
                ..Default::default()
            },
            ProfileUpdate {
                fields: Some(vec![field("a", &"v".repeat(256))]),
                ..Default::default()
            },
        ] {
            assert!(bad.clone().validate().is_err(), "{bad:?}");
        }
    }
}
