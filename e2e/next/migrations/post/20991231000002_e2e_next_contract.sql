-- The end-to-end suite's "next version" post-deploy migration (issue 34 item 1; runtime feature
-- `e2e-next`): a contract step — a constraint the previous version's rows could not be held
-- to — that must run only once no pod of the previous version is left. The expand/contract
-- scenario checks it was installed after the last old pod was gone. Never in a release.
ALTER TABLE e2e_next_marker ADD CONSTRAINT e2e_next_marker_positive CHECK (id > 0);
