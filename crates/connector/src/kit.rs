//! The connector kit: what a connector needs to trust Mercer's calls (contract §3.3).
//!
//! ```
//! use mercer_connector::kit::{verify_request, SignedHeaders, DEFAULT_MAX_SKEW_SECONDS};
//! use mercer_domain::Timestamp;
//!
//! let now = Timestamp::parse_rfc3339("2024-03-01T10:30:00Z").unwrap();
//! let signature = mercer_signing::x_hmac("connector-secret", "2024-03-01T10:30:00Z");
//! let headers = SignedHeaders {
//!     timestamp: Some("2024-03-01T10:30:00Z"),
//!     hmac: Some(&signature),
//!     compatible_hmac: Some(&signature),
//! };
//! assert!(verify_request(&headers, "connector-secret", now, DEFAULT_MAX_SKEW_SECONDS).is_ok());
//! ```

use mercer_domain::Timestamp;
use mercer_signing::{verify_x_hmac, x_hmac};

/// How far a request's `X-HMAC-Timestamp` may be from the connector's clock.
pub const DEFAULT_MAX_SKEW_SECONDS: i64 = 5 * 60;

/// The signing headers of a request from Mercer, as the connector received them.
#[derive(Debug, Clone, Copy, Default)]
pub struct SignedHeaders<'a> {
    /// `X-HMAC-Timestamp`.
    pub timestamp: Option<&'a str>,
    /// `X-HMAC`: under the shop's current secret.
    pub hmac: Option<&'a str>,
    /// `X-Compatible-HMAC`: under the previous secret during a rotation's grace.
    pub compatible_hmac: Option<&'a str>,
}

/// Why a request is not trusted as Mercer's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// The request lacks this signing header.
    MissingHeader(&'static str),
    /// `X-HMAC-Timestamp` is not an RFC 3339 date-time.
    BadTimestamp,
    /// The timestamp is further from now than allowed (a replay, or a wrong clock).
    Stale {
        /// How far it is from now, in seconds.
        skew_seconds: i64,
    },
    /// Neither `X-HMAC` nor `X-Compatible-HMAC` matches the connector's secret.
    BadSignature,
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyError::MissingHeader(name) => write!(f, "missing header {name}"),
            VerifyError::BadTimestamp => {
                f.write_str("X-HMAC-Timestamp is not an RFC 3339 date-time")
            }
            VerifyError::Stale { skew_seconds } => {
                write!(f, "X-HMAC-Timestamp is {skew_seconds} s from now")
            }
            VerifyError::BadSignature => f.write_str("the HMAC does not match"),
        }
    }
}

impl std::error::Error for VerifyError {}

/// Checks a request from Mercer against the connector's secret: the timestamp within
/// `max_skew_seconds` of `now`, and `X-HMAC` or `X-Compatible-HMAC` matching. A connector that
/// still holds the previous secret during a rotation matches `X-Compatible-HMAC`.
///
/// A stale or forged request is refused with the reason, for the connector's log (its answer
/// to Mercer should say no more than 401):
///
/// ```
/// use mercer_connector::kit::{SignedHeaders, VerifyError, verify_request};
/// use mercer_domain::Timestamp;
///
/// let sent = "2024-03-01T10:30:00Z";
/// let signature = mercer_signing::x_hmac("connector-secret", sent);
/// let headers = SignedHeaders {
///     timestamp: Some(sent),
///     hmac: Some(&signature),
///     compatible_hmac: None,
/// };
/// let later = Timestamp::parse_rfc3339("2024-03-01T10:40:00Z").unwrap();
/// assert_eq!(
///     verify_request(&headers, "connector-secret", later, 300),
///     Err(VerifyError::Stale { skew_seconds: 600 })
/// );
/// let now = Timestamp::parse_rfc3339(sent).unwrap();
/// assert_eq!(
///     verify_request(&headers, "another-secret", now, 300),
///     Err(VerifyError::BadSignature)
/// );
/// let unsigned = SignedHeaders { hmac: None, ..headers };
/// assert_eq!(
///     verify_request(&unsigned, "connector-secret", now, 300),
///     Err(VerifyError::MissingHeader("X-HMAC"))
/// );
/// ```
pub fn verify_request(
    headers: &SignedHeaders<'_>,
    secret: &str,
    now: Timestamp,
    max_skew_seconds: i64,
) -> Result<(), VerifyError> {
    let timestamp = headers
        .timestamp
        .ok_or(VerifyError::MissingHeader("X-HMAC-Timestamp"))?;
    let hmac = headers.hmac.ok_or(VerifyError::MissingHeader("X-HMAC"))?;
    let sent = Timestamp::parse_rfc3339(timestamp).ok_or(VerifyError::BadTimestamp)?;
    let skew_seconds = (now.as_micros() - sent.as_micros()).abs() / 1_000_000;
    if skew_seconds > max_skew_seconds {
        return Err(VerifyError::Stale { skew_seconds });
    }
    let matches = verify_x_hmac(secret, timestamp, hmac)
        || headers
            .compatible_hmac
            .is_some_and(|compatible| verify_x_hmac(secret, timestamp, compatible));
    if matches {
        Ok(())
    } else {
        Err(VerifyError::BadSignature)
    }
}

/// The `X-HMAC` response header a connector sends back from Verify Platform Connector
/// Destination: the HMAC of the request's `X-HMAC-Timestamp` under its secret.
///
/// ```
/// use mercer_connector::kit::verification_answer;
///
/// // Mercer's verification call carries `X-HMAC-Timestamp`; the connector echoes its HMAC.
/// let answer = verification_answer("connector-secret", "2024-03-01T10:30:00Z");
/// assert!(mercer_signing::verify_x_hmac("connector-secret", "2024-03-01T10:30:00Z", &answer));
/// ```
pub fn verification_answer(secret: &str, request_timestamp: &str) -> String {
    x_hmac(secret, request_timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "connector-secret";
    const WHEN: &str = "2024-03-01T10:30:00Z";

    fn now() -> Timestamp {
        Timestamp::parse_rfc3339(WHEN).unwrap()
    }

    #[test]
    fn accepts_the_current_or_the_compatible_signature() {
        let good = x_hmac(SECRET, WHEN);
        let other = x_hmac("another-secret", WHEN);
        let check = |hmac: &str, compatible: &str| {
            verify_request(
                &SignedHeaders {
                    timestamp: Some(WHEN),
                    hmac: Some(hmac),
                    compatible_hmac: Some(compatible),
                },
                SECRET,
                now(),
                300,
            )
        };
        assert_eq!(check(&good, &good), Ok(()));
        assert_eq!(
            check(&other, &good),
            Ok(()),
            "a connector on the old secret matches X-Compatible-HMAC"
        );
        assert_eq!(check(&other, &other), Err(VerifyError::BadSignature));
    }

    #[test]
    fn refuses_stale_missing_or_malformed_timestamps() {
        let at = |timestamp: &'static str| {
            let hmac = x_hmac(SECRET, timestamp);
            verify_request(
                &SignedHeaders {
                    timestamp: Some(timestamp),
                    hmac: Some(&hmac),
                    compatible_hmac: None,
                },
                SECRET,
                now(),
                300,
            )
        };
        assert_eq!(at("2024-03-01T10:34:59Z"), Ok(()));
        assert_eq!(
            at("2024-03-01T10:24:00Z"),
            Err(VerifyError::Stale { skew_seconds: 360 })
        );
        assert_eq!(at("yesterday"), Err(VerifyError::BadTimestamp));
        let missing = verify_request(&SignedHeaders::default(), SECRET, now(), 300);
        assert_eq!(missing, Err(VerifyError::MissingHeader("X-HMAC-Timestamp")));
    }

    #[test]
    fn the_verification_answer_is_the_timestamps_hmac() {
        assert_eq!(verification_answer(SECRET, WHEN), x_hmac(SECRET, WHEN));
    }
}
