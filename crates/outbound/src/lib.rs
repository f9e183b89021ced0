//! Mercer's outgoing HTTP calls (connector destinations, webhook callbacks, API overrides) and
//! the SSRF guard they all share:
//!
//! - [`forbidden`] says which addresses are inside Mercer's network (loopback, private,
//!   link-local, metadata and other special ones, IPv4 embedded in IPv6 included);
//! - [`PrivateAddressGuard`] checks a URL when it is registered (the domain's
//!   [`AddressGuard`](mercer_domain::kernel::outbound::AddressGuard) port);
//! - [`agent`] builds the ureq agent every outgoing call uses: names are resolved once by
//!   [`GuardedResolver`], which refuses forbidden addresses and connects only to the checked
//!   ones; redirects are never followed; no proxy from the environment is used, since a proxy
//!   would resolve names itself, past the guard; idle connections are dropped before servers
//!   usually close them ([`MAX_IDLE_AGE`]).
//!
//! Everything here blocks.

pub mod address;
mod guard;
mod resolver;

pub use address::{embedded_ipv4, forbidden};
pub use guard::{AddressNotAllowed, PRIVATE_TARGETS_HINT, PrivateAddressGuard};
pub use resolver::GuardedResolver;

use ureq::config::ConfigBuilder;
use ureq::typestate::AgentScope;
use ureq::unversioned::transport::DefaultConnector;

/// An agent for outgoing calls, configured by `config` (timeouts, user agent…) and then made
/// safe: [`GuardedResolver`] with `guard`, no redirects, no proxy. Redirects matter for more
/// than the guard: a connector's redirect would carry its signed headers to wherever it points.
pub fn agent(guard: PrivateAddressGuard, config: ConfigBuilder<AgentScope>) -> ureq::Agent {
    agent_with(GuardedResolver::new(guard), config)
}

/// How long an idle connection stays in an agent's pool. Below the 5 s after which common
/// servers (Node.js, actix-web) close an idle keep-alive connection: at ureq's 15 s, a call made
/// about 5 s after the last one (the outbox's first retry is 5 s later) could take a connection
/// the server was closing at that moment, and fail as unreachable.
pub const MAX_IDLE_AGE: std::time::Duration = std::time::Duration::from_secs(4);

fn agent_with(resolver: GuardedResolver, config: ConfigBuilder<AgentScope>) -> ureq::Agent {
    let config = config
        .max_redirects(0)
        .proxy(None)
        .max_idle_age(MAX_IDLE_AGE)
        .build();
    ureq::Agent::with_parts(config, DefaultConnector::default(), resolver)
}

/// Whether a failed call never reached a server that answered: nothing listening, a name that
/// does not resolve, a connection cut. Callers report these with one sentence of their own
/// rather than the OS's words, which tell a client what Mercer's network looks like. TLS
/// failures (`InvalidData`) are not among them: they are the far side's to fix.
pub fn is_unreachable(error: &ureq::Error) -> bool {
    match error {
        ureq::Error::Io(io) => io.kind() != std::io::ErrorKind::InvalidData,
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => true,
        _ => false,
    }
}

/// The guard's refusal inside a ureq error, if that is what it is.
pub fn refusal(error: &ureq::Error) -> Option<AddressNotAllowed> {
    match error {
        ureq::Error::Other(inner) => inner.downcast_ref::<AddressNotAllowed>().copied(),
        _ => None,
    }
}

#[cfg(test)]
mod tests;

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
