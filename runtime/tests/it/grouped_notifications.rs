//! Grouped notifications (R-MAPI-6, issue 32 item 6; Mastodon 4.3's `/api/v2/notifications`):
//! favourites and boosts of one post and follows make groups with their counts and latest
//! accounts, everything else stays alone; `grouped_types[]` chooses; pages of groups with
//! `Link`; one group, its accounts, dismissing it; unread groups past the marker; mutes and
//! the visibility check apply as on the v1 list; a group spans at most 12 hours.

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{Client, assert_error, token_with_scopes};
use support::node::Instance;

fn groups(body: &Value) -> Vec<Value> {
    body["notification_groups"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn by_type<'a>(groups: &'a [Value], ty: &str) -> Vec<&'a Value> {
    groups.iter().filter(|g| g["type"] == ty).collect()
}

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x["id"].as_str().or(x.as_str()).map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn notifications_come_in_groups_as_mastodon_makes_them() {
    let inst = Instance::start("all", &[]).await;
    let (alice, token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&token));
    let mut others = Vec::new();
    for name in ["bob", "carol", "dave", "eve"] {
        let (a, t) = inst.account(name).await;
        others.push((a, Client::new(&inst, Some(&t))));
    }
    let post = api.posted(&json!({ "status": "hello" })).await;
    let post_id = post["id"].as_str().expect("id").to_string();
    let act = |c: &Client, path: String| {
        let c = Client {
            base: c.base.clone(),
            token: c.token.clone(),
            http: c.http.clone(),
        };
        async move {
            let a = c.act(Method::POST, &path).await;
            assert_eq!(a.status, 200, "{path}: {}", a.body);
        }
    };
    // bob and carol follow; bob, carol, dave and eve favourite; bob and carol boost; dave
    // mentions alice.
    for (_, c) in &others[..2] {
        act(c, format!("/api/v1/accounts/{}/follow", alice.id)).await;
    }
    for (_, c) in &others {
        act(c, format!("/api/v1/statuses/{post_id}/favourite")).await;
    }
    for (_, c) in &others[..2] {
        act(c, format!("/api/v1/statuses/{post_id}/reblog")).await;
    }
    let mention = others[2].1.posted(&json!({ "status": "@alice hi" })).await;
    let (bob, carol, dave, eve) = (
        others[0].0.id.to_string(),
        others[1].0.id.to_string(),
        others[2].0.id.to_string(),
        others[3].0.id.to_string(),
    );

    // Refused first: no token, no scope, an unknown type, a key that is none.
    assert_eq!(
        Client::new(&inst, None)
            .get("/api/v2/notifications")
            .await
            .status,
        401
    );
    let no_scope = Client::new(
        &inst,
        Some(&token_with_scopes(&inst, alice.id, "read:statuses").await),
    );
    assert_error(
        &no_scope.get("/api/v2/notifications").await,
        403,
        "without read:notifications",
    );
    assert_error(
        &api.get("/api/v2/notifications?grouped_types[]=cheer").await,
        422,
        "an unknown type",
    );
    for bad in ["nothing", "ungrouped-x", "follow-x"] {
        assert_error(
            &api.get(&format!("/api/v2/notifications/{bad}")).await,
            404,
            bad,
        );
    }

    // The default grouping: favourite, reblog and follow groups, the mention alone.
    let page = api.get("/api/v2/notifications").await.assert_ok();
    let all = groups(&page.body);
    assert_eq!(all.len(), 4, "{}", page.body);
    let fav = by_type(&all, "favourite")[0];
    assert_eq!(fav["notifications_count"], 4);
    assert_eq!(fav["status_id"], post_id.as_str());
    assert_eq!(
        ids(&fav["sample_account_ids"]),
        [eve.as_str(), &dave, &carol, &bob]
    );
    let boosts = by_type(&all, "reblog")[0];
    assert_eq!(boosts["notifications_count"], 2);
    assert_eq!(ids(&boosts["sample_account_ids"]), [carol.as_str(), &bob]);
    let follows = by_type(&all, "follow")[0];
    assert_eq!(follows["notifications_count"], 2);
    assert!(follows.get("status_id").is_none(), "{follows}");
    let mentioned = by_type(&all, "mention")[0];
    assert_eq!(mentioned["notifications_count"], 1);
    assert!(
        mentioned["group_key"]
            .as_str()
            .is_some_and(|k| k.starts_with("ungrouped-")),
        "{mentioned}"
    );
    assert_eq!(mentioned["status_id"], mention["id"]);
    // Newest first, each with its window; accounts and statuses once each.
    let newest: Vec<i64> = all
        .iter()
        .map(|g| {
            g["page_max_id"]
                .as_str()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        })
        .collect();
    assert!(newest.windows(2).all(|w| w[0] > w[1]), "{newest:?}");
    let mut accounts = ids(&page.body["accounts"]);
    accounts.sort();
    let mut want = vec![bob.clone(), carol.clone(), dave.clone(), eve.clone()];
    want.sort();
    assert_eq!(accounts, want);
    let mut statuses = ids(&page.body["statuses"]);
    statuses.sort();
    let mut want = vec![
        post_id.clone(),
        mention["id"].as_str().unwrap_or_default().to_string(),
    ];
    want.sort();
    assert_eq!(statuses, want);

    // The v1 list carries the same keys.
    let v1 = api.get("/api/v1/notifications").await.body;
    let v1 = v1.as_array().expect("a list");
    assert_eq!(v1.len(), 9);
    for n in v1.iter().filter(|n| n["type"] == "favourite") {
        assert_eq!(n["group_key"], fav["group_key"], "{n}");
    }

    // grouped_types[] chooses: follows alone now.
    let only_favs = api
        .get("/api/v2/notifications?grouped_types[]=favourite")
        .await
        .body;
    let g = groups(&only_favs);
    assert_eq!(by_type(&g, "follow").len(), 2, "{only_favs}");
    assert_eq!(by_type(&g, "reblog").len(), 2);
    assert_eq!(by_type(&g, "favourite").len(), 1);

    // Pages of two groups through Link, down to an empty page. A group whose older
    // notifications lie below a page's window comes again on the next page (Mastodon's
    // paging too; clients merge by key), so together the pages hold every group.
    let mut url = format!("{}/api/v2/notifications?limit=2", inst.base);
    let mut seen: Vec<String> = Vec::new();
    let mut pages = 0;
    loop {
        let resp = api
            .http
            .get(&url)
            .bearer_auth(&token)
            .send()
            .await
            .expect("request");
        let link = resp
            .headers()
            .get("link")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body: Value = resp.json().await.expect("json");
        let keys: Vec<String> = groups(&body)
            .iter()
            .filter_map(|g| g["group_key"].as_str().map(str::to_string))
            .collect();
        if keys.is_empty() {
            assert!(link.is_none(), "an empty page has no Link");
            break;
        }
        assert!(keys.len() <= 2, "{body}");
        let mut unique = keys.clone();
        unique.dedup();
        assert_eq!(unique, keys, "a page holds a group once");
        seen.extend(keys);
        pages += 1;
        assert!(pages <= 5, "the pages end");
        url = link
            .as_deref()
            .and_then(|l| l.split(',').find(|l| l.contains("rel=\"next\"")))
            .and_then(|l| l.split(['<', '>']).nth(1))
            .expect("a next link")
            .to_string();
    }
    seen.sort();
    seen.dedup();
    let mut want: Vec<String> = all
        .iter()
        .filter_map(|g| g["group_key"].as_str().map(str::to_string))
        .collect();
    want.sort();
    assert_eq!(seen, want, "the pages hold every group");

    // One group and its accounts.
    let key = fav["group_key"].as_str().expect("key");
    let one = api
        .get(&format!("/api/v2/notifications/{key}"))
        .await
        .assert_ok();
    assert_eq!(groups(&one.body)[0]["notifications_count"], 4);
    let who = api
        .get(&format!("/api/v2/notifications/{key}/accounts"))
        .await;
    assert_eq!(ids(&who.body), [eve.as_str(), &dave, &carol, &bob]);
    // Another account cannot read it.
    assert_error(
        &others[0]
            .1
            .get(&format!("/api/v2/notifications/{key}"))
            .await,
        404,
        "another account's group",
    );

    // Unread groups past the marker.
    let unread = api.get("/api/v2/notifications/unread_count").await;
    assert_eq!(unread.body["count"], 4, "{}", unread.body);
    let top = v1[0]["id"].as_str().expect("id");
    api.call(
        Method::POST,
        "/api/v1/markers",
        &json!({ "notifications": { "last_read_id": top } }),
    )
    .await
    .assert_ok();
    assert_eq!(
        api.get("/api/v2/notifications/unread_count").await.body["count"],
        0
    );

    // A mute takes eve out of the group, its count and the accounts.
    api.act(Method::POST, &format!("/api/v1/accounts/{eve}/mute"))
        .await
        .assert_ok();
    let page = api.get("/api/v2/notifications").await.body;
    let fav = by_type(&groups(&page), "favourite")[0].clone();
    assert_eq!(fav["notifications_count"], 3);
    assert!(!ids(&page["accounts"]).contains(&eve), "{page}");

    // A group spans 12 hours: once the current one began 13 hours ago, a new one starts.
    sqlx::query(
        "UPDATE notifications SET group_bucket = group_bucket - 13
          WHERE account_id = $1 AND type = 'favourite'",
    )
    .bind(alice.id)
    .execute(&inst.pool)
    .await
    .expect("age the group");
    let (frank, frank_token) = inst.account("frank").await;
    act(
        &Client::new(&inst, Some(&frank_token)),
        format!("/api/v1/statuses/{post_id}/favourite"),
    )
    .await;
    let page = api.get("/api/v2/notifications").await.body;
    let favs = by_type(&groups(&page), "favourite")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(favs.len(), 2, "{page}");
    assert_eq!(favs[0]["notifications_count"], 1);
    assert_eq!(ids(&favs[0]["sample_account_ids"]), [frank.id.to_string()]);

    // Dismissing a group removes its notifications, and only its.
    let key = favs[1]["group_key"].as_str().expect("key");
    api.act(
        Method::POST,
        &format!("/api/v2/notifications/{key}/dismiss"),
    )
    .await
    .assert_ok();
    assert_error(
        &api.get(&format!("/api/v2/notifications/{key}")).await,
        404,
        "a dismissed group",
    );
    let left = api.get("/api/v1/notifications").await.body;
    assert_eq!(left.as_array().map(Vec::len), Some(6), "{left}");
    inst.shutdown().await;
}
