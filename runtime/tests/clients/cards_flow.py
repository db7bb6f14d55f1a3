"""Link previews (R-MAPI-6, issue 32 item 1) read by Mastodon.py, a client library someone else
wrote: a post linking this server's own profile page (OpenGraph, served by the web node) gets
its card from a worker; Mastodon.py parses the Status and its PreviewCard (types, dates, the
authors list) and finds the page's title and description; an edit without the link drops the
card.

usage: cards_flow.py BASE_URL USERNAME PASSWORD TOKEN (the password is unused)"""

import sys

from mastodon import Mastodon

from harness import check, fail, until


def main(base, username, token):
    api = Mastodon(access_token=token, api_base_url=base, version_check_mode="none")
    page = f"{base}/@{username}"
    status = api.status_post(f"My page: {page}")
    check(status["card"] is None, "posting does not wait for the page")
    card = until("the worker's card", lambda: api.status_card(status["id"]))
    print("cards_flow: card fetched", flush=True)
    check(card["url"] == page, f"url: {card['url']}")
    check(card["type"] == "link", f"type: {card['type']}")
    check(username in card["title"], f"title: {card['title']}")
    check(isinstance(card["authors"], list), f"authors: {card['authors']}")
    if card["image"] is not None:
        check(card["image"].startswith(base), f"the image is ours: {card['image']}")
    on_home = [s for s in api.timeline_home() if s["id"] == status["id"]]
    check(on_home and on_home[0]["card"]["url"] == page, "the card on the home timeline")

    api.status_update(status["id"], "No link now")
    until("the card gone after the edit",
          lambda: api.status(status["id"])["card"] is None or None)
    print("cards_flow: all steps passed")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        fail(__doc__)
    base, username, _password, token = sys.argv[1:]
    main(base, username, token)
