//! Mastodon's Report entity (<https://docs.joinmastodon.org/entities/Report/>), what the
//! reporter gets back, and the admin's view of one (`Admin::Report`, the fields a
//! single-admin server has: no assignees, no rules).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::account::{self, Account};
use super::status::{self, Status};
use super::{Site, Urls};
use crate::federation::actors::directory::{self, Found, RemoteAccount};
use crate::reports::Report as Row;

/// What the reporter's and the admin's entities both say of a report, in Mastodon's order.
#[derive(Clone, Debug, Serialize)]
pub struct ReportCore {
    pub id: String,
    pub action_taken: bool,
    pub action_taken_at: Option<DateTime<Utc>>,
    pub category: String,
    pub comment: String,
    pub forwarded: bool,
    pub created_at: DateTime<Utc>,
}

impl From<&Row> for ReportCore {
    fn from(row: &Row) -> Self {
        ReportCore {
            id: row.id.to_string(),
            action_taken: row.action_taken_at.is_some(),
            action_taken_at: row.action_taken_at,
            category: row.category.clone(),
            comment: row.comment.clone(),
            forwarded: row.forwarded,
            created_at: row.created_at,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub core: ReportCore,
    pub status_ids: Option<Vec<String>>,
    pub rule_ids: Option<Vec<String>>,
    pub target_account: Account,
}

/// An account in the admin's view: who it is and its Account entity (Mastodon's
/// `Admin::Account`, without the sign-up details a single-user server does not keep).
#[derive(Clone, Debug, Serialize)]
pub struct AdminAccount {
    pub id: String,
    pub username: String,
    /// `None` for one of ours.
    pub domain: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    pub account: Option<Account>,
}

#[derive(Clone, Debug, Serialize)]
pub struct AdminReport {
    #[serde(flatten)]
    pub core: ReportCore,
    pub updated_at: DateTime<Utc>,
    /// The reporter: a local account, or the remote actor whose `Flag` it was.
    pub account: AdminAccount,
    pub target_account: AdminAccount,
    pub assigned_account: Option<AdminAccount>,
    pub action_taken_by_account: Option<AdminAccount>,
    pub statuses: Vec<Status>,
    pub rules: Vec<String>,
}

/// The reporter's entity of a report it made about `target`.
pub fn of(row: &Row, target: Account) -> Report {
    Report {
        core: row.into(),
        status_ids: (!row.status_ids.is_empty())
            .then(|| row.status_ids.iter().map(Uuid::to_string).collect()),
        rule_ids: None,
        target_account: target,
    }
}

/// Everyone a page of reports names, in a fixed number of queries.
struct People {
    found: HashMap<Uuid, Found>,
    remote: HashMap<String, RemoteAccount>,
    locals: HashMap<Uuid, Account>,
}

impl People {
    async fn load(pool: &PgPool, urls: Urls<'_>, rows: &[Row]) -> Result<People, sqlx::Error> {
        let mut ids: Vec<Uuid> = rows.iter().map(|r| r.target_account_id).collect();
        ids.extend(rows.iter().filter_map(|r| r.account_id));
        let found = directory::by_ids(pool, &ids).await?;
        let iris: Vec<String> = rows.iter().filter_map(|r| r.reporter_iri.clone()).collect();
        let remote = directory::remotes_by_iri(pool, &iris)
            .await?
            .into_iter()
            .map(|r| (r.iri.clone(), r))
            .collect();
        let local_ids: Vec<Uuid> = found
            .values()
            .filter_map(|f| match f {
                Found::Local(a) => Some(a.id),
                Found::Remote(_) => None,
            })
            .collect();
        let locals = account::locals(&mut *pool.acquire().await?, urls, &local_ids).await?;
        Ok(People {
            found,
            remote,
            locals,
        })
    }

    fn admin(&self, urls: Urls<'_>, found: Option<&Found>, fallback: &str) -> AdminAccount {
        match found {
            Some(Found::Local(a)) => AdminAccount {
                id: a.id.to_string(),
                username: a.username.clone(),
                domain: None,
                created_at: self.locals.get(&a.id).map(|e| e.created_at),
                account: self.locals.get(&a.id).cloned(),
            },
            Some(Found::Remote(r)) => remote_admin(urls, r),
            // Gone since (an account deleted, an actor never stored): its IRI is what we know.
            None => AdminAccount {
                id: String::new(),
                username: fallback.to_string(),
                domain: None,
                created_at: None,
                account: None,
            },
        }
    }

    fn target(&self, urls: Urls<'_>, row: &Row) -> AdminAccount {
        self.admin(
            urls,
            self.found.get(&row.target_account_id),
            &row.target_iri,
        )
    }

    fn reporter(&self, urls: Urls<'_>, row: &Row) -> AdminAccount {
        match (&row.account_id, &row.reporter_iri) {
            (Some(id), _) => self.admin(urls, self.found.get(id), ""),
            (None, Some(iri)) => match self.remote.get(iri) {
                Some(r) => remote_admin(urls, r),
                None => self.admin(urls, None, iri),
            },
            (None, None) => self.admin(urls, None, ""),
        }
    }
}

fn remote_admin(urls: Urls<'_>, r: &RemoteAccount) -> AdminAccount {
    let acct = r.acct();
    let (username, domain) = match acct.split_once('@') {
        Some((u, d)) => (u.to_string(), Some(d.to_string())),
        None => (acct.clone(), None),
    };
    AdminAccount {
        id: r.id.to_string(),
        username,
        domain,
        created_at: None,
        account: Some(account::remote(urls, r)),
    }
}

/// The admin's entities of `rows`, in their order. A report's statuses are shown as the one who
/// could read them sees them: its local reporter, or for a received `Flag` our reported account.
pub async fn admin(
    pool: &PgPool,
    site: Site<'_>,
    rows: &[Row],
) -> Result<Vec<AdminReport>, sqlx::Error> {
    let people = People::load(pool, site.urls, rows).await?;
    let mut conn = pool.acquire().await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let viewer = row.account_id.or(Some(row.target_account_id));
        let statuses = status::render(&mut conn, site, viewer, &row.status_ids).await?;
        out.push(AdminReport {
            core: row.into(),
            updated_at: row.updated_at,
            account: people.reporter(site.urls, row),
            target_account: people.target(site.urls, row),
            assigned_account: None,
            action_taken_by_account: None,
            statuses,
            rules: Vec::new(),
        });
    }
    Ok(out)
}
