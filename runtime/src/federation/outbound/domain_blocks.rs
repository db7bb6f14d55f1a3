//! User-level domain blocks (R-MAPI-6, Mastodon's `/api/v1/domain_blocks`): an account
//! hides a whole server. What Mastodon does after one (its `AfterBlockDomainFromAccountService`)
//! happens here in the block's transaction: the account stops following that server's
//! accounts (`Undo(Follow)` to each), and its followers and waiting follow requests from there
//! are dropped, each told with a `Reject` of its `Follow`. Their posts, boosts and
//! notifications are hidden from then on when read (`statuses::hidden`), and a new `Follow`
//! from there is refused (`inbound::follows`). Nothing is sent about the block itself, as on
//! Mastodon.

use sqlx::PgConnection;

use crate::accounts::Account;
use crate::federation::Federation;
use crate::federation::actors::actor::RemoteActor;
use crate::federation::outbound::follows::answer_follow;
use crate::federation::outbound::relationships::{self, Target};

/// A domain as a client names it, as stored: lowercased, IDNs in their ASCII form, no scheme,
/// path or port. `None` for something that is not a host name or an IP address.
pub fn normalize(raw: &str) -> Option<String> {
    let raw = raw.trim().trim_start_matches("*.").trim_end_matches('.');
    if raw.is_empty() || raw.contains(['/', '@', ':', ' ', '?', '#']) {
        return None;
    }
    match url::Host::parse(raw).ok()? {
        url::Host::Domain(d) => Some(d.to_lowercase()),
        url::Host::Ipv4(ip) => Some(ip.to_string()),
        url::Host::Ipv6(_) => None,
    }
}

/// A follower (or a follow request) removed, with the `Follow` to reject.
#[derive(sqlx::FromRow)]
struct Follower {
    #[sqlx(flatten)]
    actor: RemoteActor,
    follow_activity_id: String,
}

/// What a domain block did to the account's relationships.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    pub unfollowed: usize,
    pub followers: usize,
    pub requests: usize,
}

/// `account` blocks `domain` (normalized). Blocking a domain blocked already changes nothing
/// more; relationships made since are dropped again.
pub async fn block(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    domain: &str,
) -> Result<Dropped, sqlx::Error> {
    sqlx::query(
        "INSERT INTO account_domain_blocks (account_id, domain) VALUES ($1, $2)
         ON CONFLICT DO NOTHING",
    )
    .bind(account.id)
    .bind(domain)
    .execute(&mut *tx)
    .await?;
    let on_domain = "hollo_host_in(hollo_iri_host(ra.iri), ARRAY[$2])";
    let mut dropped = Dropped::default();

    // Our follows of their accounts: undone, each with its `Undo`.
    let followed: Vec<RemoteActor> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT ra.iri, ra.inbox, ra.shared_inbox, ra.key_id, ra.public_key_pem
           FROM follows f JOIN remote_actors ra ON ra.iri = f.target_iri
          WHERE f.account_id = $1 AND {on_domain}"
    )))
    .bind(account.id)
    .bind(domain)
    .fetch_all(&mut *tx)
    .await?;
    for actor in followed {
        relationships::unfollow(tx, fed, account, &Target::Remote(actor)).await?;
        dropped.unfollowed += 1;
    }

    // Their follows of us, and their waiting requests: dropped, each with a `Reject`.
    for table in ["followers", "follow_requests"] {
        let gone: Vec<Follower> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {table} f USING remote_actors ra
              WHERE f.account_id = $1 AND ra.iri = f.actor_iri AND {on_domain}
              RETURNING ra.iri, ra.inbox, ra.shared_inbox, ra.key_id, ra.public_key_pem,
                        f.follow_activity_id"
        )))
        .bind(account.id)
        .bind(domain)
        .fetch_all(&mut *tx)
        .await?;
        for f in &gone {
            answer_follow(tx, fed, account, &f.actor, &f.follow_activity_id, "Reject").await?;
        }
        match table {
            "followers" => dropped.followers = gone.len(),
            _ => dropped.requests = gone.len(),
        }
    }
    // The account's open streams stop showing the domain.
    crate::streaming::emit::relationship(tx, account.id).await?;
    Ok(dropped)
}

/// Lifts `account`'s block of `domain`; `false` when there was none. What was dropped stays
/// dropped (as on Mastodon); what is hidden shows again.
pub async fn unblock(
    tx: &mut PgConnection,
    account: &Account,
    domain: &str,
) -> Result<bool, sqlx::Error> {
    let gone =
        sqlx::query("DELETE FROM account_domain_blocks WHERE account_id = $1 AND domain = $2")
            .bind(account.id)
            .bind(domain)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            > 0;
    if gone {
        crate::streaming::emit::relationship(tx, account.id).await?;
    }
    Ok(gone)
}

/// The blocked domains of `$1`, paged by the block's id (the caller's cursor conditions
/// complete it).
pub const LIST_SELECT: &str =
    "SELECT id, domain FROM account_domain_blocks WHERE account_id = $1 AND";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_normalized_and_junk_refused() {
        assert_eq!(normalize(" Example.COM "), Some("example.com".into()));
        assert_eq!(normalize("*.example.com"), Some("example.com".into()));
        assert_eq!(normalize("example.com."), Some("example.com".into()));
        assert_eq!(
            normalize("bücher.example"),
            Some("xn--bcher-kva.example".into())
        );
        assert_eq!(normalize("127.0.0.1"), Some("127.0.0.1".into()));
        for bad in [
            "",
            " ",
            "https://example.com",
            "a@b.c",
            "example.com:443",
            "a b",
            "[::1]",
        ] {
            assert_eq!(normalize(bad), None, "{bad:?}");
        }
    }
}
