//! Keys and proofs: account key pairs (generated, stored encrypted under `SECRET_KEY`), and
//! FEP-8b32 integrity proofs (ours signed, theirs checked against the actor's key).

pub mod keys;
pub mod proof_keys;
pub mod proofs;
