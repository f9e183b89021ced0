//! draft-cavage-http-signatures-12 with `hmac-sha256`, for checkout webhooks and override
//! requests: the signing string is `(request-target): {method} {path and query}`, `date: {Date}`
//! and `digest: {Digest}` on three lines, where `Digest: SHA-256={base64 SHA-256 of the body}`
//! covers the body, and the header is
//! `Signature: keyId="shared_secret",algorithm="hmac-sha256",headers="(request-target) date digest",signature="…"`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

use crate::{hmac_sha256, same};

/// The `keyId` Mercer sends: the original checkout documentation names the key this way.
pub const KEY_ID: &str = "shared_secret";

/// The headers Mercer signs, in order, as the `headers` parameter lists them.
pub const SIGNED_HEADERS: [&str; 3] = ["(request-target)", "date", "digest"];

/// The `Digest` header of a body: `SHA-256={base64 SHA-256}`.
///
/// ```
/// assert_eq!(
///     mercer_signing::cavage::digest(b"{}"),
///     "SHA-256=RBNvo1WzZ4oRRq0W9+hknpT7T8If536DEMBg9hyq/4o="
/// );
/// ```
pub fn digest(body: &[u8]) -> String {
    format!("SHA-256={}", STANDARD.encode(Sha256::digest(body)))
}

/// Whether a `Digest` header holds the SHA-256 of `body` (the algorithm's name in any letter
/// case; other algorithms listed beside it are ignored; compared in constant time).
pub fn digest_matches(header: &str, body: &[u8]) -> bool {
    let expected = STANDARD.encode(Sha256::digest(body));
    header.split(',').any(|entry| {
        entry
            .trim()
            .split_once('=')
            .is_some_and(|(algorithm, value)| {
                algorithm.trim().eq_ignore_ascii_case("SHA-256") && same(value.trim(), &expected)
            })
    })
}

/// The string that is signed.
pub fn signing_string(method: &str, path_and_query: &str, date: &str, digest: &str) -> String {
    format!(
        "(request-target): {} {path_and_query}\ndate: {date}\ndigest: {digest}",
        method.to_ascii_lowercase()
    )
}

/// The base64 HMAC-SHA256 of the signing string.
pub fn signature(
    secret: &str,
    method: &str,
    path_and_query: &str,
    date: &str,
    digest: &str,
) -> String {
    STANDARD.encode(hmac_sha256(
        secret.as_bytes(),
        signing_string(method, path_and_query, date, digest).as_bytes(),
    ))
}

/// The value of the `Signature` header, without spaces after the commas so standard verifiers
/// parse it. `digest` is the request's `Digest` header ([`digest`] of its body).
///
/// ```
/// use mercer_signing::cavage::{SignedRequest, digest, signature_header, verify};
///
/// let date = "Wed, 25 Nov 2026 10:00:00 GMT";
/// let body = br#"{"id":1}"#;
/// let header = signature_header("integration-secret", "POST", "/hooks/orders?shop=1", date, &digest(body));
/// assert!(header.starts_with(r#"keyId="shared_secret",algorithm="hmac-sha256""#));
/// let request = SignedRequest {
///     method: "POST",
///     path_and_query: "/hooks/orders?shop=1",
///     date,
///     digest: Some(&digest(body)),
///     body,
/// };
/// assert!(verify("integration-secret", &request, &header));
/// ```
pub fn signature_header(
    secret: &str,
    method: &str,
    path_and_query: &str,
    date: &str,
    digest: &str,
) -> String {
    format!(
        "keyId=\"{KEY_ID}\",algorithm=\"hmac-sha256\",headers=\"(request-target) date digest\",signature=\"{}\"",
        signature(secret, method, path_and_query, date, digest)
    )
}

/// The parts of a `Signature` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSignature {
    /// `keyId`: which secret signed.
    pub key_id: String,
    /// `algorithm`: `hmac-sha256`.
    pub algorithm: String,
    /// `headers`: the signed headers, in order (`(request-target)`, `date`, `digest`).
    pub headers: Vec<String>,
    /// `signature`: the base64 signature.
    pub signature: String,
}

/// Parses a `Signature` header: the quoted, comma-separated form Mercer sends, and the
/// unquoted, space-separated form of the original checkout documentation (`keyId=k,
/// algorithm=hmac-sha256, signature=…, headers=(request-target) date digest`).
pub fn parse(value: &str) -> Option<ParsedSignature> {
    let value = value
        .trim()
        .strip_prefix("Signature ")
        .unwrap_or(value.trim());
    let names = ["keyId", "algorithm", "headers", "signature"];
    // Find each `name=` and take the text up to the next `, name=` (or the end).
    let mut found: Vec<(usize, &str)> = Vec::new();
    for name in names {
        let pattern = format!("{name}=");
        let mut from = 0;
        while let Some(at) = value[from..].find(&pattern) {
            let at = from + at;
            let starts_part = at == 0 || matches!(value.as_bytes()[at - 1], b',' | b' ');
            if starts_part {
                found.push((at, name));
                break;
            }
            from = at + pattern.len();
        }
    }
    found.sort_unstable();
    let mut parts = std::collections::HashMap::new();
    for (index, (at, name)) in found.iter().enumerate() {
        let start = at + name.len() + 1;
        let end = found.get(index + 1).map_or(value.len(), |(next, _)| *next);
        let raw = value[start..end].trim().trim_end_matches(',').trim();
        parts.insert(*name, raw.trim_matches('"').to_string());
    }
    Some(ParsedSignature {
        key_id: parts.remove("keyId")?,
        algorithm: parts
            .remove("algorithm")
            .unwrap_or_else(|| "hmac-sha256".to_string()),
        headers: parts
            .remove("headers")
            .unwrap_or_else(|| "date".to_string())
            .split_whitespace()
            .map(str::to_ascii_lowercase)
            .collect(),
        signature: parts.remove("signature")?,
    })
}

/// A received request, as its `Signature` is checked: the method, the path and query, the
/// `Date` and `Digest` headers, and the raw body, all exactly as they arrived.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    /// The method (`POST`).
    pub method: &'a str,
    /// The path and query, as sent (`/hooks/orders?shop=1`).
    pub path_and_query: &'a str,
    /// The `Date` header.
    pub date: &'a str,
    /// The `Digest` header, when the request has one.
    pub digest: Option<&'a str>,
    /// The body, before any parsing.
    pub body: &'a [u8],
}

/// Verifies a request's `Signature` header against the shared secret: the headers it signed
/// must be `(request-target) date digest`, with `hmac-sha256`; the `Digest` header must be the
/// SHA-256 of the body; the path, the date and the digest must be the request's own, byte for
/// byte. A signature without `digest` (which left the body unsigned) is refused.
///
/// ```
/// use mercer_signing::cavage::{SignedRequest, digest, signature_header, verify};
///
/// let date = "Wed, 25 Nov 2026 10:00:00 GMT";
/// let body = b"{}";
/// let sent_digest = digest(body);
/// let header = signature_header("secret", "POST", "/hooks", date, &sent_digest);
/// let request = SignedRequest {
///     method: "post",
///     path_and_query: "/hooks",
///     date,
///     digest: Some(&sent_digest),
///     body,
/// };
/// assert!(verify("secret", &request, &header));
/// assert!(!verify("secret", &SignedRequest { path_and_query: "/hooks?x=1", ..request }, &header));
/// assert!(!verify("secret", &SignedRequest { body: b"{\"x\":1}", ..request }, &header));
/// ```
pub fn verify(secret: &str, request: &SignedRequest<'_>, header: &str) -> bool {
    let Some(parsed) = parse(header) else {
        return false;
    };
    let Some(digest) = request.digest else {
        return false;
    };
    parsed.algorithm.eq_ignore_ascii_case("hmac-sha256")
        && parsed.headers == SIGNED_HEADERS
        && digest_matches(digest, request.body)
        && same(
            &signature(
                secret,
                request.method,
                request.path_and_query,
                request.date,
                digest,
            ),
            &parsed.signature,
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "Tue, 07 Jun 2014 20:51:35 GMT";
    const BODY: &[u8] = br#"{"override_type":"tax"}"#;

    fn request<'a>(path: &'a str, digest: &'a str) -> SignedRequest<'a> {
        SignedRequest {
            method: "POST",
            path_and_query: path,
            date: DATE,
            digest: Some(digest),
            body: BODY,
        }
    }

    #[test]
    fn known_answer_computed_by_nodes_crypto() {
        // node -e "const c=require('crypto'); const body='{\"override_type\":\"tax\"}';
        //   const d='SHA-256='+c.createHash('sha256').update(body).digest('base64');
        //   console.log(d, c.createHmac('sha256','shared-secret-123').update(
        //   '(request-target): post /webhooks/order?source=mercer\\ndate: Tue, 07 Jun 2014 20:51:35 GMT\\ndigest: '+d).digest('base64'))"
        let body_digest = digest(BODY);
        assert_eq!(
            body_digest,
            "SHA-256=QVnAghVC65klfarj7Zp3EfwwSposesX3otr+Cin6BpY="
        );
        assert_eq!(
            signature(
                "shared-secret-123",
                "POST",
                "/webhooks/order?source=mercer",
                DATE,
                &body_digest
            ),
            "K7VpP909fRBHzprBI9wfr+GGqiiwQTzJiS8iQpf8emA="
        );
    }

    #[test]
    fn the_signing_string_has_the_three_headers_in_order() {
        assert_eq!(
            signing_string("POST", "/hook?a=1", DATE, "SHA-256=abc="),
            "(request-target): post /hook?a=1\ndate: Tue, 07 Jun 2014 20:51:35 GMT\ndigest: SHA-256=abc="
        );
    }

    #[test]
    fn the_header_has_no_spaces_after_commas() {
        let body_digest = digest(BODY);
        let header = signature_header("s3cret-value", "POST", "/hook", DATE, &body_digest);
        assert!(header.starts_with("keyId=\"shared_secret\",algorithm=\"hmac-sha256\",headers=\"(request-target) date digest\",signature=\""));
        assert!(!header.contains(", "));
        assert!(verify(
            "s3cret-value",
            &request("/hook", &body_digest),
            &header
        ));
    }

    #[test]
    fn verifies_the_unquoted_space_separated_form_too() {
        let body_digest = digest(BODY);
        let sig = signature("s3cret-value", "POST", "/hook", DATE, &body_digest);
        let unquoted = format!(
            "keyId=shared_secret, algorithm=hmac-sha256, signature={sig}, headers=(request-target) date digest"
        );
        assert!(verify(
            "s3cret-value",
            &request("/hook", &body_digest),
            &unquoted
        ));
    }

    #[test]
    fn the_digest_must_be_the_bodys() {
        let body_digest = digest(BODY);
        let header = signature_header("s3cret-value", "POST", "/hook", DATE, &body_digest);
        let good = request("/hook", &body_digest);
        assert!(verify("s3cret-value", &good, &header));
        // Another body under the same headers: the digest no longer matches it.
        let other_body = SignedRequest {
            body: br#"{"override_type":"shipping"}"#,
            ..good
        };
        assert!(!verify("s3cret-value", &other_body, &header));
        // Another body with its own digest: the signature no longer matches the digest.
        let other_digest = digest(other_body.body);
        let rewritten = SignedRequest {
            digest: Some(&other_digest),
            ..other_body
        };
        assert!(!verify("s3cret-value", &rewritten, &header));
        assert!(!verify(
            "s3cret-value",
            &SignedRequest {
                digest: None,
                ..good
            },
            &header
        ));
        // The algorithm's name in any case, beside other algorithms.
        let lower = body_digest.replace("SHA-256", "sha-256");
        assert!(digest_matches(&format!("MD5=abc, {lower}"), BODY));
        assert!(!digest_matches("SHA-512=abc", BODY));
    }

    #[test]
    fn refuses_what_does_not_match() {
        let body_digest = digest(BODY);
        let header = signature_header("s3cret-value", "POST", "/hook", DATE, &body_digest);
        let good = request("/hook", &body_digest);
        assert!(!verify("other-secret", &good, &header));
        assert!(!verify(
            "s3cret-value",
            &request("/other", &body_digest),
            &header
        ));
        let later = SignedRequest {
            date: "Wed, 08 Jun 2014 20:51:35 GMT",
            ..good
        };
        assert!(!verify("s3cret-value", &later, &header));
        assert!(!verify("s3cret-value", &good, "garbage"));
        // A signature that leaves the body out is refused, even one that verifies.
        let two_headers = STANDARD.encode(hmac_sha256(
            b"s3cret-value",
            format!("(request-target): post /hook\ndate: {DATE}").as_bytes(),
        ));
        let without_digest = format!(
            "keyId=\"shared_secret\",algorithm=\"hmac-sha256\",headers=\"(request-target) date\",signature=\"{two_headers}\""
        );
        assert!(!verify("s3cret-value", &good, &without_digest));
        let date_only = header.replace("(request-target) date digest", "date digest");
        assert!(!verify("s3cret-value", &good, &date_only));
    }

    #[test]
    fn a_parameter_name_inside_a_value_is_not_taken_for_that_parameter() {
        // A key id that spells another parameter: its `signature=` is inside the quoted value,
        // so the signature is still the one of the `signature` parameter after it.
        let body_digest = digest(BODY);
        let sig = signature("s3cret-value", "POST", "/hook", DATE, &body_digest);
        let header = format!(
            "keyId=\"signature=old\",signature=\"{sig}\",algorithm=\"hmac-sha256\",headers=\"(request-target) date digest\""
        );
        assert_eq!(
            parse(&header),
            Some(ParsedSignature {
                key_id: "signature=old".to_string(),
                algorithm: "hmac-sha256".to_string(),
                headers: vec![
                    "(request-target)".to_string(),
                    "date".to_string(),
                    "digest".to_string()
                ],
                signature: sig,
            })
        );
        assert!(verify(
            "s3cret-value",
            &request("/hook", &body_digest),
            &header
        ));
    }
}
