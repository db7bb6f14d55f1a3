-- Quote posts (R-MAPI-6, issue 32 item 2) as Mastodon 4.5 and FEP-044f have them.
--
-- `quotes`: a post (ours or remote; one id space, so no foreign key) that quotes another, by
-- the quoted post's IRI (it may not be stored yet). `state` is the quote's standing with the
-- quoted author: `pending` until they (or their policy) answer, `accepted` with the
-- `QuoteAuthorization` that proves it, `rejected`, or `revoked` afterwards. `request_id` is
-- our `QuoteRequest`, so its `Accept`/`Reject` finds the quote.
--
-- `quote_authorizations`: the approvals we granted for quotes of our statuses, served at
-- their IRI (`<actor>/quote_authorizations/<id>`) so any server can check a quote's claim.
--
-- `statuses.quote_policy`: who may quote the status (Mastodon's `quote_approval_policy`).
-- Additive only: older binaries neither read nor write these.
CREATE TABLE quotes (
    post_id           uuid PRIMARY KEY,
    quoted_uri        text NOT NULL,
    state             text NOT NULL CHECK (state IN ('pending', 'accepted', 'rejected', 'revoked')),
    authorization_iri text,
    request_id        text UNIQUE,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX quotes_quoted ON quotes (quoted_uri, post_id);
CREATE INDEX quotes_authorization ON quotes (authorization_iri) WHERE authorization_iri IS NOT NULL;

CREATE TABLE quote_authorizations (
    id          uuid PRIMARY KEY,
    status_id   uuid NOT NULL REFERENCES statuses (id) ON DELETE CASCADE,
    quoting_uri text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    UNIQUE (status_id, quoting_uri)
);

ALTER TABLE statuses ADD COLUMN quote_policy text NOT NULL DEFAULT 'public'
    CHECK (quote_policy IN ('public', 'followers', 'nobody'));
