-- The colour an account's public pages are drawn in (issue 33, R-WEB-1), as upstream Hollo
-- lets each account choose one of Pico CSS's colour names; NULL is the server's default.
-- Additive only: older binaries neither read nor write it.
ALTER TABLE accounts ADD COLUMN theme_color text CHECK (theme_color IN (
    'amber', 'azure', 'blue', 'cyan', 'fuchsia', 'green', 'grey', 'indigo', 'jade', 'lime',
    'orange', 'pink', 'pumpkin', 'purple', 'red', 'sand', 'slate', 'violet', 'yellow', 'zinc'));
