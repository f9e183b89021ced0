//! The agent against local servers: it connects only to what the guard checked, and never
//! follows a redirect. Only loopback is ever connected to.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

use super::*;

/// A loopback server answering every request with `answer`; it keeps each request line.
struct Local {
    address: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Local {
    fn start(answer: String) -> Local {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                seen.lock().unwrap().push(line.trim_end().to_string());
                // The rest of the head; these requests have no body.
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let _ = (&stream).write_all(answer.as_bytes());
            }
        });
        Local { address, requests }
    }

    fn ok() -> Local {
        Local::start("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".into())
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Resolves every name to fixed addresses and counts how often it was asked.
#[derive(Debug)]
struct Fixed {
    addresses: Vec<SocketAddr>,
    asked: AtomicUsize,
}

impl Resolver for Fixed {
    fn resolve(
        &self,
        _uri: &Uri,
        _config: &Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let mut resolved = self.empty();
        for address in &self.addresses {
            resolved.push(*address);
        }
        Ok(resolved)
    }
}

fn fixed(addresses: &[SocketAddr]) -> Arc<Fixed> {
    Arc::new(Fixed {
        addresses: addresses.to_vec(),
        asked: AtomicUsize::new(0),
    })
}

/// What [`agent`] builds, over a resolver of the test's choosing.
fn agent_over(guard: PrivateAddressGuard, inner: Arc<Fixed>) -> ureq::Agent {
    let config = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(5)));
    agent_with(GuardedResolver::with_inner(guard, inner), config)
}

#[test]
fn the_agent_connects_to_the_address_the_guard_checked() {
    let server = Local::ok();
    let resolver = fixed(&[server.address]);
    let agent = agent_over(PrivateAddressGuard::ALLOW_PRIVATE, resolver.clone());
    // `.invalid` never resolves (RFC 6761): the request can only have reached the server
    // through the address the guarded resolver handed over, not through a second lookup.
    let url = format!("http://rebinding.invalid:{}/hook", server.address.port());
    let answer = agent.get(&url).call().unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(server.requests(), ["GET /hook HTTP/1.1"]);
    assert_eq!(resolver.asked.load(Ordering::SeqCst), 1, "resolved once");
}

/// An IP address needs no lookup: the agent connects to it without asking the resolver (ureq's
/// would spawn a thread for it on every request), and the guard still checks it.
#[test]
fn an_ip_address_is_connected_to_without_a_lookup_and_still_guarded() {
    let server = Local::ok();
    // The inner resolver would send the call elsewhere: only the literal can reach the server.
    let elsewhere: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let resolver = fixed(&[elsewhere]);
    let agent = agent_over(PrivateAddressGuard::ALLOW_PRIVATE, resolver.clone());
    let url = format!("http://{}/hook", server.address);
    assert_eq!(agent.get(&url).call().unwrap().status(), 200);
    assert_eq!(agent.get(&url).call().unwrap().status(), 200);
    assert_eq!(
        server.requests(),
        ["GET /hook HTTP/1.1", "GET /hook HTTP/1.1"]
    );
    assert_eq!(resolver.asked.load(Ordering::SeqCst), 0, "no lookup");

    let strict = agent_over(PrivateAddressGuard::STRICT, resolver.clone());
    let error = strict.get(&url).call().unwrap_err();
    assert_eq!(refusal(&error), Some(AddressNotAllowed { why: "loopback" }));
    assert_eq!(server.requests().len(), 2, "the refused call never arrived");
}

/// A name's allowed addresses are used again for a while instead of a lookup per request; a
/// refused name is never remembered, so it is looked up (and refused) every time.
#[test]
fn a_names_allowed_addresses_are_remembered_and_a_refusal_is_not() {
    let server = Local::ok();
    let url = format!("http://remembered.invalid:{}/hook", server.address.port());
    let resolver = fixed(&[server.address]);
    let agent = agent_over(PrivateAddressGuard::ALLOW_PRIVATE, resolver.clone());
    for _ in 0..3 {
        assert_eq!(agent.get(&url).call().unwrap().status(), 200);
    }
    assert_eq!(resolver.asked.load(Ordering::SeqCst), 1, "looked up once");

    let forgetful = fixed(&[server.address]);
    let guarded =
        GuardedResolver::with_inner(PrivateAddressGuard::ALLOW_PRIVATE, forgetful.clone())
            .remembering_for(Duration::ZERO);
    let config = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(5)));
    let agent = agent_with(guarded, config);
    assert_eq!(agent.get(&url).call().unwrap().status(), 200);
    assert_eq!(agent.get(&url).call().unwrap().status(), 200);
    assert_eq!(
        forgetful.asked.load(Ordering::SeqCst),
        2,
        "nothing remembered"
    );

    let refusing = fixed(&[server.address]);
    let strict = agent_over(PrivateAddressGuard::STRICT, refusing.clone());
    for _ in 0..2 {
        let error = strict.get(&url).call().unwrap_err();
        assert_eq!(refusal(&error), Some(AddressNotAllowed { why: "loopback" }));
    }
    assert_eq!(
        refusing.asked.load(Ordering::SeqCst),
        2,
        "a refusal is not remembered"
    );
    assert_eq!(
        server.requests().len(),
        5,
        "three and two calls; the refused ones never came"
    );
}

#[test]
fn a_name_with_one_forbidden_address_is_not_connected_to() {
    let server = Local::ok();
    // Loopback first: were the guard to let it through, the call would go to the local
    // server (and be seen below), never to the public address.
    let public: SocketAddr = "93.184.216.34:80".parse().unwrap();
    let agent = agent_over(
        PrivateAddressGuard::STRICT,
        fixed(&[server.address, public]),
    );
    let url = format!("http://rebinding.invalid:{}/hook", server.address.port());
    let error = agent.get(&url).call().unwrap_err();
    assert_eq!(
        refusal(&error),
        Some(AddressNotAllowed { why: "loopback" }),
        "{error:?}"
    );
    thread::sleep(Duration::from_millis(100));
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}

#[test]
fn the_shared_agent_refuses_loopback_and_follows_no_redirect() {
    let target = Local::ok();
    let redirecting = Local::start(format!(
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://{}/elsewhere\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n",
        target.address
    ));
    let url = format!("http://{}/start", redirecting.address);
    let config = || ureq::Agent::config_builder().http_status_as_error(false);

    let strict = agent(PrivateAddressGuard::STRICT, config());
    let error = strict.get(&url).call().unwrap_err();
    assert_eq!(refusal(&error), Some(AddressNotAllowed { why: "loopback" }));
    assert!(redirecting.requests().is_empty());

    // Even a caller that asks for redirects gets none.
    let open = agent(
        PrivateAddressGuard::ALLOW_PRIVATE,
        config().max_redirects(5),
    );
    let answer = open.get(&url).header("X-HMAC", "secret").call().unwrap();
    assert_eq!(answer.status(), 307);
    assert_eq!(redirecting.requests(), ["GET /start HTTP/1.1"]);
    thread::sleep(Duration::from_millis(100));
    assert!(target.requests().is_empty(), "{:?}", target.requests());
}

#[test]
fn loopback_only_calls_loopback_and_looks_up_no_other_name() {
    let server = Local::ok();
    let resolver = fixed(&[server.address]);
    let agent = agent_over(PrivateAddressGuard::LOOPBACK_ONLY, resolver.clone());
    let by_address = format!("http://127.0.0.1:{}/hook", server.address.port());
    assert_eq!(agent.get(&by_address).call().unwrap().status(), 200);
    // A name other than localhost is refused before any lookup, whatever it would resolve to.
    let by_name = format!("http://example.com:{}/hook", server.address.port());
    let error = agent.get(&by_name).call().unwrap_err();
    assert_eq!(
        refusal(&error),
        Some(AddressNotAllowed {
            why: "non-loopback"
        })
    );
    let asked_before = resolver.asked.load(Ordering::SeqCst);
    let localhost = format!("http://localhost:{}/hook", server.address.port());
    assert_eq!(agent.get(&localhost).call().unwrap().status(), 200);
    assert_eq!(resolver.asked.load(Ordering::SeqCst), asked_before + 1);
    assert_eq!(
        asked_before, 0,
        "neither the IP address (no lookup needed) nor the refused name reached the resolver"
    );
    // Private and public addresses are refused alike.
    let private = agent_over(
        PrivateAddressGuard::LOOPBACK_ONLY,
        fixed(&["10.0.0.7:80".parse().unwrap()]),
    );
    assert!(private.get("http://localhost/hook").call().is_err());
}

#[test]
fn loopback_only_registrations_take_loopback_urls_only() {
    use mercer_domain::kernel::outbound::AddressGuard;
    let guard = PrivateAddressGuard::LOOPBACK_ONLY;
    assert_eq!(guard.check("http://127.0.0.1:9/hook"), Ok(()));
    assert_eq!(guard.check("http://[::1]:9/hook"), Ok(()));
    assert!(guard.check("http://10.1.2.3/hook").is_err());
    assert!(guard.check("https://93.184.216.34/hook").is_err());
    assert!(guard.check("https://hooks.example.com/hook").is_err());
}

#[test]
fn idle_connections_are_dropped_before_common_servers_close_them() {
    let agent = agent(PrivateAddressGuard::STRICT, ureq::Agent::config_builder());
    // Node.js and actix-web close an idle keep-alive connection after 5 s.
    assert!(agent.config().max_idle_age() < Duration::from_secs(5));
}
