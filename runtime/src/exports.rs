//! CSV exports of an account's relationships in Mastodon's formats (R-MAPI-6), so what
//! the import (`tasks::imports`) takes in can leave again: following (with Mastodon's header
//! and each follow's options), followers, lists, mutes (with their header), blocks, bookmarks
//! and blocked domains. Accounts are written as `name@host` addresses: ours at this server's
//! domain, remote ones by WebFinger handle or preferred username at their host, as the client
//! API shows them; an actor we no longer know is left out (an import could not resolve it).
//!
//! A remote actor names itself: a `preferredUsername` of `=HYPERLINK(…)` would be a formula
//! to the spreadsheet a user opens the file in (issue 61, F10). Every cell that a spreadsheet
//! could read as one is written with a leading `'` ([`spreadsheet_text`]), which marks it as
//! text and is not shown; the import takes the mark off ([`unmarked`]), so our files round-trip.

use std::borrow::Cow;
use std::collections::HashMap;

use sqlx::PgPool;
use uuid::Uuid;

use crate::federation::Federation;
use crate::federation::actors::directory;

/// What can be exported, by the file name Mastodon gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Export {
    Following,
    Followers,
    Lists,
    Mutes,
    Blocks,
    Bookmarks,
    DomainBlocks,
}

impl Export {
    pub const NAMES: &'static str = "following.csv, followers.csv, lists.csv, mutes.csv, \
         blocked_accounts.csv, bookmarks.csv, blocked_domains.csv";

    /// `following.csv` and the like (`follows.csv`, `blocks.csv` and `domain_blocks.csv` too).
    pub fn parse(file: &str) -> Option<Export> {
        Some(match file.strip_suffix(".csv").unwrap_or(file) {
            "following" | "follows" => Export::Following,
            "followers" => Export::Followers,
            "lists" => Export::Lists,
            "mutes" => Export::Mutes,
            "blocked_accounts" | "blocks" => Export::Blocks,
            "bookmarks" => Export::Bookmarks,
            "blocked_domains" | "domain_blocks" => Export::DomainBlocks,
            _ => return None,
        })
    }
}

/// The `name@host` of each actor IRI: ours at `fed.domain`, remote ones as the directory
/// names them. IRIs of actors we do not know are missing from the map.
async fn addresses(
    pool: &PgPool,
    fed: &Federation,
    iris: &[String],
) -> Result<HashMap<String, String>, sqlx::Error> {
    let mut out = HashMap::new();
    for iri in iris {
        if let Some(name) = fed.urls().local_username(iri) {
            out.insert(iri.clone(), format!("{name}@{}", fed.domain));
        }
    }
    for r in directory::remotes_by_iri(pool, iris).await? {
        let acct = r.acct();
        out.insert(r.iri, acct);
    }
    Ok(out)
}

/// What makes a spreadsheet read a cell as a formula (OWASP's CSV injection list), and `'`,
/// the mark itself, so that a cell that starts with one is marked too and [`unmarked`] gives
/// back what was written.
fn needs_mark(c: char) -> bool {
    matches!(c, '=' | '+' | '-' | '@' | '\t' | '\r' | '\'')
}

/// `cell` as a spreadsheet must take it: text, never a formula.
pub fn spreadsheet_text(cell: &str) -> Cow<'_, str> {
    if cell.starts_with(needs_mark) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// A cell of an imported file without the mark [`spreadsheet_text`] put on it, trimmed as the
/// import trims every cell. A `'` before anything else is the cell's own (a list named `'90s`
/// in Mastodon's export).
pub fn unmarked(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if rest.starts_with(needs_mark) => rest.trim(),
        _ => cell,
    }
}

fn csv_of(rows: Vec<Vec<String>>) -> Result<String, sqlx::Error> {
    let mut w = csv::WriterBuilder::new()
        .flexible(true)
        .from_writer(Vec::new());
    for r in rows {
        w.write_record(r.iter().map(|c| spreadsheet_text(c).into_owned()))
            .map_err(|e| sqlx::Error::Protocol(format!("CSV: {e}")))?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| sqlx::Error::Protocol(format!("CSV: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The CSV of `what` for `account`, oldest relationship first (as Mastodon writes them).
pub async fn csv(
    pool: &PgPool,
    fed: &Federation,
    account: Uuid,
    what: Export,
) -> Result<String, sqlx::Error> {
    let bool_text = |b: bool| if b { "true" } else { "false" }.to_string();
    let mut rows: Vec<Vec<String>> = Vec::new();
    match what {
        Export::Following => {
            let follows: Vec<(String, bool, bool, Option<Vec<String>>)> = sqlx::query_as(
                "SELECT target_iri, show_reblogs, notify, languages FROM follows
                  WHERE account_id = $1 AND state = 'accepted' ORDER BY created_at, target_iri",
            )
            .bind(account)
            .fetch_all(pool)
            .await?;
            let iris: Vec<String> = follows.iter().map(|f| f.0.clone()).collect();
            let names = addresses(pool, fed, &iris).await?;
            rows.push(
                [
                    "Account address",
                    "Show boosts",
                    "Notify on new posts",
                    "Languages",
                ]
                .map(String::from)
                .to_vec(),
            );
            for (iri, reblogs, notify, languages) in follows {
                if let Some(name) = names.get(&iri) {
                    rows.push(vec![
                        name.clone(),
                        bool_text(reblogs),
                        bool_text(notify),
                        languages.unwrap_or_default().join(", "),
                    ]);
                }
            }
        }
        Export::Mutes => {
            let mutes: Vec<(String, bool)> = sqlx::query_as(
                "SELECT target_iri, notifications FROM account_mutes
                  WHERE account_id = $1 AND (expires_at IS NULL OR expires_at > now())
                  ORDER BY id",
            )
            .bind(account)
            .fetch_all(pool)
            .await?;
            let iris: Vec<String> = mutes.iter().map(|m| m.0.clone()).collect();
            let names = addresses(pool, fed, &iris).await?;
            rows.push(vec!["Account address".into(), "Hide notifications".into()]);
            for (iri, quiet) in mutes {
                if let Some(name) = names.get(&iri) {
                    rows.push(vec![name.clone(), bool_text(quiet)]);
                }
            }
        }
        Export::Followers | Export::Blocks => {
            let sql = match what {
                Export::Followers => {
                    "SELECT actor_iri FROM followers WHERE account_id = $1 ORDER BY id"
                }
                _ => "SELECT target_iri FROM account_blocks WHERE account_id = $1 ORDER BY id",
            };
            let iris: Vec<String> = sqlx::query_scalar(sql)
                .bind(account)
                .fetch_all(pool)
                .await?;
            let names = addresses(pool, fed, &iris).await?;
            if what == Export::Followers {
                rows.push(vec!["Account address".into()]);
            }
            rows.extend(
                iris.iter()
                    .filter_map(|i| names.get(i))
                    .map(|n| vec![n.clone()]),
            );
        }
        Export::Lists => {
            let members: Vec<(String, String)> = sqlx::query_as(
                "SELECT l.title, m.target_iri FROM lists l JOIN list_members m ON m.list_id = l.id
                  WHERE l.account_id = $1 ORDER BY l.id, m.id",
            )
            .bind(account)
            .fetch_all(pool)
            .await?;
            let iris: Vec<String> = members.iter().map(|m| m.1.clone()).collect();
            let names = addresses(pool, fed, &iris).await?;
            for (title, iri) in members {
                if let Some(name) = names.get(&iri) {
                    rows.push(vec![title, name.clone()]);
                }
            }
        }
        Export::Bookmarks => {
            let urls: Vec<String> = sqlx::query_scalar(
                "SELECT post_iri FROM bookmarks WHERE account_id = $1 ORDER BY id",
            )
            .bind(account)
            .fetch_all(pool)
            .await?;
            rows.extend(urls.into_iter().map(|u| vec![u]));
        }
        Export::DomainBlocks => {
            let domains: Vec<String> = sqlx::query_scalar(
                "SELECT domain FROM account_domain_blocks WHERE account_id = $1 ORDER BY id",
            )
            .bind(account)
            .fetch_all(pool)
            .await?;
            rows.extend(domains.into_iter().map(|d| vec![d]));
        }
    }
    csv_of(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mastodon_file_names_parse() {
        assert_eq!(Export::parse("following.csv"), Some(Export::Following));
        assert_eq!(Export::parse("follows.csv"), Some(Export::Following));
        assert_eq!(Export::parse("blocked_accounts.csv"), Some(Export::Blocks));
        assert_eq!(
            Export::parse("blocked_domains.csv"),
            Some(Export::DomainBlocks)
        );
        assert_eq!(Export::parse("lists"), Some(Export::Lists));
        assert_eq!(Export::parse("passwords.csv"), None);
    }

    #[test]
    fn cells_are_quoted_when_they_must_be() {
        let out = csv_of(vec![
            vec!["A list, with a comma".into(), "a@b.example".into()],
            vec!["plain".into(), "c@d.example".into()],
        ])
        .expect("csv");
        assert_eq!(
            out,
            "\"A list, with a comma\",a@b.example\nplain,c@d.example\n"
        );
    }

    #[test]
    fn no_cell_is_a_formula_and_the_mark_comes_off_exactly() {
        let out = csv_of(vec![vec![
            "=HYPERLINK(\"http://x.example\")@h.example".into(),
            "+1".into(),
            "-2@h".into(),
            "@x".into(),
            "\tx".into(),
            "\rx".into(),
            "'90s".into(),
            "''".into(),
            "plain".into(),
        ]])
        .expect("csv");
        assert_eq!(
            out,
            "\"'=HYPERLINK(\"\"http://x.example\"\")@h.example\",'+1,'-2@h,'@x,'\tx,\"'\rx\",''90s,''',plain\n"
        );
        for cell in ["=1", "+1", "-1", "@1", "'90s", "''", "plain", "", "'"] {
            assert_eq!(unmarked(&spreadsheet_text(cell)), cell, "{cell:?}");
        }
        // The import trims every cell; a marked one is trimmed once the mark is off.
        assert_eq!(unmarked(&spreadsheet_text("\tx ")), "x");
        // A quote of the cell's own (not our mark) stays.
        assert_eq!(unmarked("'90s"), "'90s");
    }
}
