-- What a reader is shown of an account's posts counts only what any reader may see (R-MAPI-VIS;
-- the fourth audit's F9): `public_statuses` counts an account's public and unlisted statuses,
-- so its `statuses_count` (and its public profile's validator) no longer moves when it writes
-- a direct message or a followers-only post. Its owner still sees `statuses`, every post.
--
-- Pre-deploy: a new column with a default and triggers the previous version's writes satisfy
-- (it never reads the column).
--
-- A status is inserted as 'public' (the column's default) and given its visibility by an
-- UPDATE in the same transaction (`statuses::write`), so the count follows visibility changes
-- too: inserts and deletes per statement (as `account_stats_count`), a visibility change per
-- row, only when it changes.

ALTER TABLE account_stats ADD COLUMN public_statuses bigint NOT NULL DEFAULT 0;

CREATE FUNCTION account_stats_public_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO account_stats AS s (account_id, public_statuses)
        SELECT account_id, count(*) FROM new_rows WHERE visibility IN ('public', 'unlisted')
         GROUP BY account_id ORDER BY account_id
        ON CONFLICT (account_id) DO UPDATE SET public_statuses = s.public_statuses + EXCLUDED.public_statuses;
    ELSE
        UPDATE account_stats s SET public_statuses = s.public_statuses - d.n
          FROM (SELECT account_id, count(*) AS n FROM old_rows
                 WHERE visibility IN ('public', 'unlisted') GROUP BY account_id) d
         WHERE s.account_id = d.account_id;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION account_stats_public_visibility() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE account_stats
       SET public_statuses = public_statuses
             + (NEW.visibility IN ('public', 'unlisted'))::int
             - (OLD.visibility IN ('public', 'unlisted'))::int
     WHERE account_id = NEW.account_id;
    RETURN NULL;
END $$;

CREATE TRIGGER account_stats_public_insert AFTER INSERT ON statuses
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION account_stats_public_count();
CREATE TRIGGER account_stats_public_delete AFTER DELETE ON statuses
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION account_stats_public_count();
CREATE TRIGGER account_stats_public_update AFTER UPDATE OF visibility ON statuses
    FOR EACH ROW WHEN (OLD.visibility IS DISTINCT FROM NEW.visibility)
    EXECUTE FUNCTION account_stats_public_visibility();

-- The counts so far. The triggers above already hold `statuses`' lock in this transaction,
-- so no write lands between this count and the first trigger.
UPDATE account_stats s
   SET public_statuses = (SELECT count(*) FROM statuses t
                           WHERE t.account_id = s.account_id
                             AND t.visibility IN ('public', 'unlisted'));
