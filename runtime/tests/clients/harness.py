"""Shared pieces of the client tests (runtime/tests/clients.rs runs them): a headless Debian
Chromium driven by Selenium through chromium-driver, with JavaScript off, since the sign-in and
consent pages must work without it; and the person at the keyboard signing in and approving."""

import os
import struct
import sys
import time
import zlib

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.support.ui import WebDriverWait


def fail(message):
    print(f"FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def client(base, token):
    """A Mastodon.py client of `base` holding `token` (no version check: Hollo is not Mastodon)."""
    from mastodon import Mastodon
    return Mastodon(access_token=token, api_base_url=base, version_check_mode="none")


class TwoAccounts:
    """The shared state of a flow between two accounts: a client of each (`api`, `friend_api`)
    and their accounts as verify_credentials answers them (`me`, `friend`)."""
    def __init__(self, base, token, friend_token):
        self.api, self.friend_api = client(base, token), client(base, friend_token)
        self.me = self.api.account_verify_credentials()
        self.friend = self.friend_api.account_verify_credentials()


def gone(fetch, what):
    """Checks that `fetch()` now fails with a 404 (Mastodon.py's MastodonNotFoundError)."""
    from mastodon import MastodonNotFoundError
    try:
        fetch()
    except MastodonNotFoundError:
        return
    fail(f"the deleted {what} is still there")


def run_steps(name, steps, flow, done=lambda flow: ""):
    """Runs each step of `steps` on `flow` in order, saying which; `done(flow)` ends the last
    line."""
    for step in steps:
        print(f"{name}: {step.__name__}", flush=True)
        step(flow)
    print(f"{name}: all steps passed{done(flow)}")


def two_tokens(doc):
    """BASE_URL, TOKEN and the second account's token of the command line (`doc` is its usage;
    USERNAME and PASSWORD between are unused: the tokens were made for the accounts)."""
    if len(sys.argv) != 6:
        fail(doc)
    base, _username, _password, token, other_token = sys.argv[1:]
    return base, token, other_token


def png(width, height):
    """A small valid RGB PNG, made here so the test needs no imaging library."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 37 % 256, y * 53 % 256, 90)) for x in range(width))
        for y in range(height))
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def jpeg_size(data):
    """(width, height) of a baseline or progressive JPEG, read from its SOF marker."""
    check(data[:2] == b"\xff\xd8", "a JPEG")
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            fail(f"not a JPEG marker at {i}")
        marker, length = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return width, height
        i += 2 + length
    fail("no SOF marker in the JPEG")


def until(what, probe, deadline_s=90):
    """Polls `probe` until it returns something truthy, failing after `deadline_s` seconds."""
    deadline = time.monotonic() + deadline_s
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            fail(f"{what} never happened")
        time.sleep(0.3)


def browser(logs=False):
    """A headless Chromium; with `logs`, its console and network (performance) logs are kept
    for `driver.get_log`."""
    options = webdriver.ChromeOptions()
    if logs:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    # No JavaScript: the pages are plain HTML forms (issue 18/3).
    options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    return driver


def text(driver, element_id):
    found = driver.find_elements(By.ID, element_id)
    return found[0].text if found else ""


def sign_in(driver, username, password):
    """Fills the sign-in page and submits it."""
    check(driver.find_elements(By.ID, "sign-in"), f"expected the sign-in page, got: {driver.page_source[:500]}")
    field = driver.find_element(By.ID, "username")
    field.clear()
    field.send_keys(username)
    driver.find_element(By.ID, "password").send_keys(password)
    submit_and_wait(driver, driver.find_element(By.ID, "sign-in"))


def approve(driver, app_name, scopes):
    """Checks the consent page names the app and the scopes, then approves."""
    check(f"Authorize {app_name}" in driver.page_source, f"the consent page names the app: {driver.page_source[:800]}")
    shown = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#scopes li")]
    check(sorted(shown) == sorted(scopes), f"the consent page lists the scopes {scopes}, shows {shown}")
    submit_and_wait(driver, driver.find_element(By.ID, "approve"))


def submit_and_wait(driver, button):
    """Clicks a form's button and waits until the next page has replaced this one."""
    button.click()
    WebDriverWait(driver, 20).until(lambda _: detached(button))


def detached(element):
    """Whether the page holding `element` has gone. Chromium reports a node caught mid-navigation
    either as stale or, while the old document is being torn down, as an inspector error saying it
    "does not belong to the document"; both mean the next page has replaced this one."""
    try:
        element.is_enabled()
        return False
    except StaleElementReferenceException:
        return True
    except WebDriverException as error:
        if "does not belong to the document" in str(error):
            return True
        raise
