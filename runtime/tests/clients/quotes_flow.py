"""Quote posts (R-MAPI-6, issue 32 item 2) driven by Mastodon.py, a client library someone else
wrote, through its Mastodon 4.5 quote API: `status_post(quoted_status_id=…,
quote_approval_policy=…)`, `status_quotes`, `status_update_quote_approval_policy` and
`status_quote_revoke`. Mastodon.py parses every answer into its own Status type (the `quote`
and `quote_approval` included).

usage: quotes_flow.py BASE_URL USERNAME PASSWORD TOKEN QUOTER_TOKEN (the password is unused)"""

from mastodon.errors import MastodonAPIError

from harness import check, client, fail, two_tokens


def main(base, token, quoter_token):
    author, quoter = client(base, token), client(base, quoter_token)

    post = author.status_post("quote me, Mastodon.py", quote_approval_policy="public")
    check(post["quote_approval"]["automatic"] == ["public"], f"approval: {post['quote_approval']}")
    quoting = quoter.status_post("quoting it", quoted_status_id=post["id"])
    check(quoting["quote"]["state"] == "accepted", f"quote: {quoting['quote']}")
    check(quoting["quote"]["quoted_status"]["id"] == post["id"], "the quoted status is shown")
    print("quotes_flow: quoted", flush=True)

    quotes = author.status_quotes(post["id"])
    check([q["id"] for q in quotes] == [quoting["id"]], f"quotes: {[q['id'] for q in quotes]}")

    closed = author.status_update_quote_approval_policy(post["id"], "nobody")
    check(closed["quote_approval"]["automatic"] == [], f"closed: {closed['quote_approval']}")
    check(quoter.status(post["id"])["quote_approval"]["current_user"] == "denied",
          "the quoter is now denied")
    try:
        quoter.status_post("once more", quoted_status_id=post["id"])
        fail("a quote the policy refuses was accepted")
    except MastodonAPIError as e:
        check("422" in str(e) or "quotable" in str(e), f"refused with: {e}")
    print("quotes_flow: policy closed", flush=True)

    revoked = author.status_quote_revoke(post["id"], quoting["id"])
    check(revoked["quote"]["state"] == "revoked", f"revoked: {revoked['quote']}")
    check(revoked["quote"]["quoted_status"] is None, "a revoked quote shows no status")
    check(quoter.status(quoting["id"])["quote"]["state"] == "revoked", "the quoter sees it revoked")
    print("quotes_flow: all steps passed")


if __name__ == "__main__":
    main(*two_tokens(__doc__))
