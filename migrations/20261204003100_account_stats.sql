-- A local account's counts, kept as its rows change (issue 38): the Account entity shows
-- statuses, followers and following counts on every page where a local author appears, and
-- counting them per render read the whole `statuses` table for an account with most of its
-- posts (6-20 ms per page on the 1 M-post bench). Mastodon keeps `account_stats` the same way.
--
-- Statement-level triggers with transition tables: an import that inserts 10 000 follows in a
-- statement updates the counter once per account, not once per row. Decrements only UPDATE
-- (never insert), so the cascade of a deleted account cannot recreate its row; increments
-- upsert, so a new account needs no row until it has something to count.

CREATE TABLE account_stats (
    account_id uuid   PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    statuses   bigint NOT NULL DEFAULT 0,
    followers  bigint NOT NULL DEFAULT 0,
    following  bigint NOT NULL DEFAULT 0
);

-- Statuses and followers: inserts add, deletes subtract (rows are never moved between
-- accounts). Accounts in id order, so two statements touching the same accounts lock them in
-- one order.
CREATE FUNCTION account_stats_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    col text := TG_ARGV[0];
BEGIN
    IF TG_OP = 'INSERT' THEN
        EXECUTE format(
            'INSERT INTO account_stats AS s (account_id, %1$I)
             SELECT account_id, count(*) FROM new_rows GROUP BY account_id ORDER BY account_id
             ON CONFLICT (account_id) DO UPDATE SET %1$I = s.%1$I + EXCLUDED.%1$I', col);
    ELSE
        EXECUTE format(
            'UPDATE account_stats s SET %1$I = s.%1$I - d.n
               FROM (SELECT account_id, count(*) AS n FROM old_rows GROUP BY account_id) d
              WHERE s.account_id = d.account_id', col);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER account_stats_statuses_insert AFTER INSERT ON statuses
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION account_stats_count('statuses');
CREATE TRIGGER account_stats_statuses_delete AFTER DELETE ON statuses
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION account_stats_count('statuses');
CREATE TRIGGER account_stats_followers_insert AFTER INSERT ON followers
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION account_stats_count('followers');
CREATE TRIGGER account_stats_followers_delete AFTER DELETE ON followers
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION account_stats_count('followers');

-- `following` counts accepted follows: a follow counts once its state is 'accepted' and stops
-- when it leaves that state or is deleted. A state change upserts the net change: the account
-- exists (the follow references it) and was counted before any follow of it was accepted.
CREATE FUNCTION account_stats_following() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO account_stats AS s (account_id, following)
        SELECT account_id, count(*) FROM new_rows WHERE state = 'accepted'
         GROUP BY account_id ORDER BY account_id
        ON CONFLICT (account_id) DO UPDATE SET following = s.following + EXCLUDED.following;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE account_stats s SET following = s.following - d.n
          FROM (SELECT account_id, count(*) AS n FROM old_rows WHERE state = 'accepted'
                 GROUP BY account_id) d
         WHERE s.account_id = d.account_id;
    ELSE
        -- A state change: up where a follow became accepted, down where it stopped being.
        INSERT INTO account_stats AS s (account_id, following)
        SELECT account_id, sum(n) FROM (
                 SELECT account_id, 1 AS n FROM new_rows WHERE state = 'accepted'
                 UNION ALL
                 SELECT account_id, -1 FROM old_rows WHERE state = 'accepted') c
         GROUP BY account_id HAVING sum(n) <> 0 ORDER BY account_id
        ON CONFLICT (account_id) DO UPDATE SET following = s.following + EXCLUDED.following;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER account_stats_following_insert AFTER INSERT ON follows
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION account_stats_following();
CREATE TRIGGER account_stats_following_update AFTER UPDATE ON follows
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION account_stats_following();
CREATE TRIGGER account_stats_following_delete AFTER DELETE ON follows
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION account_stats_following();

-- The counts so far. The triggers above already hold their tables' locks in this
-- transaction, so no write lands between this count and the first trigger.
INSERT INTO account_stats (account_id, statuses, followers, following)
SELECT a.id,
       (SELECT count(*) FROM statuses s WHERE s.account_id = a.id),
       (SELECT count(*) FROM followers f WHERE f.account_id = a.id),
       (SELECT count(*) FROM follows f WHERE f.account_id = a.id AND f.state = 'accepted')
  FROM accounts a;
