//! The Mastodon client API's accounts, relationships, follow requests, search and instance
//! endpoints (SPEC §11, R-MAPI-2, R-MAPI-1), over HTTP against a real node on a real
//! PostgreSQL, with the shared fediverse `Peer` as the remote server: what we send it must
//! arrive signed and verified, what it sends us must change what the API shows.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test panics with its message

use crate::support;

use std::time::Duration;

use hollo_runtime::polls::{MAX_EXPIRES_IN, MAX_OPTION_CHARS, MAX_OPTIONS, MAX_STATUS_CHARS};
use reqwest::Method;
use serde_json::{Value, json};
use support::api::{
    Answer, Client, WAIT, assert_error, call_ok, follow, follow_each_other, peer_follows,
    peer_follows_accepted, received, token_with_scopes, unknown_ids_query, users,
};
use support::eventually;
use support::node::Instance;
use support::peer::Peer;
use uuid::Uuid;

/// An `all` node: the web API and the queues consumed (deliveries, inbox processing).
async fn instance() -> Instance {
    Instance::start("all", &[]).await
}

/// Resolves the peer's `name` through search; returns its Account entity.
async fn resolve_peer(api: &Client, peer: &Peer, name: &str) -> Value {
    let a = api
        .get(&format!(
            "/api/v2/search?q=%40{}&resolve=true&type=accounts",
            peer.handle_of(name)
        ))
        .await
        .assert_ok();
    assert_eq!(
        a.body["accounts"].as_array().map(Vec::len),
        Some(1),
        "{}",
        a.body
    );
    a.body["accounts"][0].clone()
}

async fn relationship(api: &Client, id: &str) -> Value {
    let a = api
        .get(&format!("/api/v1/accounts/relationships?id[]={id}"))
        .await
        .assert_ok();
    a.body[0].clone()
}

// ---------------------------------------------------------------------------------------------

/// R-API: the anonymous documents that show the instance's counts do not count the
/// tables per request. After the first answer a new status (and account) is not in the counts
/// of any of the three documents until `INSTANCE_STATS_SECONDS` has passed; then it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instance_counts_are_read_once_per_ttl_not_per_request() {
    // Long enough for a loaded machine to post within it; the test waits it out once.
    const TTL: Duration = Duration::from_secs(8);
    let inst = Instance::start("web", &[("INSTANCE_STATS_SECONDS", "8")]).await;
    let (_, alice) = inst.account("alice").await;
    let api = Client::bearer(&inst, &alice);
    let anon = Client::new(&inst, None);
    let counted = std::time::Instant::now();
    let v1 = anon.get("/api/v1/instance").await.assert_ok();
    assert_eq!(v1.body["stats"]["status_count"], 0);
    assert_eq!(v1.body["stats"]["user_count"], 1);
    api.post(&json!({"status": "new"})).await.assert_ok();
    inst.account("bob").await;
    assert_eq!(inst.count("SELECT count(*) FROM statuses").await, 1);
    // Answers that arrived within the TTL of the first count must all show that count.
    let mut checked = 0;
    for _ in 0..20 {
        let v1 = anon.get("/api/v1/instance").await;
        let ni = anon.get("/nodeinfo/2.1").await;
        anon.get("/api/v2/instance").await.assert_ok();
        if counted.elapsed() >= TTL {
            break;
        }
        assert_eq!(
            v1.body["stats"]["status_count"], 0,
            "recounted: {}",
            v1.body
        );
        assert_eq!(v1.body["stats"]["user_count"], 1, "recounted: {}", v1.body);
        assert_eq!(ni.body["usage"]["localPosts"], 0, "recounted: {}", ni.body);
        assert_eq!(ni.body["usage"]["users"]["total"], 1, "{}", ni.body);
        checked += 1;
    }
    assert!(
        checked > 0,
        "this machine took longer than the TTL to post; nothing was checked"
    );
    // Once the reading is older than the TTL the next request counts again.
    eventually(WAIT, "the counts after the TTL", || async {
        let v1 = anon.get("/api/v1/instance").await;
        let ni = anon.get("/nodeinfo/2.1").await;
        (v1.body["stats"]["status_count"] == 1
            && v1.body["stats"]["user_count"] == 2
            && ni.body["usage"]["localPosts"] == 1)
            .then_some(())
    })
    .await;
    assert!(counted.elapsed() >= TTL, "recounted before the TTL");
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instance_v1_v2_emojis_and_nodeinfo_report_the_real_limits_and_counts() {
    let inst = Instance::start("web", &[]).await;
    let (_, alice) = inst.account("alice").await;
    inst.account("bob").await;
    let api = Client::bearer(&inst, &alice);
    api.post(&json!({"status": "hello"})).await.assert_ok();
    let anon = Client::new(&inst, None);
    let domain = inst.base.trim_start_matches("http://").to_string();

    let v2 = anon.get("/api/v2/instance").await.assert_ok();
    assert_eq!(v2.body["domain"], json!(domain));
    // The API level whose features are served (R-MAPI-6): 4.2 (exclusive lists), not 4.3,
    // whose notification requests and multi-status fetch apps would then call.
    assert!(
        v2.body["version"]
            .as_str()
            .unwrap()
            .starts_with("4.2.0 (compatible; Hollo "),
        "{}",
        v2.body["version"]
    );
    let c = &v2.body["configuration"];
    assert_eq!(c["statuses"]["max_characters"], json!(MAX_STATUS_CHARS));
    assert_eq!(c["polls"]["max_options"], json!(MAX_OPTIONS));
    assert_eq!(
        c["polls"]["max_characters_per_option"],
        json!(MAX_OPTION_CHARS)
    );
    assert_eq!(c["polls"]["max_expiration"], json!(MAX_EXPIRES_IN));
    assert_eq!(c["media_attachments"]["supported_mime_types"], json!([]));
    assert_eq!(v2.body["usage"]["users"]["active_month"], 1);
    assert_eq!(v2.body["registrations"]["enabled"], false);

    let v1 = anon.get("/api/v1/instance").await.assert_ok();
    assert_eq!(v1.body["uri"], json!(domain));
    assert_eq!(v1.body["stats"]["user_count"], 2);
    assert_eq!(v1.body["stats"]["status_count"], 1);
    assert_eq!(
        v1.body["configuration"]["statuses"]["max_characters"],
        json!(MAX_STATUS_CHARS)
    );

    let emojis = anon.get("/api/v1/custom_emojis").await;
    assert_eq!((emojis.status, emojis.body), (200, json!([])));

    let links = anon.get("/.well-known/nodeinfo").await;
    assert_eq!(links.status, 200);
    let href = links.body["links"][0]["href"].as_str().unwrap().to_string();
    assert_eq!(href, format!("{}/nodeinfo/2.1", inst.base));
    let ni = anon.get("/nodeinfo/2.1").await;
    assert_eq!(ni.status, 200);
    assert!(
        ni.headers["content-type"]
            .to_str()
            .unwrap()
            .contains("schema/2.1")
    );
    assert_eq!(ni.body["software"]["name"], "hollo");
    assert_eq!(ni.body["protocols"], json!(["activitypub"]));
    assert_eq!(ni.body["usage"]["users"]["total"], 2);
    assert_eq!(ni.body["usage"]["localPosts"], 1);
    assert_eq!(ni.body["openRegistrations"], false);

    // The default avatar every Account entity names is served.
    let me = api.get("/api/v1/accounts/verify_credentials").await;
    let avatar = reqwest::get(me.body["avatar"].as_str().unwrap())
        .await
        .expect("avatar");
    assert_eq!(avatar.status().as_u16(), 200);
    assert_eq!(avatar.headers()["content-type"], "image/png");
    assert!(avatar.bytes().await.unwrap().starts_with(b"\x89PNG"));
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn update_credentials_changes_the_profile_the_actor_and_tells_followers() {
    let inst = instance().await;
    let peer = Peer::start().await;
    let (alice, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);

    // The peer follows alice (auto-accepted: she is not locked).
    peer_follows_accepted(&inst, &peer, "alice").await;

    let me = api
        .get("/api/v1/accounts/verify_credentials")
        .await
        .assert_ok();
    assert_eq!(me.body["id"], json!(alice.id.to_string()));
    assert_eq!(me.body["acct"], "alice");
    assert_eq!(me.body["followers_count"], 1);
    assert_eq!(me.body["source"]["note"], "");
    assert_eq!(me.body["emojis"], json!([]));
    assert_eq!(me.body["url"], json!(inst.fed.actor_iri("alice")));

    let updated = api
        .call(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            &json!({
                "display_name": "Alice <A>", "note": "I like <b>tea</b>\nand cake",
                "bot": true,
                "fields_attributes": [{"name": "Site", "value": "https://a.example"}],
            }),
        )
        .await
        .assert_ok();
    assert_eq!(updated.body["display_name"], "Alice <A>");
    assert_eq!(
        updated.body["note"],
        "<p>I like &lt;b&gt;tea&lt;/b&gt;<br>and cake</p>"
    );
    assert_eq!(
        updated.body["source"]["note"],
        "I like <b>tea</b>\nand cake"
    );
    assert_eq!(updated.body["bot"], true);
    assert_eq!(updated.body["fields"][0]["name"], "Site");

    // The same through a form, as many apps send it.
    let form = api
        .raw(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            "application/x-www-form-urlencoded",
            "locked=true&fields_attributes[0][name]=Site&fields_attributes[0][value]=x&fields_attributes[1][name]=Pets&fields_attributes[1][value]=cat",
        )
        .await.assert_ok();
    assert_eq!(form.body["locked"], true);
    assert_eq!(form.body["display_name"], "Alice <A>", "untouched");
    assert_eq!(form.body["fields"].as_array().map(Vec::len), Some(2));

    // The actor document reflects it; followers get an Update of the actor.
    let actor = support::api::ap_doc(&inst.fed.actor_iri("alice")).await;
    assert_eq!(actor["name"], "Alice <A>");
    assert_eq!(
        actor["summary"],
        "<p>I like &lt;b&gt;tea&lt;/b&gt;<br>and cake</p>"
    );
    assert_eq!(actor["manuallyApprovesFollowers"], true);
    assert_eq!(actor["type"], "Service");
    assert_eq!(actor["attachment"][1]["value"], "cat");
    let update = received(&peer, "Update", |b| {
        b["object"]["manuallyApprovesFollowers"] == true
    })
    .await;
    assert_eq!(update["object"]["id"], json!(inst.fed.actor_iri("alice")));
    assert_eq!(update["actor"], json!(inst.fed.actor_iri("alice")));

    // Bad input: 422/400/415 with {"error"} and nothing changes.
    let before = api.get("/api/v1/accounts/verify_credentials").await.body;
    for (body, what) in [
        (
            json!({"display_name": "x".repeat(31)}),
            "display name too long",
        ),
        (json!({"note": "n".repeat(501)}), "note too long"),
        (json!({"locked": "perhaps"}), "not a boolean"),
        (json!({"display_name": 7}), "not a string"),
        (
            json!({"fields_attributes": (0..5).map(|i| json!({"name": i.to_string(), "value": "v"})).collect::<Vec<_>>()}),
            "five fields",
        ),
        (json!(["not", "an", "object"]), "an array"),
    ] {
        let a = api
            .call(Method::PATCH, "/api/v1/accounts/update_credentials", &body)
            .await;
        assert_error(&a, 422, what);
    }
    let a = api
        .raw(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            "application/json",
            "{not json",
        )
        .await;
    assert_error(&a, 400, "malformed JSON");
    let a = api
        .raw(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            "application/x-www-form-urlencoded",
            "fields_attributes[x][name]=a",
        )
        .await;
    assert_error(&a, 422, "a malformed form key");
    // Multipart: an avatar that is not an image is refused (with the note beside it: a refused
    // form changes nothing), a broken body is a 400. Real avatars: tests/profile_images.rs.
    let with_file = "--x\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nnew\r\n--x\r\nContent-Disposition: form-data; name=\"avatar\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\nPNG\r\n--x--\r\n";
    let a = api
        .raw(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            "multipart/form-data; boundary=x",
            with_file,
        )
        .await;
    assert_error(&a, 422, "an avatar that is not an image");
    // A real image, but this instance has no drive (no DRIVE_DISK/FS_STORAGE_PATH): 503.
    let png = {
        let mut out = std::io::Cursor::new(Vec::new());
        image::DynamicImage::ImageRgb8(image::RgbImage::new(4, 4))
            .write_to(&mut out, image::ImageFormat::Png)
            .unwrap();
        out.into_inner()
    };
    let (ctype, body) = support::multipart::form(&[
        ("note", None, b"new"),
        ("avatar", Some(("a.png", "image/png")), &png),
    ]);
    let a = api
        .send(
            api.http
                .patch(format!("{}/api/v1/accounts/update_credentials", api.base))
                .header("content-type", ctype)
                .body(body),
        )
        .await;
    assert_error(&a, 503, "an avatar without a media drive");
    let a = api
        .raw(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            "multipart/form-data; boundary=x",
            "--x\r\nnot a part",
        )
        .await;
    assert_error(&a, 400, "a broken multipart body");
    assert_eq!(
        api.get("/api/v1/accounts/verify_credentials").await.body,
        before,
        "nothing half-written"
    );
    // Multipart text fields are read like a form (apps that can upload send them so).
    let multipart = "--x\r\nContent-Disposition: form-data; name=\"display_name\"\r\n\r\nAl\r\n--x\r\nContent-Disposition: form-data; name=\"fields_attributes[0][name]\"\r\n\r\nOnly\r\n--x--\r\n";
    let a = api
        .raw(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            "multipart/form-data; boundary=x",
            multipart,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["display_name"], "Al");
    assert_eq!(a.body["fields"].as_array().map(Vec::len), Some(1));

    // Scopes: a read-only token cannot write the profile; no token is a 401.
    let read_only = Client::bearer(&inst, &token_with_scopes(&inst, alice.id, "read").await);
    let a = read_only
        .call(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            &json!({"note": "x"}),
        )
        .await;
    assert_error(&a, 403, "read-only token");
    assert_eq!(
        read_only
            .get("/api/v1/accounts/verify_credentials")
            .await
            .status,
        200
    );
    let anon = Client::new(&inst, None);
    assert_error(
        &anon.get("/api/v1/accounts/verify_credentials").await,
        401,
        "anonymous",
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn following_a_remote_account_federates_and_shows_in_relationships_and_lists() {
    let inst = instance().await;
    let peer = Peer::start().await;
    let (alice, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);

    // Not stored yet: search without resolve finds nothing, lookup is a 404.
    let none = api
        .get(&format!("/api/v2/search?q=%40{}", peer.handle()))
        .await;
    assert_eq!(none.body["accounts"], json!([]), "{}", none.body);
    assert_error(
        &api.get(&format!("/api/v1/accounts/lookup?acct={}", peer.handle()))
            .await,
        404,
        "lookup before resolve",
    );

    let account = resolve_peer(&api, &peer, "peer").await;
    let id = account["id"].as_str().unwrap().to_string();
    assert_eq!(account["acct"], json!(peer.handle()));
    assert_eq!(account["username"], "peer");
    assert_eq!(account["uri"], json!(peer.actor()));
    // A stable local id: resolving again, lookup and show all name the same account.
    assert_eq!(resolve_peer(&api, &peer, "peer").await["id"], json!(id));
    let looked = api
        .get(&format!(
            "/api/v1/accounts/lookup?acct=%40{}",
            peer.handle()
        ))
        .await;
    assert_eq!(looked.body["id"], json!(id), "{}", looked.body);
    let shown = api.get(&format!("/api/v1/accounts/{id}")).await;
    assert_eq!(shown.body["acct"], json!(peer.handle()));

    // Follow → a verified Follow reaches the peer; requested until it accepts.
    let rel = api
        .bare(Method::POST, &format!("/api/v1/accounts/{id}/follow"))
        .await
        .assert_ok();
    assert_eq!(rel.body["id"], json!(id));
    assert_eq!(rel.body["requested"], true);
    assert_eq!(rel.body["following"], false);
    let follow = received(&peer, "Follow", |_| true).await;
    assert_eq!(follow["object"], json!(peer.actor()));
    let accept = json!({
        "id": peer.new_id("accepts"), "type": "Accept", "actor": peer.actor(),
        "object": { "id": follow["id"], "type": "Follow",
                    "actor": inst.fed.actor_iri("alice"), "object": peer.actor() },
    });
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &accept).await, 202);
    eventually(WAIT, "the relationship shows following", || async {
        (relationship(&api, &id).await["following"] == true).then_some(())
    })
    .await;
    let following = api
        .get(&format!("/api/v1/accounts/{}/following", alice.id))
        .await;
    assert_eq!(following.status, 200);
    assert_eq!(following.body[0]["id"], json!(id));
    assert!(
        following.headers["link"]
            .to_str()
            .unwrap()
            .contains("rel=\"next\"")
    );
    let me = api.get("/api/v1/accounts/verify_credentials").await;
    assert_eq!(me.body["following_count"], 1);

    // The peer follows alice too; then alice blocks it: Block delivered, both follows gone.
    peer_follows(&inst, &peer, "alice").await;
    eventually(WAIT, "the peer is a follower", || async {
        (relationship(&api, &id).await["followed_by"] == true).then_some(())
    })
    .await;
    let blocked = api
        .bare(Method::POST, &format!("/api/v1/accounts/{id}/block"))
        .await
        .assert_ok();
    assert_eq!(blocked.body["blocking"], true);
    assert_eq!(blocked.body["following"], false);
    assert_eq!(blocked.body["followed_by"], false);
    let block = received(&peer, "Block", |_| true).await;
    assert_eq!(block["object"], json!(peer.actor()));
    assert_eq!(
        inst.count("SELECT count(*) FROM follows").await
            + inst.count("SELECT count(*) FROM followers").await,
        0,
        "follows removed both ways"
    );
    // Blocked: following is refused and nothing is sent.
    assert_error(
        &api.bare(Method::POST, &format!("/api/v1/accounts/{id}/follow"))
            .await,
        422,
        "following a blocked account",
    );
    let unblocked = api
        .bare(Method::POST, &format!("/api/v1/accounts/{id}/unblock"))
        .await;
    assert_eq!(unblocked.body["blocking"], false);
    let undo = received(&peer, "Undo", |b| b["object"]["type"] == "Block").await;
    assert_eq!(undo["object"]["id"], block["id"]);

    // Follow again, then unfollow: Undo(Follow) of the new Follow's id.
    api.bare(Method::POST, &format!("/api/v1/accounts/{id}/follow"))
        .await;
    let second = received(&peer, "Follow", |b| b["id"] != follow["id"]).await;
    let unfollowed = api
        .bare(Method::POST, &format!("/api/v1/accounts/{id}/unfollow"))
        .await;
    assert_eq!(unfollowed.body["requested"], false);
    let undo = received(&peer, "Undo", |b| b["object"]["type"] == "Follow").await;
    assert_eq!(undo["object"]["id"], second["id"]);
    assert_eq!(inst.count("SELECT count(*) FROM follows").await, 0);

    // Unknown and malformed ids are 404 on every account route; relationships skip them.
    let ghost = uuid::Uuid::now_v7();
    for path in [
        format!("/api/v1/accounts/{ghost}"),
        format!("/api/v1/accounts/{ghost}/statuses"),
        format!("/api/v1/accounts/{ghost}/followers"),
        "/api/v1/accounts/nope/following".to_string(),
    ] {
        assert_error(&api.get(&path).await, 404, &path);
    }
    for path in ["follow", "unfollow", "block", "unblock"] {
        let p = format!("/api/v1/accounts/{ghost}/{path}");
        assert_error(&api.bare(Method::POST, &p).await, 404, &p);
    }
    let rels = api
        .get(&format!(
            "/api/v1/accounts/relationships?id[]={ghost}&id[]=nope&id[]={id}"
        ))
        .await;
    assert_eq!(rels.body.as_array().map(Vec::len), Some(1), "{}", rels.body);
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_locked_account_answers_follow_requests_with_accept_or_reject() {
    let inst = instance().await;
    let peer = Peer::start().await;
    let (alice, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);
    let locked = api
        .call(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            &json!({"locked": true}),
        )
        .await;
    assert_eq!(locked.body["locked"], true);

    // Two remote actors ask to follow; nothing is accepted on its own.
    let mut follow_ids = Vec::new();
    for name in ["peer", "other"] {
        let id = peer.new_id("follows");
        let follow = json!({
            "id": id, "type": "Follow", "actor": peer.actor_of(name),
            "object": inst.fed.actor_iri("alice"),
        });
        let body = serde_json::to_vec(&follow).unwrap();
        let key = hollo_runtime::federation::transport::signature::SigningKey::new(
            format!("{}#main-key", peer.actor_of(name)),
            support::peer::peer_key(),
        )
        .unwrap();
        let (status, _) = peer
            .post_with(
                &inst.fed.inbox("alice"),
                &body,
                &key,
                std::time::SystemTime::now(),
                |_| {},
            )
            .await;
        assert_eq!(status, 202);
        follow_ids.push(id);
    }
    let requests = eventually(WAIT, "two follow requests", || async {
        let a = api.get("/api/v1/follow_requests").await;
        (a.body.as_array().map(Vec::len) == Some(2)).then_some(a)
    })
    .await;
    assert_eq!(inst.count("SELECT count(*) FROM followers").await, 0);
    assert!(peer.received().iter().all(|r| r.ty() != "Accept"));
    // A Link header pages them, one at a time here.
    let page = api.get("/api/v1/follow_requests?limit=1").await;
    assert_eq!(page.body.as_array().map(Vec::len), Some(1));
    let link = page.headers["link"].to_str().unwrap().to_string();
    let next = link
        .split(['<', '>'])
        .nth(1)
        .unwrap()
        .trim_start_matches(&inst.base)
        .to_string();
    let older = api.get(&next).await;
    assert_eq!(older.body.as_array().map(Vec::len), Some(1), "{link}");
    assert_ne!(older.body[0]["id"], page.body[0]["id"], "{link}");
    assert_eq!(requests.body[1]["id"], older.body[0]["id"], "newest first");
    let me = api.get("/api/v1/accounts/verify_credentials").await;
    assert_eq!(me.body["source"]["follow_requests_count"], 2);

    let id_of = |handle: String| {
        requests
            .body
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["acct"] == json!(handle))
            .map(|a| a["id"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("{handle} asked: {}", requests.body))
    };
    let (peer_id, other_id) = (id_of(peer.handle()), id_of(peer.handle_of("other")));
    assert_eq!(relationship(&api, &peer_id).await["requested_by"], true);
    let ok = api
        .bare(
            Method::POST,
            &format!("/api/v1/follow_requests/{peer_id}/authorize"),
        )
        .await
        .assert_ok();
    assert_eq!(ok.body["followed_by"], true);
    let accept = received(&peer, "Accept", |_| true).await;
    assert_eq!(accept["object"]["id"], json!(follow_ids[0]));
    let no = api
        .bare(
            Method::POST,
            &format!("/api/v1/follow_requests/{other_id}/reject"),
        )
        .await;
    assert_eq!(no.body["followed_by"], false);
    let reject = received(&peer, "Reject", |_| true).await;
    assert_eq!(reject["object"]["id"], json!(follow_ids[1]));

    let followers = api
        .get(&format!("/api/v1/accounts/{}/followers", alice.id))
        .await;
    assert_eq!(followers.body.as_array().map(Vec::len), Some(1));
    assert_eq!(followers.body[0]["id"], json!(peer_id));
    assert_eq!(api.get("/api/v1/follow_requests").await.body, json!([]));
    // A request withdrawn with Undo(Follow) disappears.
    let third = hollo_runtime::federation::transport::signature::SigningKey::new(
        format!("{}#main-key", peer.actor_of("third")),
        support::peer::peer_key(),
    )
    .unwrap();
    let follow_id = peer.new_id("follows");
    let follow = json!({
        "id": follow_id, "type": "Follow", "actor": peer.actor_of("third"),
        "object": inst.fed.actor_iri("alice"),
    });
    let undo = json!({
        "id": peer.new_id("undos"), "type": "Undo", "actor": peer.actor_of("third"),
        "object": follow,
    });
    for activity in [&follow, &undo] {
        let body = serde_json::to_vec(activity).unwrap();
        let (status, _) = peer
            .post_with(
                &inst.fed.inbox("alice"),
                &body,
                &third,
                std::time::SystemTime::now(),
                |_| {},
            )
            .await;
        assert_eq!(status, 202);
        if activity == &follow {
            eventually(WAIT, "the third request", || async {
                (api.get("/api/v1/follow_requests")
                    .await
                    .body
                    .as_array()
                    .map(Vec::len)
                    == Some(1))
                .then_some(())
            })
            .await;
        }
    }
    eventually(WAIT, "the withdrawn request is gone", || async {
        (api.get("/api/v1/follow_requests").await.body == json!([])).then_some(())
    })
    .await;

    // Answered already, unknown or malformed: 404.
    for path in [
        format!("/api/v1/follow_requests/{peer_id}/authorize"),
        format!("/api/v1/follow_requests/{}/reject", uuid::Uuid::now_v7()),
        "/api/v1/follow_requests/nope/authorize".to_string(),
    ] {
        assert_error(&api.bare(Method::POST, &path).await, 404, &path);
    }
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_accounts_follow_each_other_and_lists_paginate() {
    let inst = Instance::start("web", &[]).await;
    let [(alice, a_token, _), (bob, b_token, _)] = users(&inst, ["alice", "bob"]).await;
    let (alice_api, bob_api) = (
        Client::bearer(&inst, &a_token),
        Client::bearer(&inst, &b_token),
    );
    bob_api
        .call(
            Method::PATCH,
            "/api/v1/accounts/update_credentials",
            &json!({"locked": true, "display_name": "Bobby"}),
        )
        .await;

    let looked = alice_api.get("/api/v1/accounts/lookup?acct=bob").await;
    assert_eq!(looked.body["id"], json!(bob.id.to_string()));
    assert_eq!(looked.body["display_name"], "Bobby");
    let domain = inst.base.trim_start_matches("http://");
    let full = alice_api
        .get(&format!("/api/v1/accounts/lookup?acct=bob@{domain}"))
        .await;
    assert_eq!(full.body["id"], json!(bob.id.to_string()));
    assert_error(
        &alice_api.get("/api/v1/accounts/lookup?acct=").await,
        422,
        "empty acct",
    );
    assert_error(
        &alice_api.get("/api/v1/accounts/lookup?acct=nobody").await,
        404,
        "unknown acct",
    );

    let rel = alice_api
        .bare(Method::POST, &format!("/api/v1/accounts/{}/follow", bob.id))
        .await;
    assert_eq!(rel.body["requested"], true, "{}", rel.body);
    let asks = bob_api.get("/api/v1/follow_requests").await;
    assert_eq!(asks.body[0]["id"], json!(alice.id.to_string()));
    bob_api
        .bare(
            Method::POST,
            &format!("/api/v1/follow_requests/{}/authorize", alice.id),
        )
        .await;
    let rel = relationship(&alice_api, &bob.id.to_string()).await;
    assert_eq!(
        (rel["following"].clone(), rel["requested"].clone()),
        (json!(true), json!(false))
    );
    let bob_followers = alice_api
        .get(&format!("/api/v1/accounts/{}/followers", bob.id))
        .await;
    assert_eq!(bob_followers.body[0]["acct"], "alice");
    assert_error(
        &alice_api
            .bare(
                Method::POST,
                &format!("/api/v1/accounts/{}/follow", alice.id),
            )
            .await,
        422,
        "following oneself",
    );

    // Statuses: newest first, max_id/min_id/since_id pages and a Link header.
    let mut ids = Vec::new();
    for i in 0..5 {
        let st = alice_api
            .post(&json!({"status": format!("post {i}")}))
            .await;
        ids.push(st.body["id"].as_str().unwrap().to_string());
    }
    let path = format!("/api/v1/accounts/{}/statuses", alice.id);
    let ids_of = |a: &Answer| -> Vec<String> {
        a.body
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    };
    let first = alice_api.get(&format!("{path}?limit=2")).await;
    assert_eq!(ids_of(&first), vec![ids[4].clone(), ids[3].clone()]);
    assert_eq!(
        first.body[0]["account"]["statuses_count"], 5,
        "the full author"
    );
    // A local status's URI is found by search, with its author.
    let uri = first.body[0]["uri"].as_str().unwrap().to_string();
    let found = alice_api
        .get(&format!(
            "/api/v2/search?q={}",
            url::form_urlencoded::byte_serialize(uri.as_bytes()).collect::<String>()
        ))
        .await;
    assert_eq!(
        found.body["statuses"][0]["id"],
        json!(ids[4]),
        "{}",
        found.body
    );
    assert_eq!(found.body["statuses"][0]["account"]["acct"], "alice");
    assert!(found.body["statuses"][0]["account"]["avatar"].is_string());
    let link = first.headers["link"].to_str().unwrap();
    assert!(link.contains(&format!("max_id={}", ids[3])), "{link}");
    assert!(link.contains(&format!("min_id={}", ids[4])), "{link}");
    let older = alice_api
        .get(&format!("{path}?limit=2&max_id={}", ids[3]))
        .await;
    assert_eq!(ids_of(&older), vec![ids[2].clone(), ids[1].clone()]);
    let newer = alice_api
        .get(&format!("{path}?limit=2&min_id={}", ids[0]))
        .await;
    assert_eq!(ids_of(&newer), vec![ids[2].clone(), ids[1].clone()]);
    let since = alice_api
        .get(&format!("{path}?limit=2&since_id={}", ids[0]))
        .await;
    assert_eq!(ids_of(&since), vec![ids[4].clone(), ids[3].clone()]);
    let none = alice_api.get(&format!("{path}?max_id={}", ids[0])).await;
    assert_eq!(none.body, json!([]));
    assert!(none.headers.get("link").is_none());
    assert_error(
        &alice_api.get(&format!("{path}?max_id=12")).await,
        422,
        "a cursor of another kind",
    );
    let profile = alice_api
        .get(&format!("/api/v1/accounts/{}", alice.id))
        .await;
    assert_eq!(profile.body["statuses_count"], 5);
    assert_eq!(profile.body["following_count"], 1);

    // Scopes: a token without read:follows cannot list requests.
    let write_only = Client::bearer(&inst, &token_with_scopes(&inst, bob.id, "write").await);
    assert_error(
        &write_only.get("/api/v1/follow_requests").await,
        403,
        "scope",
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn search_resolves_post_urls_and_finds_only_what_is_stored_without_resolve() {
    let inst = Instance::start("web", &[]).await;
    let peer = Peer::start().await;
    let (_, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);
    let note = json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": peer.iri("/notes/1"), "type": "Note", "attributedTo": peer.actor_of("bob"),
        // Public: a note addressed to no one is a direct one, which search shows to no one
        // but its audience (R-MAPI-VIS; tests/visibility.rs).
        "to": ["https://www.w3.org/ns/activitystreams#Public"],
        "content": "<p>hi<script>alert(1)</script></p>", "url": peer.iri("/@bob/1"),
        "published": "2026-11-30T10:00:00Z",
    });
    peer.doc("/notes/1", note);
    let url = peer.iri("/notes/1");
    let q = |resolve: bool| {
        format!(
            "/api/v2/search?q={}&resolve={resolve}",
            url::form_urlencoded::byte_serialize(url.as_bytes()).collect::<String>()
        )
    };
    let before = api.get(&q(false)).await;
    assert_eq!(before.body["statuses"], json!([]), "{}", before.body);
    assert_eq!(peer.hits().len(), 0, "nothing fetched without resolve");

    let found = api.get(&q(true)).await.assert_ok();
    let status = &found.body["statuses"][0];
    assert_eq!(status["uri"], json!(url));
    assert_eq!(status["content"], "<p>hi</p>", "sanitized");
    assert_eq!(status["url"], json!(peer.iri("/@bob/1")));
    assert_eq!(status["account"]["acct"], json!(peer.handle_of("bob")));
    // Stored now: found without resolve, by its id or its url, fetched once.
    let again = api.get(&q(false)).await;
    assert_eq!(again.body["statuses"][0]["id"], status["id"]);
    assert_eq!(peer.hits().len(), 1);
    let by_prefix = api.get("/api/v2/search?q=bo&type=accounts").await;
    assert_eq!(
        by_prefix.body["accounts"][0]["acct"],
        json!(peer.handle_of("bob"))
    );
    let statuses_only = api
        .get(&format!(
            "/api/v2/search?q=%40{}&type=statuses",
            peer.handle_of("bob")
        ))
        .await;
    assert_eq!(statuses_only.body["accounts"], json!([]));

    // The author's statuses are the posts of it we stored, newest first, paged.
    peer.doc(
        "/notes/2",
        json!({"id": peer.iri("/notes/2"), "type": "Note", "attributedTo": peer.actor_of("bob"),
               "to": ["https://www.w3.org/ns/activitystreams#Public"],
               "content": "<p>later</p>", "published": "2026-11-30T11:00:00Z"}),
    );
    let second = api
        .get(&format!(
            "/api/v2/search?q={}&resolve=true&type=statuses",
            url::form_urlencoded::byte_serialize(peer.iri("/notes/2").as_bytes())
                .collect::<String>()
        ))
        .await;
    assert_eq!(second.body["statuses"][0]["content"], "<p>later</p>");
    let bob_id = status["account"]["id"].as_str().unwrap();
    let newest = api
        .get(&format!("/api/v1/accounts/{bob_id}/statuses?limit=1"))
        .await;
    assert_eq!(
        newest.body[0]["uri"],
        json!(peer.iri("/notes/2")),
        "{}",
        newest.body
    );
    let link = newest.headers["link"].to_str().unwrap();
    let next = link
        .split(['<', '>'])
        .nth(1)
        .unwrap()
        .trim_start_matches(&inst.base);
    let older = api.get(next).await;
    assert_eq!(older.body[0]["uri"], json!(url), "{link}");
    assert_eq!(older.body.as_array().map(Vec::len), Some(1));

    // An unknown account or a missing post: empty results, nothing stored.
    let missing = api
        .get(&format!(
            "/api/v2/search?q=%40{}&resolve=true",
            peer.handle_of("missing")
        ))
        .await;
    assert_eq!(missing.body["accounts"], json!([]));
    let gone = api
        .get(&format!(
            "/api/v2/search?q={}&resolve=true",
            url::form_urlencoded::byte_serialize(peer.iri("/notes/404").as_bytes())
                .collect::<String>()
        ))
        .await;
    assert_eq!(gone.body["statuses"], json!([]));
    // Bad input.
    assert_error(&api.get("/api/v2/search").await, 422, "no q");
    assert_error(
        &api.get("/api/v2/search?q=a&type=nope").await,
        422,
        "bad type",
    );
    assert_error(
        &api.get("/api/v2/search?q=a&limit=x").await,
        422,
        "bad limit",
    );
    inst.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn search_resolution_obeys_the_ssrf_guard() {
    let inst = Instance::start("web", &[("ALLOW_PRIVATE_ADDRESS", "false")]).await;
    let peer = Peer::start().await;
    peer.doc(
        "/notes/1",
        json!({"id": peer.iri("/notes/1"), "type": "Note", "attributedTo": peer.actor(), "content": "x"}),
    );
    let (_, token) = inst.account("alice").await;
    let api = Client::bearer(&inst, &token);
    let url =
        url::form_urlencoded::byte_serialize(peer.iri("/notes/1").as_bytes()).collect::<String>();
    let a = api
        .get(&format!("/api/v2/search?q={url}&resolve=true"))
        .await
        .assert_ok();
    assert_eq!(a.body["statuses"], json!([]));
    let a = api
        .get(&format!(
            "/api/v2/search?q=%40{}&resolve=true",
            peer.handle()
        ))
        .await;
    assert_eq!(a.body["accounts"], json!([]));
    assert!(
        peer.hits().is_empty(),
        "the loopback peer was never reached"
    );
    assert_eq!(peer.webfinger_hits("peer"), None);
    assert_eq!(inst.count("SELECT count(*) FROM remote_posts").await, 0);
    assert_eq!(inst.count("SELECT count(*) FROM remote_actors").await, 0);
    inst.shutdown().await;
}

/// R-MAPI-6: `GET /api/v1/blocks` lists the holder's blocks, newest first, in pages
/// with a `Link` header; nobody else's, and only with `read:blocks` (or `follow`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn blocks_list_the_holders_blocks_newest_first_in_pages() {
    let inst = instance().await;
    let [(alice, _, api), (bob, bob_token, _), (carol, _, _)] =
        users(&inst, ["alice", "bob", "carol"]).await;
    let ids = |a: &Answer| -> Vec<String> {
        a.body
            .as_array()
            .expect("a list")
            .iter()
            .map(|x| x["id"].as_str().unwrap().to_string())
            .collect()
    };
    let none = api.get("/api/v1/blocks").await.assert_ok();
    assert_eq!(none.body, json!([]));

    for who in [&bob, &carol] {
        let b = api
            .bare(Method::POST, &format!("/api/v1/accounts/{}/block", who.id))
            .await
            .assert_ok();
        assert_eq!(b.body["blocking"], true);
    }
    let all = api.get("/api/v1/blocks").await;
    assert_eq!(ids(&all), [carol.id.to_string(), bob.id.to_string()]);
    assert_eq!(all.body[0]["acct"], "carol");

    let first = api.get("/api/v1/blocks?limit=1").await;
    assert_eq!(ids(&first), [carol.id.to_string()]);
    let link = first.headers["link"].to_str().unwrap().to_string();
    let next = link
        .split(',')
        .find(|p| p.contains("rel=\"next\""))
        .and_then(|p| p.split(['<', '>']).nth(1))
        .expect("a next link")
        .trim_start_matches(&inst.base)
        .to_string();
    assert!(next.starts_with("/api/v1/blocks?"), "{next}");
    let second = api.get(&next).await;
    assert_eq!(ids(&second), [bob.id.to_string()]);
    assert_error(
        &api.get("/api/v1/blocks?max_id=someone").await,
        422,
        "a cursor of another kind",
    );

    // Only the holder's own: bob blocks nobody.
    let bobs = Client::bearer(&inst, &bob_token)
        .get("/api/v1/blocks")
        .await;
    assert_eq!(bobs.body, json!([]), "bob's list");
    // Scopes: read:blocks, or follow (which grants it); not read:accounts alone.
    let wrong = Client::bearer(
        &inst,
        &token_with_scopes(&inst, alice.id, "read:accounts").await,
    );
    assert_error(
        &wrong.get("/api/v1/blocks").await,
        403,
        "read:accounts only",
    );
    let follow = Client::bearer(&inst, &token_with_scopes(&inst, alice.id, "follow").await);
    assert_eq!(ids(&follow.get("/api/v1/blocks").await).len(), 2);

    let unblocked = api
        .bare(
            Method::POST,
            &format!("/api/v1/accounts/{}/unblock", carol.id),
        )
        .await;
    assert_eq!(unblocked.body["blocking"], false);
    assert_eq!(ids(&api.get("/api/v1/blocks").await), [bob.id.to_string()]);
    inst.shutdown().await;
}

/// R-MAPI-6: `GET /api/v1/accounts/search`, what apps call for @-mention
/// autocomplete — by name prefix, by address (resolved through WebFinger only with
/// `resolve`), only followed accounts with `following`; bad input 422, scopes 401/403.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn accounts_search_completes_mentions_by_prefix_address_and_following() {
    let inst = instance().await;
    let peer = Peer::start().await;
    let [(alice, token, _), (bob, _, _), (bobby, _, _)] =
        users(&inst, ["alice", "bob", "bobby"]).await;
    inst.account("carol").await;
    let api = Client::bearer(&inst, &token);
    let accts = |a: &Answer| -> Vec<String> {
        assert_eq!(a.status, 200, "{}", a.body);
        a.body
            .as_array()
            .expect("a list")
            .iter()
            .map(|x| x["acct"].as_str().unwrap().to_string())
            .collect()
    };

    // Bad input and scopes first.
    assert_error(&api.get("/api/v1/accounts/search").await, 422, "no q");
    assert_error(
        &api.get("/api/v1/accounts/search?q=%20").await,
        422,
        "a blank q",
    );
    assert_error(
        &api.get("/api/v1/accounts/search?q=bo&limit=many").await,
        422,
        "a limit that is no number",
    );
    let anonymous = Client::new(&inst, None);
    assert_eq!(
        anonymous.get("/api/v1/accounts/search?q=bo").await.status,
        401
    );
    let wrong = Client::bearer(
        &inst,
        &token_with_scopes(&inst, alice.id, "read:statuses").await,
    );
    assert_error(
        &wrong.get("/api/v1/accounts/search?q=bo").await,
        403,
        "read:statuses only",
    );

    assert_eq!(
        accts(&api.get("/api/v1/accounts/search?q=bo").await),
        ["bob", "bobby"]
    );
    assert_eq!(
        accts(&api.get("/api/v1/accounts/search?q=%40BO").await),
        ["bob", "bobby"]
    );
    assert_eq!(
        accts(&api.get("/api/v1/accounts/search?q=bo&limit=1").await),
        ["bob"]
    );
    assert_eq!(
        accts(&api.get("/api/v1/accounts/search?q=%25").await),
        Vec::<String>::new(),
        "a LIKE wildcard is a character"
    );
    let local_address = format!("/api/v1/accounts/search?q=bobby%40{}", inst.fed.domain);
    assert_eq!(accts(&api.get(&local_address).await), ["bobby"]);

    // following: alice follows bob only.
    api.bare(Method::POST, &format!("/api/v1/accounts/{}/follow", bob.id))
        .await
        .assert_ok();
    assert_eq!(
        accts(&api.get("/api/v1/accounts/search?q=bo&following=true").await),
        ["bob"]
    );
    let _ = bobby;

    // A remote address: unknown until resolved; resolve looks it up (WebFinger + actor);
    // with following it is not resolved.
    let address =
        url::form_urlencoded::byte_serialize(peer.handle().as_bytes()).collect::<String>();
    let unknown = api
        .get(&format!("/api/v1/accounts/search?q={address}"))
        .await;
    assert_eq!(accts(&unknown), Vec::<String>::new());
    let not_resolved = api
        .get(&format!(
            "/api/v1/accounts/search?q={address}&resolve=true&following=true"
        ))
        .await;
    assert_eq!(accts(&not_resolved), Vec::<String>::new());
    let resolved = api
        .get(&format!("/api/v1/accounts/search?q={address}&resolve=true"))
        .await;
    assert_eq!(
        accts(&resolved),
        [peer.handle().trim_start_matches('@').to_string()]
    );
    // Now stored, its name prefix finds it too.
    let name = peer
        .handle()
        .trim_start_matches('@')
        .split('@')
        .next()
        .unwrap()
        .to_string();
    assert!(
        accts(&api.get(&format!("/api/v1/accounts/search?q={name}")).await)
            .iter()
            .any(|a| a.contains('@')),
        "the stored remote account by prefix"
    );
    inst.shutdown().await;
}

/// R-MAPI-2: `GET /api/v1/accounts/familiar_followers` — of each account named, its followers
/// whom the caller follows, the most recently followed first: of a local account all of them
/// (local followers and remote ones), of a remote account the local accounts following it.
/// Unknown and malformed ids are left out, a repeated one answered once; `read:follows` is
/// needed and at most 80 accounts are asked about at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn familiar_followers_are_the_followers_one_follows() {
    let inst = instance().await;
    let peer = Peer::start().await;
    let [
        (alice, _, alice_api),
        (bob, _, bob_api),
        (carol, _, carol_api),
        (dave, _, _),
        (_, _, erin_api),
    ] = users(&inst, ["alice", "bob", "carol", "dave", "erin"]).await;
    let [bob_id, carol_id, dave_id] = [&bob, &carol, &dave].map(|a| a.id.to_string());
    // Alice and bob follow the peer's person, which follows them back.
    let (peer_id, _) = follow_each_other(&inst, &alice_api, &peer, "alice").await;
    follow_each_other(&inst, &bob_api, &peer, "bob").await;
    // Dave's followers: bob, carol, erin and the peer. Alice follows bob and carol, not erin.
    for api in [&bob_api, &carol_api, &erin_api] {
        follow(api, &dave_id).await;
    }
    peer_follows(&inst, &peer, "dave").await;
    follow(&alice_api, &bob_id).await;
    follow(&alice_api, &carol_id).await;

    let names = |v: &Value| -> Vec<String> {
        v["accounts"]
            .as_array()
            .expect("accounts")
            .iter()
            .map(|a| a["acct"].as_str().expect("acct").to_string())
            .collect()
    };
    let path = format!(
        "/api/v1/accounts/familiar_followers?id[]={dave_id}&id[]={peer_id}&id[]=nope&id[]={}&id[]={dave_id}&id[]={bob_id}",
        Uuid::now_v7()
    );
    let peer_acct = peer.handle();
    let body = eventually(WAIT, "the peer's follow of dave is stored", || async {
        let a = alice_api.get(&path).await.assert_ok();
        (names(&a.body[0]).len() == 3).then_some(a.body)
    })
    .await;
    let entries = body.as_array().expect("a list");
    assert_eq!(entries.len(), 3, "{body}");
    assert_eq!(entries[0]["id"], dave_id.as_str());
    assert_eq!(names(&entries[0]), ["carol", "bob", peer_acct.as_str()]);
    // The peer's followers here: bob follows it, carol does not.
    assert_eq!(entries[1]["id"], peer_id.as_str());
    assert_eq!(names(&entries[1]), ["bob"]);
    // Bob's followers: alice herself and the peer; alice follows the peer.
    assert_eq!(entries[2]["id"], bob_id.as_str());
    assert_eq!(names(&entries[2]), [peer_acct.as_str()]);
    assert_eq!(entries[2]["accounts"][0]["id"], peer_id.as_str());

    // Someone who follows none of them has no familiar followers.
    let erins = erin_api.get(&path).await.assert_ok();
    assert!(
        erins
            .body
            .as_array()
            .expect("a list")
            .iter()
            .all(|e| names(e).is_empty()),
        "{}",
        erins.body
    );

    let no_scope = token_with_scopes(&inst, alice.id, "read:accounts").await;
    let a = Client::bearer(&inst, &no_scope).get(&path).await;
    assert_error(&a, 403, "without read:follows");
    let many = unknown_ids_query(81);
    let a = alice_api
        .get(&format!("/api/v1/accounts/familiar_followers?{many}"))
        .await;
    assert_error(&a, 422, "81 ids");
}

/// Mastodon 4.3's `GET /api/v1/accounts?id[]=…`: local accounts and stored remote actors in
/// the order asked, each once; unknown and malformed ids are left out; more than 80 is a 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_accounts_at_once() {
    let inst = instance().await;
    let peer = Peer::start().await;
    let [(_, _, alice_api), (bob, _, _)] = users(&inst, ["alice", "bob"]).await;
    let peer_id = resolve_peer(&alice_api, &peer, "peer").await["id"]
        .as_str()
        .expect("id")
        .to_string();
    let bob_id = bob.id.to_string();
    let path = format!(
        "/api/v1/accounts?id[]={peer_id}&id[]=x&id[]={bob_id}&id[]={}&id[]={peer_id}",
        Uuid::now_v7()
    );
    let a = alice_api.get(&path).await.assert_ok();
    let got: Vec<&str> = a
        .body
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v["id"].as_str().expect("id"))
        .collect();
    assert_eq!(got, [peer_id.as_str(), bob_id.as_str()], "{}", a.body);
    assert_eq!(a.body[1]["username"], "bob");
    assert_eq!(a.body[0]["acct"], peer.handle().as_str());
    let many = unknown_ids_query(81);
    assert_error(
        &alice_api.get(&format!("/api/v1/accounts?{many}")).await,
        422,
        "81 ids",
    );
}

/// R-MAPI-6: follow suggestions. Alice follows bob and carol (local) and the peer's person.
/// Dave is followed by bob and carol, erin by bob, and the peer boosted a post of frank's:
/// each is popular among the people alice follows (`friends_of_friends`, by how many of them);
/// gina is followed by two other local accounts (`most_followed`). Never suggested: alice,
/// whom she follows, whom she mutes, whom she dismissed; the scope is needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn suggestions_come_from_the_people_one_follows_and_the_server() {
    let inst = instance().await;
    let peer = Peer::start().await;
    let [
        (alice, _, alice_api),
        (bob, _, bob_api),
        (carol, _, carol_api),
        (dave, _, dave_api),
        (erin, _, erin_api),
        (frank, _, frank_api),
        (gina, _, _),
    ] = users(
        &inst,
        ["alice", "bob", "carol", "dave", "erin", "frank", "gina"],
    )
    .await;
    let [dave_id, erin_id, frank_id, gina_id] =
        [&dave, &erin, &frank, &gina].map(|a| a.id.to_string());
    follow_each_other(&inst, &alice_api, &peer, "alice").await;
    follow(&alice_api, &bob.id.to_string()).await;
    follow(&alice_api, &carol.id.to_string()).await;
    follow(&bob_api, &dave_id).await;
    follow(&carol_api, &dave_id).await;
    follow(&bob_api, &erin_id).await;
    follow(&dave_api, &gina_id).await;
    follow(&erin_api, &gina_id).await;
    let post = frank_api.posted(&json!({"status": "boost me"})).await;
    let post_id: Uuid = post["id"].as_str().expect("id").parse().expect("uuid");
    let boost = json!({
        "id": peer.new_id("boosts"), "type": "Announce", "actor": peer.actor(),
        "to": ["https://www.w3.org/ns/activitystreams#Public"],
        "object": inst.fed.status_iri("frank", post_id),
    });
    assert_eq!(peer.post(&inst.fed.inbox("alice"), &boost).await, 202);
    eventually(WAIT, "the peer's boost is stored", || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM reblogs WHERE post_id = $1")
            .bind(post_id)
            .fetch_one(&inst.pool)
            .await
            .expect("count");
        (n == 1).then_some(())
    })
    .await;

    let ids = |v: &Value, at: &str| -> Vec<String> {
        v.as_array()
            .expect("a list")
            .iter()
            .map(|x| {
                x.pointer(at)
                    .and_then(Value::as_str)
                    .expect("id")
                    .to_string()
            })
            .collect()
    };
    let v2 = alice_api.get("/api/v2/suggestions").await.assert_ok();
    assert_eq!(
        ids(&v2.body, "/account/id"),
        [&dave_id, &erin_id, &frank_id, &gina_id].map(String::as_str),
        "{}",
        v2.body
    );
    assert_eq!(
        v2.body[0]["sources"],
        json!(["friends_of_friends", "most_followed"])
    );
    assert_eq!(v2.body[0]["source"], "past_interactions");
    assert_eq!(
        v2.body[2]["sources"],
        json!(["friends_of_friends"]),
        "frank, by the boost"
    );
    assert_eq!(v2.body[3]["sources"], json!(["most_followed"]));
    assert_eq!(v2.body[3]["source"], "global");
    let v1 = alice_api
        .get("/api/v1/suggestions?limit=2")
        .await
        .assert_ok();
    assert_eq!(
        ids(&v1.body, "/id"),
        [&dave_id, &erin_id].map(String::as_str)
    );

    // A mute and a dismissal take them out; dismissing again is fine, an unknown id is 404.
    call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{erin_id}/mute"),
        json!({}),
    )
    .await;
    for _ in 0..2 {
        let a = alice_api
            .call(
                Method::DELETE,
                &format!("/api/v1/suggestions/{dave_id}"),
                &json!({}),
            )
            .await
            .assert_ok();
        assert_eq!(a.body, json!({}));
    }
    let a = alice_api
        .call(
            Method::DELETE,
            &format!("/api/v1/suggestions/{}", Uuid::now_v7()),
            &json!({}),
        )
        .await;
    assert_error(&a, 404, "unknown account");
    let v1 = alice_api.get("/api/v1/suggestions").await.assert_ok();
    assert_eq!(
        ids(&v1.body, "/id"),
        [&frank_id, &gina_id].map(String::as_str),
        "{}",
        v1.body
    );

    let no_scope = token_with_scopes(&inst, alice.id, "read:statuses").await;
    let a = Client::bearer(&inst, &no_scope)
        .get("/api/v2/suggestions")
        .await;
    assert_error(&a, 403, "without read:accounts");
}

/// R-MAPI-2: `remove_from_followers` ends a follower's follow — a local follower's as if it
/// had unfollowed (our posts leave its home), a remote one's with a `Reject` of its `Follow`;
/// `note` keeps a private note shown only in one's own Relationship (at most 2 000 characters,
/// empty removes it); `domain_blocking` says whether one blocks the account's server.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn removing_followers_private_notes_and_domain_blocking_in_relationships() {
    let inst = instance().await;
    // On 127.0.0.2: another host than ours, so its server can be blocked.
    let peer = Peer::start_on("127.0.0.2").await;
    let [(alice, _, alice_api), (_, _, bob_api)] = users(&inst, ["alice", "bob"]).await;
    let alice_id = alice.id.to_string();
    let bob_id = bob_api
        .get("/api/v1/accounts/verify_credentials")
        .await
        .body["id"]
        .as_str()
        .expect("id")
        .to_string();
    follow(&bob_api, &alice_id).await;
    let post = alice_api
        .posted(&json!({"status": "for my followers"}))
        .await;
    let home_has_it = || async {
        bob_api
            .get("/api/v1/timelines/home")
            .await
            .body
            .as_array()
            .expect("a list")
            .iter()
            .any(|s| s["id"] == post["id"])
    };
    assert!(home_has_it().await, "bob's home has alice's post");
    let follow_activity = peer_follows_accepted(&inst, &peer, "alice").await;
    let peer_id = resolve_peer(&alice_api, &peer, "peer").await["id"]
        .as_str()
        .expect("id")
        .to_string();
    assert_eq!(relationship(&alice_api, &bob_id).await["followed_by"], true);
    assert_eq!(
        relationship(&alice_api, &peer_id).await["followed_by"],
        true
    );

    // A local follower removed: its follow and its home entries go.
    let r = call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{bob_id}/remove_from_followers"),
        json!({}),
    )
    .await;
    assert_eq!(r["followed_by"], false, "{r}");
    assert_eq!(relationship(&bob_api, &alice_id).await["following"], false);
    assert!(!home_has_it().await, "alice's post left bob's home");
    // A remote follower removed: told with a Reject of its own Follow.
    let r = call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{peer_id}/remove_from_followers"),
        json!({}),
    )
    .await;
    assert_eq!(r["followed_by"], false, "{r}");
    received(&peer, "Reject", |b| {
        b["object"]["id"] == follow_activity["id"]
    })
    .await;
    // Not a follower (any more): nothing changes, nothing is sent.
    call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{peer_id}/remove_from_followers"),
        json!({}),
    )
    .await;

    // Notes: too long is a 422 that keeps nothing; JSON or a form; only the writer sees it.
    let long = "x".repeat(2001);
    let a = alice_api
        .call(
            Method::POST,
            &format!("/api/v1/accounts/{peer_id}/note"),
            &json!({"comment": long}),
        )
        .await;
    assert_error(&a, 422, "2 001 characters");
    assert_eq!(relationship(&alice_api, &peer_id).await["note"], "");
    let r = call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{peer_id}/note"),
        json!({"comment": "met at the <conf>"}),
    )
    .await;
    assert_eq!(r["note"], "met at the <conf>");
    let a = alice_api
        .form(
            Method::POST,
            &format!("/api/v1/accounts/{peer_id}/note"),
            "comment=rather+tea",
        )
        .await
        .assert_ok();
    assert_eq!(a.body["note"], "rather tea");
    assert_eq!(
        relationship(&alice_api, &peer_id).await["note"],
        "rather tea"
    );
    assert_eq!(
        relationship(&bob_api, &peer_id).await["note"],
        "",
        "private to alice"
    );
    let r = call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{peer_id}/note"),
        json!({"comment": ""}),
    )
    .await;
    assert_eq!(r["note"], "", "an empty comment removes the note");

    // Blocking the peer's server shows in the relationship.
    assert_eq!(
        relationship(&alice_api, &peer_id).await["domain_blocking"],
        false
    );
    let domain = peer.host().split(':').next().expect("host").to_string();
    alice_api
        .form(
            Method::POST,
            "/api/v1/domain_blocks",
            &format!("domain={domain}"),
        )
        .await
        .assert_ok();
    assert_eq!(
        relationship(&alice_api, &peer_id).await["domain_blocking"],
        true
    );
    assert_eq!(
        relationship(&bob_api, &peer_id).await["domain_blocking"],
        false
    );
}

/// R-MAPI-6: endorsements (featured accounts). Only an account one follows can be endorsed
/// (422 otherwise, nothing kept); the Relationship shows `endorsed`; `GET
/// /api/v1/endorsements` and the account's `/endorsements` list them, newest first; unpinning
/// and unfollowing end one; pinning needs `write:accounts`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn endorsements_feature_followed_accounts() {
    let inst = instance().await;
    let peer = Peer::start().await;
    let [(alice, _, alice_api), (bob, _, bob_api), (carol, _, _)] =
        users(&inst, ["alice", "bob", "carol"]).await;
    let (peer_id, _) = follow_each_other(&inst, &alice_api, &peer, "alice").await;
    let [alice_id, bob_id, carol_id] = [&alice, &bob, &carol].map(|a| a.id.to_string());
    let pin = |id: &str| format!("/api/v1/accounts/{id}/pin");
    let listed = |v: &Value| -> Vec<String> {
        v.as_array()
            .expect("a list")
            .iter()
            .map(|a| a["id"].as_str().expect("id").to_string())
            .collect()
    };

    let a = alice_api
        .call(Method::POST, &pin(&carol_id), &json!({}))
        .await;
    assert_error(&a, 422, "not followed");
    assert_eq!(relationship(&alice_api, &carol_id).await["endorsed"], false);

    follow(&alice_api, &bob_id).await;
    for _ in 0..2 {
        let r = call_ok(&alice_api, Method::POST, &pin(&bob_id), json!({})).await;
        assert_eq!(r["endorsed"], true, "{r}");
    }
    call_ok(&alice_api, Method::POST, &pin(&peer_id), json!({})).await;
    let mine = alice_api.get("/api/v1/endorsements").await.assert_ok();
    assert_eq!(listed(&mine.body), [&peer_id, &bob_id].map(String::as_str));
    let hers = bob_api
        .get(&format!("/api/v1/accounts/{alice_id}/endorsements"))
        .await
        .assert_ok();
    assert_eq!(listed(&hers.body), [&peer_id, &bob_id].map(String::as_str));
    let remote = bob_api
        .get(&format!("/api/v1/accounts/{peer_id}/endorsements"))
        .await
        .assert_ok();
    assert_eq!(remote.body, json!([]), "a remote account's are not fetched");
    assert_eq!(
        relationship(&bob_api, &alice_id).await["endorsed"],
        false,
        "alice's endorsement is hers"
    );

    let r = call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{peer_id}/unpin"),
        json!({}),
    )
    .await;
    assert_eq!(r["endorsed"], false);
    call_ok(
        &alice_api,
        Method::POST,
        &format!("/api/v1/accounts/{bob_id}/unfollow"),
        json!({}),
    )
    .await;
    assert_eq!(relationship(&alice_api, &bob_id).await["endorsed"], false);
    let mine = alice_api.get("/api/v1/endorsements").await.assert_ok();
    assert_eq!(mine.body, json!([]), "unfollowing ends the endorsement");

    let read_only = token_with_scopes(&inst, alice.id, "read").await;
    let a = Client::bearer(&inst, &read_only)
        .call(Method::POST, &pin(&peer_id), &json!({}))
        .await;
    assert_error(&a, 403, "without write:accounts");
}
