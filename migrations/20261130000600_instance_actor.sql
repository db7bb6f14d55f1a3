-- The instance actor (Mastodon's and Fedify's application actor): one `Application` actor per
-- server, `<PUBLIC_URL>/actor`, whose key signs the fetches no local account makes, above all the
-- key fetches of the shared inbox (servers in authorized-fetch mode refuse unsigned GETs).
--
-- One row at most: the primary key is a constant. Every process that finds no row generates a
-- key pair and inserts it with ON CONFLICT DO NOTHING, then reads the row back, so processes that
-- start together all end up with the same key.

CREATE TABLE instance_actor (
    singleton        boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    -- The associated data of the encrypted private key, as an account's id is for its key.
    id               uuid        NOT NULL,
    public_key_pem   text        NOT NULL,
    -- AES-256-GCM under a key derived from SECRET_KEY: 12-byte nonce || ciphertext (PKCS#8 DER).
    private_key_enc  bytea       NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);
