//! CSV exports in Mastodon's formats (R-MAPI-6), round-tripped: what one account made
//! through the client API (a follow with its options, a mute, a block, a list whose title
//! needs quoting, a bookmark, a blocked domain, a follower) is exported, the exports are
//! imported by a fresh account through `POST /api/v1/imports`, and the fresh account's own
//! exports come out the same — over HTTP against a real node on a real PostgreSQL, with the
//! shared test peer as the remote server.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Client, WAIT, assert_error, header_text, id, import_csv, resolve_id, token_with_scopes, users,
};
use support::eventually;
use support::node::Instance;
use support::peer::Peer;

/// The body of `GET /api/v1/exports/<file>` (asserting a 200 and a CSV).
async fn export(inst: &Instance, token: &str, file: &str) -> String {
    let resp = reqwest::Client::new()
        .get(format!("{}/api/v1/exports/{file}", inst.base))
        .bearer_auth(token)
        .send()
        .await
        .expect("export");
    assert_eq!(resp.status().as_u16(), 200, "{file}");
    let ctype = header_text(resp.headers(), "content-type");
    assert!(ctype.starts_with("text/csv"), "{file}: {ctype}");
    resp.text().await.expect("body")
}

/// `POST /api/v1/imports?type=<ty>` of `csv`, then waits until the job is completed with no
/// failure.
async fn import(inst: &Instance, token: &str, ty: &str, csv: &str) {
    let done = import_csv(&Client::bearer(inst, token), &format!("type={ty}"), csv).await;
    assert_eq!(done["failed"], 0, "{ty}: {done}");
}

/// The Account id of the peer's person `name`, resolved through search.
async fn resolve(api: &Client, peer: &Peer, name: &str) -> String {
    resolve_id(api, &peer.handle_of(name)).await
}

/// The peer accepts `username`'s pending follow of its person `peer`.
async fn accept(inst: &Instance, peer: &Peer, username: &str) {
    let me = inst.fed.actor_iri(username);
    let f = eventually(WAIT, "the Follow reaches the peer", || async {
        peer.bodies()
            .into_iter()
            .find(|b| b["type"] == "Follow" && b["actor"] == me.as_str())
    })
    .await;
    let accept = json!({
        "id": peer.new_id("accepts"), "type": "Accept", "actor": peer.actor(),
        "object": { "id": f["id"], "type": "Follow", "actor": me, "object": peer.actor() },
    });
    assert_eq!(peer.post(&inst.fed.inbox(username), &accept).await, 202);
    inst.until_count(
        "the follow is accepted",
        &format!(
            "SELECT count(*) FROM follows f JOIN accounts a ON a.id = f.account_id
                  WHERE a.username = '{username}' AND f.state = 'accepted'"
        ),
        |c| c == 1,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exports_are_mastodons_csv_and_import_back_the_same() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let [(alice, alice_token, api), (_, zed_token, _)] = users(&inst, ["alice", "zed"]).await;
    let call = |method: Method, path: String, body: Value| {
        let api = &api;
        async move {
            let a = api.call(method, &path, &body).await;
            assert_eq!(a.status, 200, "{path}: {}", a.body);
            a.body
        }
    };

    // alice's relationships, made through the client API.
    let followed = resolve(&api, &peer, "peer").await;
    call(
        Method::POST,
        format!("/api/v1/accounts/{followed}/follow"),
        json!({ "reblogs": false, "notify": true, "languages": ["en", "ja"] }),
    )
    .await;
    accept(&inst, &peer, "alice").await;
    let muted = resolve(&api, &peer, "muted").await;
    call(
        Method::POST,
        format!("/api/v1/accounts/{muted}/mute"),
        json!({ "notifications": false }),
    )
    .await;
    let blocked = resolve(&api, &peer, "blocked").await;
    call(
        Method::POST,
        format!("/api/v1/accounts/{blocked}/block"),
        json!({}),
    )
    .await;
    let list = id(&call(
        Method::POST,
        "/api/v1/lists".into(),
        json!({ "title": "Close, \"dear\" friends" }),
    )
    .await);
    call(
        Method::POST,
        format!("/api/v1/lists/{list}/accounts"),
        json!({ "account_ids": [followed] }),
    )
    .await;
    // Titles a spreadsheet would read as a formula, or as text already marked as such.
    for title in ["@team", "'90s"] {
        let other = id(&call(
            Method::POST,
            "/api/v1/lists".into(),
            json!({ "title": title }),
        )
        .await);
        call(
            Method::POST,
            format!("/api/v1/lists/{other}/accounts"),
            json!({ "account_ids": [followed] }),
        )
        .await;
    }
    let post = api.posted(&json!({ "status": "keep this" })).await;
    call(
        Method::POST,
        format!("/api/v1/statuses/{}/bookmark", id(&post)),
        json!({}),
    )
    .await;
    let uri = post["uri"].as_str().expect("uri").to_string();
    let blocked_domain = api
        .form(Method::POST, "/api/v1/domain_blocks", "domain=spam.example")
        .await;
    assert_eq!(blocked_domain.status, 200);
    let follower = json!({
        "id": peer.new_id("follows"), "type": "Follow",
        "actor": peer.actor(), "object": inst.fed.actor_iri("alice"),
    });
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &follower).await, 202);
    inst.until_count(
        "the peer follows alice",
        "SELECT count(*) FROM followers",
        |c| c == 1,
    )
    .await;

    // Mastodon's formats, exactly.
    let host = peer.host();
    let following = export(&inst, &alice_token, "following.csv").await;
    assert_eq!(
        following,
        format!(
            "Account address,Show boosts,Notify on new posts,Languages\n\
             peer@{host},false,true,\"en, ja\"\n"
        )
    );
    let mutes = export(&inst, &alice_token, "mutes.csv").await;
    assert_eq!(
        mutes,
        format!("Account address,Hide notifications\nmuted@{host},false\n")
    );
    let blocks = export(&inst, &alice_token, "blocked_accounts.csv").await;
    assert_eq!(blocks, format!("blocked@{host}\n"));
    let lists = export(&inst, &alice_token, "lists.csv").await;
    assert_eq!(
        lists,
        format!(
            "\"Close, \"\"dear\"\" friends\",peer@{host}\n'@team,peer@{host}\n''90s,peer@{host}\n"
        )
    );
    let bookmarks = export(&inst, &alice_token, "bookmarks.csv").await;
    assert_eq!(bookmarks, format!("{uri}\n"));
    assert_eq!(
        export(&inst, &alice_token, "blocked_domains.csv").await,
        "spam.example\n"
    );
    assert_eq!(
        export(&inst, &alice_token, "followers.csv").await,
        format!("Account address\npeer@{host}\n")
    );

    // Only the holder's, behind the scope of what it holds.
    assert_eq!(
        export(&inst, &zed_token, "following.csv").await,
        "Account address,Show boosts,Notify on new posts,Languages\n"
    );
    let reader = token_with_scopes(&inst, alice.id, "read:lists").await;
    let narrow = Client::new(&inst, Some(&reader));
    assert_eq!(narrow.get("/api/v1/exports/lists.csv").await.status, 200);
    assert_error(
        &narrow.get("/api/v1/exports/mutes.csv").await,
        403,
        "mutes without read:mutes",
    );
    assert_error(
        &Client::new(&inst, None)
            .get("/api/v1/exports/following.csv")
            .await,
        401,
        "no token",
    );

    // Imported by zed, they come out the same.
    import(&inst, &zed_token, "following", &following).await;
    accept(&inst, &peer, "zed").await;
    import(&inst, &zed_token, "mutes", &mutes).await;
    import(&inst, &zed_token, "blocks", &blocks).await;
    import(&inst, &zed_token, "lists", &lists).await;
    import(&inst, &zed_token, "bookmarks", &bookmarks).await;
    for (file, alices) in [
        ("following.csv", &following),
        ("mutes.csv", &mutes),
        ("blocked_accounts.csv", &blocks),
        ("lists.csv", &lists),
        ("bookmarks.csv", &bookmarks),
    ] {
        // The import makes the lists in no set order; each line comes back the same.
        let lines = |csv: &str| {
            let mut l: Vec<String> = csv.lines().map(str::to_string).collect();
            l.sort();
            l
        };
        assert_eq!(
            lines(&export(&inst, &zed_token, file).await),
            lines(alices),
            "{file} after the round trip"
        );
    }
    inst.shutdown().await;
}

/// F10 (issue 61): a remote actor's `preferredUsername` went into the exports as it came, and
/// a spreadsheet opening the file runs a cell that starts with `=`, `+`, `-` or `@` as a
/// formula. Such a cell (tab and carriage return too, as OWASP lists them) starts with a `'`,
/// which spreadsheets read as "text" and do not show; the import takes the mark off again
/// (the round trip above).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_remote_name_is_never_a_spreadsheet_formula() {
    let inst = Instance::start("all", &[]).await;
    let peer = Peer::start().await;
    let [(_, alice_token, _)] = users(&inst, ["alice"]).await;
    let name = "=1+2";
    let follow = json!({
        "id": peer.new_id("follows"), "type": "Follow",
        "actor": peer.actor_of(name), "object": inst.fed.actor_iri("alice"),
    });
    assert_eq!(
        peer.post_as(name, &inst.fed.inbox("alice"), &follow).await,
        202
    );
    inst.until_count(
        "the hostile name follows alice",
        "SELECT count(*) FROM followers",
        |c| c == 1,
    )
    .await;
    let followers = export(&inst, &alice_token, "followers.csv").await;
    assert_eq!(
        followers,
        format!("Account address\n'=1+2@{}\n", peer.host())
    );
    inst.shutdown().await;
}
