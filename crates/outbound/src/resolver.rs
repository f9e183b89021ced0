//! The name resolver of every outgoing agent: the guard checks the very addresses ureq then
//! connects to, so a name cannot resolve to a public address for the check and to a private
//! one for the connection (DNS rebinding).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

use crate::guard::{AddressNotAllowed, NOT_LOOPBACK, PrivateAddressGuard};

/// How long a name's checked addresses are used before the name is looked up again: ureq looks
/// a name up for every request, even one that goes out on a pooled connection, and its resolver
/// spawns a thread for each lookup when a timeout is set.
const REMEMBERED_FOR: Duration = Duration::from_secs(10);

/// Most names remembered at once; past it, the memory starts over.
const MOST_REMEMBERED: usize = 256;

/// A name's addresses, allowed by the guard, and until when they are used.
#[derive(Clone)]
struct Remembered {
    addresses: ResolvedSocketAddrs,
    until: Instant,
}

/// Resolves a name once (with ureq's own resolver: its timeout, its IP family), refuses it
/// when any of its addresses is forbidden, and otherwise hands ureq exactly those addresses.
/// The allowed addresses of a name are used again for [`REMEMBERED_FOR`]: they were checked,
/// and connecting to them again is as safe as the first time.
///
/// A refusal is `ureq::Error::Other` holding an [`AddressNotAllowed`](crate::AddressNotAllowed);
/// [`refusal`](crate::refusal) finds it again.
#[derive(Clone)]
pub struct GuardedResolver {
    guard: PrivateAddressGuard,
    inner: Arc<dyn Resolver>,
    remembered: Arc<Mutex<HashMap<String, Remembered>>>,
    remembered_for: Duration,
}

impl std::fmt::Debug for GuardedResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedResolver")
            .field("guard", &self.guard)
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl GuardedResolver {
    pub fn new(guard: PrivateAddressGuard) -> Self {
        Self::with_inner(guard, Arc::new(DefaultResolver::default()))
    }

    /// Over another resolver: tests hand it names that resolve as they please.
    pub(crate) fn with_inner(guard: PrivateAddressGuard, inner: Arc<dyn Resolver>) -> Self {
        GuardedResolver {
            guard,
            inner,
            remembered: Arc::default(),
            remembered_for: REMEMBERED_FOR,
        }
    }

    /// The same, remembering names for `remembered_for` (tests: zero, to look up every time).
    #[cfg(test)]
    pub(crate) fn remembering_for(mut self, remembered_for: Duration) -> Self {
        self.remembered_for = remembered_for;
        self
    }

    /// The key a name is remembered under: scheme, host and port, as the URL gives them.
    fn key(uri: &Uri) -> String {
        format!(
            "{}://{}",
            uri.scheme_str().unwrap_or_default(),
            uri.authority().map(|a| a.as_str()).unwrap_or_default()
        )
    }

    fn recall(&self, key: &str) -> Option<ResolvedSocketAddrs> {
        let remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        remembered
            .get(key)
            .filter(|entry| entry.until > Instant::now())
            .map(|entry| entry.addresses.clone())
    }

    fn remember(&self, key: String, addresses: &ResolvedSocketAddrs) {
        if self.remembered_for.is_zero() {
            return;
        }
        let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        if remembered.len() >= MOST_REMEMBERED {
            remembered.clear();
        }
        let until = Instant::now() + self.remembered_for;
        let addresses = addresses.clone();
        remembered.insert(key, Remembered { addresses, until });
    }
}

impl GuardedResolver {
    /// A URL whose host is an IP address needs no lookup. ureq's own resolver would still run
    /// one, on a thread of its own for every request when a timeout is set (a webhook worker's
    /// agent has one), which cost about a fifth of a delivery's CPU. None when the scheme has no
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
        if let Some(addresses) = ip.and_then(|ip| self.literal_address(uri, config, ip)) {
            self.check(uri, &addresses)?;
            return Ok(addresses);
        }
        let key = Self::key(uri);
        if let Some(addresses) = self.recall(&key) {
            return Ok(addresses);
        }
        let addresses = self.inner.resolve(uri, config, timeout)?;
        self.check(uri, &addresses)?;
        self.remember(key, &addresses);
        Ok(addresses)
    }
}

impl GuardedResolver {
    /// Refuses the addresses when the guard forbids any of them.
    fn check(&self, uri: &Uri, addresses: &ResolvedSocketAddrs) -> Result<(), ureq::Error> {
        self.guard
            .check_addresses(addresses.iter().copied())
            .map_err(|refused| {
                log::debug!(
                    target: "mercer::outbound",
                    "refused {}: {refused}",
                    uri.host().unwrap_or("a URL without host")
                );
                ureq::Error::Other(Box::new(refused))
            })
    }
}
