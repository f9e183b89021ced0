//! draft-cavage-http-signatures-12 with `hmac-sha256`, as contract §4.3 fixes it: the signing
//! string is `(request-target): {method} {path and query}` and `date: {Date}`, and the header is
//! `Signature: keyId="shared_secret",algorithm="hmac-sha256",headers="(request-target) date",signature="…"`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::{hmac_sha256, same};

/// The `keyId` Mercer sends: the seed names the key this way.
pub const KEY_ID: &str = "shared_secret";

/// The string that is signed.
pub fn signing_string(method: &str, path_and_query: &str, date: &str) -> String {
    format!(
        "(request-target): {} {path_and_query}\ndate: {date}",
        method.to_ascii_lowercase()
    )
}

/// The base64 HMAC-SHA256 of the signing string.
pub fn signature(secret: &str, method: &str, path_and_query: &str, date: &str) -> String {
    STANDARD.encode(hmac_sha256(
        secret.as_bytes(),
        signing_string(method, path_and_query, date).as_bytes(),
    ))
}

/// The value of the `Signature` header, without spaces after the commas so standard verifiers
/// parse it.
///
/// ```
/// use mercer_signing::cavage::{signature_header, verify};
///
/// let date = "Wed, 25 Nov 2026 10:00:00 GMT";
/// let header = signature_header("integration-secret", "POST", "/hooks/orders?shop=1", date);
/// assert!(header.starts_with(r#"keyId="shared_secret",algorithm="hmac-sha256""#));
/// assert!(verify("integration-secret", "POST", "/hooks/orders?shop=1", date, &header));
/// ```
pub fn signature_header(secret: &str, method: &str, path_and_query: &str, date: &str) -> String {
    format!(
        "keyId=\"{KEY_ID}\",algorithm=\"hmac-sha256\",headers=\"(request-target) date\",signature=\"{}\"",
        signature(secret, method, path_and_query, date)
    )
}

/// The parts of a `Signature` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSignature {
    /// `keyId`: which secret signed.
    pub key_id: String,
    /// `algorithm`: `hmac-sha256`.
    pub algorithm: String,
    /// `headers`: the signed headers, in order (`(request-target)`, `date`).
    pub headers: Vec<String>,
    /// `signature`: the base64 signature.
    pub signature: String,
}

/// Parses a `Signature` header: the quoted, comma-separated form Mercer sends, and the
/// unquoted form printed in seed 001 §5 (`keyId=k, algorithm=hmac-sha256, signature=…,
/// headers=(request-target) date`).
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

/// Verifies a request's `Signature` header against the shared secret: the headers it signed
/// must be `(request-target) date`, with `hmac-sha256`. The path and the date must be the
/// request's own, byte for byte.
///
/// ```
/// use mercer_signing::cavage::{signature_header, verify};
///
/// let date = "Wed, 25 Nov 2026 10:00:00 GMT";
/// let header = signature_header("secret", "POST", "/hooks", date);
/// assert!(verify("secret", "post", "/hooks", date, &header));
/// assert!(!verify("secret", "POST", "/hooks?x=1", date, &header));
/// assert!(!verify("secret", "POST", "/hooks", "Wed, 25 Nov 2026 10:00:01 GMT", &header));
/// ```
pub fn verify(secret: &str, method: &str, path_and_query: &str, date: &str, header: &str) -> bool {
    let Some(parsed) = parse(header) else {
        return false;
    };
    parsed.algorithm.eq_ignore_ascii_case("hmac-sha256")
        && parsed.headers == ["(request-target)", "date"]
        && same(
            &signature(secret, method, path_and_query, date),
            &parsed.signature,
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "Tue, 07 Jun 2014 20:51:35 GMT";

    #[test]
    fn known_answer_computed_by_nodes_crypto() {
        // node -e "crypto.createHmac('sha256','shared-secret-123').update(
        //   '(request-target): post /webhooks/order?source=mercer\\ndate: Tue, 07 Jun 2014 20:51:35 GMT').digest('base64')"
        assert_eq!(
            signature(
                "shared-secret-123",
                "POST",
                "/webhooks/order?source=mercer",
                DATE
            ),
            "oau7Peq0WsY3uNXP6kPEnfJjggZFcn6VrcL8zY0KyBU="
        );
    }

    #[test]
    fn the_header_has_no_spaces_after_commas() {
        let header = signature_header("s3cret-value", "POST", "/hook", DATE);
        assert!(header.starts_with("keyId=\"shared_secret\",algorithm=\"hmac-sha256\",headers=\"(request-target) date\",signature=\""));
        assert!(!header.contains(", "));
        assert!(verify("s3cret-value", "POST", "/hook", DATE, &header));
    }

    #[test]
    fn verifies_the_seeds_unquoted_form_too() {
        let sig = signature("s3cret-value", "POST", "/hook", DATE);
        let seed_form = format!(
            "keyId=shared_secret, algorithm=hmac-sha256, signature={sig}, headers=(request-target) date"
        );
        assert!(verify("s3cret-value", "POST", "/hook", DATE, &seed_form));
    }

    #[test]
    fn refuses_what_does_not_match() {
        let header = signature_header("s3cret-value", "POST", "/hook", DATE);
        assert!(!verify("other-secret", "POST", "/hook", DATE, &header));
        assert!(!verify("s3cret-value", "POST", "/other", DATE, &header));
        assert!(!verify(
            "s3cret-value",
            "POST",
            "/hook",
            "Wed, 08 Jun 2014 20:51:35 GMT",
            &header
        ));
        assert!(!verify("s3cret-value", "POST", "/hook", DATE, "garbage"));
        let date_only = header.replace("(request-target) date", "date");
        assert!(!verify("s3cret-value", "POST", "/hook", DATE, &date_only));
    }

    #[test]
    fn a_parameter_name_inside_a_value_is_not_taken_for_that_parameter() {
        // A key id that spells another parameter: its `signature=` is inside the quoted value,
        // so the signature is still the one of the `signature` parameter after it.
        let sig = signature("s3cret-value", "POST", "/hook", DATE);
        let header = format!(
            "keyId=\"signature=old\",signature=\"{sig}\",algorithm=\"hmac-sha256\",headers=\"(request-target) date\""
        );
        assert_eq!(
            parse(&header),
            Some(ParsedSignature {
                key_id: "signature=old".to_string(),
                algorithm: "hmac-sha256".to_string(),
                headers: vec!["(request-target)".to_string(), "date".to_string()],
                signature: sig,
            })
        );
        assert!(verify("s3cret-value", "POST", "/hook", DATE, &header));
    }
}
