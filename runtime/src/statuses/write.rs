//! Writing local statuses (R-MAPI-3): create, edit and delete, each in one
//! transaction with everything that follows from it — media attached, mentions stored, whom
//! it names (`audience`), the home timelines it lands in, `mention` notifications and the
//! ActivityPub activity queued for delivery — so no status exists without its side effects
//! and no side effect outlives its status. Handlers parse and render; they decide nothing here.

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::notify::{self, Kind, Notification};
use super::{Visibility, access, conversations, feed, followers, post};
use crate::accounts::Account;
use crate::content::{self, Mention};
use crate::federation::Federation;
use crate::federation::outbound::mentions;
use crate::federation::outbound::statuses::{self as ap, Announce};
use crate::media::{self, AttachError, Drive};
use crate::polls::{self, MAX_STATUS_CHARS, NewPoll, PollError, StatusEdit};
use crate::streaming;

/// How long an `Idempotency-Key` names its first status (Mastodon keeps them an hour).
const IDEMPOTENCY_HOURS: i64 = 1;

/// A status to write, as the API received it (already shaped; rules are checked here).
#[derive(Clone, Debug)]
pub struct NewStatus {
    pub text: String,
    pub visibility: Visibility,
    pub spoiler_text: String,
    pub sensitive: bool,
    pub language: Option<String>,
    pub in_reply_to: Option<Uuid>,
    pub poll: Option<NewPoll>,
    pub media_ids: Vec<Uuid>,
    pub idempotency_key: Option<String>,
    /// The post it quotes (`quotes::local` checks the quoted author lets it).
    pub quoted: Option<Uuid>,
    /// Who may quote it; `None`: anyone (Mastodon's default).
    pub quote_policy: Option<crate::quotes::Policy>,
}

/// What an edit changes; `None` keeps the stored value.
#[derive(Clone, Debug, Default)]
pub struct Edit {
    /// The text and the poll's expiry (the poll module's edit rules).
    pub poll_edit: StatusEdit,
    pub spoiler_text: Option<String>,
    pub sensitive: Option<bool>,
    pub language: Option<String>,
    pub media_ids: Option<Vec<Uuid>>,
}

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Unknown, or not the caller's to see (404, no existence leak).
    #[error("Record not found")]
    NotFound,
    /// Someone else's status the caller can see (403).
    #[error("This action is not allowed")]
    NotAuthor,
    /// A block stands between the caller and the author of the post it replies to or quotes
    /// (403, `statuses::post::blocked`).
    #[error("This action is not allowed")]
    Blocked,
    /// The policy of the remote post it replies to refuses the author (403, `approvals`).
    #[error("{0}")]
    NotPermitted(String),
    /// A rule the request breaks (422).
    #[error("{0}")]
    Invalid(String),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

impl From<AttachError> for WriteError {
    fn from(e: AttachError) -> Self {
        match e {
            AttachError::Db(e) => WriteError::Db(e),
            e => WriteError::Invalid(e.to_string()),
        }
    }
}

impl From<crate::quotes::local::TargetError> for WriteError {
    fn from(e: crate::quotes::local::TargetError) -> Self {
        use crate::quotes::local::TargetError;
        match e {
            TargetError::NotFound => WriteError::NotFound,
            TargetError::Blocked => WriteError::Blocked,
            e @ TargetError::NotQuotable => WriteError::Invalid(e.to_string()),
            TargetError::Db(e) => WriteError::Db(e),
        }
    }
}

impl From<crate::approvals::AskError> for WriteError {
    fn from(e: crate::approvals::AskError) -> Self {
        match e {
            crate::approvals::AskError::Db(e) => WriteError::Db(e),
            e @ crate::approvals::AskError::Refused(_) => WriteError::NotPermitted(e.to_string()),
        }
    }
}

impl From<PollError> for WriteError {
    fn from(e: PollError) -> Self {
        match e {
            PollError::NotFound(_) => WriteError::NotFound,
            PollError::NotAuthor => WriteError::NotAuthor,
            e @ PollError::AcrossBlock => WriteError::NotPermitted(e.to_string()),
            PollError::Invalid(e) => WriteError::Invalid(e.to_string()),
            PollError::Db(e) => WriteError::Db(e),
        }
    }
}

/// A written status.
#[derive(Clone, Copy, Debug)]
pub struct Written {
    pub status: Uuid,
    pub poll: Option<Uuid>,
    /// An `Idempotency-Key` named an earlier status: nothing new was stored.
    pub replayed: bool,
}

/// Mastodon's length rule: the text and the content warning together.
fn check_length(text: &str, spoiler: &str) -> Result<(), WriteError> {
    if text.chars().count() + spoiler.chars().count() > MAX_STATUS_CHARS {
        return Err(WriteError::Invalid(format!(
            "Validation failed: Text character limit of {MAX_STATUS_CHARS} exceeded"
        )));
    }
    Ok(())
}

/// The rules of a new status that need no database.
pub fn check_new(n: &NewStatus) -> Result<(), WriteError> {
    check_length(&n.text, &n.spoiler_text)?;
    if n.poll.is_some() && !n.media_ids.is_empty() {
        return Err(WriteError::Invalid(
            "Validation failed: a status cannot have both media and a poll".into(),
        ));
    }
    if n.text.trim().is_empty() && n.poll.is_none() && n.media_ids.is_empty() {
        return Err(WriteError::Invalid(
            "Validation failed: Text can't be blank".into(),
        ));
    }
    Ok(())
}

async fn replayed(pool: &PgPool, account: Uuid, key: &str) -> Result<Option<Written>, sqlx::Error> {
    let found: Option<(Uuid, Option<Uuid>)> = sqlx::query_as(
        "SELECT i.status_id, p.id FROM status_idempotency i
           LEFT JOIN polls p ON p.status_id = i.status_id
          WHERE i.account_id = $1 AND i.key = $2
            AND i.created_at > now() - $3 * interval '1 hour'",
    )
    .bind(account)
    .bind(key)
    .bind(IDEMPOTENCY_HOURS as f64)
    .fetch_optional(pool)
    .await?;
    Ok(found.map(|(status, poll)| Written {
        status,
        poll,
        replayed: true,
    }))
}

/// What a new status settles before its transaction: its parent (checked readable by the
/// author, and its policy asked whether the author may reply: `approvals`) and its mentions,
/// which may need remote fetches that no transaction should wait on.
pub struct Prepared {
    parent_uri: Option<String>,
    /// The reply waits for the remote parent's author to approve it.
    pending_approval: bool,
    mentioned: Vec<Mention>,
    quote: Option<crate::quotes::local::Target>,
}

/// Checks `n`'s rules and settles what [`insert`] needs from outside the transaction.
pub async fn prepare(
    pool: &PgPool,
    fed: Option<&Federation>,
    author: &Account,
    n: &NewStatus,
) -> Result<Prepared, WriteError> {
    check_new(n)?;
    let parent_uri = match n.in_reply_to {
        Some(p) => Some(parent(pool, fed, author, p).await?),
        None => None,
    };
    let pending_approval = match (&parent_uri, fed) {
        (Some(uri), Some(f)) => {
            let mut conn = pool.acquire().await?;
            crate::approvals::ask(&mut conn, f, author, uri, crate::approvals::Kind::Reply)
                .await?
                .pending()
        }
        _ => false,
    };
    let mentioned = match fed {
        Some(f) => mentions::resolve(pool, f, author, &n.text).await,
        None => Vec::new(),
    };
    let quote = match n.quoted {
        Some(q) => Some(crate::quotes::local::target(pool, fed, author, q).await?),
        None => None,
    };
    Ok(Prepared {
        parent_uri,
        pending_approval,
        mentioned,
        quote,
    })
}

/// Writes a new status of `author` with all its side effects, or, for a repeated
/// `Idempotency-Key`, answers the first one and stores nothing.
pub async fn create(
    pool: &PgPool,
    fed: Option<&Federation>,
    drive: &Drive,
    author: &Account,
    n: &NewStatus,
) -> Result<Written, WriteError> {
    check_new(n)?;
    if let Some(key) = &n.idempotency_key
        && let Some(w) = replayed(pool, author.id, key).await?
    {
        return Ok(w);
    }
    let prepared = prepare(pool, fed, author, n).await?;
    let mut tx = pool.begin().await?;
    let (status, poll) = insert(&mut tx, fed, drive, author, n, prepared).await?;
    if let Some(key) = &n.idempotency_key {
        // A concurrent retry waits here on the key's row, then finds it taken: the first
        // status stands and this one is rolled back.
        sqlx::query(
            "DELETE FROM status_idempotency WHERE account_id = $1 AND key = $2
                AND created_at <= now() - $3 * interval '1 hour'",
        )
        .bind(author.id)
        .bind(key)
        .bind(IDEMPOTENCY_HOURS as f64)
        .execute(&mut *tx)
        .await?;
        let stored: Option<Uuid> = sqlx::query_scalar(
            "INSERT INTO status_idempotency (account_id, key, status_id) VALUES ($1, $2, $3)
             ON CONFLICT (account_id, key) DO NOTHING RETURNING status_id",
        )
        .bind(author.id)
        .bind(key)
        .bind(status)
        .fetch_optional(&mut *tx)
        .await?;
        if stored.is_none() {
            tx.rollback().await?;
            return replayed(pool, author.id, key)
                .await?
                .ok_or(WriteError::NotFound);
        }
    }
    tx.commit().await?;
    Ok(Written {
        status,
        poll,
        replayed: false,
    })
}

/// Writes the status `n` of `author` and everything that follows from it inside `tx`
/// (the caller commits): the status and its poll ids. `prepared` is [`prepare`]'s answer for
/// the same `n`.
pub async fn insert(
    tx: &mut PgConnection,
    fed: Option<&Federation>,
    drive: &Drive,
    author: &Account,
    n: &NewStatus,
    prepared: Prepared,
) -> Result<(Uuid, Option<Uuid>), WriteError> {
    let Prepared {
        parent_uri,
        pending_approval,
        mentioned,
        quote,
    } = prepared;
    let actor = fed.map(|f| f.actor_iri(&author.username));
    let (status, poll) =
        polls::insert_status(tx, author.id, actor.as_deref(), &n.text, n.poll.as_ref()).await?;
    let uri: String = sqlx::query_scalar(
        "UPDATE statuses SET visibility = $2, spoiler_text = $3, sensitive = $4, language = $5,
                in_reply_to_uri = $6, tags = $7, quote_policy = $8, pending_approval = $9
          WHERE id = $1 RETURNING uri",
    )
    .bind(status)
    .bind(n.visibility.as_str())
    .bind(&n.spoiler_text)
    .bind(n.sensitive || !n.spoiler_text.is_empty())
    .bind(&n.language)
    .bind(&parent_uri)
    .bind(content::hashtags(&n.text))
    .bind(
        n.quote_policy
            .unwrap_or(crate::quotes::Policy::Public)
            .as_str(),
    )
    .bind(pending_approval)
    .fetch_one(&mut *tx)
    .await?;
    media::attach(tx, author.id, status, &n.media_ids).await?;
    // Its quote, before the `Create` is built (the note names it).
    let quote_request = match (quote, fed) {
        (Some(q), Some(f)) => crate::quotes::local::attach(tx, f, author, status, &uri, q).await?,
        _ => None,
    };
    mentions::store(tx, status, &mentioned).await?;
    let local = local_reach(tx, fed, author, n.visibility, &mentioned).await?;
    set_audience(tx, status, &local.mentioned).await?;
    let own = feed::Entry {
        entry: status,
        post: status,
        source: "self",
        reply_to: None,
    };
    feed::push(tx, &own, &[author.id]).await?;
    if let (Some(a), Some(f)) = (&actor, fed) {
        let reply_to = match parent_uri {
            Some(_) if !local.home.is_empty() => feed::ReplyTo::of(tx, f.urls(), status).await?,
            _ => None,
        };
        let theirs = feed::Entry {
            entry: status,
            post: status,
            source: a,
            reply_to,
        };
        feed::push(tx, &theirs, &local.home).await?;
    }
    // Accounts following one of its tags get a public post too (R-MAPI-6).
    crate::tags::fan_out(tx, status).await?;
    notify_mentioned(tx, author.id, status, &uri, &local.mentioned).await?;
    if let (Some(a), true) = (&actor, notifies_followers(tx, author.id, n).await?) {
        for account in followers::notified_of_posts(tx, a).await? {
            let note = Notification {
                account,
                kind: Kind::Status,
                from_account: author.id,
                post: Some(status),
                cause: &uri,
            };
            notify::notify(tx, &note).await?;
        }
    }
    if let (Visibility::Direct, Some(f), Some(a)) = (n.visibility, fed, &actor) {
        let mut participants = vec![a.clone()];
        participants.extend(mentioned.iter().map(|m| m.href.clone()).filter(|h| h != a));
        participants.dedup();
        conversations::record(tx, f, status, Some(author.id), &participants).await?;
    }
    streaming::emit::created(tx, status).await?;
    // Its link preview is fetched by a worker, after the post is out (`cards`).
    crate::cards::enqueue_for(tx, status, &content::render(&n.text, &uri, &[]).html, false).await?;
    if let Some(f) = fed {
        ap::publish(tx, f, Some(drive), author.id, status, Announce::Create).await?;
        if let Some(r) = quote_request {
            crate::quotes::local::send_request(tx, f, author, status, r).await?;
        }
    }
    Ok((status, poll))
}

/// Whether a new status makes `status` notifications for the author's followers who asked
/// for them: not a direct one, and not a reply to someone else (as Mastodon's).
async fn notifies_followers(
    tx: &mut PgConnection,
    author: Uuid,
    n: &NewStatus,
) -> Result<bool, sqlx::Error> {
    if n.visibility == Visibility::Direct {
        return Ok(false);
    }
    let Some(parent) = n.in_reply_to else {
        return Ok(true);
    };
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM statuses WHERE id = $1 AND account_id = $2)")
        .bind(parent)
        .bind(author)
        .fetch_one(tx)
        .await
}

/// The IRI of the post `id` (not a boost) a status of `author` replies to, if the author may
/// see it, and no block stands between it and the post's author.
async fn parent(
    pool: &PgPool,
    fed: Option<&Federation>,
    author: &Account,
    id: Uuid,
) -> Result<String, WriteError> {
    let mut conn = pool.acquire().await?;
    let post = post::find(&mut conn, Some(author.id), id)
        .await?
        .filter(|p| p.id == id)
        .ok_or(WriteError::NotFound)?;
    if let Some(f) = fed
        && post::blocked(&mut conn, f, author, &post).await?
    {
        return Err(WriteError::Blocked);
    }
    Ok(post.uri)
}

/// The local accounts a status reaches.
struct LocalReach {
    /// Mentioned local accounts (notified, and its `audience`: they may read it whatever
    /// its visibility; its followers read a followers-only one as long as they follow,
    /// `access`).
    mentioned: Vec<Uuid>,
    /// Whose home timelines it goes to besides the author's.
    home: Vec<Uuid>,
}

/// Mastodon's fan-out: public, unlisted and followers-only statuses reach every local
/// follower's home; a direct one only the mentioned accounts that follow the author.
async fn local_reach(
    tx: &mut PgConnection,
    fed: Option<&Federation>,
    author: &Account,
    visibility: Visibility,
    mentioned: &[Mention],
) -> Result<LocalReach, sqlx::Error> {
    let Some(fed) = fed else {
        return Ok(LocalReach {
            mentioned: Vec::new(),
            home: Vec::new(),
        });
    };
    let names: Vec<&str> = mentioned
        .iter()
        .filter_map(|m| fed.local_username(&m.href))
        .collect();
    let mentioned: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM accounts WHERE username = ANY($1) AND id <> $2")
            .bind(&names)
            .bind(author.id)
            .fetch_all(&mut *tx)
            .await?;
    let followers = followers::of(&mut *tx, &fed.actor_iri(&author.username)).await?;
    let home = match visibility {
        Visibility::Direct => followers
            .into_iter()
            .filter(|f| mentioned.contains(f))
            .collect(),
        _ => followers,
    };
    Ok(LocalReach { mentioned, home })
}

async fn set_audience(
    tx: &mut PgConnection,
    status: Uuid,
    audience: &[Uuid],
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE statuses SET audience = $2 WHERE id = $1")
        .bind(status)
        .bind(audience)
        .execute(tx)
        .await?;
    Ok(())
}

/// `mention` notifications, caused by the status's `Create` (so an edit that mentions the same
/// account again notifies nobody twice).
async fn notify_mentioned(
    tx: &mut PgConnection,
    author: Uuid,
    status: Uuid,
    uri: &str,
    accounts: &[Uuid],
) -> Result<(), sqlx::Error> {
    let cause = format!("{uri}/activity");
    for a in accounts {
        let n = Notification {
            account: *a,
            kind: Kind::Mention,
            from_account: author,
            post: Some(status),
            cause: &cause,
        };
        notify::notify(&mut *tx, &n).await?;
    }
    Ok(())
}

/// The author and visibility of a local status `viewer` may see: `NotFound` otherwise.
async fn own_or_visible(
    tx: &mut PgConnection,
    viewer: Uuid,
    status: Uuid,
) -> Result<(Uuid, String, Visibility), WriteError> {
    let row: Option<(Uuid, String, String)> =
        sqlx::query_as("SELECT account_id, uri, visibility FROM statuses WHERE id = $1 FOR UPDATE")
            .bind(status)
            .fetch_optional(&mut *tx)
            .await?;
    let (owner, uri, visibility) = row.ok_or(WriteError::NotFound)?;
    if owner != viewer && !access::can_see(&mut *tx, Some(viewer), status).await? {
        return Err(WriteError::NotFound);
    }
    Ok((
        owner,
        uri,
        Visibility::parse(&visibility).unwrap_or(Visibility::Public),
    ))
}

/// Edits a status of `author`: the version it replaces is kept in `status_edits`, the new
/// one is federated as an `Update`. Someone else's visible status is `NotAuthor` (403, as
/// the polls API always answered), an invisible one `NotFound`.
pub async fn edit(
    pool: &PgPool,
    fed: Option<&Federation>,
    drive: &Drive,
    author: &Account,
    status: Uuid,
    e: &Edit,
) -> Result<Option<Uuid>, WriteError> {
    let text = &e.poll_edit.content;
    let mentioned = match (fed, text) {
        (Some(f), Some(t)) => Some(mentions::resolve(pool, f, author, t).await),
        _ => None,
    };
    let mut tx = pool.begin().await?;
    let (owner, uri, visibility) = own_or_visible(&mut tx, author.id, status).await?;
    if owner != author.id {
        return Err(WriteError::NotAuthor);
    }
    let (old_text, old_spoiler): (String, String) =
        sqlx::query_as("SELECT content, spoiler_text FROM statuses WHERE id = $1")
            .bind(status)
            .fetch_one(&mut *tx)
            .await?;
    check_length(
        text.as_deref().unwrap_or(&old_text),
        e.spoiler_text.as_deref().unwrap_or(&old_spoiler),
    )?;
    // The version being replaced, with its poll options, dated when it was written.
    sqlx::query(
        "INSERT INTO status_edits (status_id, content, spoiler_text, sensitive, poll_options,
                                   created_at)
         SELECT s.id, s.content, s.spoiler_text, s.sensitive, p.options,
                coalesce(s.edited_at, s.created_at)
           FROM statuses s LEFT JOIN polls p ON p.status_id = s.id WHERE s.id = $1",
    )
    .bind(status)
    .execute(&mut *tx)
    .await?;
    let changes_poll_side = e.poll_edit.content.is_some() || e.poll_edit.has_poll;
    let poll = if changes_poll_side {
        polls::update_status(&mut tx, status, author.id, &e.poll_edit)
            .await?
            .poll_id
    } else {
        sqlx::query_scalar("SELECT id FROM polls WHERE status_id = $1")
            .bind(status)
            .fetch_optional(&mut *tx)
            .await?
    };
    sqlx::query(
        "UPDATE statuses SET spoiler_text = coalesce($2, spoiler_text),
                sensitive = coalesce($3, sensitive) OR coalesce($2, spoiler_text) <> '',
                language = coalesce($4, language), edited_at = now()
          WHERE id = $1",
    )
    .bind(status)
    .bind(&e.spoiler_text)
    .bind(e.sensitive)
    .bind(&e.language)
    .execute(&mut *tx)
    .await?;
    if let Some(ids) = &e.media_ids {
        if poll.is_some() && !ids.is_empty() {
            return Err(WriteError::Invalid(
                "Validation failed: a status cannot have both media and a poll".into(),
            ));
        }
        // Uploads left out are detached (the unattached-media cleanup removes them later).
        sqlx::query(
            "UPDATE media_attachments SET status_id = NULL, position = NULL
              WHERE status_id = $1 AND NOT (id = ANY($2))",
        )
        .bind(status)
        .bind(ids)
        .execute(&mut *tx)
        .await?;
        media::attach(&mut tx, author.id, status, ids).await?;
    }
    if let (Some(m), Some(t)) = (&mentioned, text) {
        mentions::store(&mut tx, status, m).await?;
        sqlx::query("UPDATE statuses SET tags = $2 WHERE id = $1")
            .bind(status)
            .bind(content::hashtags(t))
            .execute(&mut *tx)
            .await?;
        let local = local_reach(&mut tx, fed, author, visibility, m).await?;
        set_audience(&mut tx, status, &local.mentioned).await?;
        notify_mentioned(&mut tx, author.id, status, &uri, &local.mentioned).await?;
    }
    // Local accounts that boosted it hear of the edit (`update`), once per edit.
    let tag = Uuid::now_v7().to_string();
    let boosters: Vec<Uuid> = sqlx::query_scalar(
        "SELECT account_id FROM reblogs WHERE post_id = $1 AND account_id IS NOT NULL
            AND account_id <> $2",
    )
    .bind(status)
    .bind(author.id)
    .fetch_all(&mut *tx)
    .await?;
    let cause = format!("{uri}/updates/{tag}");
    for account in boosters {
        let n = Notification {
            account,
            kind: Kind::Update,
            from_account: author.id,
            post: Some(status),
            cause: &cause,
        };
        notify::notify(&mut tx, &n).await?;
    }
    // And the local accounts whose statuses quote it (`quoted_update`).
    crate::quotes::inbound::quoted_edited(&mut tx, &uri, author.id, &cause).await?;
    streaming::emit::edited(&mut tx, status).await?;
    if let Some(t) = text {
        // The link may have changed or gone: the card follows the new text.
        crate::cards::enqueue_for(&mut tx, status, &content::render(t, &uri, &[]).html, true)
            .await?;
    }
    if let Some(f) = fed {
        let update = Announce::Update { tag: &tag };
        ap::publish(&mut tx, f, Some(drive), author.id, status, update).await?;
    }
    tx.commit().await?;
    Ok(poll)
}

/// Deletes a status of `author`: its `Delete` (a `Tombstone`) is queued to everyone its
/// `Create` went to, it leaves every home timeline and notification, boosts and favourites of
/// it go, and its URI keeps a tombstone. Anyone else's status is `NotFound`, as on Mastodon.
pub async fn delete(
    pool: &PgPool,
    fed: Option<&Federation>,
    drive: &Drive,
    author: &Account,
    status: Uuid,
) -> Result<(), WriteError> {
    let mut tx = pool.begin().await?;
    let (owner, uri, _) = own_or_visible(&mut tx, author.id, status).await?;
    if owner != author.id {
        return Err(WriteError::NotFound);
    }
    remove(&mut tx, fed, Some(drive), author.id, status, &uri).await?;
    tx.commit().await?;
    Ok(())
}

/// [`delete`]'s effects, in the caller's transaction, for the status `status` (IRI `uri`) of
/// `author`: also how a reply its parent's author rejected goes (`approvals::answers`).
pub async fn remove(
    tx: &mut PgConnection,
    fed: Option<&Federation>,
    drive: Option<&Drive>,
    author: Uuid,
    status: Uuid,
    uri: &str,
) -> Result<(), sqlx::Error> {
    // Published first: the activity's recipients and addressing are read from the row.
    if let Some(f) = fed {
        ap::publish(&mut *tx, f, drive, author, status, Announce::Delete).await?;
    }
    streaming::emit::deleted(&mut *tx, status).await?;
    feed::remove_post(&mut *tx, status).await?;
    notify::remove_post(&mut *tx, status).await?;
    conversations::remove_post(&mut *tx, status).await?;
    for sql in [
        "DELETE FROM reblogs WHERE post_id = $1",
        "DELETE FROM favourites WHERE post_id = $1",
        // What it quoted goes with it; quotes *of* it then show as `deleted`.
        "DELETE FROM quotes WHERE post_id = $1",
        "DELETE FROM statuses WHERE id = $1",
    ] {
        sqlx::query(sql).bind(status).execute(&mut *tx).await?;
    }
    sqlx::query("INSERT INTO status_tombstones (uri) VALUES ($1) ON CONFLICT DO NOTHING")
        .bind(uri)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// `GET /:id/source`: the text and content warning as typed, for the author only.
pub async fn source(
    conn: &mut PgConnection,
    author: Uuid,
    status: Uuid,
) -> Result<Option<(String, String)>, sqlx::Error> {
    let row: Option<(String, String)> = sqlx::query_as(
        "SELECT content, spoiler_text FROM statuses WHERE id = $1 AND account_id = $2",
    )
    .bind(status)
    .bind(author)
    .fetch_optional(conn)
    .await?;
    Ok(row)
}
