//! The SSRF guard: an outgoing call must not reach into the network Mercer runs in.

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use mercer_domain::kernel::outbound::AddressGuard;

use crate::address::forbidden;

/// Refuses addresses that [`forbidden`] names, unless private targets were allowed (local
/// development, tests). Only http and https are ever allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrivateAddressGuard {
    /// Loopback and private networks may be called too.
    pub allow_private: bool,
    /// Only loopback may be called, and host names other than `localhost` are refused without
    /// being looked up: a run whose URLs come from a fuzzer or a test sends nothing off the
    /// machine, not even a DNS query.
    pub loopback_only: bool,
}

impl PrivateAddressGuard {
    /// The default: only public addresses.
    pub const STRICT: PrivateAddressGuard = PrivateAddressGuard {
        allow_private: false,
        loopback_only: false,
    };
    /// `--allow-private-targets`: loopback and private networks too.
    pub const ALLOW_PRIVATE: PrivateAddressGuard = PrivateAddressGuard {
        allow_private: true,
        loopback_only: false,
    };
    /// `--loopback-targets-only`: this machine only.
    pub const LOOPBACK_ONLY: PrivateAddressGuard = PrivateAddressGuard {
        allow_private: false,
        loopback_only: true,
    };

    /// Refuses `address` when it is forbidden and private targets are not allowed, or when it
    /// is not loopback and only loopback is.
    pub fn check_address(&self, address: IpAddr) -> Result<(), AddressNotAllowed> {
        if self.loopback_only {
            return match address.to_canonical().is_loopback() {
                true => Ok(()),
                false => Err(AddressNotAllowed { why: NOT_LOOPBACK }),
            };
        }
        match forbidden(address) {
            Some(why) if !self.allow_private => Err(AddressNotAllowed { why }),
            _ => Ok(()),
        }
    }

    /// Whether a host name may be looked up at all: under `loopback_only`, `localhost` only.
    pub fn may_resolve(&self, name: &str) -> bool {
        !self.loopback_only || name.eq_ignore_ascii_case("localhost")
    }

    /// Refuses the lot when any one address is forbidden: a name that also resolves to a
    /// private address is not trusted with its public ones either.
    pub fn check_addresses(
        &self,
        addresses: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<(), AddressNotAllowed> {
        addresses
            .into_iter()
            .try_for_each(|address| self.check_address(address.ip()))
    }
}

/// An outgoing call refused by the guard. It says which kind of address, never which address:
/// its text reaches API clients, who must not learn how names resolve inside Mercer's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressNotAllowed {
    /// The kind of address: "loopback", "private", "cloud metadata"…
    pub why: &'static str,
}

impl fmt::Display for AddressNotAllowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "it leads to a {} address", self.why)
    }
}

impl std::error::Error for AddressNotAllowed {}

/// Why a host name is refused, whether it does not resolve or resolves to a forbidden address.
pub const NAME_REFUSED: &str =
    "its host name does not resolve to an address Mercer may call (public addresses only)";

/// Said after a registration refused for its address: how an operator lets Mercer call local
/// servers (a connector, a receiver or an override on the same machine).
pub const PRIVATE_TARGETS_HINT: &str = "; Mercer calls loopback and private addresses only when \
     its operator starts it with `mercer serve --allow-private-targets` \
     (MERCER_ALLOW_PRIVATE_TARGETS=true), for development";

/// What [`PrivateAddressGuard::LOOPBACK_ONLY`] calls every address but loopback.
pub(crate) const NOT_LOOPBACK: &str = "non-loopback";

/// The registration check (webhook callbacks, overrides, connector destinations): the URL's
/// scheme, and every address its host resolves to now. Calls are checked again when they are
/// made, by [`crate::GuardedResolver`], since a name may resolve differently later.
impl AddressGuard for PrivateAddressGuard {
    fn check(&self, url: &str) -> Result<(), String> {
        let parsed = url::Url::parse(url).map_err(|_| "not an absolute URL".to_string())?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("only http and https URLs are allowed".to_string());
        }
        if parsed.host().is_none() {
            return Err("the URL has no host".to_string());
        }
        self.check_host(&parsed)
            .map_err(|refused| format!("{refused}{PRIVATE_TARGETS_HINT}"))
    }
}

impl PrivateAddressGuard {
    /// The addresses of the URL's host; `Err` says why they may not be called.
    fn check_host(&self, parsed: &url::Url) -> Result<(), String> {
        if self.allow_private {
            return Ok(());
        }
        // The url crate has already turned every IPv4 spelling (decimal, octal, hex, short
        // forms) into dotted quads, and bracketed IPv6 into its address.
        let address = |ip: IpAddr| vec![SocketAddr::new(ip, 0)];
        match parsed.host() {
            // An address the client wrote itself: saying which kind it is tells them nothing.
            Some(url::Host::Ipv4(ip)) => self
                .check_addresses(address(ip.into()))
                .map_err(|refused| refused.to_string()),
            Some(url::Host::Ipv6(ip)) => self
                .check_addresses(address(ip.into()))
                .map_err(|refused| refused.to_string()),
            // A name: one answer whether it does not resolve or resolves inside, so the
            // answers cannot be used to map the names of Mercer's network.
            Some(url::Host::Domain(name)) => {
                if !self.may_resolve(name) {
                    return Err(NAME_REFUSED.to_string());
                }
                let port = parsed.port_or_known_default().unwrap_or(80);
                let addresses: Vec<SocketAddr> = (name, port)
                    .to_socket_addrs()
                    .map(Iterator::collect)
                    .unwrap_or_default();
                if addresses.is_empty() || self.check_addresses(addresses).is_err() {
                    return Err(NAME_REFUSED.to_string());
                }
                Ok(())
            }
            // No host: refused by `check` before.
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_urls_unless_private_is_allowed() {
        let strict = PrivateAddressGuard::STRICT;
        let refused = strict.check("http://127.0.0.1:8080/hook").unwrap_err();
        assert_eq!(
            refused,
            format!("it leads to a loopback address{PRIVATE_TARGETS_HINT}")
        );
        assert!(refused.contains("--allow-private-targets"));
        // Names get one answer, resolving inside or not at all.
        let name_refused = format!("{NAME_REFUSED}{PRIVATE_TARGETS_HINT}");
        assert_eq!(
            strict.check("http://localhost/hook").unwrap_err(),
            name_refused
        );
        assert_eq!(
            strict
                .check("http://no-such-host.invalid/hook")
                .unwrap_err(),
            name_refused
        );
        assert!(strict.check("http://[::1]/hook").is_err());
        assert!(
            strict
                .check("http://169.254.169.254/latest")
                .unwrap_err()
                .contains("metadata")
        );
        assert!(
            strict
                .check("ftp://example.test/")
                .unwrap_err()
                .contains("http")
        );
        assert!(
            strict.check("http://93.184.216.34/hook").is_ok(),
            "a public address literal"
        );
        let open = PrivateAddressGuard::ALLOW_PRIVATE;
        assert!(open.check("http://127.0.0.1:8080/hook").is_ok());
        assert!(open.check("file:///etc/passwd").is_err());
    }

    #[test]
    fn one_forbidden_address_refuses_a_name() {
        let public: SocketAddr = "93.184.216.34:80".parse().unwrap();
        let private: SocketAddr = "10.0.0.1:80".parse().unwrap();
        assert_eq!(
            PrivateAddressGuard::STRICT.check_addresses([public, private]),
            Err(AddressNotAllowed { why: "private" })
        );
        assert_eq!(
            PrivateAddressGuard::STRICT.check_addresses([public]),
            Ok(())
        );
        assert_eq!(
            PrivateAddressGuard::ALLOW_PRIVATE.check_addresses([public, private]),
            Ok(())
        );
    }
}
