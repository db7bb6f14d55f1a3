-- One-time tokens of the first-run page (`/setup`): `hollo serve` makes one at start while no
-- account exists and prints it in its log; creating the owner deletes them all. Only a SHA-256
-- of each token is kept, as for every other token. Rows from several nodes may coexist (each
-- printed its own); any of them opens the page once.
CREATE TABLE setup_tokens (
    token_hash bytea PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);
