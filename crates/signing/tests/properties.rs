//! Property tests of the signature parsers and checks (the reliability suite; docs/testing.md):
//! headers of any text never make them panic, and what Mercer signs verifies, with the same
//! parts, while any change to what was signed does not. `PROPTEST_CASES` sets the cases per
//! property (256 by default; `cargo xtask chaos` runs 5,000).

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use mercer_signing::{
    cavage, message_signature, standard_webhooks, svc_signature, verify_svc_signature,
    verify_x_hmac, x_hmac,
};
use proptest::prelude::*;

proptest! {
    #[test]
    fn signature_headers_of_any_text_never_panic(header in "\\PC{0,200}") {
        let _ = cavage::parse(&header);
        let request = cavage::SignedRequest {
            method: "POST",
            path_and_query: "/hooks",
            date: "date",
            digest: Some(&header),
            body: b"{}",
        };
        let _ = cavage::verify("secret", &request, &header);
        let _ = cavage::digest_matches(&header, b"{}");
        let _ = message_signature::content_digest_matches(&header, b"{}");
        let message = message_signature::Request {
            method: "GET",
            target_uri: "http://127.0.0.1/v1/shops/s/verification",
            headers: &[("content-digest", &header)],
        };
        let _ = message_signature::verify_any(b"key", &message, &header, &header);
        let _ = message_signature::verify_any(b"key", &message, &header, "sig1=:AAAA:");
        let _ = standard_webhooks::verify(b"key", "msg_1", 1_700_000_000, b"{}", &header);
        let _ = standard_webhooks::key_from_whsec(&header);
        let _ = verify_svc_signature("secret", b"{}", &header);
        let _ = verify_x_hmac("secret", "1700000000", &header);
    }

    #[test]
    fn signature_headers_of_the_grammar_never_panic(
        parts in prop::collection::vec(
            "(keyId|algorithm|headers|signature|Signature |x)(=\"?[^\"]{0,12}\"?)?[, ]{0,2}", 0..6)) {
        let header = parts.concat();
        let _ = cavage::parse(&header);
    }

    /// The header Mercer sends parses to its parts and verifies; another method, path, date,
    /// body or secret does not.
    #[test]
    fn cavage_signatures_round_trip(secret in "[ -~]{1,40}", method in "(GET|POST|PUT|DELETE)",
                                    path in "/[a-z0-9/?=&_-]{0,40}", date in "[A-Za-z0-9 ,:]{1,32}",
                                    body in prop::collection::vec(any::<u8>(), 0..200)) {
        let digest = cavage::digest(&body);
        let header = cavage::signature_header(&secret, &method, &path, &date, &digest);
        let parsed = cavage::parse(&header).unwrap();
        prop_assert_eq!(&parsed.algorithm, "hmac-sha256");
        prop_assert_eq!(&parsed.headers, &["(request-target)", "date", "digest"]);
        prop_assert_eq!(&parsed.signature, &cavage::signature(&secret, &method, &path, &date, &digest));
        let request = cavage::SignedRequest {
            method: &method,
            path_and_query: &path,
            date: &date,
            digest: Some(&digest),
            body: &body,
        };
        prop_assert!(cavage::verify(&secret, &request, &header));
        let (other_secret, other_path, other_date) =
            (format!("{secret}x"), format!("{path}x"), format!("{date}x"));
        let mut other_body = body.clone();
        other_body.push(b' ');
        prop_assert!(!cavage::verify(&other_secret, &request, &header));
        let moved = cavage::SignedRequest { path_and_query: &other_path, ..request };
        let later = cavage::SignedRequest { date: &other_date, ..request };
        let changed = cavage::SignedRequest { body: &other_body, ..request };
        prop_assert!(!cavage::verify(&secret, &moved, &header));
        prop_assert!(!cavage::verify(&secret, &later, &header));
        prop_assert!(!cavage::verify(&secret, &changed, &header));
    }

    /// A message signature Mercer makes verifies; another method, URI, body or key does not.
    #[test]
    fn message_signatures_round_trip(key in prop::collection::vec(any::<u8>(), 1..64),
                                     method in "(GET|POST|PATCH|DELETE)",
                                     path in "/[a-z0-9/_-]{0,40}", query in "[a-z0-9=&_-]{0,20}",
                                     created in 0i64..4_000_000_000, nonce in "[0-9a-f]{1,32}",
                                     body in prop::collection::vec(any::<u8>(), 0..200)) {
        let uri = format!("https://connector.example{path}?{query}");
        let digest = message_signature::content_digest(&body);
        let headers = [("Content-Digest", digest.as_str())];
        let request = message_signature::Request { method: &method, target_uri: &uri, headers: &headers };
        let covered = ["@method", "@target-uri", "content-digest"];
        let params = message_signature::SigningParams::new(created, &nonce);
        let signed = message_signature::sign(&key, "sig1", &request, &covered, &params).unwrap();
        let verified = message_signature::verify_any(&key, &request, &signed.input, &signed.signature).unwrap();
        prop_assert_eq!(verified.created, Some(created));
        prop_assert_eq!(verified.nonce.as_deref(), Some(nonce.as_str()));
        // (Not a longer key: HMAC pads keys with zero bytes, so `key` and `key + [0]` sign alike.)
        let mut other_key = key.clone();
        other_key[0] ^= 1;
        prop_assert!(message_signature::verify_any(&other_key, &request, &signed.input, &signed.signature).is_err());
        let other_uri = format!("{uri}x");
        let moved = message_signature::Request { target_uri: &other_uri, ..request };
        prop_assert!(message_signature::verify_any(&key, &moved, &signed.input, &signed.signature).is_err());
        let other_method = if method == "GET" { "POST" } else { "GET" };
        let changed = message_signature::Request { method: other_method, ..request };
        prop_assert!(message_signature::verify_any(&key, &changed, &signed.input, &signed.signature).is_err());
        let mut other_body = body.clone();
        other_body.push(b' ');
        prop_assert!(!message_signature::content_digest_matches(&digest, &other_body));
    }

    #[test]
    fn standard_webhooks_signatures_round_trip(key in prop::collection::vec(any::<u8>(), 1..64),
                                               id in "msg_[a-z0-9]{1,32}", at in 0i64..4_000_000_000,
                                               body in prop::collection::vec(any::<u8>(), 0..200)) {
        let header = standard_webhooks::sign(&key, &id, at, &body);
        prop_assert!(standard_webhooks::verify(&key, &id, at, &body, &header));
        prop_assert!(!standard_webhooks::verify(&key, &id, at + 1, &body, &header));
        let mut changed = body.clone();
        changed.push(b' ');
        prop_assert!(!standard_webhooks::verify(&key, &id, at, &changed, &header));
    }

    #[test]
    fn whsec_secrets_round_trip(secret in "[ -~]{1,60}") {
        let key = standard_webhooks::key_from_whsec(&standard_webhooks::whsec(&secret));
        prop_assert_eq!(key, Some(secret.into_bytes()));
    }

    #[test]
    fn svc_and_x_hmac_signatures_round_trip(secret in "[ -~]{1,40}",
                                            body in prop::collection::vec(any::<u8>(), 0..200),
                                            timestamp in "[0-9]{1,12}") {
        let header = svc_signature(&secret, &body);
        prop_assert!(verify_svc_signature(&secret, &body, &header));
        let (other_secret, other_timestamp) = (format!("{secret}x"), format!("{timestamp}0"));
        prop_assert!(!verify_svc_signature(&other_secret, &body, &header));
        let hmac = x_hmac(&secret, &timestamp);
        prop_assert!(verify_x_hmac(&secret, &timestamp, &hmac));
        prop_assert!(!verify_x_hmac(&secret, &other_timestamp, &hmac));
    }
}
