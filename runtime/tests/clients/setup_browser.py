"""The first run in a real headless Chromium, as a person with only the README gets there: the
first-run page refused without its one-time link (the node is behind a proxy, so no request is
local), opened with it, the owner created; then a Mastodon app's sign-in — the app registered,
the authorization page, signing in with the new account, approving, the code traded for a token
and verify_credentials naming the owner.

usage: setup_browser.py BASE_URL USERNAME PASSWORD TOKEN"""

import sys
import urllib.parse

import requests
from selenium.webdriver.common.by import By

from harness import approve, browser, check, fail, sign_in, submit_and_wait, text
from oauth_browser import callback_server


def create_owner(driver, base, username, password, token):
    driver.get(f"{base}/setup")
    check("Not from here" in driver.page_source, f"no link, no page: {driver.page_source[:500]}")
    check(not driver.find_elements(By.ID, "create"), "no form without the link")

    driver.get(f"{base}/setup?token={token}")
    check(driver.find_elements(By.ID, "create"), f"the first-run form: {driver.page_source[:500]}")
    driver.find_element(By.ID, "username").send_keys(username)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "password_confirmation").send_keys(password)
    submit_and_wait(driver, driver.find_element(By.ID, "create"))
    check(driver.current_url.startswith(f"{base}/auth/sign_in"), f"sent to the sign-in page: {driver.current_url}")
    check(f"@{username}" in text(driver, "created"), f"the page names the new account: {driver.page_source[:500]}")

    driver.get(f"{base}/setup?token={token}")
    check("action=\"/setup\"" not in driver.page_source, "the page is closed once the owner exists")


def sign_in_as_an_app(driver, base, username, password):
    server, callback, hits = callback_server()
    try:
        scopes = ["read", "write", "profile"]
        app = requests.post(f"{base}/api/v1/apps", data={
            "client_name": "First Run App", "redirect_uris": callback, "scopes": " ".join(scopes),
        }, timeout=10)
        check(app.status_code == 200, f"app registration: {app.status_code} {app.text}")
        app = app.json()
        query = urllib.parse.urlencode({
            "response_type": "code", "client_id": app["client_id"], "redirect_uri": callback,
            "scope": " ".join(scopes), "state": "first",
        })
        driver.get(f"{base}/oauth/authorize?{query}")
        sign_in(driver, username, password)
        approve(driver, "First Run App", scopes)
        check(len(hits) == 1 and hits[0].get("state") == "first", f"back in the app: {hits}")
        token = requests.post(f"{base}/oauth/token", data={
            "grant_type": "authorization_code", "client_id": app["client_id"],
            "client_secret": app["client_secret"], "redirect_uri": callback, "code": hits[0].get("code"),
        }, timeout=10)
        check(token.status_code == 200, f"the code is traded: {token.status_code} {token.text}")
        access = token.json()["access_token"]
        me = requests.get(f"{base}/api/v1/accounts/verify_credentials",
                          headers={"authorization": f"Bearer {access}"}, timeout=10)
        check(me.status_code == 200 and me.json()["username"] == username,
              f"verify_credentials: {me.status_code} {me.text}")
    finally:
        server.shutdown()


def main(base, username, password, token):
    driver = browser()
    try:
        create_owner(driver, base, username, password, token)
        sign_in_as_an_app(driver, base, username, password)
    finally:
        driver.quit()
    print("setup_browser: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        fail(__doc__)
    main(*sys.argv[1:])
