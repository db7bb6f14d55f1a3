-- Streams close when their token is revoked (issue 28 item 6), on every web node. Whatever
-- deletes tokens — `POST /oauth/revoke`, a replayed code, an app or an account deleted (the
-- cascades), a sign-out or password change — the deletion writes one `revoke` event naming the
-- deleted tokens' hashes and notifies every web node in the same transaction, so it is heard
-- at commit and never if the deletion rolls back, and a node that was cut off catches it up
-- from the table like any other event. Each node closes its streams of those tokens.
ALTER TABLE stream_events
    DROP CONSTRAINT stream_events_kind_check,
    ADD CONSTRAINT stream_events_kind_check
        CHECK (kind IN ('home', 'notification', 'public', 'delete', 'revoke')),
    DROP CONSTRAINT stream_events_event_check,
    ADD CONSTRAINT stream_events_event_check
        CHECK (event IN ('update', 'status.update', 'notification', 'delete', 'revoke')),
    -- For `revoke`: SHA-256 hashes of the revoked tokens (as `account_tokens.token_hash`).
    ADD COLUMN tokens bytea[] NOT NULL DEFAULT '{}';

CREATE FUNCTION stream_tokens_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    event_id bigint;
BEGIN
    -- One event per statement, however many tokens it deleted (an account's deletion).
    INSERT INTO stream_events (kind, event, tokens)
    SELECT 'revoke', 'revoke', array_agg(token_hash) FROM gone HAVING count(*) > 0
    RETURNING id INTO event_id;
    IF event_id IS NOT NULL THEN
        PERFORM pg_notify('hollo_stream', event_id::text);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER account_tokens_revoked
    AFTER DELETE ON account_tokens
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION stream_tokens_revoked();
