//! Filters and conversation mutes in the Mastodon client API (R-MAPI-6), over
//! HTTP and real WebSockets against a real node on a real PostgreSQL: v2 filters with their
//! keywords and statuses, the v1 view old clients read, bad input refused first; a `warn`
//! filter putting `filtered` on the status in every context it names (home, list, public, tag,
//! notifications, thread, account) and nowhere else, a `hide` filter leaving it out; the same
//! on the streams, with `filters_changed`; a filter's end announced on the queue once, even
//! across a worker SIGKILLed mid-task; a muted conversation notifying nothing.
//!
//! "Never arrives" on a stream is shown with a barrier, as in `streaming.rs`: the status that
//! must not arrive is posted first, then one that must; events reach a connection in commit
//! order, so once the second has arrived the first would have arrived before it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Client, WAIT, act_ok, add_to_list, assert_error, call_ok, follow, get_ok, id, new_list, users,
};
use support::eventually;
use support::node::Instance;
use support::stream::{Socket, listening};
use tokio_tungstenite::tungstenite::Message;

/// The statuses of a page by id, each with the titles of the filters in its `filtered`.
async fn page(api: &Client, path: &str) -> Vec<(String, Vec<String>)> {
    get_ok(api, path)
        .await
        .as_array()
        .expect("a list")
        .iter()
        .map(|s| (id(s), titles(s)))
        .collect()
}

fn titles(status: &Value) -> Vec<String> {
    status["filtered"]
        .as_array()
        .map(|f| {
            f.iter()
                .map(|r| {
                    r["filter"]["title"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What `path` shows of status `want`: `None` when it is left out, else its filters' titles.
async fn shown(api: &Client, path: &str, want: &str) -> Option<Vec<String>> {
    page(api, path)
        .await
        .into_iter()
        .find(|(i, _)| i == want)
        .map(|(_, t)| t)
}

#[tokio::test]
async fn filters_v2_and_v1_are_kept_and_refused_as_mastodon_does() {
    let inst = Instance::start("all", &[]).await;
    let [(_, _, api), (bob, _, bob_api), (_, _, eve)] = users(&inst, ["alice", "bob", "eve"]).await;

    // Bad input first: nothing is stored by any of these.
    for (body, what) in [
        (json!({ "context": ["home"] }), "no title"),
        (json!({ "title": " ", "context": ["home"] }), "blank title"),
        (json!({ "title": "x" }), "no context"),
        (
            json!({ "title": "x", "context": ["everywhere"] }),
            "unknown context",
        ),
        (
            json!({ "title": "x", "context": "home", "expires_in": "soon" }),
            "bad expires_in",
        ),
        (
            json!({ "title": "x", "context": "home", "expires_in": -5 }),
            "negative expires_in",
        ),
        (
            json!({ "title": "x", "context": "home", "keywords_attributes": "cat" }),
            "keywords not a list",
        ),
        (
            json!({ "title": "x", "context": "home", "keywords_attributes": [{ "keyword": "" }] }),
            "blank keyword",
        ),
        (
            json!({ "title": "t".repeat(257), "context": "home" }),
            "title over 256",
        ),
    ] {
        let a = api.call(Method::POST, "/api/v2/filters", &body).await;
        assert_error(&a, 422, what);
    }
    assert_eq!(inst.count("SELECT count(*) FROM filters").await, 0);

    // A form, with Rails' `keywords_attributes[][…]` grouping, as apps send it.
    let made = api
        .form(
            Method::POST,
            "/api/v2/filters",
            "title=Spoilers&context[]=home&context[]=public&filter_action=warn\
             &keywords_attributes[][keyword]=spoiler&keywords_attributes[][whole_word]=false\
             &keywords_attributes[][keyword]=finale",
        )
        .await
        .assert_ok();
    let f = made.body;
    assert_eq!(f["title"], "Spoilers");
    assert_eq!(f["context"], json!(["home", "public"]));
    assert_eq!(f["filter_action"], "warn");
    assert_eq!(f["expires_at"], Value::Null);
    let kws = f["keywords"].as_array().unwrap();
    assert_eq!(kws.len(), 2, "{f}");
    assert_eq!(
        (kws[0]["keyword"].as_str(), kws[0]["whole_word"].as_bool()),
        (Some("spoiler"), Some(false))
    );
    assert_eq!(
        (kws[1]["keyword"].as_str(), kws[1]["whole_word"].as_bool()),
        (Some("finale"), Some(true))
    );
    assert_eq!(f["statuses"], json!([]));
    let fid = id(&f);
    let (spoiler_kw, finale_kw) = (id(&kws[0]), id(&kws[1]));

    // Another account's filter, keyword or rule is the same 404 as none.
    for path in [
        format!("/api/v2/filters/{fid}"),
        format!("/api/v2/filters/{fid}/keywords"),
        format!("/api/v2/filters/keywords/{spoiler_kw}"),
        format!("/api/v1/filters/{spoiler_kw}"),
        "/api/v2/filters/not-an-id".to_string(),
    ] {
        assert_error(&eve.get(&path).await, 404, &path);
    }
    assert_error(
        &eve.act(Method::DELETE, &format!("/api/v2/filters/{fid}"))
            .await,
        404,
        "eve deletes alice's filter",
    );
    assert_eq!(get_ok(&eve, "/api/v2/filters").await, json!([]));

    // Update: a new title, `hide`, an end; a keyword changed, one destroyed, one added.
    let changed = call_ok(
        &api,
        Method::PUT,
        &format!("/api/v2/filters/{fid}"),
        json!({
            "title": "No spoilers",
            "filter_action": "hide",
            "expires_in": 3600,
            "keywords_attributes": [
                { "id": spoiler_kw, "whole_word": true },
                { "id": finale_kw, "_destroy": true },
                { "keyword": "ending" }
            ]
        }),
    )
    .await;
    assert_eq!(changed["title"], "No spoilers");
    assert_eq!(changed["filter_action"], "hide");
    assert!(changed["expires_at"].is_string(), "{changed}");
    let words: Vec<(String, bool)> = changed["keywords"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["keyword"].as_str().unwrap().to_string(),
                k["whole_word"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        words,
        vec![("spoiler".into(), true), ("ending".into(), true)]
    );
    assert_eq!(
        inst.count(
            "SELECT count(*) FROM hollo_task_message_v1 WHERE kind = 'hollo.filter-expiry.v1'"
        )
        .await,
        1,
        "an end queues its expiry"
    );
    // The end removed again (null), as apps do to make a filter permanent.
    let endless = call_ok(
        &api,
        Method::PUT,
        &format!("/api/v2/filters/{fid}"),
        json!({ "expires_in": null }),
    )
    .await;
    assert_eq!(endless["expires_at"], Value::Null);
    // A keyword id of another filter is refused, and changes nothing.
    assert_error(
        &api.call(
            Method::PUT,
            &format!("/api/v2/filters/{fid}"),
            &json!({ "title": "renamed", "keywords_attributes": [{ "id": uuid::Uuid::now_v7().to_string(), "keyword": "x" }] }),
        )
        .await,
        422,
        "a keyword of no filter",
    );
    assert_eq!(
        get_ok(&api, &format!("/api/v2/filters/{fid}")).await["title"],
        "No spoilers"
    );

    // The keywords resource.
    let added = call_ok(
        &api,
        Method::POST,
        &format!("/api/v2/filters/{fid}/keywords"),
        json!({ "keyword": "twist", "whole_word": false }),
    )
    .await;
    assert_eq!(
        (added["keyword"].as_str(), added["whole_word"].as_bool()),
        (Some("twist"), Some(false))
    );
    let twist = id(&added);
    let renamed = call_ok(
        &api,
        Method::PUT,
        &format!("/api/v2/filters/keywords/{twist}"),
        json!({ "keyword": "plot twist" }),
    )
    .await;
    assert_eq!(renamed["keyword"], "plot twist");
    assert_eq!(
        get_ok(&api, &format!("/api/v2/filters/keywords/{twist}")).await["whole_word"],
        false
    );
    assert_eq!(
        get_ok(&api, &format!("/api/v2/filters/{fid}/keywords"))
            .await
            .as_array()
            .unwrap()
            .len(),
        3
    );
    act_ok(
        &api,
        Method::DELETE,
        &format!("/api/v2/filters/keywords/{twist}"),
    )
    .await;
    assert_error(
        &api.get(&format!("/api/v2/filters/keywords/{twist}")).await,
        404,
        "deleted keyword",
    );

    // The statuses resource: a status alice can read; one she cannot is a 404.
    let public = id(&bob_api.posted(&json!({ "status": "a public post" })).await);
    let private = id(&bob_api
        .posted(&json!({ "status": "followers only", "visibility": "private" }))
        .await);
    assert_error(
        &api.call(
            Method::POST,
            &format!("/api/v2/filters/{fid}/statuses"),
            &json!({ "status_id": private }),
        )
        .await,
        404,
        "a status alice may not read",
    );
    let rule = call_ok(
        &api,
        Method::POST,
        &format!("/api/v2/filters/{fid}/statuses"),
        json!({ "status_id": public }),
    )
    .await;
    assert_eq!(rule["status_id"], public.as_str());
    let again = call_ok(
        &api,
        Method::POST,
        &format!("/api/v2/filters/{fid}/statuses"),
        json!({ "status_id": public }),
    )
    .await;
    assert_eq!(again["id"], rule["id"], "adding it twice is the same rule");
    let rule_id = id(&rule);
    assert_eq!(
        get_ok(&api, &format!("/api/v2/filters/statuses/{rule_id}")).await["status_id"],
        public.as_str()
    );
    assert_eq!(
        get_ok(&api, &format!("/api/v2/filters/{fid}/statuses"))
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_error(
        &eve.get(&format!("/api/v2/filters/statuses/{rule_id}"))
            .await,
        404,
        "eve reads the rule",
    );
    act_ok(
        &api,
        Method::DELETE,
        &format!("/api/v2/filters/statuses/{rule_id}"),
    )
    .await;
    assert_eq!(
        get_ok(&api, &format!("/api/v2/filters/{fid}")).await["statuses"],
        json!([])
    );

    // v1: one filter per keyword, `irreversible` is `hide`.
    let v1 = get_ok(&api, "/api/v1/filters").await;
    let v1 = v1.as_array().unwrap();
    assert_eq!(v1.len(), 2, "{v1:?}");
    assert_eq!(v1[0]["phrase"], "spoiler");
    assert_eq!(v1[0]["irreversible"], true);
    assert_eq!(v1[0]["context"], json!(["home", "public"]));
    // Changing the filter's own settings through one of several keywords is refused.
    assert_error(
        &api.call(
            Method::PUT,
            &format!("/api/v1/filters/{spoiler_kw}"),
            &json!({ "context": ["home"] }),
        )
        .await,
        422,
        "a v1 change of a filter with several keywords",
    );
    // The keyword itself may change.
    let phrase = call_ok(
        &api,
        Method::PUT,
        &format!("/api/v1/filters/{spoiler_kw}"),
        json!({ "phrase": "spoilers", "whole_word": false }),
    )
    .await;
    assert_eq!(
        (phrase["phrase"].as_str(), phrase["whole_word"].as_bool()),
        (Some("spoilers"), Some(false))
    );
    // A v1 create is a filter of one keyword; a v1 delete of it removes the filter.
    let old = api
        .form(
            Method::POST,
            "/api/v1/filters",
            "phrase=election&context[]=notifications&irreversible=false&whole_word=true",
        )
        .await
        .assert_ok();
    assert_eq!(old.body["phrase"], "election");
    assert_eq!(old.body["irreversible"], false);
    let old_id = id(&old.body);
    let v2 = get_ok(&api, "/api/v2/filters").await;
    let made_by_v1 = v2
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["title"] == "election")
        .expect("a v2 filter")
        .clone();
    assert_eq!(made_by_v1["context"], json!(["notifications"]));
    assert_eq!(made_by_v1["filter_action"], "warn");
    let moved = call_ok(
        &api,
        Method::PUT,
        &format!("/api/v1/filters/{old_id}"),
        json!({ "irreversible": true, "context": ["home", "thread"] }),
    )
    .await;
    assert_eq!(
        (moved["irreversible"].as_bool(), moved["context"].clone()),
        (Some(true), json!(["home", "thread"]))
    );
    act_ok(&api, Method::DELETE, &format!("/api/v1/filters/{old_id}")).await;
    assert_eq!(
        get_ok(&api, "/api/v2/filters")
            .await
            .as_array()
            .unwrap()
            .len(),
        1,
        "its filter went with it"
    );

    // Scopes: read:filters to read, write:filters to change.
    let reader = support::api::token_with_scopes(&inst, bob.id, "read:statuses").await;
    let reader = Client::new(&inst, Some(&reader));
    assert_error(&reader.get("/api/v2/filters").await, 403, "no read:filters");
    assert_error(
        &reader
            .call(
                Method::POST,
                "/api/v1/filters",
                &json!({ "phrase": "x", "context": ["home"] }),
            )
            .await,
        403,
        "no write:filters",
    );

    act_ok(&api, Method::DELETE, &format!("/api/v2/filters/{fid}")).await;
    assert_eq!(get_ok(&api, "/api/v2/filters").await, json!([]));
    assert_eq!(
        inst.count("SELECT count(*) FROM filter_keywords").await,
        0,
        "rules go with their filter"
    );
    inst.shutdown().await;
}

async fn filter(api: &Client, body: Value) -> String {
    id(&call_ok(api, Method::POST, "/api/v2/filters", body).await)
}

#[tokio::test]
async fn a_filter_applies_in_the_contexts_it_names_and_nowhere_else() {
    let inst = Instance::start("all", &[]).await;
    let [
        (alice, alice_token, api),
        (bob, _, bob_api),
        (carol, carol_token, carol_api),
    ] = users(&inst, ["alice", "bob", "carol"]).await;
    let (bob_id, carol_id) = (bob.id.to_string(), carol.id.to_string());
    follow(&api, &bob_id).await;
    follow(&api, &carol_id).await;
    let list = new_list(&api, json!({ "title": "bob" })).await;
    add_to_list(&api, &list, &[&bob_id]).await;

    let root = id(&alice_api_post(&api, "what happened in the show?").await);
    // Matches "Spoiler" whole-word (case-insensitive) inside HTML paragraphs; the control
    // says "spoilers", which the whole-word keyword does not match.
    let hit = id(&bob_api
        .posted(
            &json!({ "status": "@alice Spoiler\n\nthe butler did it #tv", "in_reply_to_id": root }),
        )
        .await);
    let near = id(&bob_api
        .posted(&json!({ "status": "no spoilers here #tv" }))
        .await);
    let boost = id(&act_ok(
        &carol_api,
        Method::POST,
        &format!("/api/v1/statuses/{hit}/reblog"),
    )
    .await);
    let own = id(&alice_api_post(&api, "my own spoiler is mine to see").await);

    let f = filter(
        &api,
        json!({ "title": "TV", "context": ["home", "public", "notifications", "thread", "account"],
                "keywords_attributes": [{ "keyword": "spoiler", "whole_word": true }] }),
    )
    .await;
    let warned = Some(vec!["TV".to_string()]);
    let paths = [
        "/api/v1/timelines/home".to_string(),
        format!("/api/v1/timelines/list/{list}"),
        "/api/v1/timelines/public".to_string(),
        "/api/v1/timelines/tag/tv".to_string(),
        format!("/api/v1/accounts/{bob_id}/statuses"),
    ];
    for p in &paths {
        assert_eq!(shown(&api, p, &hit).await, warned, "warned in {p}");
        assert_eq!(
            shown(&api, p, &near).await,
            Some(vec![]),
            "a near miss is not filtered: {p}"
        );
    }
    // A boost carries its boosted status's results, on itself and on `reblog`.
    let home = get_ok(&api, "/api/v1/timelines/home").await;
    let b = home
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == boost.as_str())
        .expect("the boost")
        .clone();
    assert_eq!(
        (titles(&b), titles(&b["reblog"])),
        (vec!["TV".into()], vec!["TV".into()])
    );
    assert_eq!(b["filtered"][0]["keyword_matches"], json!(["spoiler"]));
    assert!(
        b["filtered"][0]["filter"].get("keywords").is_none(),
        "a result's filter has no rules"
    );
    // The thread and the notifications.
    let ctx = get_ok(&api, &format!("/api/v1/statuses/{root}/context")).await;
    assert_eq!(
        titles(&ctx["descendants"][0]),
        vec!["TV".to_string()],
        "{ctx}"
    );
    let notes = get_ok(&api, "/api/v1/notifications?types[]=mention").await;
    assert_eq!(
        titles(&notes[0]["status"]),
        vec!["TV".to_string()],
        "{notes}"
    );
    // One's own statuses are never filtered.
    assert_eq!(
        shown(&api, "/api/v1/timelines/home", &own).await,
        Some(vec![])
    );
    // Another reader has no such filter.
    let carol_home = Client::new(&inst, Some(&carol_token));
    assert_eq!(
        shown(&carol_home, "/api/v1/timelines/public", &hit).await,
        Some(vec![])
    );

    // Narrowed to home: the other contexts show it unfiltered.
    call_ok(
        &api,
        Method::PUT,
        &format!("/api/v2/filters/{f}"),
        json!({ "context": ["home"] }),
    )
    .await;
    assert_eq!(shown(&api, &paths[0], &hit).await, warned);
    assert_eq!(
        shown(&api, &paths[1], &hit).await,
        warned,
        "lists are the home context"
    );
    for p in &paths[2..] {
        assert_eq!(
            shown(&api, p, &hit).await,
            Some(vec![]),
            "not filtered in {p}"
        );
    }

    // `hide` in every context: gone everywhere, the boost too; the near miss stays.
    call_ok(
        &api,
        Method::PUT,
        &format!("/api/v2/filters/{f}"),
        json!({ "filter_action": "hide", "context": ["home", "public", "notifications", "thread", "account"] }),
    )
    .await;
    for p in &paths {
        assert_eq!(shown(&api, p, &hit).await, None, "hidden from {p}");
        assert_eq!(
            shown(&api, p, &near).await,
            Some(vec![]),
            "the near miss stays in {p}"
        );
    }
    assert_eq!(
        shown(&api, &paths[0], &boost).await,
        None,
        "the boost of it too"
    );
    let ctx = get_ok(&api, &format!("/api/v1/statuses/{root}/context")).await;
    assert_eq!(ctx["descendants"], json!([]), "hidden from the thread");
    assert_eq!(
        get_ok(&api, "/api/v1/notifications?types[]=mention").await,
        json!([])
    );
    // A page emptied by the filter still leads on: its Link names the cursor it read (the
    // entry just older than the near miss is the hidden one).
    let emptied = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/timelines/home?limit=1&max_id={near}",
            api.base
        ))
        .bearer_auth(&alice_token)
        .send()
        .await
        .unwrap();
    let link = emptied
        .headers()
        .get("link")
        .map(|v| v.to_str().unwrap().to_string());
    assert_eq!(emptied.json::<Value>().await.unwrap(), json!([]));
    assert!(
        link.as_deref()
            .is_some_and(|l| l.contains(&format!("max_id={hit}"))),
        "{link:?}"
    );
    // Opening the status itself still works (a preference, not visibility).
    assert_eq!(
        get_ok(&api, &format!("/api/v1/statuses/{hit}")).await["id"],
        hit.as_str()
    );

    // A status rule: carol's unrelated post, hidden by id alone.
    let carols = id(&carol_api
        .posted(&json!({ "status": "carol's ordinary post" }))
        .await);
    let by_id = filter(&api, json!({ "title": "that one", "context": ["home"] })).await;
    call_ok(
        &api,
        Method::POST,
        &format!("/api/v2/filters/{by_id}/statuses"),
        json!({ "status_id": carols }),
    )
    .await;
    let home = get_ok(&api, "/api/v1/timelines/home").await;
    let c = home
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == carols.as_str())
        .expect("carol's post")
        .clone();
    assert_eq!(c["filtered"][0]["status_matches"], json!([carols]));
    assert_eq!(c["filtered"][0]["keyword_matches"], Value::Null);

    // Deleted: everything is back.
    act_ok(&api, Method::DELETE, &format!("/api/v2/filters/{f}")).await;
    for p in &paths {
        assert_eq!(shown(&api, p, &hit).await, Some(vec![]), "back in {p}");
    }
    let _ = (alice, carol);
    inst.shutdown().await;
}

async fn alice_api_post(api: &Client, text: &str) -> Value {
    api.posted(&json!({ "status": text })).await
}

#[tokio::test]
async fn a_filter_ends_at_its_expiry_and_the_streams_are_told_once() {
    let inst = Instance::start("all", &[]).await;
    let [(_, alice_token, api), (bob, _, bob_api)] = users(&inst, ["alice", "bob"]).await;
    follow(&api, &bob.id.to_string()).await;
    let hit = id(&bob_api
        .posted(&json!({ "status": "a quick spoiler" }))
        .await);
    let mut ws = listening(&inst.base, "stream=user", &alice_token, WAIT).await;

    let started = Instant::now();
    let f = filter(
        &api,
        json!({ "title": "brief", "context": ["home"], "filter_action": "hide", "expires_in": 3,
                "keywords_attributes": [{ "keyword": "spoiler" }] }),
    )
    .await;
    // The creation itself is announced.
    assert_eq!(
        next_event(&mut ws).await,
        ("filters_changed".to_string(), Value::Null)
    );
    let still = shown(&api, "/api/v1/timelines/home", &hit).await;
    if started.elapsed() < Duration::from_secs(3) {
        assert_eq!(still, None, "hidden while the filter stands");
    }
    // At its end the worker announces it, and the filter (kept, as on Mastodon) applies no more.
    assert_eq!(next_event(&mut ws).await.0, "filters_changed");
    assert!(started.elapsed() >= Duration::from_secs(3), "never early");
    assert_eq!(
        shown(&api, "/api/v1/timelines/home", &hit).await,
        Some(vec![])
    );
    let kept = get_ok(&api, &format!("/api/v2/filters/{f}")).await;
    assert!(kept["expires_at"].is_string(), "{kept}");
    let announced = "SELECT count(*) FROM stream_events WHERE kind = 'filters'";
    assert_eq!(inst.count(announced).await, 2, "created, then ended");

    // A duplicate message for the same end announces nothing again.
    let mut tx = inst.pool.begin().await.unwrap();
    hollo_runtime::queue::enqueue(
        &mut *tx,
        hollo_runtime::queue::QueueName::Task,
        &hollo_runtime::queue::NewMessage::new("hollo.filter-expiry.v1", json!({ "filterId": f })),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    eventually(WAIT, "the duplicate is run", || async {
        (inst
            .count(
                "SELECT count(*) FROM hollo_task_message_v1 WHERE kind = 'hollo.filter-expiry.v1'",
            )
            .await
            == 0)
            .then_some(())
    })
    .await;
    assert_eq!(inst.count(announced).await, 2, "never twice");
    inst.shutdown().await;
}

/// The poll-expiry standard for a filter's end: a worker SIGKILLed while it runs the expiry
/// (held on the filter's row lock, so the kill lands mid-task) loses nothing and does nothing
/// twice: once its lease lapses another worker announces the end, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_filter_expiry_survives_a_worker_killed_mid_task() {
    let inst = Instance::start("web", &[]).await;
    let (_, alice_token) = inst.account("alice").await;
    let api = Client::new(&inst, Some(&alice_token));
    filter(
        &api,
        json!({ "title": "soon", "context": ["home"], "expires_in": 1,
                         "keywords_attributes": [{ "keyword": "x" }] }),
    )
    .await;
    support::expiry::KilledMidTask {
        lock: "SELECT 1 FROM filters FOR UPDATE",
        kind: "hollo.filter-expiry.v1",
        done: "SELECT count(*) FROM filters WHERE expiry_announced IS NOT NULL",
        before: 0,
        after: 1,
    }
    .check(&inst)
    .await;
    assert_eq!(
        inst.count("SELECT count(*) FROM stream_events WHERE kind = 'filters'")
            .await,
        2,
        "created once, ended once"
    );
    inst.shutdown().await;
}

/// The next message's event and payload (parsed; `Null` when it has none).
async fn next_event(ws: &mut Socket) -> (String, Value) {
    let m = tokio::time::timeout(WAIT, ws.next())
        .await
        .expect("an event in time");
    let Some(Ok(Message::Text(text))) = m else {
        panic!("stream ended: {m:?}")
    };
    let v: Value = serde_json::from_str(text.as_str()).unwrap();
    let payload = v["payload"]
        .as_str()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or(Value::Null);
    (v["event"].as_str().unwrap_or_default().to_string(), payload)
}

/// Events until an `event` whose payload (a status, or a notification's status) has id
/// `want`; returns that status and the status ids of every event before it.
async fn until(ws: &mut Socket, event: &str, want: &str) -> (Value, Vec<String>) {
    let start = Instant::now();
    let mut before = Vec::new();
    loop {
        assert!(
            start.elapsed() < WAIT,
            "timed out waiting for {want}; got {before:?}"
        );
        let (got_event, payload) = next_event(ws).await;
        let status = if got_event == "notification" {
            payload["status"].clone()
        } else {
            payload.clone()
        };
        let got = status["id"].as_str().unwrap_or_default().to_string();
        if got == want && got_event == event {
            return (status, before);
        }
        before.push(got);
    }
}

#[tokio::test]
async fn the_streams_carry_filtered_and_leave_hidden_statuses_out() {
    let inst = Instance::start("all", &[]).await;
    let [(_, alice_token, api), (bob, _, bob_api)] = users(&inst, ["alice", "bob"]).await;
    follow(&api, &bob.id.to_string()).await;
    filter(
        &api,
        json!({ "title": "warned", "context": ["home", "public", "notifications"],
                         "keywords_attributes": [{ "keyword": "cats" }] }),
    )
    .await;
    filter(&api, json!({ "title": "hidden", "context": ["home", "public", "notifications"], "filter_action": "hide",
                         "keywords_attributes": [{ "keyword": "dogs" }] }))
    .await;
    let list = new_list(&api, json!({ "title": "bob" })).await;
    add_to_list(&api, &list, &[&bob.id.to_string()]).await;
    let mut user = listening(&inst.base, "stream=user", &alice_token, WAIT).await;
    let mut listed = listening(
        &inst.base,
        &format!("stream=list&list={list}"),
        &alice_token,
        WAIT,
    )
    .await;
    let mut public = listening(&inst.base, "stream=public", &alice_token, WAIT).await;
    let (_, eve_token) = inst.account("eve").await;
    let mut eve_public = listening(&inst.base, "stream=public", &eve_token, WAIT).await;

    let dogs = id(&bob_api
        .posted(&json!({ "status": "dogs everywhere" }))
        .await);
    let dog_mention = id(&bob_api
        .posted(&json!({ "status": "@alice dogs again" }))
        .await);
    let cats = id(&bob_api.posted(&json!({ "status": "cats are here" })).await);
    let cat_mention = id(&bob_api
        .posted(&json!({ "status": "@alice cats too" }))
        .await);

    // Home: the cats post warned; the dogs post never sent (it came first: the barrier).
    let (got, before) = until(&mut user, "update", &cats).await;
    assert_eq!(titles(&got), vec!["warned".to_string()]);
    assert!(
        !before.contains(&dogs) && !before.contains(&dog_mention),
        "{before:?}"
    );
    // The notification of the cats mention is warned; the dogs mention's never came.
    let (got, before) = until(&mut user, "notification", &cat_mention).await;
    assert_eq!(titles(&got), vec!["warned".to_string()]);
    assert!(
        !before.contains(&dogs) && !before.contains(&dog_mention),
        "{before:?}"
    );
    // A list stream is the home context too.
    let (got, before) = until(&mut listed, "update", &cats).await;
    assert_eq!(titles(&got), vec!["warned".to_string()]);
    assert!(
        !before.contains(&dogs) && !before.contains(&dog_mention),
        "{before:?}"
    );
    // Public: the shared render, filtered for alice only.
    let (got, before) = until(&mut public, "update", &cats).await;
    assert_eq!(titles(&got), vec!["warned".to_string()]);
    assert!(!before.contains(&dogs), "{before:?}");
    let (got, before) = until(&mut eve_public, "update", &cats).await;
    assert!(titles(&got).is_empty(), "eve has no filters");
    assert!(before.contains(&dogs), "eve sees the dogs post: {before:?}");
    inst.shutdown().await;
}

#[tokio::test]
async fn a_muted_conversation_notifies_nothing_until_unmuted() {
    let inst = Instance::start("all", &[]).await;
    let [(_, _, api), (_, _, bob_api), (_, _, carol_api)] =
        users(&inst, ["alice", "bob", "carol"]).await;
    let root = id(&api.posted(&json!({ "status": "a thread of mine" })).await);
    let reply = id(&bob_api
        .posted(&json!({ "status": "@alice a reply", "in_reply_to_id": root }))
        .await);
    let mentions = || async {
        get_ok(&api, "/api/v1/notifications")
            .await
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n["status"]["id"].as_str().map(str::to_string))
            .collect::<Vec<_>>()
    };
    assert!(mentions().await.contains(&reply), "before the mute");

    // Muted through a reply deep in it: the whole thread is muted, the root says so.
    let muted = act_ok(
        &api,
        Method::POST,
        &format!("/api/v1/statuses/{reply}/mute"),
    )
    .await;
    assert_eq!(muted["muted"], true);
    assert_eq!(
        get_ok(&api, &format!("/api/v1/statuses/{root}")).await["muted"],
        true
    );
    assert_eq!(
        get_ok(&bob_api, &format!("/api/v1/statuses/{root}")).await["muted"],
        false,
        "bob's view"
    );
    let deeper = id(&bob_api
        .posted(&json!({ "status": "@alice more", "in_reply_to_id": reply }))
        .await);
    act_ok(
        &carol_api,
        Method::POST,
        &format!("/api/v1/statuses/{root}/favourite"),
    )
    .await;
    act_ok(
        &carol_api,
        Method::POST,
        &format!("/api/v1/statuses/{root}/reblog"),
    )
    .await;
    // The control: another thread still notifies.
    let elsewhere = id(&carol_api
        .posted(&json!({ "status": "@alice elsewhere" }))
        .await);
    let seen = mentions().await;
    assert!(
        seen.contains(&elsewhere),
        "another thread notifies: {seen:?}"
    );
    assert!(
        !seen.contains(&deeper),
        "the muted thread's reply did not notify: {seen:?}"
    );
    let kinds: Vec<String> = get_ok(&api, "/api/v1/notifications")
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["type"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !kinds.iter().any(|k| k == "favourite" || k == "reblog"),
        "{kinds:?}"
    );

    // Unmuted: the thread notifies again.
    let unmuted = act_ok(
        &api,
        Method::POST,
        &format!("/api/v1/statuses/{root}/unmute"),
    )
    .await;
    assert_eq!(unmuted["muted"], false);
    let after = id(&bob_api
        .posted(&json!({ "status": "@alice and again", "in_reply_to_id": deeper }))
        .await);
    assert!(mentions().await.contains(&after));
    // Someone else's status, unreadable, is a 404.
    let private = id(&bob_api
        .posted(&json!({ "status": "mine alone", "visibility": "direct" }))
        .await);
    assert_error(
        &carol_api
            .act(Method::POST, &format!("/api/v1/statuses/{private}/mute"))
            .await,
        404,
        "unreadable",
    );
    inst.shutdown().await;
}

/// F4 (issue 61): 100 filters of 100 keywords of 512 characters made every page a reader was
/// shown cost seconds of CPU on an async worker. An account's keywords are bounded in total
/// (16 KiB, counted in bytes over all its filters): the audit's filter is refused whole, and
/// every way of adding keyword text (a new filter, a filter's update, the keywords resource,
/// a keyword's change) is refused past the bound and changes nothing. A reader at the bound
/// still gets their pages, filtered as before, and the node its health checks.
#[tokio::test]
async fn an_accounts_keywords_are_bounded_in_total() {
    let inst = Instance::start("all", &[]).await;
    let [(_, _, api), (bob, _, bob_api)] = users(&inst, ["alice", "bob"]).await;
    follow(&api, &bob.id.to_string()).await;
    let long = |i: usize, n: usize| format!("{}{i:03}", "a".repeat(n - 3));
    let bytes = || {
        inst.count("SELECT coalesce(sum(octet_length(keyword)), 0)::bigint FROM filter_keywords")
    };

    let audit: Vec<Value> = (0..100)
        .map(|i| json!({ "keyword": long(i, 512) }))
        .collect();
    let refused = api
        .call(
            Method::POST,
            "/api/v2/filters",
            &json!({ "title": "hostile", "context": ["home"], "keywords_attributes": audit }),
        )
        .await;
    assert_error(&refused, 422, "100 keywords of 512 characters");
    assert!(
        refused.body["error"]
            .as_str()
            .unwrap()
            .contains("16384 bytes"),
        "{}",
        refused.body
    );
    assert_eq!(inst.count("SELECT count(*) FROM filters").await, 0);

    // Up to the bound exactly: 31 keywords of 512 bytes, then "cat" and one of 509 bytes.
    let first: Vec<Value> = (0..31)
        .map(|i| json!({ "keyword": long(i, 512) }))
        .collect();
    call_ok(
        &api,
        Method::POST,
        "/api/v2/filters",
        json!({ "title": "long", "context": ["home"], "keywords_attributes": first }),
    )
    .await;
    let pets = call_ok(
        &api,
        Method::POST,
        "/api/v2/filters",
        json!({ "title": "pets", "context": ["home"],
                "keywords_attributes": [{ "keyword": "cat", "whole_word": true }] }),
    )
    .await;
    let (pets_id, cat) = (id(&pets), id(&pets["keywords"][0]));
    let keywords = format!("/api/v2/filters/{pets_id}/keywords");
    let over = api
        .call(
            Method::POST,
            &keywords,
            &json!({ "keyword": long(900, 510) }),
        )
        .await;
    assert_error(&over, 422, "one byte over, by the keywords resource");
    call_ok(
        &api,
        Method::POST,
        &keywords,
        json!({ "keyword": long(901, 509) }),
    )
    .await;
    assert_eq!(bytes().await, 16 * 1024);

    // At the bound, nothing more goes in by any route.
    for (method, path, body, what) in [
        (
            Method::POST,
            keywords.clone(),
            json!({ "keyword": "x" }),
            "a keyword added",
        ),
        (
            Method::PUT,
            format!("/api/v2/filters/keywords/{cat}"),
            json!({ "keyword": "cats" }),
            "a keyword made longer",
        ),
        (
            Method::PUT,
            format!("/api/v2/filters/{pets_id}"),
            json!({ "keywords_attributes": [{ "keyword": "dog" }] }),
            "a filter's update",
        ),
        (
            Method::POST,
            "/api/v2/filters".to_string(),
            json!({ "title": "more", "context": ["home"],
                    "keywords_attributes": [{ "keyword": "dog" }] }),
            "a new filter",
        ),
        (
            Method::POST,
            "/api/v1/filters".to_string(),
            json!({ "phrase": "dog", "context": ["home"] }),
            "a v1 filter",
        ),
    ] {
        assert_error(&api.call(method, &path, &body).await, 422, what);
    }
    assert_eq!(bytes().await, 16 * 1024, "the refusals changed nothing");
    assert_eq!(inst.count("SELECT count(*) FROM filters").await, 2);
    // Shorter is always allowed.
    call_ok(
        &api,
        Method::PUT,
        &format!("/api/v2/filters/keywords/{cat}"),
        json!({ "keyword": "ca" }),
    )
    .await;
    call_ok(
        &api,
        Method::PUT,
        &format!("/api/v2/filters/keywords/{cat}"),
        json!({ "keyword": "cat" }),
    )
    .await;

    // The page: every keyword matched, as before, and the node answers its health checks.
    let near = "a".repeat(400);
    let hit = id(&bob_api
        .posted(&json!({ "status": format!("{near} and a Cat!") }))
        .await);
    let miss = id(&bob_api
        .posted(&json!({ "status": format!("{near} concatenated") }))
        .await);
    let home = get_ok(&api, "/api/v1/timelines/home").await;
    let of = |want: &str| {
        home.as_array()
            .unwrap()
            .iter()
            .find(|s| id(s) == want)
            .cloned()
            .expect("on the page")
    };
    assert_eq!(titles(&of(&hit)), ["pets"]);
    assert_eq!(of(&hit)["filtered"][0]["keyword_matches"], json!(["cat"]));
    assert_eq!(titles(&of(&miss)), Vec::<String>::new());
    let health = reqwest::get(format!("{}/healthz", inst.health_base()))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}
