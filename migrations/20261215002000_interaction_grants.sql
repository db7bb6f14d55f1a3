-- The approvals we grant (GoToSocial's interaction policies, issue 61; `approvals::granted`).
-- Our followers-only statuses let their author's followers like and reply to them; a remote
-- server cannot check our followers collection, so GoToSocial keeps such a like or reply
-- pending until the author's server answers with an `Accept` whose `result` is an approval it
-- can fetch. Each row is one approval: the interaction (the `Like`'s id, or the reply's IRI),
-- who made it, and the status it is with; it is served at `<actor>/approvals/<id>` (as a
-- `LikeApproval` or `ReplyApproval`) while the interaction stands, and goes with the status,
-- the undone like or the deleted reply.
--
-- Pre-deploy: a new table; the previous version neither reads nor writes it.

CREATE TABLE interaction_grants (
    id               uuid        PRIMARY KEY,
    status_id        uuid        NOT NULL REFERENCES statuses (id) ON DELETE CASCADE,
    kind             text        NOT NULL CHECK (kind IN ('like', 'reply')),
    interaction      text        NOT NULL,
    -- What the interaction is (`Like`, `Note`, …), named in the `Accept` so its server knows
    -- what we accept without fetching it.
    interaction_type text        NOT NULL,
    actor            text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (interaction, status_id)
);
