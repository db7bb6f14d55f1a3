//! Verified profile links (R-MAPI-6, as Mastodon's `fields[].verified_at`): a field whose value
//! is a web page that links back to the account with `rel="me"` is shown as verified.
//!
//! When a profile's fields change (`profiles::update_in`), the verifications of values no
//! longer in the profile are deleted — a changed value loses its verification at once, in the
//! transaction that changes it — and `hollo.verify-links.v1 {accountId}` is queued (one per
//! account, coalesced) when any value is a URL. The task (`tasks::verify_links`) fetches each
//! such page through the guarded fetcher (SSRF rules, redirects re-checked, at most
//! [`MAX_PAGE_BYTES`], timeouts; `https` only, plain `http` only where the guard allows it, i.e.
//! `ALLOW_PRIVATE_ADDRESS=true`) and looks for `<a rel="me" href>` or `<link rel="me" href>`
//! naming the account's profile page (`/@name`) or its actor IRI. Found: the value is stored
//! verified; a page read in full without it: the verification, if any, is removed; a page that
//! could not be read (unreachable, too large, not HTML): left as it was.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::queue::{NewMessage, QueueName, enqueue};

pub const KIND: &str = "hollo.verify-links.v1";

/// Largest page read (Mastodon reads 1 MB of it); a larger one is not read on, and stays
/// unverified.
pub const MAX_PAGE_BYTES: usize = 1024 * 1024;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    pub account_id: Uuid,
}

/// The coalescing key of an account's verification: one waiting message per account.
pub fn key(account: Uuid) -> String {
    format!("{KIND}:{account}")
}

/// Whether a field value is worth a fetch: an absolute http(s) URL (the fetcher refuses plain
/// http unless private addresses are allowed).
pub fn verifiable(value: &str) -> Option<url::Url> {
    let u = url::Url::parse(value.trim()).ok()?;
    (matches!(u.scheme(), "https" | "http") && u.host().is_some()).then_some(u)
}

/// Called in the transaction that stores new `values` of the account's fields: forgets the
/// verifications of values that are gone and queues a verification when any is a URL.
pub async fn fields_changed(
    tx: &mut PgConnection,
    account: Uuid,
    values: &[String],
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "DELETE FROM account_field_verifications
          WHERE account_id = $1 AND NOT (value = ANY($2))",
    )
    .bind(account)
    .bind(values)
    .execute(&mut *tx)
    .await?;
    if values.iter().any(|v| verifiable(v).is_some()) {
        request(tx, account).await?;
    }
    Ok(())
}

/// The account's verified field values, with when each was verified.
pub async fn verified<'e>(
    exec: impl sqlx::PgExecutor<'e>,
    account: Uuid,
) -> Result<std::collections::HashMap<String, chrono::DateTime<chrono::Utc>>, sqlx::Error> {
    let rows: Vec<(String, chrono::DateTime<chrono::Utc>)> = sqlx::query_as(
        "SELECT value, verified_at FROM account_field_verifications WHERE account_id = $1",
    )
    .bind(account)
    .fetch_all(exec)
    .await?;
    Ok(rows.into_iter().collect())
}

/// Queues the account's verification (coalesced with a waiting one).
pub async fn request(conn: &mut PgConnection, account: Uuid) -> Result<(), sqlx::Error> {
    let data = serde_json::to_value(Payload {
        account_id: account,
    })
    .unwrap_or_default();
    enqueue(
        &mut *conn,
        QueueName::Task,
        &NewMessage::new(KIND, data).coalesce(key(account)),
    )
    .await?;
    Ok(())
}

/// The `href`s of `<a>` and `<link>` elements whose `rel` has the token `me`, in page order.
/// Tokenized by html5ever (entities decoded, any quoting), with `<script>`, `<style>`,
/// `<textarea>` and `<title>` read as the text they are, so markup inside them is not a link.
pub fn rel_me_links(html: &str) -> Vec<String> {
    struct Sink {
        links: RefCell<Vec<String>>,
    }
    impl TokenSink for Sink {
        type Handle = ();
        fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
            use html5ever::tokenizer::states::RawKind;
            let Token::TagToken(tag) = token else {
                return TokenSinkResult::Continue;
            };
            if tag.kind != TagKind::StartTag {
                return TokenSinkResult::Continue;
            }
            match &*tag.name {
                "a" | "link" => {
                    let attr = |name: &str| {
                        tag.attrs
                            .iter()
                            .find(|a| &*a.name.local == name)
                            .map(|a| a.value.to_string())
                    };
                    let me = attr("rel").is_some_and(|rel| {
                        rel.split_ascii_whitespace()
                            .any(|t| t.eq_ignore_ascii_case("me"))
                    });
                    if me && let Some(href) = attr("href") {
                        self.links.borrow_mut().push(href.trim().to_string());
                    }
                    TokenSinkResult::Continue
                }
                "script" => TokenSinkResult::RawData(RawKind::ScriptData),
                "style" => TokenSinkResult::RawData(RawKind::Rawtext),
                "textarea" | "title" => TokenSinkResult::RawData(RawKind::Rcdata),
                _ => TokenSinkResult::Continue,
            }
        }
    }
    let sink = Sink {
        links: RefCell::new(Vec::new()),
    };
    let tok = Tokenizer::new(sink, TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tok.feed(&input);
    tok.end();
    tok.sink.links.take()
}

/// Whether `html` (served from `page`) links back to one of `targets` with `rel="me"`. A
/// relative `href` is resolved against the page; URLs compare as parsed (scheme and host
/// case, default ports), else as text ignoring case.
pub fn links_back(html: &str, page: &url::Url, targets: &[String]) -> bool {
    let wanted: Vec<Option<url::Url>> = targets.iter().map(|t| url::Url::parse(t).ok()).collect();
    rel_me_links(html).iter().any(|href| {
        let resolved = page.join(href).ok();
        targets
            .iter()
            .zip(&wanted)
            .any(|(t, w)| match (&resolved, w) {
                (Some(r), Some(w)) => r == w,
                _ => href.eq_ignore_ascii_case(t),
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> url::Url {
        url::Url::parse("https://site.example/about").expect("url")
    }

    #[test]
    fn rel_me_links_are_found_in_a_and_link_only() {
        let html = r#"<!doctype html><html><head>
            <link rel="me" href="https://h.example/@alice">
            <link rel="stylesheet" href="https://h.example/x.css">
            <title><a rel="me" href="https://evil.example/@t"></a></title>
            <script>document.write('<a rel="me" href="https://evil.example/@s">')</script>
            </head><body>
            <a rel='nofollow ME noopener' href=https://h.example/users/alice>me</a>
            <!-- <a rel="me" href="https://evil.example/@c"> -->
            <img rel="me" href="https://evil.example/@img">
            <a rel="me">no href</a>
            <a href="https://h.example/@bob" rel="met">not me</a>
            <a rel="me" href="https://h.example/@a&amp;b">entity</a>
            </body></html>"#;
        assert_eq!(
            rel_me_links(html),
            [
                "https://h.example/@alice",
                "https://h.example/users/alice",
                "https://h.example/@a&b"
            ]
        );
    }

    #[test]
    fn only_a_link_to_the_account_verifies() {
        let targets = [
            "https://h.example/@alice".to_string(),
            "https://h.example/users/alice".to_string(),
        ];
        let yes = [
            r#"<a rel="me" href="https://h.example/@alice">x</a>"#,
            r#"<link rel="me" href="HTTPS://H.EXAMPLE:443/users/alice">"#,
        ];
        for html in yes {
            assert!(links_back(html, &page(), &targets), "{html}");
        }
        let no = [
            r#"<a rel="me" href="https://h.example/@bob">x</a>"#,
            r#"<a href="https://h.example/@alice">no rel</a>"#,
            r#"<a rel="me" href="https://h.example/@alice2">x</a>"#,
            r#"<a rel="me" href="https://h.example.evil/@alice">x</a>"#,
            r#"<a rel="me" href="/@alice">relative, on the page's own site</a>"#,
            "",
            "<a rel=\"me\" href=\"https://h.example/@alice",
        ];
        for html in no {
            assert!(!links_back(html, &page(), &targets), "{html}");
        }
    }

    #[test]
    fn only_urls_are_verifiable() {
        assert!(verifiable(" https://site.example/ ").is_some());
        assert!(verifiable("http://site.example/").is_some());
        for v in [
            "site.example",
            "javascript:alert(1)",
            "mailto:a@b",
            "",
            "https://",
        ] {
            assert!(verifiable(v).is_none(), "{v}");
        }
    }
}
