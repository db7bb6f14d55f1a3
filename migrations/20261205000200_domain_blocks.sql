-- User-level domain blocks (issue 31 item 4, Mastodon's `/api/v1/domain_blocks`): an account
-- hides a whole server — its posts, boosts and notifications — and stops following and being
-- followed by it. `id` orders the list for paging, newest first.
CREATE TABLE account_domain_blocks (
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    account_id  uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    domain      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, domain)
);
CREATE UNIQUE INDEX account_domain_blocks_id ON account_domain_blocks (account_id, id);

-- The host of an actor IRI (lowercased, without port), and whether it is one of `domains` or
-- under one of them (blocking `example.com` blocks `social.example.com`, as on Mastodon).
-- Both are plain SQL so the planner inlines them into the timelines' row filters.
CREATE FUNCTION hollo_iri_host(iri text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT nullif(lower(split_part(split_part(iri, '/', 3), ':', 1)), '')
$$;
CREATE FUNCTION hollo_host_in(host text, domains text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT host IS NOT NULL AND EXISTS (
        SELECT 1 FROM unnest(domains) d WHERE host = d OR right(host, length(d) + 1) = '.' || d)
$$;
