-- FEP-8b32 object integrity proofs (issue 17/5): each local account's Ed25519 key, sealed like
-- its RSA key (AES-256-GCM under SECRET_KEY; the account id and a label are the associated
-- data). NULL until first needed: accounts made before this migration get one on first use.
ALTER TABLE accounts ADD COLUMN proof_key_enc bytea;

-- Remote actors' proof keys (`assertionMethod` Multikeys), as their actor documents list them;
-- refetched once when a proof stops verifying (key rotation), like remote_keys.
CREATE TABLE remote_proof_keys (
    id          text        PRIMARY KEY,   -- the verificationMethod id
    controller  text        NOT NULL,      -- the actor that lists it
    public_key  bytea       NOT NULL,      -- 32 bytes
    fetched_at  timestamptz NOT NULL DEFAULT now()
);
