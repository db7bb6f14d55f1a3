//! RFC 9421 HTTP Message Signatures beside draft-cavage (R-AP-1), as Fedify and other
//! current servers sign: `Signature-Input` / `Signature` with `rsa-v1_5-sha256` over
//! `@method`, `@target-uri`, `@authority`, `date` and, with a body, `content-digest`
//! (RFC 9530, `sha-256=:…:`). The structured fields are parsed and serialized with `sfv`.
//!
//! Verifying needs no key until the end: [`prepare`] checks the fields, the coverage, the
//! `created` time and the body digest and builds the signature base; what it returns is
//! verified against the signer's key like a draft-cavage signature.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use sfv::{BareItem, Dictionary, FieldType, InnerList, ListEntry, Parser};
use sha2::{Digest, Sha256, Sha512};
use url::Url;

use crate::federation::transport::signature::{
    MAX_AGE, MAX_FUTURE, PendingVerification, SignatureError, SigningKey, host_header,
};

/// The one algorithm we sign and verify with (our keys, and the keys we cache, are RSA).
pub const ALG: &str = "rsa-v1_5-sha256";
const LABEL: &str = "sig1";

/// Whether a request carries an RFC 9421 signature (rather than a draft-cavage one).
pub fn is_signed(headers: &HeaderMap) -> bool {
    headers.contains_key("signature-input")
}

/// `Content-Digest: sha-256=:<base64>:` for `body`.
pub fn content_digest(body: &[u8]) -> String {
    format!("sha-256=:{}:", B64.encode(Sha256::digest(body)))
}

fn unix(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// Adds `Date`, `Content-Digest` (with a body), `Signature-Input` and `Signature`.
pub fn sign_at(
    key: &SigningKey,
    method: &Method,
    url: &Url,
    body: Option<&[u8]>,
    headers: &mut HeaderMap,
    at: SystemTime,
) -> Result<(), String> {
    let date = httpdate::fmt_http_date(at);
    let mut components: Vec<(&str, String)> = vec![
        ("@method", method.as_str().to_ascii_uppercase()),
        ("@target-uri", url.as_str().to_string()),
        ("@authority", host_header(url).to_ascii_lowercase()),
        ("date", date.clone()),
    ];
    if let Some(body) = body {
        let digest = content_digest(body);
        headers.insert(
            HeaderName::from_static("content-digest"),
            HeaderValue::from_str(&digest).map_err(|e| e.to_string())?,
        );
        components.push(("content-digest", digest));
    }
    let params = signature_params(
        components.iter().map(|(name, _)| *name),
        unix(at),
        &key.key_id,
    )?;
    let base = signature_base(&components, &params);
    let sig = key.sign(base.as_bytes())?;
    headers.insert(
        reqwest::header::DATE,
        HeaderValue::from_str(&date).map_err(|e| e.to_string())?,
    );
    headers.insert(
        HeaderName::from_static("signature-input"),
        HeaderValue::from_str(&format!("{LABEL}={params}")).map_err(|e| e.to_string())?,
    );
    headers.insert(
        HeaderName::from_static("signature"),
        HeaderValue::from_str(&format!("{LABEL}=:{}:", B64.encode(sig)))
            .map_err(|e| e.to_string())?,
    );
    Ok(())
}

/// The serialized inner list of covered components with `created`, `keyid` and `alg`.
fn signature_params<'a>(
    names: impl Iterator<Item = &'a str>,
    created: i64,
    key_id: &str,
) -> Result<String, String> {
    let mut ser = sfv::ListSerializer::new();
    {
        let mut inner = ser.inner_list();
        for name in names {
            inner.bare_item(sfv::StringRef::from_str(name).map_err(|e| e.to_string())?);
        }
        inner
            .finish()
            .parameter(
                sfv::KeyRef::from_str("created").map_err(|e| e.to_string())?,
                sfv::Integer::try_from(created).map_err(|e| e.to_string())?,
            )
            .parameter(
                sfv::KeyRef::from_str("keyid").map_err(|e| e.to_string())?,
                sfv::StringRef::from_str(key_id).map_err(|e| e.to_string())?,
            )
            .parameter(
                sfv::KeyRef::from_str("alg").map_err(|e| e.to_string())?,
                sfv::StringRef::from_str(ALG).map_err(|e| e.to_string())?,
            );
    }
    ser.finish()
        .ok_or_else(|| "empty signature parameters".to_string())
}

/// RFC 9421 §2.5: one line per covered component, then `@signature-params`.
fn signature_base(components: &[(&str, String)], params: &str) -> String {
    let mut base = String::new();
    for (name, value) in components {
        base.push_str(&format!("\"{name}\": {value}\n"));
    }
    base.push_str(&format!("\"@signature-params\": {params}"));
    base
}

fn malformed(what: impl Into<String>) -> SignatureError {
    SignatureError::Malformed(what.into())
}

/// The request as the signer saw it: method, and the target URI it sent to (our public
/// origin and the path with its query).
pub struct Target<'a> {
    pub method: &'a str,
    pub uri: &'a str,
}

/// Checks everything that needs no key and builds the signature base. `body` is `None`
/// before the body is read (the digest is checked on the second call, with it).
pub fn prepare(
    target: &Target<'_>,
    headers: &HeaderMap,
    body: Option<&[u8]>,
    now: SystemTime,
) -> Result<PendingVerification, SignatureError> {
    let field = |name: &str| -> Result<String, SignatureError> {
        let values: Vec<&str> = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if values.is_empty() {
            return Err(SignatureError::Missing);
        }
        Ok(values.join(", "))
    };
    let inputs: Dictionary = Parser::new(&field("signature-input")?)
        .parse()
        .map_err(|e| malformed(format!("Signature-Input: {e}")))?;
    let signatures: Dictionary = Parser::new(&field("signature")?)
        .parse()
        .map_err(|e| malformed(format!("Signature: {e}")))?;
    // The first signature that has both an input and a value (a proxy may add its own).
    let (label, input) = inputs
        .iter()
        .find(|(label, _)| signatures.contains_key(*label))
        .ok_or_else(|| malformed("no Signature-Input label has a Signature"))?;
    let ListEntry::InnerList(input) = input else {
        return Err(malformed("Signature-Input member is not an inner list"));
    };
    let signature = match signatures.get(label) {
        Some(ListEntry::Item(item)) => item
            .bare_item
            .as_byte_sequence()
            .map(<[u8]>::to_vec)
            .ok_or_else(|| malformed("Signature member is not a byte sequence"))?,
        _ => return Err(malformed("Signature member is not a byte sequence")),
    };
    let param = |k: &str| {
        sfv::KeyRef::from_str(k)
            .ok()
            .and_then(|k| input.params.get(k))
    };
    let key_id = param("keyid")
        .and_then(BareItem::as_string)
        .map(|s| s.as_str().to_string())
        .ok_or_else(|| malformed("no keyid"))?;
    if let Some(alg) = param("alg") {
        let alg = alg.as_string().map(|s| s.as_str()).unwrap_or_default();
        if alg != ALG {
            return Err(SignatureError::Algorithm(alg.to_string()));
        }
    }
    let created = param("created")
        .and_then(BareItem::as_integer)
        .map(i64::from)
        .ok_or_else(|| malformed("no created time"))?;
    check_window(created, now)?;
    if let Some(expires) = param("expires").and_then(BareItem::as_integer)
        && i64::from(expires) < unix(now)
    {
        return Err(SignatureError::Stale);
    }
    let names = component_names(input)?;
    let covers = |n: &str| names.iter().any(|c| c == n);
    // Too few components: the signature must bind the method, where it was sent and the body.
    if !covers("@method") {
        return Err(SignatureError::Uncovered("@method"));
    }
    if !covers("@target-uri")
        && !(covers("@authority") && (covers("@path") || covers("@request-target")))
    {
        return Err(SignatureError::Uncovered("@target-uri"));
    }
    if let Some(body) = body {
        if !covers("content-digest") {
            return Err(SignatureError::Uncovered("content-digest"));
        }
        check_digest(
            &field("content-digest").map_err(|_| SignatureError::MissingDigest)?,
            body,
        )?;
    }
    let uri = Url::parse(target.uri).map_err(|e| malformed(format!("target URI: {e}")))?;
    let mut components = Vec::with_capacity(names.len());
    for name in &names {
        let value = match name.as_str() {
            "@method" => target.method.to_ascii_uppercase(),
            "@target-uri" => uri.as_str().to_string(),
            "@authority" => host_header(&uri).to_ascii_lowercase(),
            "@scheme" => uri.scheme().to_string(),
            "@path" => uri.path().to_string(),
            "@query" => format!("?{}", uri.query().unwrap_or_default()),
            "@request-target" => match uri.query() {
                Some(q) => format!("{}?{q}", uri.path()),
                None => uri.path().to_string(),
            },
            derived if derived.starts_with('@') => {
                return Err(malformed(format!("unsupported component {derived}")));
            }
            header => field(header)
                .map_err(|_| malformed(format!("signed field {header} is missing")))?
                .trim()
                .to_string(),
        };
        components.push((name.as_str(), value));
    }
    let params = vec![ListEntry::InnerList(input.clone())]
        .serialize()
        .ok_or_else(|| malformed("empty Signature-Input"))?;
    Ok(PendingVerification::new(
        key_id,
        signature_base(&components, &params),
        signature,
    ))
}

fn check_window(created: i64, now: SystemTime) -> Result<(), SignatureError> {
    let now = unix(now);
    let fresh = if created <= now {
        Duration::from_secs((now - created) as u64) <= MAX_AGE
    } else {
        Duration::from_secs((created - now) as u64) <= MAX_FUTURE
    };
    if fresh {
        Ok(())
    } else {
        Err(SignatureError::Stale)
    }
}

/// The covered components: plain strings, no parameters (`;sf`, `;key`, `;req` are not
/// supported and refused rather than misread).
fn component_names(input: &InnerList) -> Result<Vec<String>, SignatureError> {
    input
        .items
        .iter()
        .map(|item| {
            if !item.params.is_empty() {
                return Err(malformed("component parameters are not supported"));
            }
            item.bare_item
                .as_string()
                .map(|s| s.as_str().to_ascii_lowercase())
                .ok_or_else(|| malformed("a component is not a string"))
        })
        .collect()
}

/// `Content-Digest` must hold a `sha-256` or `sha-512` digest matching the body.
fn check_digest(field: &str, body: &[u8]) -> Result<(), SignatureError> {
    let digests: Dictionary = Parser::new(field)
        .parse()
        .map_err(|e| malformed(format!("Content-Digest: {e}")))?;
    let mut known = false;
    for (alg, value) in &digests {
        let want: Vec<u8> = match alg.as_str() {
            "sha-256" => Sha256::digest(body).to_vec(),
            "sha-512" => Sha512::digest(body).to_vec(),
            _ => continue,
        };
        known = true;
        let given = match value {
            ListEntry::Item(i) => i.bare_item.as_byte_sequence(),
            ListEntry::InnerList(_) => None,
        };
        if given != Some(want.as_slice()) {
            return Err(SignatureError::DigestMismatch);
        }
    }
    if known {
        Ok(())
    } else {
        Err(SignatureError::MissingDigest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::federation::crypto::keys;
    use rsa::RsaPublicKey;

    const URI: &str = "https://b.example:8443/users/bob/inbox";

    fn key() -> SigningKey {
        SigningKey::new("https://a.example/users/alice#main-key", keys::test_key()).expect("key")
    }

    fn signed(body: &[u8], at: SystemTime) -> HeaderMap {
        let url = Url::parse(URI).expect("url");
        let mut h = HeaderMap::new();
        sign_at(&key(), &Method::POST, &url, Some(body), &mut h, at).expect("sign");
        h
    }

    fn target() -> Target<'static> {
        Target {
            method: "POST",
            uri: URI,
        }
    }

    #[test]
    fn a_signed_request_verifies_and_tampering_does_not() {
        let body = br#"{"type":"Follow"}"#;
        let now = SystemTime::now();
        let h = signed(body, now);
        let input = h["signature-input"].to_str().expect("ascii");
        assert!(
            input.starts_with(
                r#"sig1=("@method" "@target-uri" "@authority" "date" "content-digest");created="#
            ),
            "{input}"
        );
        let public = RsaPublicKey::from(keys::test_key());
        let p = prepare(&target(), &h, Some(body), now).expect("prepare");
        assert_eq!(p.key_id, "https://a.example/users/alice#main-key");
        assert_eq!(p.verify(&public), Ok(()));
        // Another body, another target, another method: refused.
        assert_eq!(
            prepare(&target(), &h, Some(b"{}"), now).err(),
            Some(SignatureError::DigestMismatch)
        );
        let elsewhere = Target {
            method: "POST",
            uri: "https://b.example:8443/inbox",
        };
        let p = prepare(&elsewhere, &h, Some(body), now).expect("prepare");
        assert_eq!(p.verify(&public), Err(SignatureError::Invalid));
        let get = Target {
            method: "GET",
            uri: URI,
        };
        let p = prepare(&get, &h, Some(body), now).expect("prepare");
        assert_eq!(p.verify(&public), Err(SignatureError::Invalid));
    }

    #[test]
    fn too_few_components_stale_or_foreign_algorithms_are_refused() {
        let body = b"{}";
        let now = SystemTime::now();
        let mut h = signed(body, now);
        let sig = h["signature"].clone();
        for (input, want) in [
            (
                r#"sig1=("@target-uri" "content-digest");created=1;keyid="k""#,
                "@method",
            ),
            (
                r#"sig1=("@method" "content-digest");created=1;keyid="k""#,
                "@target-uri",
            ),
            (
                r#"sig1=("@method" "@target-uri");created=1;keyid="k""#,
                "content-digest",
            ),
        ] {
            let created = unix(now).to_string();
            let input = input.replace("created=1", &format!("created={created}"));
            h.insert(
                "signature-input",
                HeaderValue::from_str(&input).expect("header"),
            );
            h.insert("signature", sig.clone());
            match prepare(&target(), &h, Some(body), now) {
                Err(SignatureError::Uncovered(c)) => assert_eq!(c, want, "{input}"),
                other => panic!("{input}: {other:?}"),
            }
        }
        let h = signed(body, now - Duration::from_secs(13 * 3600));
        assert_eq!(
            prepare(&target(), &h, Some(body), now).err(),
            Some(SignatureError::Stale)
        );
        let mut h = signed(body, now);
        let input = h["signature-input"]
            .to_str()
            .expect("ascii")
            .replace(ALG, "ed25519");
        h.insert(
            "signature-input",
            HeaderValue::from_str(&input).expect("header"),
        );
        assert_eq!(
            prepare(&target(), &h, Some(body), now).err(),
            Some(SignatureError::Algorithm("ed25519".into()))
        );
        for (name, value) in [
            ("signature-input", "sig1=???"),
            ("signature", "sig1=notbytes"),
        ] {
            let mut h = signed(body, now);
            h.insert(name, HeaderValue::from_static(value));
            assert!(
                matches!(
                    prepare(&target(), &h, Some(body), now),
                    Err(SignatureError::Malformed(_))
                ),
                "{name}"
            );
        }
    }
}
