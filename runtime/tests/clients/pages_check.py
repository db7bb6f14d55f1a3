"""The public pages as readers other than browsers see them (issue 33, R-WEB-1): the Atom
feeds through feedparser (valid, titles, entries, the post HTML unescaped back from
content type="html"), the microformats2 of a profile and a permalink through mf2py (h-card
name, rel=me links, h-entry content) and the OpenGraph tags of a permalink.

usage: pages_check.py BASE_URL SPEC_JSON
SPEC_JSON: {"profile", "post", "feed", "tag_feed", "name", "rel_me", "post_text", "image",
            "feed_has": [...], "tag_feed_has": [...], "tag_feed_lacks": [...], "absent": [...],
            "og_images": {path: the og:image URL its page must name (tag and home pages)}}"""

import json
import sys
from html.parser import HTMLParser

import feedparser
import mf2py
import requests

from harness import check


def get(url, accept):
    r = requests.get(url, headers={"Accept": accept}, timeout=15)
    check(r.status_code == 200, f"GET {url}: {r.status_code} {r.text[:300]}")
    return r


class MetaTags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        key = a.get("property") or a.get("name")
        if tag == "meta" and key and "content" in a:
            self.tags.setdefault(key, a["content"])


def entries_of(items):
    """Every h-entry in a parsed mf2 document, children included."""
    for item in items:
        if "h-entry" in item.get("type", []):
            yield item
        yield from entries_of(item.get("children", []))


def feed(url, has, lacks, title):
    r = get(url, "application/atom+xml")
    check(r.headers.get("content-type", "").startswith("application/atom+xml"),
          f"{url} content type {r.headers.get('content-type')}")
    f = feedparser.parse(r.content)
    check(not f.bozo, f"{url} is not well-formed: {f.get('bozo_exception')}")
    check(f.version == "atom10", f"{url} parses as {f.version}")
    check(title in f.feed.get("title", ""), f"{url} title {f.feed.get('title')!r} lacks {title!r}")
    contents = [e.content[0].value for e in f.entries]
    for want in has:
        check(any(want in c for c in contents), f"{url}: no entry with {want!r} in {contents}")
    for secret in lacks:
        check(secret not in r.text, f"{url} shows {secret!r}")
    check(all(e.content[0].type == "text/html" for e in f.entries), "entries are HTML content")
    check(any("<p>" in c for c in contents), f"content type=html reads back as HTML: {contents}")
    check(all(e.get("link", "").startswith("http") and e.get("id") for e in f.entries), "entries have links and ids")
    return f


def main(base, spec):
    s = json.loads(spec)
    f = feed(base + s["feed"], s["feed_has"], s["absent"], s["name"])
    t = feed(base + s["tag_feed"], s["tag_feed_has"], s["absent"] + s["tag_feed_lacks"], "#")
    for path in s.get("valid_feeds", []):
        parsed = feedparser.parse(get(base + path, "application/atom+xml").content)
        check(not parsed.bozo, f"{path} is not well-formed: {parsed.get('bozo_exception')}")
        values = [e.content[0].value for e in parsed.entries]
        check(any("&lt;script&gt;alert(6)" in v and "ctrl" in v for v in values),
              f"{path}: the typed markup reads back as text: {values}")

    profile_url = base + s["profile"]
    doc = mf2py.parse(doc=get(profile_url, "text/html").text, url=profile_url)
    cards = [i for i in doc["items"] if "h-card" in i["type"]]
    check(any(s["name"] in c["properties"].get("name", []) for c in cards),
          f"an h-card named {s['name']!r}: {cards}")
    check(s["rel_me"] in doc["rels"].get("me", []), f"rel=me {s['rel_me']}: {doc['rels']}")
    contents = [e["properties"]["content"][0]["value"] for e in entries_of(doc["items"])
                if e["properties"].get("content")]
    for want in s["feed_has"]:
        check(any(want in c for c in contents), f"an h-entry with {want!r}: {contents}")

    post_url = base + s["post"]
    html = get(post_url, "text/html").text
    doc = mf2py.parse(doc=html, url=post_url)
    entries = list(entries_of(doc["items"]))
    check(any(s["post_text"] in e["properties"]["content"][0]["value"] for e in entries),
          f"the permalink's h-entry: {entries}")
    check(any(s["name"] in json.dumps(e["properties"].get("author", [])) for e in entries),
          "the h-entry names its author")
    meta = MetaTags()
    meta.feed(html)
    og = meta.tags
    check(s["name"] in og.get("og:title", ""), f"og:title {og.get('og:title')!r}")
    check(s["post_text"] in og.get("og:description", ""), f"og:description {og.get('og:description')!r}")
    check(og.get("og:image") == s["image"], f"og:image {og.get('og:image')!r}, want {s['image']!r}")
    check(og.get("twitter:card") == "summary_large_image", f"twitter:card {og.get('twitter:card')!r}")
    for path, want in s.get("og_images", {}).items():
        tags = MetaTags()
        tags.feed(get(base + path, "text/html").text)
        check(tags.tags.get("og:image") == want, f"{path} og:image {tags.tags.get('og:image')!r}, want {want!r}")
        check(tags.tags.get("og:image:alt"), f"{path} og:image:alt")
        check(tags.tags.get("twitter:image") == want, f"{path} twitter:image {tags.tags.get('twitter:image')!r}")
    print(f"pages_check: ok ({len(f.entries)} account entries, {len(t.entries)} tag entries, "
          f"og:title={og['og:title']!r})")


if __name__ == "__main__":
    main(*sys.argv[1:3])
