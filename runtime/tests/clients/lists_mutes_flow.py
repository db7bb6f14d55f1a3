"""Issue 31's lists and mutes driven by Mastodon.py, a client library someone else wrote:
follow a friend, make a list (replies policy, exclusivity), add the friend, see their post in
the list timeline, mute them (their posts leave home and the list; the mute is listed), unmute
(the posts are back), mute for two seconds and see the mute end by itself, then take the friend
out of the list and delete it. Each step is a function taking the shared `Flow`, run in order.

usage: lists_mutes_flow.py BASE_URL USERNAME PASSWORD TOKEN FRIEND_TOKEN (the password is
unused: the tokens were made for the accounts, as `hollo account create` makes them)"""

from harness import check, client, gone, run_steps, two_tokens, until


class Flow:
    def __init__(self, base, token, friend_token):
        self.api, self.friend_api = client(base, token), client(base, friend_token)
        self.friend = self.friend_api.account_verify_credentials()
        self.list = None
        self.post = None


def ids(page):
    return [s["id"] for s in page]


def follow_and_make_a_list(flow):
    rel = flow.api.account_follow(flow.friend["id"])
    check(rel["following"], f"following the friend: {rel}")
    made = flow.api.list_create("Friends", replies_policy="followed", exclusive=False)
    check(made["title"] == "Friends" and made["replies_policy"] == "followed",
          f"the list as made: {made}")
    changed = flow.api.list_update(made["id"], "Close friends", replies_policy="list",
                                   exclusive=True)
    check((changed["title"], changed["replies_policy"], changed["exclusive"])
          == ("Close friends", "list", True), f"the list as changed: {changed}")
    check([l["id"] for l in flow.api.lists()] == [made["id"]], "lists() shows it")
    flow.list = changed


def add_the_friend(flow):
    flow.api.list_accounts_add(flow.list["id"], [flow.friend["id"]])
    members = flow.api.list_accounts(flow.list["id"])
    check([a["id"] for a in members] == [flow.friend["id"]], f"the members: {members}")
    held = flow.api.account_lists(flow.friend["id"])
    check([l["id"] for l in held] == [flow.list["id"]], f"account_lists: {held}")


def their_post_reaches_the_list(flow):
    flow.post = flow.friend_api.status_post("for my friends")
    until("the post reaches the list timeline",
          lambda: flow.post["id"] in ids(flow.api.timeline_list(flow.list["id"])))
    # The list is exclusive: the friend's posts stay out of home.
    check(flow.post["id"] not in ids(flow.api.timeline_home()),
          "an exclusive list's member is not at home")


def mute_and_unmute(flow):
    rel = flow.api.account_mute(flow.friend["id"], notifications=True)
    check(rel["muting"] and rel["muting_notifications"], f"muted: {rel}")
    check([a["id"] for a in flow.api.mutes()] == [flow.friend["id"]], "mutes() lists them")
    check(flow.post["id"] not in ids(flow.api.timeline_list(flow.list["id"])),
          "a muted account's post leaves the list timeline")
    rel = flow.api.account_unmute(flow.friend["id"])
    check(not rel["muting"], f"unmuted: {rel}")
    check(flow.post["id"] in ids(flow.api.timeline_list(flow.list["id"])),
          "unmuted: the post is back")
    check(list(flow.api.mutes()) == [], "no mutes left")


def a_mute_that_ends(flow):
    rel = flow.api.account_mute(flow.friend["id"], notifications=False, duration=2)
    check(rel["muting"] and not rel["muting_notifications"], f"muted for 2 s: {rel}")
    until("the two-second mute ends by itself",
          lambda: not flow.api.account_relationships([flow.friend["id"]])[0]["muting"])
    check(flow.post["id"] in ids(flow.api.timeline_list(flow.list["id"])),
          "the post is back after the mute ended")


def take_the_list_apart(flow):
    flow.api.list_accounts_delete(flow.list["id"], [flow.friend["id"]])
    check(list(flow.api.list_accounts(flow.list["id"])) == [], "no members left")
    check(ids(flow.api.timeline_list(flow.list["id"])) == [],
          "a removed member's posts leave the list")
    flow.api.list_delete(flow.list["id"])
    gone(lambda: flow.api.list(flow.list["id"]), "list")


STEPS = [follow_and_make_a_list, add_the_friend, their_post_reaches_the_list, mute_and_unmute,
         a_mute_that_ends, take_the_list_apart]


def main(base, token, friend_token):
    run_steps("lists_mutes_flow", STEPS, Flow(base, token, friend_token))


if __name__ == "__main__":
    main(*two_tokens(__doc__))
