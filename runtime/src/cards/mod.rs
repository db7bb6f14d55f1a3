//! Link previews (R-MAPI-6): the first link of a post gets a card — title,
//! description, image, an oEmbed player — that clients show under the post.
//!
//! Writing a post never waits for the linked page: a post (ours, or a remote one arriving)
//! whose HTML has a link enqueues `hollo.preview-card.v1 {postId}`; a worker fetches the page
//! through the guarded fetcher (`tasks::preview_card`), stores the card once per URL (a link
//! many posts share is fetched once; a page that gave no card is not asked again for a day)
//! and sends `status.update` so open timelines show the card. Everything a page says is
//! untrusted text (`page`, `oembed`): stored and served as text, its image re-encoded by our
//! own decoder, a player kept only as one https iframe.

pub mod oembed;
pub mod pacing;
pub mod page;
pub mod store;

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, StartTag, TagToken, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use url::Url;
use uuid::Uuid;

use crate::queue::{NewMessage, QueueName, enqueue};

pub const KIND: &str = "hollo.preview-card.v1";

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    pub post_id: Uuid,
    /// Times the card was put back because its site was busy (`cards::pacing`); bounded.
    #[serde(default)]
    pub deferrals: u32,
}

/// One pending card message per post.
pub fn coalesce_key(post: Uuid) -> String {
    format!("preview-card:{post}")
}

/// The link a post's card is for: the first `<a href>` of its HTML that is neither a mention
/// nor a hashtag (Mastodon's rule), over http(s) with a host.
pub fn first_link(html: &str) -> Option<Url> {
    struct Sink(RefCell<Option<Url>>);
    impl TokenSink for Sink {
        type Handle = ();
        fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
            let mut found = self.0.borrow_mut();
            if found.is_some() {
                return TokenSinkResult::Continue;
            }
            if let TagToken(tag) = token
                && tag.kind == StartTag
                && &*tag.name == "a"
            {
                let attr = |name: &str| {
                    tag.attrs
                        .iter()
                        .find(|a| &*a.name.local == name)
                        .map(|a| a.value.to_ascii_lowercase())
                        .unwrap_or_default()
                };
                let (class, rel) = (attr("class"), attr("rel"));
                let classes: Vec<&str> = class.split_ascii_whitespace().collect();
                let tagged = rel.split_ascii_whitespace().any(|r| r == "tag");
                if classes
                    .iter()
                    .any(|c| matches!(*c, "mention" | "hashtag" | "u-url"))
                    || tagged
                {
                    return TokenSinkResult::Continue;
                }
                *found = tag
                    .attrs
                    .iter()
                    .find(|a| &*a.name.local == "href")
                    .and_then(|a| Url::parse(a.value.trim()).ok())
                    .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
            }
            TokenSinkResult::Continue
        }
    }
    let tok = Tokenizer::new(Sink(RefCell::new(None)), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tok.feed(&input);
    tok.end();
    tok.sink.0.into_inner()
}

/// Queues the card of `post` if its HTML has a link (an edit that removes the link queues it
/// too when `always`, so the old card goes). One pending message per post.
pub async fn enqueue_for(
    tx: &mut PgConnection,
    post: Uuid,
    html: &str,
    always: bool,
) -> Result<(), sqlx::Error> {
    if !always && first_link(html).is_none() {
        return Ok(());
    }
    let data = serde_json::to_value(Payload {
        post_id: post,
        deferrals: 0,
    })
    .unwrap_or_default();
    enqueue(
        &mut *tx,
        QueueName::Task,
        &NewMessage::new(KIND, data).coalesce(coalesce_key(post)),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::first_link;

    #[test]
    fn mentions_and_hashtags_are_not_the_link() {
        let html = r#"<p><span class="h-card"><a href="https://m.example/@bob" class="u-url mention">@bob</a></span>
            <a href="https://h.example/tags/rust" class="mention hashtag" rel="tag">#rust</a>
            <a href="https://m.example/tags/x" rel="tag">#x</a>
            see <a href="https://news.example/story?id=1" rel="nofollow noopener" target="_blank">news</a>
            and <a href="https://other.example/">other</a></p>"#;
        assert_eq!(
            first_link(html).map(String::from).as_deref(),
            Some("https://news.example/story?id=1")
        );
    }

    #[test]
    fn no_link_or_a_bad_one_is_none() {
        assert_eq!(first_link("<p>plain text https://not.a.link</p>"), None);
        assert_eq!(first_link(r#"<a href="javascript:alert(1)">x</a>"#), None);
        assert_eq!(first_link(r#"<a href="mailto:a@b.example">x</a>"#), None);
    }
}
