//! Links Mercer answers with (the customer directory's `next_url` and `previous_url`): under the
//! operator's public URL (`serve --public-url`) when one is set, relative (path and query only)
//! otherwise. Never built from a request's `Host`, `Forwarded` or `X-Forwarded-Host` header: a
//! client or a proxy could name any host there, and the link, followed with the client's
//! token, would take that token to it.

/// The address clients reach Mercer at: `http(s)://HOST[:PORT][/PREFIX]`, without a trailing
/// slash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl(String);

impl PublicUrl {
    /// An absolute http or https URL with a host, and no credentials, query or fragment; a path
    /// is kept as a prefix of every link.
    pub fn parse(text: &str) -> Result<PublicUrl, String> {
        let url = url::Url::parse(text.trim()).map_err(|error| format!("not a URL: {error}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("give an http or https URL".to_string());
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("give a URL with a host".to_string());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("give a URL without a user name or password".to_string());
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err("give a URL without a query or fragment".to_string());
        }
        let text = url.as_str();
        Ok(PublicUrl(text.trim_end_matches('/').to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A link to `path_and_query` (which starts with `/`): under `public_url`, or as it is.
pub fn link(public_url: Option<&PublicUrl>, path_and_query: &str) -> String {
    match public_url {
        Some(base) => format!("{}{path_and_query}", base.as_str()),
        None => path_and_query.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_url_keeps_its_scheme_host_port_and_prefix_without_the_trailing_slash() {
        for (given, kept) in [
            ("https://api.example.com", "https://api.example.com"),
            ("https://api.example.com/", "https://api.example.com"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("https://example.com/mercer/", "https://example.com/mercer"),
            ("HTTPS://Example.COM:443/api", "https://example.com/api"),
        ] {
            let url = PublicUrl::parse(given).expect(given);
            assert_eq!(url.as_str(), kept, "{given}");
        }
    }

    #[test]
    fn a_public_url_that_is_not_a_plain_http_base_is_refused() {
        for given in [
            "",
            "example.com",
            "/customers",
            "ftp://example.com",
            "https://user:secret@example.com",
            "https://example.com/?a=1",
            "https://example.com/#top",
            "javascript:alert(1)",
        ] {
            assert!(PublicUrl::parse(given).is_err(), "{given}");
        }
    }

    #[test]
    fn links_are_under_the_public_url_or_relative() {
        let base = PublicUrl::parse("https://example.com/mercer").expect("a URL");
        assert_eq!(
            link(Some(&base), "/customers/v2/shops/s/customers?page=2"),
            "https://example.com/mercer/customers/v2/shops/s/customers?page=2"
        );
        assert_eq!(
            link(None, "/customers/v2/shops/s/customers?page=2"),
            "/customers/v2/shops/s/customers?page=2"
        );
    }
}
