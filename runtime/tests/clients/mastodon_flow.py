"""The whole client flow driven by Mastodon.py, a Mastodon client library someone else wrote
(issue 18 "Tests"): register an app, authorize in the browser (out-of-band code), log in,
read the instance, verify the account and the app, update the profile, upload and remove an
avatar (issue 30 item 2), resolve an account of
a remote test peer by search, follow it and see the relationship turn to `following` once the
peer accepts, then revoke. Each step is a function taking the shared `Flow`, run in STEPS
order.

usage: mastodon_flow.py BASE_URL USERNAME PASSWORD PEER_HANDLE"""

import sys
import time
import urllib.request

from mastodon import Mastodon, MastodonUnauthorizedError
from selenium.webdriver.common.by import By

from harness import approve, browser, check, fail, jpeg_size, png, run_steps, sign_in

OOB = "urn:ietf:wg:oauth:2.0:oob"
SCOPES = ["read", "write", "follow", "profile"]


class Flow:
    def __init__(self, base, username, password, peer):
        self.base, self.username, self.password, self.peer = base, username, password, peer
        self.api = None


def register_app(flow):
    flow.client_id, flow.client_secret = Mastodon.create_app(
        "Mastodon.py test", scopes=SCOPES, redirect_uris=OOB, api_base_url=flow.base,
    )
    # Mastodon.py reads the server's version from /api/v2/instance (falling back to v1).
    flow.api = Mastodon(client_id=flow.client_id, client_secret=flow.client_secret,
                        api_base_url=flow.base, version_check_mode="none")


def authorize_in_browser(flow):
    # The test node serves plain http on loopback; Mastodon.py wants https unless told.
    # It finds the authorization endpoint through /.well-known/oauth-authorization-server.
    url = flow.api.auth_request_url(redirect_uris=OOB, scopes=SCOPES, allow_http=True)
    check(url.startswith(f"{flow.base}/oauth/authorize?"), f"the metadata's endpoint: {url}")
    driver = browser()
    try:
        driver.get(url)
        sign_in(driver, flow.username, flow.password)
        approve(driver, "Mastodon.py test", SCOPES)
        codes = driver.find_elements(By.ID, "code")
        check(codes, f"the out-of-band page shows the code: {driver.page_source[:500]}")
        flow.code = codes[0].text.strip()
    finally:
        driver.quit()


def log_in(flow):
    flow.token = flow.api.log_in(code=flow.code, redirect_uri=OOB, scopes=SCOPES, allow_http=True)
    check(flow.token, "log_in returns an access token")


def verify_credentials(flow):
    me = flow.api.account_verify_credentials()
    check(me["username"] == flow.username, f"verify_credentials names the account: {me}")
    app = flow.api.app_verify_credentials()
    check(app["name"] == "Mastodon.py test", f"app_verify_credentials names the app: {app}")


def instance(flow):
    info = flow.api.instance_v2()
    check(info["domain"] == flow.base.split("://", 1)[1], f"the instance names its domain: {info}")
    polls = info["configuration"]["polls"]
    check(polls["max_options"] == 4, f"the instance reports the poll limits: {polls}")
    check(flow.api.verify_minimum_version("4.0.0", cached=True), "an API level of 4.x")


def update_profile(flow):
    me = flow.api.account_update_credentials(
        display_name="Mona Py", note="Testing <b>clients</b>", locked=False,
        fields=[("Site", "https://mona.example"), ("Pets", "none")])
    check(me["display_name"] == "Mona Py", f"the display name changed: {me}")
    check(me["note"] == "<p>Testing &lt;b&gt;clients&lt;/b&gt;</p>", f"the note as escaped HTML: {me}")
    check([f["name"] for f in me["fields"]] == ["Site", "Pets"], f"the fields: {me}")
    again = flow.api.account_verify_credentials()
    check(again["source"]["note"] == "Testing <b>clients</b>", f"source keeps the text: {again}")


def upload_and_remove_an_avatar(flow):
    missing = f"{flow.base}/avatars/original/missing.png"
    me = flow.api.account_update_credentials(avatar=png(40, 30), avatar_mime_type="image/png")
    avatar = me["avatar"]
    check(avatar != missing and avatar == me["avatar_static"], f"the avatar is set: {me}")
    with urllib.request.urlopen(avatar) as resp:
        check(resp.headers["Content-Type"] == "image/jpeg", f"served as JPEG: {resp.headers}")
        size = jpeg_size(resp.read())
    check(size == (400, 400), f"the avatar is 400x400, as Mastodon makes it: {size}")
    check(flow.api.account_verify_credentials()["avatar"] == avatar, "verify_credentials shows it")
    me = flow.api.account_delete_avatar()
    check(me["avatar"] == missing, f"removed: the placeholder again: {me}")


def follow_remote_peer(flow):
    found = flow.api.search_v2(f"@{flow.peer}", resolve=True, result_type="accounts")
    check(len(found["accounts"]) == 1, f"search resolves @{flow.peer}: {found}")
    account = found["accounts"][0]
    check(account["acct"] == flow.peer, f"the resolved account: {account}")
    flow.peer_id = account["id"]
    relationship = flow.api.account_follow(flow.peer_id)
    check(relationship["requested"] or relationship["following"],
          f"following is requested: {relationship}")


def see_the_relationship(flow):
    deadline = time.monotonic() + 60
    while True:
        relationship = flow.api.account_relationships(flow.peer_id)[0]
        if relationship["following"]:
            break
        if time.monotonic() > deadline:
            fail(f"the peer's Accept never showed: {relationship}")
        time.sleep(0.2)
    me = flow.api.account_verify_credentials()
    check(me["following_count"] == 1, f"following_count counts the peer: {me}")
    following = flow.api.account_following(me["id"])
    check([a["id"] for a in following] == [flow.peer_id], f"the following list: {following}")


def revoke(flow):
    flow.api.revoke_access_token(allow_http=True)
    try:
        flow.api.account_verify_credentials()
    except MastodonUnauthorizedError:
        return
    fail("the revoked token still works")


# Steps run in order; add new ones before `revoke`.
STEPS = [register_app, authorize_in_browser, log_in, instance, verify_credentials,
         update_profile, upload_and_remove_an_avatar, follow_remote_peer, see_the_relationship,
         revoke]


def main(base, username, password, peer):
    run_steps("mastodon_flow", STEPS, Flow(base, username, password, peer))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        fail(__doc__)
    main(*sys.argv[1:])
