//! A local account's posting defaults (R-MAPI-6): what a status or a boost sent
//! without a visibility, a sensitivity or a language gets. Kept on `accounts`, changed through
//! `update_credentials`' `source[…]`, read by `GET /api/v1/preferences` and the
//! CredentialAccount's `source`.
//!
//! Leaving `visibility` out must never widen the audience: a followers-only default makes a
//! post (and a boost) followers-only, as on Mastodon.

use sqlx::PgExecutor;
use uuid::Uuid;

use super::Visibility;

/// The posting defaults of one account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Posting {
    pub visibility: Visibility,
    pub sensitive: bool,
    /// ISO 639 code, or none (apps then let the device's language decide).
    pub language: Option<String>,
}

impl Default for Posting {
    fn default() -> Self {
        Posting {
            visibility: Visibility::Public,
            sensitive: false,
            language: None,
        }
    }
}

/// What an `update_credentials` request changes of them; `None` leaves a value as it is.
/// `language: Some(None)` clears the language (an empty `source[language]`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PostingUpdate {
    pub visibility: Option<Visibility>,
    pub sensitive: Option<bool>,
    pub language: Option<Option<String>>,
}

impl PostingUpdate {
    pub fn is_empty(&self) -> bool {
        self.visibility.is_none() && self.sensitive.is_none() && self.language.is_none()
    }

    /// `source[privacy]`: public, unlisted or private (Mastodon refuses direct as a default).
    pub fn privacy(value: &str) -> Result<Visibility, String> {
        match Visibility::parse(value) {
            Some(Visibility::Direct) | None => Err(format!(
                "source[privacy] {value:?} is not one of public, unlisted, private"
            )),
            Some(v) => Ok(v),
        }
    }

    /// `source[language]`: an ISO 639 code (`en`, `ast`, `zh-TW`); empty clears it.
    pub fn language(value: &str) -> Result<Option<String>, String> {
        let value = value.trim();
        if value.is_empty() {
            return Ok(None);
        }
        let (code, region) = match value.split_once('-') {
            Some((c, r)) => (c, Some(r)),
            None => (value, None),
        };
        let code_ok = (2..=3).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_lowercase());
        let region_ok = region.is_none_or(|r| {
            (2..=4).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_alphabetic())
        });
        if code_ok && region_ok {
            Ok(Some(value.to_string()))
        } else {
            Err(format!(
                "source[language] {value:?} is not an ISO 639 language code"
            ))
        }
    }
}

#[derive(sqlx::FromRow)]
struct Row {
    default_visibility: String,
    default_sensitive: bool,
    default_language: Option<String>,
}

impl From<Row> for Posting {
    fn from(r: Row) -> Self {
        Posting {
            // The column's CHECK allows only what `parse` reads.
            visibility: Visibility::parse(&r.default_visibility).unwrap_or(Visibility::Public),
            sensitive: r.default_sensitive,
            language: r.default_language,
        }
    }
}

/// The account's defaults (Mastodon's for an account that is gone).
pub async fn load<'e>(exec: impl PgExecutor<'e>, account: Uuid) -> Result<Posting, sqlx::Error> {
    let row: Option<Row> = sqlx::query_as(
        "SELECT default_visibility, default_sensitive, default_language
           FROM accounts WHERE id = $1",
    )
    .bind(account)
    .fetch_optional(exec)
    .await?;
    Ok(row.map(Posting::from).unwrap_or_default())
}

/// Applies `update`; returns the defaults after it.
pub async fn update<'e>(
    exec: impl PgExecutor<'e>,
    account: Uuid,
    update: &PostingUpdate,
) -> Result<Posting, sqlx::Error> {
    let row: Row = sqlx::query_as(
        "UPDATE accounts
            SET default_visibility = coalesce($2, default_visibility),
                default_sensitive = coalesce($3, default_sensitive),
                default_language = CASE WHEN $4 THEN $5 ELSE default_language END
          WHERE id = $1
         RETURNING default_visibility, default_sensitive, default_language",
    )
    .bind(account)
    .bind(update.visibility.map(Visibility::as_str))
    .bind(update.sensitive)
    .bind(update.language.is_some())
    .bind(update.language.clone().flatten())
    .fetch_one(exec)
    .await?;
    Ok(row.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privacy_is_a_visibility_but_not_direct() {
        assert_eq!(PostingUpdate::privacy("private"), Ok(Visibility::Private));
        assert_eq!(PostingUpdate::privacy("unlisted"), Ok(Visibility::Unlisted));
        for bad in ["direct", "", "Private", "friends"] {
            assert!(PostingUpdate::privacy(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn languages_are_iso_639_codes() {
        assert_eq!(PostingUpdate::language("en"), Ok(Some("en".into())));
        assert_eq!(PostingUpdate::language("ast"), Ok(Some("ast".into())));
        assert_eq!(PostingUpdate::language("zh-TW"), Ok(Some("zh-TW".into())));
        assert_eq!(PostingUpdate::language(""), Ok(None));
        for bad in ["english", "EN", "e", "en-", "en_US", "<b>", "en-12"] {
            assert!(PostingUpdate::language(bad).is_err(), "{bad:?}");
        }
    }
}
