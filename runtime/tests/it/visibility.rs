//! One visibility rule for every path that returns a status (R-MAPI-VIS, R-API and
//! 2): a direct message and a followers-only post between two other accounts — local ones, with
//! a poll and a hashtag, and remote ones addressed to someone else — never reach a third
//! account or an anonymous client, through any route the server has; nor do the
//! followers-only ones reach a follower of their author's once the follow has ended (removed
//! from the followers, unfollowed, blocked by the author here or by the remote author). And
//! a reader the author blocks — here, or by the `Block` a remote author sent — reads none of
//! the author's public posts either, through any route of the client API (which knows its
//! reader by token; the pages and documents serve anonymous readers, and a blocked server's
//! signed fetch is `access.rs`'s).
//!
//! The routes are not listed here: they are read from the router's source (every
//! `.route("…", get(…).post(…))` under `src/web`), so a route added tomorrow is attacked too.
//! Each is called with every method it has, with each secret id, IRI, account id and tag in
//! its path parameters, its query and its body, as each ex-follower and anonymously; no
//! answer may contain a secret's id, IRI or text, and no route may answer 2xx to a secret
//! status's or poll's id.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;

use reqwest::Method;
use serde_json::json;
use support::api::{
    Client, WAIT, call_ok, follow, id, received, resolve_id, until_follow_accepted, users,
};
use support::eventually;
use support::node::Instance;
use support::peer::Peer;

/// One route as the source declares it: its path and the methods it answers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Route {
    path: String,
    methods: Vec<String>,
}

/// Every `.route("<path>", <method router>)` in the `.rs` files under `dir`: the path literal
/// and the `get`/`post`/`put`/`patch`/`delete`/`any` calls of its method router (up to the
/// parenthesis that closes `.route(`). Routes whose path is not a literal are skipped (a
/// constant; the check below asks for a minimum number found).
fn declared_routes(dir: &Path, out: &mut BTreeSet<Route>) {
    for entry in std::fs::read_dir(dir).expect("read src/web") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            declared_routes(&path, out);
            continue;
        }
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let src = std::fs::read_to_string(&path).expect("read source");
        let mut rest = src.as_str();
        while let Some(at) = rest.find(".route(") {
            rest = &rest[at + ".route(".len()..];
            // The argument list, to its closing parenthesis.
            let mut depth = 1usize;
            let mut end = rest.len();
            for (i, c) in rest.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let args = &rest[..end];
            let trimmed = args.trim_start();
            let Some(literal) = trimmed.strip_prefix('"') else {
                continue;
            };
            let Some(close) = literal.find('"') else {
                continue;
            };
            let route_path = literal[..close].to_string();
            let router = &literal[close + 1..];
            let mut methods = Vec::new();
            for m in ["get", "post", "put", "patch", "delete", "any"] {
                let call = format!("{m}(");
                let found = router.match_indices(&call).any(|(i, _)| {
                    i == 0
                        || !router[..i]
                            .chars()
                            .last()
                            .is_some_and(|c| c.is_alphanumeric() || c == '_')
                });
                if found {
                    methods.push(m.to_string());
                }
            }
            out.insert(Route {
                path: route_path,
                methods,
            });
        }
    }
}

/// The path with every `{param}` / `{*param}` replaced by `value` (a `{name}` by `name`).
fn fill(path: &str, value: &str, name: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let param = &rest[open + 1..open + close];
        out.push_str(if param == "name" { name } else { value });
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// What must never be shown to the third account: text, ids and IRIs of the secret statuses.
struct Secrets {
    /// Strings no answer may contain.
    needles: Vec<String>,
    /// Ids of secret statuses and polls: no route may answer 2xx with one in its path.
    ids: Vec<String>,
}

impl Secrets {
    fn leaked_in(&self, body: &str) -> Option<&str> {
        self.needles
            .iter()
            .find(|n| body.contains(n.as_str()))
            .map(String::as_str)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_route_shows_a_status_to_anyone_it_is_not_addressed_to() {
    let mut routes = BTreeSet::new();
    declared_routes(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/web"),
        &mut routes,
    );
    // The scanner works: it finds the routes (the number grows; it never shrinks below what
    // the server had when this test was written) and the ones of the reported leaks.
    assert!(routes.len() >= 80, "only {} routes found", routes.len());
    // A route whose methods the scanner cannot read would never be attacked: its `.route`
    // call must name them (`get(…)`, `post(…)`, …).
    let unread: Vec<&Route> = routes.iter().filter(|r| r.methods.is_empty()).collect();
    assert!(
        unread.is_empty(),
        "routes with no method the scanner can read: {unread:?}"
    );
    for known in [
        "/api/v1/accounts/{id}/statuses",
        "/api/v2/search",
        "/api/v1/polls/{id}",
        "/api/v1/notifications",
        "/api/v1/accounts/search",
        "/api/v1/blocks",
        "/api/v1/preferences",
        // R-MAPI-6's: a list's timeline, its members, the mutes and the exports.
        "/api/v1/timelines/list/{id}",
        "/api/v1/lists/{id}/accounts",
        "/api/v1/mutes",
        "/api/v1/domain_blocks",
        "/api/v1/exports/bookmarks.csv",
        // Filters (a status rule names a status) and conversation mutes answer statuses.
        "/api/v2/filters/{id}/statuses",
        "/api/v1/statuses/{id}/mute",
        // Scheduled statuses are their author's alone until published.
        "/api/v1/scheduled_statuses/{id}",
        // The public pages and feeds (issue 33, R-WEB-1): the anonymous reader's view.
        "/",
        "/@{name}",
        "/@{name}/{id}",
        "/@{name}/atom.xml",
        "/tags/{tag}",
        "/tags/{tag}/atom.xml",
        // A report names statuses its reporter can read (else 404, `tests/reports.rs`); the
        // admin's view shows them to ADMIN_TOKEN alone.
        "/api/v1/reports",
        "/api/v1/admin/reports/{id}",
        // Grouped notifications name statuses too (through the same check as v1).
        "/api/v2/notifications",
        "/api/v2/notifications/{group_key}",
    ] {
        assert!(
            routes.iter().any(|r| r.path == known),
            "{known} not found in {routes:?}"
        );
    }

    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let [
        (alice, _, alice_api),
        (bob, _, bob_api),
        (mallory, _, mallory_api),
        (trudy, _, trudy_api),
    ] = users(&inst, ["alice", "bob", "mallory", "trudy"]).await;
    let anonymous = Client::new(&inst, None);

    // Followers read followers-only posts for as long as they follow (as on Mastodon): bob,
    // mallory and trudy follow alice, and mallory and trudy the peer's person, before any
    // secret is written — then, before the attack, alice removes mallory from her followers
    // and blocks trudy, mallory unfollows the peer and the peer blocks trudy. Each was a
    // follower when the posts were written (in their home timelines, notified); neither may
    // read them any more. Alice approves her followers, so the attackers' own follow calls
    // below ask and are never granted.
    call_ok(
        &alice_api,
        Method::PATCH,
        "/api/v1/accounts/update_credentials",
        json!({ "locked": true }),
    )
    .await;
    for (api, account) in [
        (&bob_api, &bob),
        (&mallory_api, &mallory),
        (&trudy_api, &trudy),
    ] {
        follow(api, &alice.id.to_string()).await;
        call_ok(
            &alice_api,
            Method::POST,
            &format!("/api/v1/follow_requests/{}/authorize", account.id),
            json!({}),
        )
        .await;
    }
    let peer_account = resolve_id(&mallory_api, &peer.handle()).await;
    for (api, account, name) in [
        (&mallory_api, &mallory, "mallory"),
        (&trudy_api, &trudy, "trudy"),
    ] {
        follow(api, &peer_account).await;
        let me = inst.fed.actor_iri(name);
        let f = received(&peer, "Follow", |b| b["actor"] == me.as_str()).await;
        let accept = json!({
            "id": peer.new_id("accepts"), "type": "Accept", "actor": peer.actor(),
            "object": { "id": f["id"], "type": "Follow", "actor": me, "object": peer.actor() },
        });
        assert_eq!(peer.post(&inst.fed.inbox(name), &accept).await, 202);
        until_follow_accepted(&inst, account.id, &peer.actor(), "a follow of the peer").await;
    }
    // Local secrets: a direct message to bob with a poll and a hashtag, and a followers-only
    // post of alice's.
    let dm = alice_api
        .posted(&json!({
            "status": "@bob SECRET-LOCAL-DM #secrettag",
            "visibility": "direct",
            "poll": { "options": ["SECRET-OPTION-A", "SECRET-OPTION-B"], "expires_in": 3600 },
        }))
        .await;
    let private = alice_api
        .posted(&json!({ "status": "SECRET-LOCAL-PRIVATE #secrettag", "visibility": "private" }))
        .await;
    // A public quote of it by its author (R-MAPI-6): public timelines, the profile and the
    // tag show the quote to everyone, never the followers-only post inside it.
    let quoting = alice_api
        .posted(&json!({ "status": "a public quote", "quoted_status_id": id(&private) }))
        .await;
    assert_eq!(
        quoting["quote"]["quoted_status"]["id"], private["id"],
        "{quoting}"
    );
    // A public post of alice's scheduled for tomorrow: no one but alice sees it before then.
    let tomorrow = (chrono::Utc::now() + chrono::TimeDelta::days(1)).to_rfc3339();
    let scheduled = alice_api
        .posted(&json!({ "status": "SECRET-LOCAL-SCHEDULED #secrettag", "scheduled_at": tomorrow }))
        .await;
    assert!(
        scheduled["params"]["text"] == "SECRET-LOCAL-SCHEDULED #secrettag",
        "{scheduled}"
    );
    // Public posts, a poll and a hashtag with them: everyone's to read but trudy's, whom
    // their authors block below (alice here, the peer by its `Block`). Bob boosts alice's.
    let blocked_public = alice_api
        .posted(&json!({
            "status": "BLOCKED-READER-LOCAL-PUBLIC #secrettag",
            "poll": { "options": ["BLOCKED-OPTION-A", "BLOCKED-OPTION-B"], "expires_in": 3600 },
        }))
        .await;
    let blocked_poll = blocked_public["poll"]["id"].as_str().unwrap().to_string();
    call_ok(
        &bob_api,
        Method::POST,
        &format!("/api/v1/statuses/{}/reblog", id(&blocked_public)),
        json!({}),
    )
    .await;
    // Bob acts on them, so they are in his favourites, bookmarks, conversations and alice's
    // notifications.
    let poll = dm["poll"]["id"]
        .as_str()
        .expect("the DM's poll")
        .to_string();
    for path in [
        format!("/api/v1/statuses/{}/favourite", id(&dm)),
        format!("/api/v1/statuses/{}/bookmark", id(&dm)),
        format!("/api/v1/statuses/{}/favourite", id(&private)),
        format!("/api/v1/polls/{poll}/votes"),
    ] {
        let a = bob_api
            .call(Method::POST, &path, &json!({ "choices": [0] }))
            .await;
        assert_eq!(a.status, 200, "bob {path}: {}", a.body);
    }

    // Remote secrets: a direct note and a followers-only note of the peer's, to bob; and a
    // public one, trudy's not to read once the peer blocks her.
    let bob_iri = inst.fed.actor_iri("bob");
    let mut remote_iris = Vec::new();
    for (text, to, cc) in [
        ("SECRET-REMOTE-DM", json!([bob_iri]), json!([])),
        (
            "SECRET-REMOTE-PRIVATE",
            json!([peer.iri("/users/peer/followers")]),
            json!([bob_iri]),
        ),
        (
            "BLOCKED-READER-REMOTE-PUBLIC",
            json!(["https://www.w3.org/ns/activitystreams#Public"]),
            json!([bob_iri]),
        ),
    ] {
        let note = peer.new_id("notes");
        let create = peer.create(json!({
            "id": note, "type": "Note", "attributedTo": peer.actor(),
            "to": to, "cc": cc,
            "content": format!("<p>@bob {text} #secrettag</p>"),
            "published": "2026-12-01T10:00:00Z",
            "tag": [{ "type": "Mention", "href": bob_iri, "name": "@bob" },
                    { "type": "Hashtag", "name": "#secrettag",
                      "href": peer.iri("/tags/secrettag") }]
        }));
        assert_eq!(peer.post(&inst.fed.inbox("bob"), &create).await, 202);
        remote_iris.push(note);
    }
    // Bob sees each secret (so what is looked for below is what a leak would show).
    let remote_ids: Vec<String> =
        eventually(WAIT, "bob's notifications of the remote notes", || async {
            let n = bob_api.get("/api/v1/notifications?limit=40").await;
            let ids: Vec<String> = remote_iris
                .iter()
                .filter_map(|iri| {
                    n.body.as_array()?.iter().find_map(|x| {
                        (x["status"]["uri"] == json!(iri))
                            .then(|| x["status"]["id"].as_str().map(str::to_string))
                            .flatten()
                    })
                })
                .collect();
            (ids.len() == remote_iris.len()).then_some(ids)
        })
        .await;
    // The public remote note is trudy's secret alone (below), not one of these.
    let remote_public_iri = remote_iris.pop().unwrap();
    let remote_public_id = remote_ids[2].clone();
    let remote_ids: Vec<String> = remote_ids[..2].to_vec();
    for sid in [id(&dm), id(&private)].iter().chain(&remote_ids) {
        let a = bob_api.get(&format!("/api/v1/statuses/{sid}")).await;
        assert_eq!(a.status, 200, "bob reads {sid}: {}", a.body);
        assert!(a.body["content"].as_str().unwrap().contains("SECRET-"));
    }
    let remote_account: String = {
        let a = bob_api
            .get(&format!("/api/v1/statuses/{}", remote_ids[0]))
            .await;
        a.body["account"]["id"].as_str().unwrap().to_string()
    };
    let bobs_view = bob_api
        .get(&format!("/api/v1/accounts/{}/statuses", alice.id))
        .await;
    assert!(
        bobs_view.body.to_string().contains("SECRET-LOCAL-DM"),
        "bob, its recipient, sees the DM on alice's profile: {}",
        bobs_view.body
    );

    // Mallory and trudy read the followers-only posts while they follow, and the public ones.
    for api in [&mallory_api, &trudy_api] {
        for sid in [
            &id(&private),
            &remote_ids[1],
            &id(&blocked_public),
            &remote_public_id,
        ] {
            let a = api.get(&format!("/api/v1/statuses/{sid}")).await;
            assert_eq!(a.status, 200, "a follower reads {sid}: {}", a.body);
        }
    }
    // Then their follows end: removed, unfollowed, blocked both by alice and by the peer.
    call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{}/remove_from_followers", mallory.id),
        json!({}),
    )
    .await;
    call_ok(
        &mallory_api,
        Method::POST,
        &format!("/api/v1/accounts/{peer_account}/unfollow"),
        json!({}),
    )
    .await;
    call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{}/block", trudy.id),
        json!({}),
    )
    .await;
    let block = json!({
        "id": peer.new_id("blocks"), "type": "Block", "actor": peer.actor(),
        "object": inst.fed.actor_iri("trudy"),
    });
    assert_eq!(peer.post(&inst.fed.inbox("trudy"), &block).await, 202);
    inst.until_count(
        "the peer's block of trudy applied",
        &format!(
            "SELECT count(*) FROM follows WHERE account_id = '{}' AND target_iri = '{}'",
            trudy.id,
            peer.actor()
        ),
        |n| n == 0,
    )
    .await;

    let mut secret_ids: Vec<String> = vec![id(&dm), id(&private), poll.clone(), id(&scheduled)];
    secret_ids.extend(remote_ids.iter().cloned());
    let mut secret_iris: Vec<String> = vec![
        dm["uri"].as_str().unwrap().to_string(),
        private["uri"].as_str().unwrap().to_string(),
    ];
    secret_iris.extend(remote_iris.iter().cloned());
    let mut needles: Vec<String> = [
        "SECRET-LOCAL-DM",
        "SECRET-LOCAL-PRIVATE",
        "SECRET-REMOTE-DM",
        "SECRET-REMOTE-PRIVATE",
        "SECRET-OPTION",
        "SECRET-LOCAL-SCHEDULED",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    needles.extend(secret_ids.iter().cloned());
    needles.extend(secret_iris.iter().cloned());
    let secrets = Secrets {
        needles,
        ids: secret_ids.clone(),
    };
    // What trudy, whom their authors block, may not read besides: the public posts, their
    // poll, their IRIs (the client API knows her; other routes serve anonymous readers). Their
    // ids answer nothing in a path; in a body they may still name the post someone else's
    // reply answers (`in_reply_to_id`, as Mastodon shows it), which is not the post.
    let blocked_ids = vec![
        id(&blocked_public),
        blocked_poll.clone(),
        remote_public_id.clone(),
    ];
    let blocked_iris = [
        blocked_public["uri"].as_str().unwrap().to_string(),
        remote_public_iri.clone(),
    ];
    let mut trudys_needles = secrets.needles.clone();
    trudys_needles.extend(
        [
            "BLOCKED-READER-LOCAL-PUBLIC",
            "BLOCKED-READER-REMOTE-PUBLIC",
            "BLOCKED-OPTION",
        ]
        .map(String::from),
    );
    trudys_needles.extend(blocked_iris.iter().cloned());
    let blocked_reader = Secrets {
        needles: trudys_needles,
        ids: secret_ids.iter().chain(&blocked_ids).cloned().collect(),
    };

    // What goes into path parameters, queries and bodies: the secrets themselves, and the
    // accounts and tag they live under.
    let mut values: Vec<String> = secret_ids.clone();
    values.extend(secret_iris.iter().cloned());
    values.extend(blocked_ids.iter().cloned());
    values.extend(blocked_iris.iter().cloned());
    values.extend([
        alice.id.to_string(),
        bob.id.to_string(),
        remote_account,
        "secrettag".to_string(),
        "alice".to_string(),
        "bob".to_string(),
    ]);

    let mut calls = 0usize;
    let mut leaks = Vec::new();
    for route in &routes {
        for method in &route.methods {
            let methods: Vec<Method> = match method.as_str() {
                "get" => vec![Method::GET],
                "post" => vec![Method::POST],
                "put" => vec![Method::PUT],
                "patch" => vec![Method::PATCH],
                "delete" => vec![Method::DELETE],
                _ => vec![Method::GET, Method::POST],
            };
            for method in methods {
                for value in &values {
                    for name in ["alice", "bob"] {
                        if name == "bob" && !route.path.contains("{name}") {
                            continue;
                        }
                        let filled = fill(&route.path, value, name);
                        // An `{id}` naming a secret status or poll: not found, whatever
                        // the route does with it (a tag or name is not an id: a tag timeline
                        // of a word that is also an id is an empty page).
                        let secret_in_path = |secrets: &Secrets| {
                            route.path.contains("{id}")
                                && filled.contains(value.as_str())
                                && secrets.ids.contains(value)
                        };
                        let path = format!(
                            "{filled}?q={}&resolve=false&limit=40&account_id={}",
                            enc(value),
                            enc(value)
                        );
                        let body = json!({
                            "status": "probe", "in_reply_to_id": value, "choices": [0],
                            "id": value, "q": value, "status_ids": [value],
                        });
                        for (who, client) in [
                            ("mallory", &mallory_api),
                            ("trudy", &trudy_api),
                            ("anonymous", &anonymous),
                        ] {
                            let secrets = if who == "trudy" && route.path.starts_with("/api/") {
                                &blocked_reader
                            } else {
                                &secrets
                            };
                            let req = client
                                .http
                                .request(method.clone(), format!("{}{path}", client.base))
                                .json(&body);
                            let req = match &client.token {
                                Some(t) => req.bearer_auth(t),
                                None => req,
                            };
                            let resp = req.send().await.expect("request");
                            let status = resp.status().as_u16();
                            let text = resp.text().await.unwrap_or_default();
                            calls += 1;
                            if let Some(n) = secrets.leaked_in(&text) {
                                leaks.push(format!(
                                    "{who} {method} {path} → {status} shows {n:?}: {}",
                                    text.chars().take(300).collect::<String>()
                                ));
                            }
                            if secret_in_path(secrets) && (200..300).contains(&status) {
                                leaks.push(format!(
                                    "{who} {method} {path} → {status} for a secret id: {}",
                                    text.chars().take(300).collect::<String>()
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(calls > 1000, "only {calls} calls made");
    assert!(
        leaks.is_empty(),
        "{} leaks in {calls} calls:\n{}",
        leaks.len(),
        leaks.join("\n")
    );

    // Nothing above changed what bob, who may read them, sees, nor what mallory and an
    // anonymous reader see of the public posts.
    for api in [&mallory_api, &anonymous] {
        for sid in [&id(&blocked_public), &remote_public_id] {
            let a = api.get(&format!("/api/v1/statuses/{sid}")).await;
            assert_eq!(a.status, 200, "{sid} is public: {}", a.body);
        }
    }
    for sid in [id(&dm), id(&private)]
        .iter()
        .chain(&remote_ids)
        .chain(&blocked_ids[..1])
        .chain(std::slice::from_ref(&remote_public_id))
    {
        let a = bob_api.get(&format!("/api/v1/statuses/{sid}")).await;
        assert_eq!(a.status, 200, "bob still reads {sid}: {}", a.body);
    }
    inst.shutdown().await;
}

/// Someone edited out of a direct message no longer reads it through the notification it
/// left (Mastodon drops such notifications), in the list, by id, in the unread count, and
/// the poll of it is gone for them too.
#[tokio::test]
async fn a_notification_goes_with_the_readers_access_to_its_status() {
    let inst = Instance::start("all", &[]).await;
    let [(_, _, alice_api), (_, _, bob_api), (_, _, carol_api)] =
        users(&inst, ["alice", "bob", "carol"]).await;

    let dm = alice_api
        .posted(&json!({
            "status": "@bob @carol planning SECRET-PLAN",
            "visibility": "direct",
            "poll": { "options": ["yes", "no"], "expires_in": 3600 },
        }))
        .await;
    let poll = dm["poll"]["id"].as_str().unwrap().to_string();
    let notification = eventually(WAIT, "bob's mention", || async {
        let n = bob_api.get("/api/v1/notifications").await;
        n.body.as_array()?.iter().find_map(|x| {
            (x["status"]["id"] == dm["id"]).then(|| x["id"].as_str().map(str::to_string))?
        })
    })
    .await;
    assert_eq!(
        bob_api.get(&format!("/api/v1/polls/{poll}")).await.status,
        200
    );
    let unread = bob_api.get("/api/v1/notifications/unread_count").await;
    assert_eq!(unread.body["count"], 1, "{}", unread.body);

    // Bob is edited out.
    alice_api
        .edit(
            &id(&dm),
            &json!({ "status": "@carol planning SECRET-PLAN" }),
        )
        .await
        .assert_ok();

    let list = bob_api.get("/api/v1/notifications").await;
    assert_eq!(list.status, 200);
    assert!(
        !list.body.to_string().contains("SECRET-PLAN"),
        "the list still shows the DM: {}",
        list.body
    );
    assert_eq!(list.body.as_array().map(Vec::len), Some(0), "{}", list.body);
    let one = bob_api
        .get(&format!("/api/v1/notifications/{notification}"))
        .await;
    assert_eq!(one.status, 404, "{}", one.body);
    let unread = bob_api.get("/api/v1/notifications/unread_count").await;
    assert_eq!(unread.body["count"], 0, "{}", unread.body);
    let poll_read = bob_api.get(&format!("/api/v1/polls/{poll}")).await;
    assert_eq!(poll_read.status, 404, "{}", poll_read.body);
    let vote = bob_api
        .call(
            Method::POST,
            &format!("/api/v1/polls/{poll}/votes"),
            &json!({ "choices": [0] }),
        )
        .await;
    assert_eq!(vote.status, 404, "{}", vote.body);

    // Carol, still addressed, keeps hers and may vote.
    let carols = carol_api.get("/api/v1/notifications").await;
    assert!(
        carols.body.to_string().contains("SECRET-PLAN"),
        "{}",
        carols.body
    );
    carol_api
        .call(
            Method::POST,
            &format!("/api/v1/polls/{poll}/votes"),
            &json!({ "choices": [0] }),
        )
        .await
        .assert_ok();
    // And anonymously the poll is not there at all.
    let anonymous = Client::new(&inst, None);
    assert_eq!(
        anonymous.get(&format!("/api/v1/polls/{poll}")).await.status,
        404
    );
    inst.shutdown().await;
}
