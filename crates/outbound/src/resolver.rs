//! The name resolver of every outgoing agent: the guard checks the very addresses ureq then
//! connects to, so a name cannot resolve to a public address for the check and to a private
//! one for the connection (DNS rebinding).

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

impl Resolver for GuardedResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri.host().unwrap_or_default();
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if literal.parse::<std::net::IpAddr>().is_err() && !self.guard.may_resolve(host) {
            return Err(ureq::Error::Other(Box::new(AddressNotAllowed {
                why: NOT_LOOPBACK,
            })));
        }
        let addresses = self.inner.resolve(uri, config, timeout)?;
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
