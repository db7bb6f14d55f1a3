"""Issue 19's full path driven by Mastodon.py, a client library someone else wrote: post a
status with an image (uploaded through /api/v2/media) and one with a poll, wait for the remote
test peer's person to favourite, boost and reply (runtime/tests/clients.rs plays them), see
those as notifications, in the status's context and in who favourited and boosted it, read
the home and hashtag timelines, then delete the status (the test then sees the peer receive
the `Delete`). Each step is a function taking the shared `Flow`, run in STEPS order.

usage: statuses_flow.py BASE_URL USERNAME PASSWORD TOKEN PEER_HANDLE (the password is unused: the
token was made for the account, as `hollo account create` makes one)"""

import sys

from harness import check, client, fail, gone, png, run_steps, until

TAG = "fullpath"


class Flow:
    def __init__(self, base, username, token, peer):
        self.base, self.username, self.peer = base, username, peer
        self.api = client(base, token)


def post_with_media(flow):
    media = flow.api.media_post(png(32, 24), mime_type="image/png", description="a test card",
                                focus=(0.5, -0.25))
    check(media["type"] == "image", f"an image attachment: {media}")
    media = until("the upload is processed",
                  lambda: (m := flow.api.media(media["id"])) and m.get("url") and m)
    check(media["description"] == "a test card", f"the description: {media}")
    check(media.get("blurhash"), f"a blurhash: {media}")
    flow.status = flow.api.status_post(
        f"Hello @{flow.peer}, a picture #{TAG}", media_ids=[media["id"]], visibility="public",
        idempotency_key="fullpath-post-1")
    again = flow.api.status_post(
        f"Hello @{flow.peer}, a picture #{TAG}", media_ids=[media["id"]], visibility="public",
        idempotency_key="fullpath-post-1")
    check(again["id"] == flow.status["id"], f"a retried post is stored once: {again}")
    attached = flow.status["media_attachments"]
    check([m["id"] for m in attached] == [media["id"]], f"the status shows its media: {attached}")
    check(flow.status["tags"] and flow.status["tags"][0]["name"] == TAG,
          f"the hashtag: {flow.status['tags']}")


def post_with_poll(flow):
    poll = flow.api.make_poll(["tea", "coffee"], expires_in=3600)
    flow.poll_status = flow.api.status_post("Which one?", poll=poll)
    check([o["title"] for o in flow.poll_status["poll"]["options"]] == ["tea", "coffee"],
          f"the poll: {flow.poll_status}")


def see_the_reactions(flow):
    def kinds():
        got = {n["type"]: n for n in flow.api.notifications()}
        return got if {"favourite", "reblog", "mention"} <= got.keys() else None
    got = until("the peer's favourite, boost and reply notifications", kinds)
    for kind in ("favourite", "reblog"):
        check(got[kind]["status"]["id"] == flow.status["id"], f"{kind} is about our post: {got[kind]}")
        check(got[kind]["account"]["acct"] == flow.peer, f"{kind} is from the peer: {got[kind]}")
    flow.reply = got["mention"]["status"]
    check(flow.reply["in_reply_to_id"] == flow.status["id"], f"the reply: {flow.reply}")
    only = flow.api.notifications(types=["favourite"])
    check({n["type"] for n in only} == {"favourite"}, f"types[] filters: {only}")
    status = flow.api.status(flow.status["id"])
    check(status["favourites_count"] == 1 and status["reblogs_count"] == 1
          and status["replies_count"] == 1, f"the counts: {status}")
    who = flow.api.status_favourited_by(flow.status["id"])
    check([a["acct"] for a in who] == [flow.peer], f"favourited_by: {who}")
    who = flow.api.status_reblogged_by(flow.status["id"])
    check([a["acct"] for a in who] == [flow.peer], f"reblogged_by: {who}")
    context = flow.api.status_context(flow.status["id"])
    check([s["id"] for s in context["descendants"]] == [flow.reply["id"]],
          f"the reply is in the context: {context}")


def read_timelines(flow):
    home = [s["id"] for s in flow.api.timeline_home()]
    check(flow.status["id"] in home and flow.poll_status["id"] in home, f"home: {home}")
    tagged = [s["id"] for s in flow.api.timeline_hashtag(TAG)]
    check(tagged == [flow.status["id"]], f"the hashtag timeline: {tagged}")
    local = [s["id"] for s in flow.api.timeline_public(local=True)]
    check(flow.status["id"] in local, f"the local timeline: {local}")


def interact_ourselves(flow):
    reply = flow.reply["id"]
    check(flow.api.status_favourite(reply)["favourited"], "we favourite the reply")
    check(flow.api.status_bookmark(reply)["bookmarked"], "we bookmark the reply")
    check([s["id"] for s in flow.api.favourites()] == [reply], "our favourites")
    check([s["id"] for s in flow.api.bookmarks()] == [reply], "our bookmarks")
    check(not flow.api.status_unbookmark(reply)["bookmarked"], "unbookmarked")


def delete(flow):
    deleted = flow.api.status_delete(flow.status["id"])
    check(deleted["id"] == flow.status["id"], f"delete answers the status: {deleted}")
    gone(lambda: flow.api.status(flow.status["id"]), "status")


STEPS = [post_with_media, post_with_poll, see_the_reactions, read_timelines,
         interact_ourselves, delete]


def main(base, username, token, peer):
    run_steps("statuses_flow", STEPS, Flow(base, username, token, peer),
              lambda flow: f"; deleted {flow.status['uri']}")


if __name__ == "__main__":
    if len(sys.argv) != 6:
        fail(__doc__)
    base, username, _password, token, peer = sys.argv[1:]
    main(base, username, token, peer)
