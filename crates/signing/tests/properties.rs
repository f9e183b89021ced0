//! Property tests of the signature parsers and checks (the reliability suite; docs/testing.md):
//! headers of any text never make them panic, and what Mercer signs verifies, with the same
//! parts, while any change to what was signed does not. `PROPTEST_CASES` sets the cases per
//! property (256 by default; `cargo xtask chaos` runs 5,000).

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use mercer_signing::{
    cavage, standard_webhooks, svc_signature, verify_svc_signature, verify_x_hmac, x_hmac,
};
use proptest::prelude::*;

proptest! {
    #[test]
    fn signature_headers_of_any_text_never_panic(header in "\\PC{0,200}") {
        let _ = cavage::parse(&header);
        let _ = cavage::verify("secret", "POST", "/hooks", "date", &header);
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

    /// The header Mercer sends parses to its parts and verifies; another method, path, date or
    /// secret does not.
    #[test]
    fn cavage_signatures_round_trip(secret in "[ -~]{1,40}", method in "(GET|POST|PUT|DELETE)",
                                    path in "/[a-z0-9/?=&_-]{0,40}", date in "[A-Za-z0-9 ,:]{1,32}") {
        let header = cavage::signature_header(&secret, &method, &path, &date);
        let parsed = cavage::parse(&header).unwrap();
        prop_assert_eq!(&parsed.algorithm, "hmac-sha256");
        prop_assert_eq!(&parsed.headers, &["(request-target)", "date"]);
        prop_assert_eq!(&parsed.signature, &cavage::signature(&secret, &method, &path, &date));
        prop_assert!(cavage::verify(&secret, &method, &path, &date, &header));
        let (other_secret, other_path, other_date) =
            (format!("{secret}x"), format!("{path}x"), format!("{date}x"));
        prop_assert!(!cavage::verify(&other_secret, &method, &path, &date, &header));
        prop_assert!(!cavage::verify(&secret, &method, &other_path, &date, &header));
        prop_assert!(!cavage::verify(&secret, &method, &path, &other_date, &header));
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
