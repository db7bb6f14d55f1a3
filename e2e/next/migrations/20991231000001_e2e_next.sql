-- The end-to-end suite's "next version" migration (runtime feature `e2e-next`, image
-- localhost/hollo:0.1.1-e2e): harmless, and it fails on purpose in a database whose setting
-- hollo_e2e.fail_migration is 'on' (the failing-migration scenario sets it with ALTER DATABASE),
-- so one image serves both the upgrade and the failed-migration scenarios. Never in a release.
CREATE TABLE e2e_next_marker (
    id integer PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

DO $$
BEGIN
    IF current_setting('hollo_e2e.fail_migration', true) = 'on' THEN
        RAISE EXCEPTION 'e2e: this database asks the next version''s migration to fail (hollo_e2e.fail_migration)';
    END IF;
END
$$;
