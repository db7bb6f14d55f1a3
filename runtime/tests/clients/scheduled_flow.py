"""Scheduled statuses (R-MAPI-6) driven by Mastodon.py, a client library someone else wrote:
schedule a post with an image for an hour ahead, find it in the list, move it to a few seconds
ahead, schedule a second one and cancel it, then wait for the worker to publish the first —
never before its time, once, with its image — and for the list to be empty.

usage: scheduled_flow.py BASE_URL USERNAME PASSWORD TOKEN (the password is unused: the token was
made for the account, as `hollo account create` makes them)"""

import datetime
import sys

from mastodon import Mastodon

from harness import check, fail, png, until


def ahead(seconds):
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)


def main(base, token):
    api = Mastodon(access_token=token, api_base_url=base, version_check_mode="none")
    me = api.account_verify_credentials()
    media = api.media_post(png(6, 4), mime_type="image/png", description="a gradient")
    scheduled = api.status_post("Posted by the queue #later", media_ids=[media["id"]],
                                scheduled_at=ahead(3600))
    print("scheduled_flow: scheduled", flush=True)
    check(scheduled["params"]["text"] == "Posted by the queue #later", f"params: {scheduled}")
    check([m["id"] for m in scheduled["media_attachments"]] == [media["id"]],
          f"its image: {scheduled['media_attachments']}")
    listed = api.scheduled_statuses()
    check([s["id"] for s in listed] == [scheduled["id"]], f"the list: {listed}")

    soon = ahead(3)
    moved = api.scheduled_status_update(scheduled["id"], soon)
    check(abs((moved["scheduled_at"] - soon).total_seconds()) < 1, f"moved: {moved}")
    other = api.status_post("Never posted", scheduled_at=ahead(7200))
    api.scheduled_status_delete(other["id"])
    check([s["id"] for s in api.scheduled_statuses()] == [scheduled["id"]], "cancelled")
    print("scheduled_flow: moved and cancelled", flush=True)

    def published():
        return [s for s in api.account_statuses(me["id"]) if "Posted by the queue" in s["content"]]
    posted = until("the worker publishes it", lambda: published() or None)
    check(len(posted) == 1, f"once: {posted}")
    status = posted[0]
    check(status["created_at"] >= moved["scheduled_at"] - datetime.timedelta(milliseconds=1),
          f"never early: {status['created_at']} < {moved['scheduled_at']}")
    check([m["id"] for m in status["media_attachments"]] == [media["id"]], "with its image")
    check([t["name"] for t in status["tags"]] == ["later"], f"tags: {status['tags']}")
    check(list(api.scheduled_statuses()) == [], "nothing left scheduled")
    check(not any("Never posted" in s["content"] for s in api.account_statuses(me["id"])),
          "the cancelled one never posts")
    print("scheduled_flow: all steps passed")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        fail(__doc__)
    base, _username, _password, token = sys.argv[1:]
    main(base, token)
