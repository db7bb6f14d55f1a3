-- OAuth scopes per token (SPEC §11, R-MAPI). Tokens made before OAuth existed (by
-- `hollo token create`) keep every top-level scope, so nothing that works today stops working.
ALTER TABLE account_tokens
    ADD COLUMN scopes text NOT NULL DEFAULT 'follow profile push read write';
