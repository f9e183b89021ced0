//! Where Mercer may send a call: the form of a callback URL, and the port that says whether its
//! address may be called (the SSRF guard; `mercer-outbound` implements it).

use crate::kernel::error::FieldError;

/// Checks a callback URL's form: absolute http(s) with a host. Whether its address is allowed
/// is the sender's [`AddressGuard`]'s to say.
pub(crate) fn check_callback_url(field: &str, url: &str) -> Result<String, FieldError> {
    let invalid = |why: &str| FieldError::new(field, "invalid_url", format!("{field} {why}"));
    let parsed =
        url::Url::parse(url.trim()).map_err(|_| invalid("must be an absolute http(s) URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("must be an absolute http(s) URL"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(invalid("must not carry credentials"));
    }
    if parsed.fragment().is_some() {
        return Err(invalid("must not have a fragment"));
    }
    if url.len() > 2048 {
        return Err(invalid("must be at most 2048 characters"));
    }
    Ok(url.trim().to_string())
}

/// Whether a URL's host may be called: the SSRF guard, a port because it resolves names.
pub trait AddressGuard: Send + Sync {
    /// `Err(reason)` when the host resolves to an address that must not be called.
    fn check(&self, url: &str) -> Result<(), String>;
}
