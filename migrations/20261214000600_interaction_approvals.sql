-- Our interactions that a remote post's author must approve (GoToSocial's interaction
-- policies, issue 61; `approvals`). A reply, favourite or boost of a post whose
-- `interactionPolicy` lets our user do it only with the author's approval is stored pending:
-- sent to the author alone, shown to its own author only (a reply, a boost) and counted
-- nowhere, until the author's `Accept` (then `approved_by` holds the approval's IRI, which the
-- reply and the boost carry as `approvedBy`) or `Reject` (then it is undone).
--
-- Pre-deploy: new columns with defaults, and the `posts` view with one more column at its end;
-- the previous version writes rows that are never pending and reads nothing new.

ALTER TABLE statuses
    ADD COLUMN pending_approval boolean NOT NULL DEFAULT false,
    ADD COLUMN approved_by      text;
ALTER TABLE favourites
    ADD COLUMN pending_approval boolean NOT NULL DEFAULT false,
    ADD COLUMN approved_by      text;
ALTER TABLE reblogs
    ADD COLUMN pending_approval boolean NOT NULL DEFAULT false,
    ADD COLUMN approved_by      text;

-- `statuses::access` reads `pending_approval` beside the visibility: a pending reply of ours is
-- its author's alone. Remote posts are never pending here (their servers decide theirs).
CREATE OR REPLACE VIEW posts AS
    SELECT s.id, s.uri, true AS local, s.account_id, NULL::text AS actor_iri,
           s.account_id AS author_id, s.visibility, s.created_at, s.in_reply_to_uri, s.tags,
           s.audience, s.pending_approval
      FROM statuses s
    UNION ALL
    SELECT r.id, r.iri, false, NULL, r.actor, ra.id, r.visibility,
           coalesce(r.published, r.created_at), r.in_reply_to, r.tags, r.audience, false
      FROM remote_posts r JOIN remote_actors ra ON ra.iri = r.actor
     WHERE r.deleted_at IS NULL;
