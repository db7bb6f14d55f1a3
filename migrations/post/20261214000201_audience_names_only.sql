-- Followers-only posts are read by their author's followers as the follows stand, not as they
-- stood when the post was written (R-MAPI-VIS; the fourth audit's F2): `statuses::access`
-- asks `follows` when a post is read, so a follower blocked, removed from the followers or
-- gone no longer reads it, and one who follows later does, as on Mastodon. What `audience`
-- holds is narrowed to match what this version writes: the local accounts a post names itself
-- — those it mentions, and for a remote post those it addresses — not the followers it had.
--
-- Post-deploy: the previous version reads `audience` as every local reader of a
-- followers-only post (its followers included), so this runs once no pod of it is left.
--
-- Ours: a mentioned local account's IRI is `<origin>/users/<name>`, the origin the status's
-- own IRI (`<origin>/users/<author>/statuses/<id>`) starts with.
UPDATE statuses s
   SET audience = ARRAY(
         SELECT a.id FROM accounts a
          WHERE a.id = ANY(s.audience)
            AND EXISTS (
                SELECT 1
                  FROM jsonb_array_elements(CASE jsonb_typeof(s.mentions)
                                            WHEN 'array' THEN s.mentions ELSE '[]' END) m
                 WHERE m->>'href' = substring(s.uri FROM '^(.*)/users/[^/]+/statuses/[^/]+$')
                                    || '/users/' || a.username))
 WHERE s.visibility = 'private' AND cardinality(s.audience) > 0;

-- Theirs: a local account named in the post's mentions or its `to`/`cc`, by the `/users/<name>`
-- its IRI ends with (whatever a remote author names only keeps what it already showed them).
UPDATE remote_posts r
   SET audience = ARRAY(
         SELECT a.id FROM accounts a
          WHERE a.id = ANY(r.audience)
            AND EXISTS (
                SELECT 1
                  FROM (SELECT m->>'href' AS iri
                          FROM jsonb_array_elements(CASE jsonb_typeof(r.mentions)
                                                    WHEN 'array' THEN r.mentions ELSE '[]' END) m
                        UNION ALL
                        SELECT x
                          FROM unnest(ARRAY['to', 'cc']) k,
                               jsonb_array_elements_text(
                                   CASE jsonb_typeof(r.body->k)
                                   WHEN 'array' THEN r.body->k
                                   WHEN 'string' THEN jsonb_build_array(r.body->k)
                                   ELSE '[]' END) x) named
                 WHERE lower(right(named.iri, length(a.username) + 7)) = '/users/' || lower(a.username)))
 WHERE r.visibility = 'private' AND cardinality(r.audience) > 0;
