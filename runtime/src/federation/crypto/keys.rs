//! Account key pairs: RSA 2048 generated once per account, the public half as SPKI PEM (what
//! actor documents publish), the private half stored encrypted with AES-256-GCM under a key
//! derived from `SECRET_KEY` by HKDF-SHA256. The account id is the associated data, so a
//! ciphertext copied onto another account's row does not decrypt.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use hkdf::Hkdf;
use rand::RngCore;
use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding,
};
use rsa::{RsaPrivateKey, RsaPublicKey};
use sha2::Sha256;
use std::time::Duration;
use uuid::Uuid;

use crate::federation::transport::ttl::TtlMap;

const NONCE_LEN: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key generation failed: {0}")]
    Generate(String),
    #[error("encoding: {0}")]
    Encode(String),
    #[error("cannot decrypt the account key (was SECRET_KEY changed?)")]
    Decrypt,
    #[error("not an RSA public key in PEM: {0}")]
    Pem(String),
}

pub fn generate() -> Result<RsaPrivateKey, KeyError> {
    RsaPrivateKey::new(&mut rand::rngs::OsRng, 2048).map_err(|e| KeyError::Generate(e.to_string()))
}

pub fn public_key_pem(key: &RsaPrivateKey) -> Result<String, KeyError> {
    key.to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| KeyError::Encode(e.to_string()))
}

/// SPKI (`BEGIN PUBLIC KEY`, what Mastodon publishes) or PKCS#1 (`BEGIN RSA PUBLIC KEY`).
pub fn public_key_from_pem(pem: &str) -> Result<RsaPublicKey, KeyError> {
    let pem = pem.trim();
    RsaPublicKey::from_public_key_pem(pem)
        .or_else(|_| RsaPublicKey::from_pkcs1_pem(pem))
        .map_err(|e| KeyError::Pem(e.to_string()))
}

/// Encrypts and decrypts account private keys; built once from `SECRET_KEY`.
#[derive(Clone)]
pub struct KeyCipher {
    cipher: Aes256Gcm,
}

impl KeyCipher {
    pub fn new(secret_key: &str) -> Self {
        let hk = Hkdf::<Sha256>::new(Some(b"hollo-account-keys"), secret_key.as_bytes());
        let mut okm = [0u8; 32];
        // 32 bytes is far below HKDF-SHA256's 8160-byte limit, so expand cannot fail.
        let _ = hk.expand(b"account private key v1", &mut okm);
        KeyCipher {
            cipher: Aes256Gcm::new(&Key::<Aes256Gcm>::from(okm)),
        }
    }

    pub fn encrypt(&self, account: Uuid, key: &RsaPrivateKey) -> Result<Vec<u8>, KeyError> {
        let der = key
            .to_pkcs8_der()
            .map_err(|e| KeyError::Encode(e.to_string()))?;
        self.seal(der.as_bytes(), account.as_bytes())
    }

    pub fn decrypt(&self, account: Uuid, sealed: &[u8]) -> Result<RsaPrivateKey, KeyError> {
        let der = self.open(sealed, account.as_bytes())?;
        RsaPrivateKey::from_pkcs8_der(&der).map_err(|_| KeyError::Decrypt)
    }

    /// Seals an account's Ed25519 seed (its FEP-8b32 proof key). The associated data is the
    /// account id and a label, so neither another account's ciphertext nor the account's RSA
    /// ciphertext opens as this key.
    pub fn seal_ed25519(&self, account: Uuid, seed: &[u8; 32]) -> Result<Vec<u8>, KeyError> {
        self.seal(seed, &ed25519_aad(account))
    }

    pub fn open_ed25519(&self, account: Uuid, sealed: &[u8]) -> Result<[u8; 32], KeyError> {
        let seed = self.open(sealed, &ed25519_aad(account))?;
        seed.try_into().map_err(|_| KeyError::Decrypt)
    }

    /// `nonce ‖ AES-256-GCM(msg)` with a fresh random nonce, bound to `aad`.
    fn seal(&self, msg: &[u8], aad: &[u8]) -> Result<Vec<u8>, KeyError> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let sealed = self
            .cipher
            .encrypt(&Nonce::from(nonce), Payload { msg, aad })
            .map_err(|_| KeyError::Encode("encryption failed".into()))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, KeyError> {
        if sealed.len() <= NONCE_LEN {
            return Err(KeyError::Decrypt);
        }
        let (nonce, ct) = sealed.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| KeyError::Decrypt)?;
        self.cipher
            .decrypt(&Nonce::from(nonce), Payload { msg: ct, aad })
            .map_err(|_| KeyError::Decrypt)
    }
}

fn ed25519_aad(account: Uuid) -> Vec<u8> {
    let mut aad = account.as_bytes().to_vec();
    aad.extend_from_slice(b"/ed25519");
    aad
}

/// One key per unit-test binary: generation is the slow part of these tests.
/// Remote public keys this process has verified a signature with, parsed, with their owner,
/// for a minute (R-AP-2): a busy inbox takes many requests signed by one key, and reading
/// the key's row and parsing its PEM each time was most of what accepting one cost. Only a key
/// that verifies is used from here; anything else goes the full way (read, refetch). A key the
/// owner replaces stays accepted here for at most the minute.
pub struct VerifiedKeys(TtlMap<VerifiedKey>);

#[derive(Clone)]
pub struct VerifiedKey {
    pub key: RsaPublicKey,
    pub owner: String,
}

impl Default for VerifiedKeys {
    fn default() -> Self {
        VerifiedKeys(TtlMap::new(Duration::from_secs(60), 20_000))
    }
}

impl VerifiedKeys {
    pub fn get(&self, key_id: &str) -> Option<VerifiedKey> {
        self.0.get(key_id)
    }

    pub fn put(&self, key_id: &str, key: RsaPublicKey, owner: &str) {
        self.0.insert(
            key_id,
            VerifiedKey {
                key,
                owner: owner.to_string(),
            },
        );
    }

    /// Forgets every key (after `remote_keys` was emptied behind this process's back).
    pub fn clear(&self) {
        self.0.clear();
    }
}

#[cfg(test)]
pub fn test_key() -> &'static RsaPrivateKey {
    static KEY: std::sync::OnceLock<RsaPrivateKey> = std::sync::OnceLock::new();
    KEY.get_or_init(|| generate().expect("test key"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ed25519_seeds_open_only_for_their_account_and_never_as_the_rsa_key() {
        let c = KeyCipher::new("k".repeat(40).as_str());
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let sealed = c.seal_ed25519(a, &[9u8; 32]).expect("seal");
        assert_eq!(c.open_ed25519(a, &sealed).expect("open"), [9u8; 32]);
        assert!(c.open_ed25519(b, &sealed).is_err(), "another account");
        assert!(c.decrypt(a, &sealed).is_err(), "not the RSA key");
        let rsa = c.encrypt(a, test_key()).expect("rsa");
        assert!(
            c.open_ed25519(a, &rsa).is_err(),
            "the RSA ciphertext is not a seed"
        );
        assert!(
            KeyCipher::new("j".repeat(40).as_str())
                .open_ed25519(a, &sealed)
                .is_err()
        );
    }

    #[test]
    fn private_keys_round_trip_only_with_the_same_secret_and_account() {
        let key = test_key();
        let account = Uuid::new_v4();
        let c = KeyCipher::new("0123456789abcdef0123456789abcdef");
        let sealed = c.encrypt(account, key).expect("encrypt");
        assert_eq!(&c.decrypt(account, &sealed).expect("decrypt"), key);
        assert!(c.decrypt(Uuid::new_v4(), &sealed).is_err());
        let other = KeyCipher::new("another secret key of enough length!!");
        assert!(other.decrypt(account, &sealed).is_err());
    }

    #[test]
    fn public_pem_round_trips() {
        let pem = public_key_pem(test_key()).expect("pem");
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        assert_eq!(
            public_key_from_pem(&pem).expect("parse"),
            test_key().to_public_key()
        );
        assert!(public_key_from_pem("nope").is_err());
    }
}
