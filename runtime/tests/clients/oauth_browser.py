"""The sign-in and consent pages in a real headless Chromium (issue 18/3): a wrong password,
the cookies' flags, approval redirecting to the app with code and state, the PKCE exchange, a
replayed code (refused, and the token it bought revoked) and a redirect URI the app did not
register (an error page, no redirect).

usage: oauth_browser.py BASE_URL USERNAME PASSWORD"""

import base64
import hashlib
import http.server
import secrets
import sys
import threading
import urllib.parse

import requests

from harness import browser, check, fail, sign_in, approve, text


def callback_server():
    """The app's redirect URI: records the query of each request it gets."""
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/callback":  # not the browser's /favicon.ico
                hits.append(dict(urllib.parse.parse_qsl(url.query)))
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(b"<!doctype html><title>app</title><p id=app>back in the app</p>")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/callback", hits


def main(base, username, password):
    server, callback, hits = callback_server()
    scopes = ["read", "write:statuses", "profile"]
    app = requests.post(f"{base}/api/v1/apps", data={
        "client_name": "Browser Test", "redirect_uris": callback, "scopes": " ".join(scopes),
    }, timeout=10)
    check(app.status_code == 200, f"app registration: {app.status_code} {app.text}")
    app = app.json()
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state = secrets.token_urlsafe(8)
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": app["client_id"], "redirect_uri": callback,
        "scope": " ".join(scopes), "state": state, "code_challenge": challenge,
        "code_challenge_method": "S256",
    })
    driver = browser()
    try:
        driver.get(f"{base}/oauth/authorize?{query}")
        sign_in(driver, username, "not the password")
        check("Wrong username or password" in text(driver, "error"), f"a wrong password is refused: {driver.page_source[:500]}")
        check(not any(c["name"] == "hollo_session" for c in driver.get_cookies()), "no session after a wrong password")

        sign_in(driver, username, password)
        cookies = {c["name"]: c for c in driver.get_cookies()}
        session = cookies.get("hollo_session")
        check(session is not None, f"a session cookie after signing in: {list(cookies)}")
        check(session["httpOnly"] and session.get("sameSite") == "Lax", f"session cookie flags: {session}")
        check(not session.get("secure"), "no Secure flag over plain http")

        approve(driver, "Browser Test", scopes)
        check(driver.current_url.startswith(callback), f"approval redirects to the app: {driver.current_url}")
        check(len(hits) == 1, f"the app got one redirect: {hits}")
        check(hits[0].get("state") == state, f"the state comes back: {hits[0]}")
        code = hits[0].get("code")
        check(code, f"a code comes back: {hits[0]}")

        form = {"grant_type": "authorization_code", "client_id": app["client_id"],
                "client_secret": app["client_secret"], "redirect_uri": callback, "code": code}
        wrong = requests.post(f"{base}/oauth/token", data={**form, "code_verifier": "x" * 43}, timeout=10)
        check(wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant", f"a wrong PKCE verifier: {wrong.status_code} {wrong.text}")
        token = requests.post(f"{base}/oauth/token", data={**form, "code_verifier": verifier}, timeout=10)
        check(token.status_code == 200, f"the code is traded: {token.status_code} {token.text}")
        access = token.json()["access_token"]
        me = requests.get(f"{base}/api/v1/accounts/verify_credentials", headers={"authorization": f"Bearer {access}"}, timeout=10)
        check(me.status_code == 200 and me.json()["username"] == username, f"verify_credentials: {me.status_code} {me.text}")

        replay = requests.post(f"{base}/oauth/token", data={**form, "code_verifier": verifier}, timeout=10)
        check(replay.status_code == 400 and replay.json()["error"] == "invalid_grant", f"a replayed code: {replay.status_code} {replay.text}")
        me = requests.get(f"{base}/api/v1/accounts/verify_credentials", headers={"authorization": f"Bearer {access}"}, timeout=10)
        check(me.status_code == 401, f"the replay revoked the token: {me.status_code}")

        evil = query.replace(urllib.parse.quote(callback, safe=""), urllib.parse.quote("http://127.0.0.1:9/evil", safe=""))
        check(evil != query, "the mismatched query differs")
        driver.get(f"{base}/oauth/authorize?{evil}")
        check(driver.current_url.startswith(base), f"no redirect to an unregistered URI: {driver.current_url}")
        check("Wrong redirect URI" in driver.page_source, f"an error page: {driver.page_source[:500]}")
        check(len(hits) == 1, f"the app got nothing more: {hits}")
    finally:
        driver.quit()
        server.shutdown()
    print("oauth_browser: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        fail(__doc__)
    main(*sys.argv[1:])
