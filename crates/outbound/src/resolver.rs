//! The name resolver of every outgoing agent: the guard checks the very addresses ureq then
//! connects to, so a name cannot resolve to a public address for the check and to a private
//! one for the connection (DNS rebinding).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

use crate::guard::{AddressNotAllowed, NOT_LOOPBACK, PrivateAddressGuard};

/// Resolves a name once (with ureq's own resolver: its timeout, its IP family), refuses it
/// when any of its addresses is forbidden, and otherwise hands ureq exactly those addresses.
///
/// A refusal is `ureq::Error::Other` holding an [`AddressNotAllowed`](crate::AddressNotAllowed);
/// [`refusal`](crate::refusal) finds it again.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    guard: PrivateAddressGuard,
    inner: Arc<dyn Resolver>,
}

impl GuardedResolver {
    pub fn new(guard: PrivateAddressGuard) -> Self {
        Self::with_inner(guard, Arc::new(DefaultResolver::default()))
    }

    /// Over another resolver: tests hand it names that resolve as they please.
    pub(crate) fn with_inner(guard: PrivateAddressGuard, inner: Arc<dyn Resolver>) -> Self {
        GuardedResolver { guard, inner }
    }
}

impl GuardedResolver {
    /// A URL whose host is an IP address needs no lookup. ureq's own resolver would still run
    /// one, on a thread of its own for every request when a timeout is set (a webhook worker's
    /// agent has one), which cost a tenth of a delivery's CPU. None when the scheme has no
    /// known default port, or the address is not of the agent's IP family: the inner resolver
    /// then answers as it always did.
    fn literal_address(
        &self,
        uri: &Uri,
        config: &Config,
        ip: IpAddr,
    ) -> Option<ResolvedSocketAddrs> {
        let port = uri.port_u16().or_else(|| match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        })?;
        let mut addresses = self.inner.empty();
        for address in config
            .ip_family()
            .keep_wanted(std::iter::once(SocketAddr::new(ip, port)))
        {
            addresses.push(address);
        }
        (!addresses.is_empty()).then_some(addresses)
    }
}

impl Resolver for GuardedResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri.host().unwrap_or_default();
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        let ip = literal.parse::<IpAddr>().ok();
        if ip.is_none() && !self.guard.may_resolve(host) {
            return Err(ureq::Error::Other(Box::new(AddressNotAllowed {
                why: NOT_LOOPBACK,
            })));
        }
        let addresses = match ip.and_then(|ip| self.literal_address(uri, config, ip)) {
            Some(addresses) => addresses,
            None => self.inner.resolve(uri, config, timeout)?,
        };
        self.guard
            .check_addresses(addresses.iter().copied())
            .map_err(|refused| {
                log::debug!(
                    target: "mercer::outbound",
                    "refused {}: {refused}",
                    uri.host().unwrap_or("a URL without host")
                );
                ureq::Error::Other(Box::new(refused))
            })?;
        Ok(addresses)
    }
}
