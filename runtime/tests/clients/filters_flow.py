"""Issue 31's filters and conversation mutes driven by Mastodon.py, a client library someone
else wrote: follow a friend, make a v2 filter that warns (their matching post comes back with
`filtered`), read it through the v1 API and apply it client-side with the library's own
`filters_apply`, turn it to `hide` (the post leaves home), manage keywords and a status rule, let
a two-second filter end by itself, mute a conversation (no more notifications from it) and
unmute it, then delete everything. Each step is a function taking the shared `Flow`, run in
order.

usage: filters_flow.py BASE_URL USERNAME PASSWORD TOKEN FRIEND_TOKEN (the password is unused:
the tokens were made for the accounts, as `hollo account create` makes them)"""

from harness import TwoAccounts, check, run_steps, two_tokens, until


class Flow(TwoAccounts):
    def __init__(self, base, token, friend_token):
        super().__init__(base, token, friend_token)
        self.filter = None
        self.post = None


def home(flow):
    return {s["id"]: s for s in flow.api.timeline_home()}


def a_warning_filter(flow):
    flow.api.account_follow(flow.friend["id"])
    flow.filter = flow.api.create_filter_v2(
        "Spoilers", ["home", "public"], "warn",
        keywords_attributes=[{"keyword": "spoiler", "whole_word": True}])
    check(flow.filter["title"] == "Spoilers" and flow.filter["filter_action"] == "warn",
          f"the filter as made: {flow.filter}")
    check([k["keyword"] for k in flow.filter["keywords"]] == ["spoiler"], "its keyword")
    flow.post = flow.friend_api.status_post("Spoiler: the butler did it")
    shown = until("the post reaches home", lambda: home(flow).get(flow.post["id"]))
    results = shown["filtered"]
    check(len(results) == 1 and results[0]["filter"]["title"] == "Spoilers"
          and results[0]["keyword_matches"] == ["spoiler"], f"filtered: {results}")
    public = {s["id"]: s for s in flow.api.timeline_public()}
    check(public[flow.post["id"]]["filtered"], "warned in the public timeline too")


def the_v1_view(flow):
    old = flow.api.filters()
    check([(f["phrase"], f["irreversible"]) for f in old] == [("spoiler", False)],
          f"v1 filters: {old}")
    kept = flow.api.filters_apply(flow.api.timeline_home(), old, "home")
    check(flow.post["id"] not in [s["id"] for s in kept],
          "the library's own v1 matching agrees with the server's")


def hide_it(flow):
    flow.api.update_filter_v2(flow.filter["id"], filter_action="hide")
    check(flow.post["id"] not in home(flow), "a hide filter takes the post out of home")
    check(flow.api.status(flow.post["id"])["id"] == flow.post["id"],
          "the post itself still opens")


def keywords_and_statuses(flow):
    added = flow.api.add_filter_keyword_v2(flow.filter["id"], "twist", whole_word=False)
    words = [k["keyword"] for k in flow.api.filter_keywords_v2(flow.filter["id"])]
    check(words == ["spoiler", "twist"], f"keywords: {words}")
    flow.api.delete_filter_keyword_v2(added["id"])
    plain = flow.friend_api.status_post("an ordinary post")
    until("the ordinary post reaches home", lambda: plain["id"] in home(flow))
    rule = flow.api.add_filter_status_v2(flow.filter["id"], plain["id"])
    check([r["status_id"] for r in flow.api.filter_statuses_v2(flow.filter["id"])]
          == [plain["id"]], "the status rule is listed")
    check(plain["id"] not in home(flow), "a status rule hides that status")
    flow.api.delete_filter_status_v2(rule["id"])
    check(plain["id"] in home(flow), "the rule removed: it is back")


def a_filter_that_ends(flow):
    brief = flow.api.create_filter_v2("Brief", ["home"], "hide", expires_in=2,
                                      keywords_attributes=[{"keyword": "soon", "whole_word": True}])
    post = flow.friend_api.status_post("soon over")
    until("the two-second filter ends by itself", lambda: post["id"] in home(flow))
    check(flow.api.filter_v2(brief["id"])["expires_at"] is not None,
          "the ended filter is kept, with its end")
    flow.api.delete_filter_v2(brief["id"])


def mute_a_conversation(flow):
    mine = flow.api.status_post("my thread")
    reply = flow.friend_api.status_post(f"@{flow.me['acct']} a reply", in_reply_to_id=mine["id"])

    def mentioned(status_id):
        return any(n["status"] and n["status"]["id"] == status_id
                   for n in flow.api.notifications(types=["mention"]))
    until("the reply notifies", lambda: mentioned(reply["id"]))
    muted = flow.api.status_mute(mine["id"])
    check(muted["muted"], f"status_mute: {muted}")
    quiet = flow.friend_api.status_post(f"@{flow.me['acct']} again", in_reply_to_id=reply["id"])
    control = flow.friend_api.status_post(f"@{flow.me['acct']} in another thread")
    until("another thread notifies", lambda: mentioned(control["id"]))
    check(not mentioned(quiet["id"]), "the muted thread did not notify")
    unmuted = flow.api.status_unmute(mine["id"])
    check(not unmuted["muted"], f"status_unmute: {unmuted}")
    loud = flow.friend_api.status_post(f"@{flow.me['acct']} once more", in_reply_to_id=quiet["id"])
    until("unmuted, the thread notifies again", lambda: mentioned(loud["id"]))


def clean_up(flow):
    flow.api.delete_filter_v2(flow.filter["id"])
    check(list(flow.api.filters_v2()) == [], "no filters left")
    check(flow.post["id"] in home(flow), "the filter deleted: the post is back")


STEPS = [a_warning_filter, the_v1_view, hide_it, keywords_and_statuses, a_filter_that_ends,
         mute_a_conversation, clean_up]


def main(base, token, friend_token):
    run_steps("filters_flow", STEPS, Flow(base, token, friend_token))


if __name__ == "__main__":
    main(*two_tokens(__doc__))
