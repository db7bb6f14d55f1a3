"""Issue 30's profile and posting flows driven by Mastodon.py, a client library someone else
wrote: set a default visibility and post without one (the post takes the default), pin posts
and see them as the profile's pinned ones (and unpin), find a friend for an @-mention by prefix,
follow a hashtag and see a stranger's tagged post reach home, feature a tag, search hashtags.
Each step is a function taking the shared `Flow`, run in order.

usage: profile_flow.py BASE_URL USERNAME PASSWORD TOKEN FRIEND_TOKEN (the password is unused:
the tokens were made for the accounts, as `hollo account create` makes them)"""

from mastodon import MastodonAPIError

from harness import TwoAccounts, check, fail, run_steps, two_tokens, until


class Flow(TwoAccounts):
    def __init__(self, base, token, friend_token):
        super().__init__(base, token, friend_token)
        self.pinned = []


def default_visibility(flow):
    flow.api.account_update_credentials(default_privacy="private")
    me = flow.api.account_verify_credentials()
    check(me["source"]["privacy"] == "private", f"source.privacy: {me['source']}")
    post = flow.api.status_post("no visibility given")
    check(post["visibility"] == "private", f"the default applies: {post['visibility']}")
    flow.api.account_update_credentials(default_privacy="public")


def pin_and_unpin(flow):
    for text in ["first pinned", "second pinned"]:
        post = flow.api.status_post(text)
        pinned = flow.api.status_pin(post["id"])
        check(pinned["pinned"], f"status_pin: {pinned}")
        flow.pinned.append(post["id"])
    shown = [s["id"] for s in flow.api.account_statuses(flow.me["id"], pinned=True)]
    check(shown == list(reversed(flow.pinned)), f"pinned=True: {shown}")
    try:
        flow.api.status_pin(flow.friend_api.status_post("not yours")["id"])
    except MastodonAPIError:
        pass
    else:
        fail("pinning another's status was accepted")
    flow.api.status_unpin(flow.pinned[0])
    shown = [s["id"] for s in flow.api.account_statuses(flow.me["id"], pinned=True)]
    check(shown == [flow.pinned[1]], f"after status_unpin: {shown}")


def mention_autocomplete(flow):
    prefix = flow.friend["username"][:3]
    found = flow.api.account_search(prefix, limit=5)
    check(flow.friend["id"] in [a["id"] for a in found], f"account_search({prefix!r}): {found}")


def follow_a_tag(flow):
    tag = flow.api.tag_follow("Flowtag")
    check(tag["name"] == "flowtag" and tag["following"], f"tag_follow: {tag}")
    check([t["name"] for t in flow.api.followed_tags()] == ["flowtag"], "followed_tags()")
    # The friend is not followed: only the tag brings the post home.
    post = flow.friend_api.status_post("something about #flowtag")
    until("the tagged post reaches home",
          lambda: post["id"] in [s["id"] for s in flow.api.timeline_home()])
    found = flow.api.search_v2("flowt", result_type="hashtags")
    check([t["name"] for t in found["hashtags"]] == ["flowtag"], f"search_v2: {found}")
    flow.api.tag_unfollow("flowtag")
    check(post["id"] not in [s["id"] for s in flow.api.timeline_home()],
          "unfollowed: the post leaves home")


def feature_a_tag(flow):
    flow.api.status_post("a post with #mytag")
    made = flow.api.featured_tag_create("mytag")
    check(made["name"] == "mytag" and int(made["statuses_count"]) == 1, f"featured: {made}")
    shown = flow.friend_api.account_featured_tags(flow.me["id"])
    check([t["name"] for t in shown] == ["mytag"], f"account_featured_tags: {shown}")
    flow.api.featured_tag_delete(made["id"])
    check(list(flow.api.featured_tags()) == [], "deleted")


STEPS = [default_visibility, pin_and_unpin, mention_autocomplete, follow_a_tag, feature_a_tag]


def main(base, token, friend_token):
    run_steps("profile_flow", STEPS, Flow(base, token, friend_token))


if __name__ == "__main__":
    main(*two_tokens(__doc__))
