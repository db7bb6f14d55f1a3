//! HTTP Signatures as Mastodon sends and checks them (draft-cavage-http-signatures-12,
//! `rsa-sha256`; `hs2019` is accepted as its alias for RSA keys), plus the `Digest` header
//! (`SHA-256=<base64>`) that binds the body to the signature.
//!
//! Time window: a `Date` more than 12 hours old or more than 1 hour in the future is stale
//! (Mastodon's limits), so a captured request cannot be replayed for long while servers with
//! some clock skew still federate.

use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::pkcs1v15;
use rsa::signature::Verifier;
use rsa::{RsaPrivateKey, RsaPublicKey};
use sha2::{Digest, Sha256};
use url::Url;

/// How a request is signed: RFC 9421 HTTP Message Signatures, or draft-cavage (what every
/// server reads today). Which one a host gets is `schemes`' decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Rfc9421,
    Cavage,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Rfc9421 => "rfc9421",
            Scheme::Cavage => "cavage",
        }
    }
}

pub const MAX_AGE: Duration = Duration::from_secs(12 * 3600);
pub const MAX_FUTURE: Duration = Duration::from_secs(3600);

/// A local actor's key, ready to sign: `key_id` is `<actor>#main-key`.
///
/// Signing goes through `ring`, whose RSA private-key operation is constant-time and blinded:
/// the `rsa` crate's is not (RUSTSEC-2023-0071, the Marvin attack), and every delivery and
/// signed fetch is a private-key operation whose timing a remote server can observe. `rsa`
/// still generates keys (ring cannot) and verifies signatures (public-key operations).
#[derive(Clone)]
pub struct SigningKey {
    pub key_id: String,
    pair: std::sync::Arc<ring::signature::RsaKeyPair>,
}

impl SigningKey {
    pub fn new(key_id: impl Into<String>, key: &RsaPrivateKey) -> Result<Self, String> {
        Ok(Self::from_pair(key_id, Self::pair_of(key)?))
    }

    /// A key already prepared for signing (see [`SigningKey::pair_of`]).
    pub fn from_pair(
        key_id: impl Into<String>,
        pair: std::sync::Arc<ring::signature::RsaKeyPair>,
    ) -> Self {
        SigningKey {
            key_id: key_id.into(),
            pair,
        }
    }

    /// Converts a private key for signing (validates it; worth caching per key).
    pub fn pair_of(
        key: &RsaPrivateKey,
    ) -> Result<std::sync::Arc<ring::signature::RsaKeyPair>, String> {
        let der = key
            .to_pkcs1_der()
            .map_err(|e| format!("encoding the private key: {e}"))?;
        ring::signature::RsaKeyPair::from_der(der.as_bytes())
            .map(std::sync::Arc::new)
            .map_err(|e| format!("the private key is not usable for signing: {e}"))
    }

    /// `RSASSA-PKCS1-v1_5` with SHA-256 over `msg`.
    pub fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, String> {
        let mut sig = vec![0; self.pair.public().modulus_len()];
        self.pair
            .sign(
                &ring::signature::RSA_PKCS1_SHA256,
                &ring::rand::SystemRandom::new(),
                msg,
                &mut sig,
            )
            .map_err(|_| "RSA signing failed".to_string())?;
        Ok(sig)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignatureError {
    #[error("missing Signature header")]
    Missing,
    #[error("malformed Signature header: {0}")]
    Malformed(String),
    #[error("the signature must cover {0}")]
    Uncovered(&'static str),
    #[error("missing or bad Date header")]
    BadDate,
    #[error("stale Date: outside the accepted clock window")]
    Stale,
    #[error("Digest header does not match the body")]
    DigestMismatch,
    #[error("missing Digest header")]
    MissingDigest,
    #[error("unsupported algorithm {0}")]
    Algorithm(String),
    #[error("signature does not verify")]
    Invalid,
    #[error("bad public key: {0}")]
    BadKey(String),
}

/// `Host` as a client sends it for `url`: the port only when it is not the scheme's default.
pub fn host_header(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

pub fn digest_header(body: &[u8]) -> String {
    format!("SHA-256={}", B64.encode(Sha256::digest(body)))
}

fn path_and_query(url: &Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    }
}

/// Adds `Date`, `Digest` (with a body) and `Signature` to `headers`. reqwest sets `Host` from
/// the URL itself, the same value `host_header` signs.
pub fn sign_request(
    key: &SigningKey,
    method: &Method,
    url: &Url,
    body: Option<&[u8]>,
    headers: &mut HeaderMap,
) -> Result<(), String> {
    sign_request_at(key, method, url, body, headers, SystemTime::now())
}

pub fn sign_request_at(
    key: &SigningKey,
    method: &Method,
    url: &Url,
    body: Option<&[u8]>,
    headers: &mut HeaderMap,
    at: SystemTime,
) -> Result<(), String> {
    let date = httpdate::fmt_http_date(at);
    let host = host_header(url);
    let target = format!(
        "{} {}",
        method.as_str().to_ascii_lowercase(),
        path_and_query(url)
    );
    let mut lines = vec![
        format!("(request-target): {target}"),
        format!("host: {host}"),
        format!("date: {date}"),
    ];
    let mut names = "(request-target) host date".to_string();
    if let Some(body) = body {
        let digest = digest_header(body);
        lines.push(format!("digest: {digest}"));
        names.push_str(" digest");
        headers.insert(
            HeaderName::from_static("digest"),
            HeaderValue::from_str(&digest).map_err(|e| e.to_string())?,
        );
    }
    let signing_string = lines.join("\n");
    let sig = key.sign(signing_string.as_bytes())?;
    let header = format!(
        "keyId=\"{}\",algorithm=\"rsa-sha256\",headers=\"{names}\",signature=\"{}\"",
        key.key_id,
        B64.encode(sig)
    );
    headers.insert(
        reqwest::header::DATE,
        HeaderValue::from_str(&date).map_err(|e| e.to_string())?,
    );
    headers.insert(
        HeaderName::from_static("signature"),
        HeaderValue::from_str(&header).map_err(|e| e.to_string())?,
    );
    Ok(())
}

/// A parsed `Signature` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureParams {
    pub key_id: String,
    pub algorithm: Option<String>,
    pub headers: Vec<String>,
    pub signature: Vec<u8>,
}

pub fn parse_signature_header(v: &str) -> Result<SignatureParams, SignatureError> {
    let mut key_id = None;
    let mut algorithm = None;
    let mut names = None;
    let mut signature = None;
    let mut rest = v.trim();
    while !rest.is_empty() {
        let eq = rest
            .find('=')
            .ok_or_else(|| SignatureError::Malformed("expected key=value".into()))?;
        let name = rest[..eq].trim().trim_start_matches(',').trim();
        rest = &rest[eq + 1..];
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted
                .find('"')
                .ok_or_else(|| SignatureError::Malformed("unterminated quote".into()))?;
            value = &quoted[..end];
            rest = quoted[end + 1..].trim_start();
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim();
            rest = &rest[end..];
        }
        rest = rest.trim_start_matches(',').trim_start();
        match name {
            "keyId" => key_id = Some(value.to_string()),
            "algorithm" => algorithm = Some(value.to_ascii_lowercase()),
            "headers" => {
                names = Some(
                    value
                        .split_whitespace()
                        .map(|s| s.to_ascii_lowercase())
                        .collect::<Vec<_>>(),
                )
            }
            "signature" => {
                signature = Some(
                    B64.decode(value)
                        .map_err(|_| SignatureError::Malformed("signature is not base64".into()))?,
                )
            }
            _ => {}
        }
    }
    Ok(SignatureParams {
        key_id: key_id.ok_or_else(|| SignatureError::Malformed("no keyId".into()))?,
        algorithm,
        // The draft's default when `headers` is absent is just `date`.
        headers: names.unwrap_or_else(|| vec!["date".into()]),
        signature: signature.ok_or_else(|| SignatureError::Malformed("no signature".into()))?,
    })
}

/// An incoming request whose signature is well-formed, fresh and body-bound; what is left is
/// checking it against the signer's public key (which the caller fetches by `key_id`).
#[derive(Debug, Clone)]
pub struct PendingVerification {
    pub key_id: String,
    signing_string: String,
    signature: Vec<u8>,
}

impl PendingVerification {
    /// A signature to check: the signer's key id, the exact bytes it signed (draft-cavage's
    /// signing string or RFC 9421's signature base) and the signature.
    pub fn new(key_id: String, signing_string: String, signature: Vec<u8>) -> Self {
        PendingVerification {
            key_id,
            signing_string,
            signature,
        }
    }

    pub fn verify_pem(&self, public_key_pem: &str) -> Result<(), SignatureError> {
        let key = crate::federation::crypto::keys::public_key_from_pem(public_key_pem)
            .map_err(|e| SignatureError::BadKey(e.to_string()))?;
        self.verify(&key)
    }

    pub fn verify(&self, key: &RsaPublicKey) -> Result<(), SignatureError> {
        let sig = pkcs1v15::Signature::try_from(self.signature.as_slice())
            .map_err(|_| SignatureError::Invalid)?;
        pkcs1v15::VerifyingKey::<Sha256>::new(key.clone())
            .verify(self.signing_string.as_bytes(), &sig)
            .map_err(|_| SignatureError::Invalid)
    }
}

/// Checks everything that needs no key: the header parses, covers `(request-target)`, `host`,
/// `date` (and `digest` when there is a body), the date is fresh and the digest matches.
pub fn prepare_verification(
    method: &str,
    path_and_query: &str,
    headers: &HeaderMap,
    body: Option<&[u8]>,
    now: SystemTime,
) -> Result<PendingVerification, SignatureError> {
    let raw = headers
        .get("signature")
        .and_then(|v| v.to_str().ok())
        .ok_or(SignatureError::Missing)?;
    let params = parse_signature_header(raw)?;
    if let Some(alg) = &params.algorithm
        && alg != "rsa-sha256"
        && alg != "hs2019"
    {
        return Err(SignatureError::Algorithm(alg.clone()));
    }
    for (required, name) in [
        ("(request-target)", "(request-target)"),
        ("host", "host"),
        ("date", "date"),
    ] {
        if !params.headers.iter().any(|h| h == required) {
            return Err(SignatureError::Uncovered(name));
        }
    }
    let date = headers
        .get(reqwest::header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok())
        .ok_or(SignatureError::BadDate)?;
    let fresh = match now.duration_since(date) {
        Ok(age) => age <= MAX_AGE,
        Err(ahead) => ahead.duration() <= MAX_FUTURE,
    };
    if !fresh {
        return Err(SignatureError::Stale);
    }
    if let Some(body) = body {
        if !params.headers.iter().any(|h| h == "digest") {
            return Err(SignatureError::Uncovered("digest"));
        }
        let given = headers
            .get("digest")
            .and_then(|v| v.to_str().ok())
            .ok_or(SignatureError::MissingDigest)?;
        // A Digest header may list several algorithms; we need a matching SHA-256 among them.
        let want = B64.encode(Sha256::digest(body));
        let ok = given.split(',').any(|part| {
            part.trim()
                .split_once('=')
                .is_some_and(|(alg, v)| alg.eq_ignore_ascii_case("sha-256") && v == want)
        });
        if !ok {
            return Err(SignatureError::DigestMismatch);
        }
    }
    let mut lines = Vec::with_capacity(params.headers.len());
    for name in &params.headers {
        if name == "(request-target)" {
            lines.push(format!(
                "(request-target): {} {path_and_query}",
                method.to_ascii_lowercase()
            ));
            continue;
        }
        let values: Vec<&str> = headers
            .get_all(name.as_str())
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if values.is_empty() {
            return Err(SignatureError::Malformed(format!(
                "signed header {name} is missing"
            )));
        }
        lines.push(format!("{name}: {}", values.join(", ")));
    }
    Ok(PendingVerification {
        key_id: params.key_id,
        signing_string: lines.join("\n"),
        signature: params.signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::federation::crypto::keys;

    fn key() -> SigningKey {
        SigningKey::new("https://a.example/users/alice#main-key", keys::test_key()).expect("key")
    }

    /// PKCS#1 v1.5 signatures are deterministic: ring's must be byte for byte the one the
    /// `rsa` crate makes with the same key, and verify with the public half.
    #[test]
    fn ring_signs_exactly_what_the_rsa_crate_signs() {
        use rsa::signature::{SignatureEncoding, Signer};
        let msg =
            b"(request-target): post /inbox\nhost: b.example\ndate: Mon, 30 Nov 2026 12:00:00 GMT";
        let ours = key().sign(msg).expect("sign");
        let reference = pkcs1v15::SigningKey::<Sha256>::new(keys::test_key().clone())
            .try_sign(msg)
            .expect("rsa sign")
            .to_vec();
        assert_eq!(ours, reference);
        let public = RsaPublicKey::from(keys::test_key());
        let sig = pkcs1v15::Signature::try_from(ours.as_slice()).expect("signature");
        assert!(
            pkcs1v15::VerifyingKey::<Sha256>::new(public)
                .verify(msg, &sig)
                .is_ok()
        );
    }

    fn signed(body: &[u8], at: SystemTime) -> HeaderMap {
        let url = Url::parse("https://b.example:8443/users/bob/inbox").expect("url");
        let mut h = HeaderMap::new();
        sign_request_at(&key(), &Method::POST, &url, Some(body), &mut h, at).expect("sign");
        h.insert("host", HeaderValue::from_static("b.example:8443"));
        h
    }

    #[test]
    fn a_signed_request_verifies_and_tampering_does_not() {
        let body = br#"{"type":"Follow"}"#;
        let now = SystemTime::now();
        let h = signed(body, now);
        let public = keys::test_key().to_public_key();
        let p = prepare_verification("POST", "/users/bob/inbox", &h, Some(body), now)
            .expect("well-formed");
        assert_eq!(p.key_id, "https://a.example/users/alice#main-key");
        p.verify(&public).expect("verifies");
        // Another path: the signing string differs.
        let p = prepare_verification("POST", "/inbox", &h, Some(body), now).expect("well-formed");
        assert_eq!(p.verify(&public), Err(SignatureError::Invalid));
        // Another body: the digest no longer matches.
        assert_eq!(
            prepare_verification("POST", "/users/bob/inbox", &h, Some(b"{}"), now).unwrap_err(),
            SignatureError::DigestMismatch
        );
    }

    #[test]
    fn stale_and_future_dates_are_refused() {
        let body = b"{}";
        let now = SystemTime::now();
        let old = signed(body, now - Duration::from_secs(13 * 3600));
        assert_eq!(
            prepare_verification("POST", "/users/bob/inbox", &old, Some(body), now).unwrap_err(),
            SignatureError::Stale
        );
        let future = signed(body, now + Duration::from_secs(2 * 3600));
        assert_eq!(
            prepare_verification("POST", "/users/bob/inbox", &future, Some(body), now).unwrap_err(),
            SignatureError::Stale
        );
    }

    #[test]
    fn signature_header_parses_like_mastodon_writes_it() {
        let p = parse_signature_header(
            r#"keyId="https://m.example/users/a#main-key",algorithm="rsa-sha256",headers="(request-target) host date digest",signature="AAEC""#,
        )
        .expect("parses");
        assert_eq!(p.key_id, "https://m.example/users/a#main-key");
        assert_eq!(p.headers.len(), 4);
        assert_eq!(p.signature, vec![0, 1, 2]);
        assert!(parse_signature_header(r#"algorithm="rsa-sha256""#).is_err());
        assert!(parse_signature_header("garbage").is_err());
    }

    #[test]
    fn host_header_keeps_non_default_ports_only() {
        assert_eq!(
            host_header(&Url::parse("https://x.example/a").expect("url")),
            "x.example"
        );
        assert_eq!(
            host_header(&Url::parse("http://127.0.0.1:8080/a").expect("url")),
            "127.0.0.1:8080"
        );
    }
}
