"""The public pages in a real headless Chromium with JavaScript off (issue 33, R-WEB-1): each
page at 375 px and 1280 px wide loads without console errors, without a request to any other
origin and without sideways scrolling; a screenshot of each is saved.

usage: pages_browser.py BASE_URL OUT_DIR PATH..."""

import json
import os
import sys
import urllib.parse

from harness import browser, check


def origin(url):
    u = urllib.parse.urlsplit(url)
    return f"{u.scheme}://{u.netloc}"


def main(base, out_dir, paths):
    os.makedirs(out_dir, exist_ok=True)
    driver = browser(logs=True)
    try:
        for path in paths:
            for width in (375, 1280):
                driver.set_window_size(width, 900)
                driver.get_log("performance")  # drop what came before
                driver.get_log("browser")
                driver.get(base + path)
                check(driver.find_elements("css selector", "main"), f"{path}: a <main>")
                check(len(driver.find_elements("css selector", "h1")) == 1, f"{path}: one <h1>")
                errors = [e for e in driver.get_log("browser")
                          if e["level"] == "SEVERE" and "favicon.ico" not in e["message"]]
                check(not errors, f"{path} at {width}px logs errors: {errors}")
                requested = []
                for entry in driver.get_log("performance"):
                    msg = json.loads(entry["message"])["message"]
                    if msg["method"] == "Network.requestWillBeSent":
                        requested.append(msg["params"]["request"]["url"])
                foreign = [u for u in requested if not u.startswith("data:") and origin(u) != origin(base)]
                check(requested, f"{path}: no requests seen")
                check(not foreign, f"{path} at {width}px requests other origins: {foreign}")
                metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
                content = metrics["cssContentSize"]["width"]
                viewport = metrics["cssLayoutViewport"]["clientWidth"]
                check(content <= viewport + 1, f"{path} at {width}px scrolls sideways: {content} > {viewport}")
                name = path.strip("/").replace("/", "_").replace("@", "at_").replace("?", "_") or "home"
                driver.save_screenshot(os.path.join(out_dir, f"{name}-{width}.png"))
                print(f"{path} at {width}px: {len(requested)} requests, all same-origin")
    finally:
        driver.quit()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
