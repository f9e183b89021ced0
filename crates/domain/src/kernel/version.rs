//! The `Svc-API-Version-Date` header: optional; absent means the newest version.

use chrono::NaiveDate;

/// Every API version Mercer knows, oldest first. A request names a date; it gets the newest
/// version released on or before that date.
pub const VERSIONS: [&str; 1] = ["2022-05-01"];

/// One of [`VERSIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersion(&'static str);

impl ApiVersion {
    /// The newest version, which a request without the header gets.
    pub fn newest() -> Self {
        ApiVersion(VERSIONS[VERSIONS.len() - 1])
    }

    /// `YYYY-MM-DD`, as the header writes it.
    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// `YYYY-MM-DD`, as an owned string.
    pub fn as_string(self) -> String {
        self.0.to_string()
    }
}

/// Why the header's value names no version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The value is not a date written `YYYY-MM-DD`.
    #[error("Svc-API-Version-Date must be a date written YYYY-MM-DD")]
    Malformed,
    /// The date is before the first version Mercer knows.
    #[error("Svc-API-Version-Date is before the first supported version {}", VERSIONS[0])]
    Unsupported,
}

fn parse_known(text: &str) -> NaiveDate {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap_or(NaiveDate::MIN)
}

/// Resolves the header's value to the version that answers the request.
pub fn resolve_version(header: Option<&str>) -> Result<ApiVersion, VersionError> {
    let Some(text) = header else {
        return Ok(ApiVersion::newest());
    };
    let text = text.trim();
    // Exactly YYYY-MM-DD: chrono alone would also take `2022-5-1`.
    let shaped = text.len() == 10
        && text.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    let date = shaped
        .then(|| NaiveDate::parse_from_str(text, "%Y-%m-%d").ok())
        .flatten()
        .ok_or(VersionError::Malformed)?;
    VERSIONS
        .iter()
        .rev()
        .find(|known| parse_known(known) <= date)
        .map(|known| ApiVersion(known))
        .ok_or(VersionError::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_header_means_newest() {
        assert_eq!(resolve_version(None), Ok(ApiVersion::newest()));
        assert_eq!(ApiVersion::newest().as_string(), "2022-05-01");
    }

    #[test]
    fn dates_on_or_after_the_first_version_resolve_to_the_newest_before_them() {
        assert_eq!(
            resolve_version(Some("2022-05-01")).unwrap().as_string(),
            "2022-05-01"
        );
        assert_eq!(
            resolve_version(Some("2030-01-31")).unwrap().as_string(),
            "2022-05-01"
        );
    }

    #[test]
    fn malformed_and_unsupported_dates_are_told_apart() {
        for bad in [
            "",
            "2022-5-1",
            "20220501",
            "2022-02-30",
            "yesterday",
            "2022-05-01T00:00:00Z",
        ] {
            assert_eq!(
                resolve_version(Some(bad)),
                Err(VersionError::Malformed),
                "{bad}"
            );
        }
        assert_eq!(
            resolve_version(Some("2022-04-30")),
            Err(VersionError::Unsupported)
        );
    }
}
