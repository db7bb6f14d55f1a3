-- R-MAPI-VIS: a `delete` event of a followers-only or direct status goes only to the streams
-- of the accounts that could read it (`accounts`: its local author and audience), never to
-- every connected user; `delete` events of public and unlisted statuses still go to every
-- stream (`restricted` false, `accounts` empty).
ALTER TABLE stream_events ADD COLUMN restricted boolean NOT NULL DEFAULT false;
