//! The status model every client-API route builds on (R-MAPI-3/4): the one id space
//! over our posts, remote posts and boosts, the visibility rule, and Mastodon's Status entity
//! rendered for a viewer — against a real PostgreSQL with rows as the writers store them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use hollo_runtime::federation::Federation;
use hollo_runtime::mastodon::{Site, status};
use hollo_runtime::media::Drive;
use hollo_runtime::statuses::notify::{self, Kind, Notification};
use hollo_runtime::statuses::{access, feed};
use serde_json::json;
use support::{account_with_token, fresh_db};
use uuid::Uuid;

fn fed() -> Federation {
    Federation::new(
        "https://hollo.example",
        "statuses-model-secret-0123456789abcdef",
        true,
        4,
    )
    .expect("federation")
}

/// Status entities as clients receive them (JSON), rendered by `mastodon::status`.
async fn render(
    conn: &mut sqlx::PgConnection,
    fed: &Federation,
    viewer: Option<Uuid>,
    ids: &[Uuid],
) -> Vec<serde_json::Value> {
    let drive = Drive::disabled(&fed.origin);
    let page = status::render(conn, Site::new(&fed.origin, &drive, None), viewer, ids)
        .await
        .unwrap();
    page.iter()
        .map(|s| serde_json::to_value(s).unwrap())
        .collect()
}

async fn render_one(
    conn: &mut sqlx::PgConnection,
    fed: &Federation,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Option<serde_json::Value> {
    render(conn, fed, viewer, &[id]).await.pop()
}

async fn remote_actor(pool: &sqlx::PgPool, iri: &str, handle: &str) -> Uuid {
    sqlx::query_scalar(
        "INSERT INTO remote_actors (iri, handle, inbox, document) VALUES ($1, $2, $3, $4) RETURNING id",
    )
    .bind(iri)
    .bind(handle)
    .bind(format!("{iri}/inbox"))
    .bind(json!({"id": iri, "type": "Person", "preferredUsername": "bob", "name": "Bob"}))
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn local_status(
    pool: &sqlx::PgPool,
    fed: &Federation,
    account: Uuid,
    username: &str,
    text: &str,
    visibility: &str,
    audience: &[Uuid],
) -> Uuid {
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO statuses (id, account_id, uri, content, visibility, audience, tags)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(id)
    .bind(account)
    .bind(fed.status_iri(username, id))
    .bind(text)
    .bind(visibility)
    .bind(audience)
    .bind(vec!["rust".to_string()])
    .execute(pool)
    .await
    .unwrap();
    id
}

#[tokio::test]
async fn one_id_space_renders_posts_boosts_counts_and_viewer_flags() {
    let db = fresh_db().await;
    let fed = fed();
    let (alice, _) = account_with_token(&db.pool, "alice").await;
    let (carol, _) = account_with_token(&db.pool, "carol").await;
    let bob_iri = "https://remote.example/users/bob";
    let bob = remote_actor(&db.pool, bob_iri, "bob@remote.example").await;

    let mine = local_status(&db.pool, &fed, alice, "alice", "hello #rust", "public", &[]).await;
    let my_uri = fed.status_iri("alice", mine);
    // Bob replies to it; his post gets a v7 id from its time, sorting with ours.
    let theirs: Uuid = sqlx::query_scalar(
        "INSERT INTO remote_posts (iri, actor, content, summary, in_reply_to, published, body, mentions, attachments)
         VALUES ($1, $2, '<p>hi <b>there</b></p>', '<p>CW &amp; more</p>', $3, now(), '{}', $4, $5)
         RETURNING id",
    )
    .bind("https://remote.example/notes/1")
    .bind(bob_iri)
    .bind(&my_uri)
    .bind(json!([{"href": fed.actor_iri("alice"), "name": "@alice@hollo.example"}]))
    .bind(json!([{"type": "Document", "mediaType": "image/png", "url": "https://remote.example/a.png",
                  "name": "a cat", "width": 40, "height": 20},
                 {"type": "Document", "mediaType": "image/png", "url": "javascript:alert(1)"}]))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        theirs.get_version_num(),
        7,
        "remote posts get time-ordered ids"
    );

    // Carol favourites and boosts alice's post; bob boosts it too and likes it remotely.
    sqlx::query("INSERT INTO favourites (account_id, post_id, post_uri, activity_id) VALUES ($1, $2, $3, 'like-1')")
        .bind(carol).bind(mine).bind(&my_uri).execute(&db.pool).await.unwrap();
    let boost = Uuid::now_v7();
    sqlx::query("INSERT INTO reblogs (id, post_id, post_uri, account_id, activity_id) VALUES ($1, $2, $3, $4, 'announce-1')")
        .bind(boost).bind(mine).bind(&my_uri).bind(carol).execute(&db.pool).await.unwrap();
    sqlx::query("INSERT INTO reblogs (id, post_id, post_uri, actor_iri, activity_id) VALUES ($1, $2, $3, $4, 'announce-2')")
        .bind(Uuid::now_v7()).bind(mine).bind(&my_uri).bind(bob_iri).execute(&db.pool).await.unwrap();
    sqlx::query("INSERT INTO remote_interactions (activity_id, kind, actor, object) VALUES ('like-2', 'like', $1, $2)")
        .bind(bob_iri).bind(&my_uri).execute(&db.pool).await.unwrap();
    sqlx::query("INSERT INTO bookmarks (account_id, post_iri, post_id) VALUES ($1, $2, $3)")
        .bind(carol)
        .bind(&my_uri)
        .bind(mine)
        .execute(&db.pool)
        .await
        .unwrap();

    let mut conn = db.pool.acquire().await.unwrap();
    let unknown = Uuid::now_v7();
    let page = render(
        &mut conn,
        &fed,
        Some(carol),
        &[boost, theirs, unknown, mine],
    )
    .await;
    assert_eq!(
        page.len(),
        3,
        "an unknown id is left out, the order kept: {page:#?}"
    );

    let b = &page[0];
    assert_eq!(b["id"], boost.to_string());
    assert_eq!(b["account"]["acct"], "carol");
    assert_eq!(b["reblog"]["id"], mine.to_string());
    assert_eq!(b["reblogged"], true);

    let r = &page[1];
    assert_eq!(r["account"]["acct"], "bob@remote.example");
    assert_eq!(r["account"]["id"], bob.to_string());
    assert_eq!(r["in_reply_to_id"], mine.to_string());
    assert_eq!(r["in_reply_to_account_id"], alice.to_string());
    assert_eq!(r["spoiler_text"], "CW & more", "spoiler text is plain text");
    assert_eq!(r["sensitive"], true, "a content warning makes it sensitive");
    assert_eq!(r["mentions"][0]["acct"], "alice");
    assert_eq!(r["mentions"][0]["id"], alice.to_string());
    let media = r["media_attachments"].as_array().unwrap();
    assert_eq!(media.len(), 1, "a javascript: url is not an attachment");
    assert_eq!(media[0]["type"], "image");
    assert_eq!(media[0]["description"], "a cat");
    assert_eq!(media[0]["meta"]["original"]["aspect"], 2.0);

    let m = &page[2];
    assert_eq!(
        m["content"],
        "<p>hello <a href=\"https://hollo.example/tags/rust\" class=\"mention hashtag\" rel=\"tag\">#<span>rust</span></a></p>"
    );
    assert_eq!(m["tags"][0]["name"], "rust");
    assert_eq!(m["replies_count"], 1);
    assert_eq!(m["reblogs_count"], 2);
    assert_eq!(m["favourites_count"], 2, "carol's favourite and bob's Like");
    assert_eq!(m["favourited"], true);
    assert_eq!(m["reblogged"], true);
    assert_eq!(m["bookmarked"], true);
    assert_eq!(m["account"]["statuses_count"], 1);

    // Anonymous: the counts stay, the flags are false.
    let anon = render_one(&mut conn, &fed, None, mine).await.unwrap();
    assert_eq!(anon["favourited"], false);
    assert_eq!(anon["favourites_count"], 2);

    // A deleted remote post names nothing.
    sqlx::query("UPDATE remote_posts SET deleted_at = now() WHERE id = $1")
        .bind(theirs)
        .execute(&db.pool)
        .await
        .unwrap();
    assert!(
        render_one(&mut conn, &fed, Some(carol), theirs)
            .await
            .is_none()
    );
}

#[tokio::test]
async fn followers_only_and_direct_reach_only_author_and_audience() {
    let db = fresh_db().await;
    let fed = fed();
    let (alice, _) = account_with_token(&db.pool, "alice").await;
    let (carol, _) = account_with_token(&db.pool, "carol").await;
    let (dave, _) = account_with_token(&db.pool, "dave").await;
    let public = local_status(&db.pool, &fed, alice, "alice", "p", "public", &[]).await;
    let unlisted = local_status(&db.pool, &fed, alice, "alice", "u", "unlisted", &[]).await;
    let private = local_status(&db.pool, &fed, alice, "alice", "f", "private", &[carol]).await;
    let direct = local_status(&db.pool, &fed, alice, "alice", "d", "direct", &[carol]).await;
    let mut conn = db.pool.acquire().await.unwrap();
    for (id, who, want) in [
        (public, None, true),
        (unlisted, None, true),
        (private, None, false),
        (private, Some(alice), true),
        (private, Some(carol), true),
        (private, Some(dave), false),
        (direct, Some(carol), true),
        (direct, Some(dave), false),
        (direct, None, false),
        (Uuid::now_v7(), Some(alice), false),
    ] {
        assert_eq!(
            access::can_see(&mut conn, who, id).await.unwrap(),
            want,
            "{id} by {who:?}"
        );
    }
    // A boost of a followers-only post is no way around the rule.
    let boost = Uuid::now_v7();
    sqlx::query("INSERT INTO reblogs (id, post_id, post_uri, account_id, activity_id) VALUES ($1, $2, 'u', $3, 'a-1')")
        .bind(boost).bind(private).bind(alice).execute(&db.pool).await.unwrap();
    assert!(!access::can_see(&mut conn, Some(dave), boost).await.unwrap());
    assert!(
        access::can_see(&mut conn, Some(carol), boost)
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn feed_and_notifications_are_written_once_per_cause() {
    let db = fresh_db().await;
    let fed = fed();
    let (alice, _) = account_with_token(&db.pool, "alice").await;
    let (carol, _) = account_with_token(&db.pool, "carol").await;
    let post = local_status(&db.pool, &fed, alice, "alice", "x", "public", &[]).await;
    let mut tx = db.pool.begin().await.unwrap();
    let e = feed::Entry {
        entry: post,
        post,
        source: "self",
        reply_to: None,
    };
    assert_eq!(
        feed::push(&mut tx, &e, &[alice, carol])
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(
        feed::push(&mut tx, &e, &[alice]).await.unwrap().is_empty(),
        "redelivery adds nothing"
    );
    let n = Notification {
        account: alice,
        kind: Kind::Favourite,
        from_account: carol,
        post: Some(post),
        cause: "like-9",
    };
    assert!(notify::notify(&mut tx, &n).await.unwrap().is_some());
    assert!(
        notify::notify(&mut tx, &n).await.unwrap().is_none(),
        "the same cause notifies once"
    );
    let own = Notification {
        account: alice,
        kind: Kind::Favourite,
        from_account: alice,
        post: Some(post),
        cause: "like-10",
    };
    assert!(
        notify::notify(&mut tx, &own).await.unwrap().is_none(),
        "never for one's own action"
    );
    assert_eq!(feed::remove_post(&mut tx, post).await.unwrap(), 2);
    tx.commit().await.unwrap();
    for k in Kind::ALL {
        assert_eq!(Kind::parse(k.as_str()), Some(k));
    }
}

/// What an `Undo` or a deletion takes back (R-MAPI-3): `withdraw` removes the
/// notifications one cause made and no other, `remove_entry` one boost's entries and not the
/// post's, `notify::remove_post` every notification about a deleted post.
#[tokio::test]
async fn undo_and_delete_take_back_only_what_their_cause_made() {
    let db = fresh_db().await;
    let fed = fed();
    let (alice, _) = account_with_token(&db.pool, "alice").await;
    let (carol, _) = account_with_token(&db.pool, "carol").await;
    let post = local_status(&db.pool, &fed, alice, "alice", "x", "public", &[]).await;
    let boost = uuid::Uuid::now_v7();
    let mut tx = db.pool.begin().await.unwrap();
    for (entry, source) in [(post, "self"), (boost, "carol")] {
        let e = feed::Entry {
            entry,
            post,
            source,
            reply_to: None,
        };
        feed::push(&mut tx, &e, &[alice, carol]).await.unwrap();
    }
    let mut ids = Vec::new();
    for (kind, cause) in [(Kind::Favourite, "like-1"), (Kind::Reblog, "announce-1")] {
        let n = Notification {
            account: alice,
            kind,
            from_account: carol,
            post: Some(post),
            cause,
        };
        ids.push(notify::notify(&mut tx, &n).await.unwrap().unwrap());
    }
    assert_eq!(
        notify::withdraw(&mut tx, Kind::Favourite, "like-1")
            .await
            .unwrap(),
        vec![(alice, ids[0])]
    );
    assert!(
        notify::withdraw(&mut tx, Kind::Reblog, "like-1")
            .await
            .unwrap()
            .is_empty(),
        "another kind with the same cause is not taken back"
    );
    assert_eq!(feed::remove_entry(&mut tx, boost).await.unwrap(), 2);
    assert_eq!(feed::remove_entry(&mut tx, boost).await.unwrap(), 0);
    assert_eq!(notify::remove_post(&mut tx, post).await.unwrap(), 1);
    assert_eq!(feed::remove_post(&mut tx, post).await.unwrap(), 2);
    tx.commit().await.unwrap();
}
