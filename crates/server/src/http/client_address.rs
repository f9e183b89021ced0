//! The client's address: the connection's peer, or, when the peer is a proxy Mercer was told to
//! trust (`serve --trusted-proxies`), the address that proxy says it serves.
//!
//! A trusted proxy's request names its hops in `X-Forwarded-For` (or, when it has none, in the
//! `for=` parameters of `Forwarded`), the client first and each proxy appending the address it
//! was reached from. Everything left of the last proxy's own entry can be written by the client,
//! so the list is read from the right: trusted proxies are skipped, and the first address that
//! is not one is the client's. An entry that is no address (garbage, `unknown`, an obfuscated
//! name) met on the way means the hops cannot be told apart: the peer's address is kept.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use actix_web::HttpRequest;
use actix_web::http::header::{self, HeaderMap};
use ipnet::IpNet;

/// The proxies whose forwarded headers are believed: addresses and CIDR ranges, IPv4 or IPv6.
/// Empty (the default), no header is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// A comma-separated list of addresses (`127.0.0.1`, `::1`) and ranges (`10.0.0.0/8`,
    /// `fd00::/8`); blanks around entries are ignored, and so is an empty list.
    pub fn parse(text: &str) -> Result<TrustedProxies, String> {
        text.split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                entry
                    .parse::<IpNet>()
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map(|net| match net {
                        // `::ffff:10.0.0.0/104` is 10.0.0.0/8, as peers are compared.
                        IpNet::V6(v6) => match (v6.addr().to_ipv4_mapped(), v6.prefix_len()) {
                            (Some(v4), prefix @ 96..) => {
                                IpNet::new(IpAddr::V4(v4), prefix - 96).unwrap_or(net)
                            }
                            _ => net,
                        },
                        v4 => v4,
                    })
                    .map_err(|_| {
                        format!(
                            "{:?} is neither an IP address nor a CIDR range (10.0.0.0/8, fd00::/8)",
                            entry
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(TrustedProxies)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `address` (as [`canonical`]) is one of the proxies.
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.0.iter().any(|net| net.contains(&address))
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a dual-stack listener sees an IPv4
/// client as) as its IPv4 address, so that one client has one address.
fn canonical(address: IpAddr) -> IpAddr {
    address.to_canonical()
}

/// The client's address for `request`: see [`client_address_of`].
pub fn client_address(request: &HttpRequest, trusted: &TrustedProxies) -> IpAddr {
    client_address_of(
        request.peer_addr().map(|peer| peer.ip()),
        request.headers(),
        trusted,
    )
}

/// The client's address: the peer's (unspecified when unknown), unless the peer is a trusted
/// proxy whose forwarded hops name an address that is not one, read from the right.
pub fn client_address_of(
    peer: Option<IpAddr>,
    headers: &HeaderMap,
    trusted: &TrustedProxies,
) -> IpAddr {
    let peer = canonical(peer.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
    if trusted.is_empty() || !trusted.contains(peer) {
        return peer;
    }
    forwarded_client(headers, trusted).unwrap_or(peer)
}

/// The client named by the forwarded hops, if every hop read up to it is an address.
fn forwarded_client(headers: &HeaderMap, trusted: &TrustedProxies) -> Option<IpAddr> {
    let hops = hops(headers)?;
    let mut leftmost = None;
    for hop in hops.iter().rev() {
        let address = canonical(hop.ok()?);
        if !trusted.contains(address) {
            return Some(address);
        }
        leftmost = Some(address);
    }
    // Every hop is a trusted proxy: the one farthest away made the request.
    leftmost
}

/// A hop that is not an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NotAnAddress;

/// The hops, client first: every `X-Forwarded-For` line's entries in order, or when there is
/// none, the `for=` of every `Forwarded` element. None when neither header is there, or when a
/// line is not text.
fn hops(headers: &HeaderMap) -> Option<Vec<Result<IpAddr, NotAnAddress>>> {
    let lines = |name| -> Option<Vec<&str>> {
        headers
            .get_all(name)
            .map(|value| value.to_str().ok())
            .collect()
    };
    let forwarded_for = lines(header::X_FORWARDED_FOR)?;
    if !forwarded_for.is_empty() {
        return Some(
            forwarded_for
                .iter()
                .flat_map(|line| line.split(','))
                .map(|entry| address(entry.trim()))
                .collect(),
        );
    }
    let forwarded = lines(header::FORWARDED)?;
    if forwarded.is_empty() {
        return None;
    }
    Some(
        forwarded
            .iter()
            .flat_map(|line| line.split(','))
            .map(forwarded_for_of)
            .collect(),
    )
}

/// The `for=` of one `Forwarded` element (`for=192.0.2.60;proto=https`), unquoted.
fn forwarded_for_of(element: &str) -> Result<IpAddr, NotAnAddress> {
    let value = element
        .split(';')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("for"))
        .map(|(_, value)| value.trim())
        .ok_or(NotAnAddress)?;
    let value = value
        .strip_prefix('"')
        .and_then(|quoted| quoted.strip_suffix('"'))
        .unwrap_or(value);
    address(value)
}

/// An entry as an address: `192.0.2.60`, `2001:db8::1`, `[2001:db8::1]`, or either with a
/// port (`192.0.2.60:4711`, `[2001:db8::1]:4711`), which some proxies add.
fn address(entry: &str) -> Result<IpAddr, NotAnAddress> {
    entry
        .parse::<IpAddr>()
        .or_else(|_| entry.parse::<SocketAddr>().map(|socket| socket.ip()))
        .or_else(|_| {
            entry
                .strip_prefix('[')
                .and_then(|rest| rest.strip_suffix(']'))
                .ok_or(NotAnAddress)?
                .parse::<std::net::Ipv6Addr>()
                .map(IpAddr::V6)
                .map_err(|_| NotAnAddress)
        })
        .map_err(|_| NotAnAddress)
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::{HeaderName, HeaderValue};

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn trusted(list: &str) -> TrustedProxies {
        TrustedProxies::parse(list).unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value.as_bytes()).unwrap(),
            );
        }
        map
    }

    fn client(peer: &str, list: &str, pairs: &[(&str, &str)]) -> IpAddr {
        client_address_of(Some(ip(peer)), &headers(pairs), &trusted(list))
    }

    #[test]
    fn the_list_parses_addresses_and_ranges_of_both_families() {
        let list = trusted(" 127.0.0.1, ::1 ,10.0.0.0/8,fd00::/8,, ::ffff:192.168.0.0/112");
        for inside in [
            "127.0.0.1",
            "::1",
            "10.1.2.3",
            "fd12::7",
            "::ffff:10.9.9.9",
            "192.168.4.5",
        ] {
            assert!(list.contains(ip(inside)), "{inside}");
        }
        for outside in ["127.0.0.2", "::2", "11.0.0.1", "fe80::1", "192.169.0.1"] {
            assert!(!list.contains(ip(outside)), "{outside}");
        }
        assert!(trusted("").is_empty());
        assert!(trusted(" , ").is_empty());
        for bad in [
            "localhost",
            "10.0.0.0/33",
            "1.2.3",
            "::1/129",
            "10.0.0.1 10.0.0.2",
        ] {
            let error = TrustedProxies::parse(bad).expect_err(bad);
            assert!(error.contains(bad), "{error}");
        }
    }

    #[test]
    fn without_trusted_proxies_the_headers_are_ignored() {
        let spoofed = [
            ("x-forwarded-for", "203.0.113.7"),
            ("forwarded", "for=1.2.3.4"),
        ];
        assert_eq!(client("127.0.0.1", "", &spoofed), ip("127.0.0.1"));
        // A peer that is not a trusted proxy cannot name another client either.
        assert_eq!(
            client("198.51.100.9", "127.0.0.1", &spoofed),
            ip("198.51.100.9")
        );
        assert_eq!(
            client_address_of(None, &headers(&spoofed), &TrustedProxies::default()),
            ip("0.0.0.0")
        );
    }

    #[test]
    fn a_trusted_peer_names_the_client() {
        let from = |value| client("127.0.0.1", "127.0.0.1", &[("x-forwarded-for", value)]);
        assert_eq!(from("203.0.113.7"), ip("203.0.113.7"));
        assert_eq!(from(" 203.0.113.7 "), ip("203.0.113.7"));
        // No header: the peer is the client (a request made on the proxy's machine).
        assert_eq!(client("127.0.0.1", "127.0.0.1", &[]), ip("127.0.0.1"));
        // A dual-stack listener's IPv4-mapped peer is trusted as its IPv4 address.
        assert_eq!(
            client(
                "::ffff:127.0.0.1",
                "127.0.0.1",
                &[("x-forwarded-for", "203.0.113.7")]
            ),
            ip("203.0.113.7")
        );
    }

    #[test]
    fn several_hops_are_read_from_the_right_skipping_trusted_proxies() {
        let list = "127.0.0.1, 10.0.0.0/8";
        let chain = [("x-forwarded-for", "203.0.113.7, 10.0.0.5, 10.1.1.1")];
        assert_eq!(client("127.0.0.1", list, &chain), ip("203.0.113.7"));
        // Lines of the header count as one list, in order.
        let lines = [
            ("x-forwarded-for", "203.0.113.7"),
            ("x-forwarded-for", "10.0.0.5"),
        ];
        assert_eq!(client("127.0.0.1", list, &lines), ip("203.0.113.7"));
        // Every hop a trusted proxy: the farthest is the client.
        let inside = [("x-forwarded-for", "10.0.0.9, 10.0.0.5")];
        assert_eq!(client("127.0.0.1", list, &inside), ip("10.0.0.9"));
    }

    #[test]
    fn spoofed_leftmost_entries_are_ignored() {
        // The client wrote the first two; the proxy appended the address it was reached from.
        let spoofed = [(
            "x-forwarded-for",
            "127.0.0.1, not an address, 198.51.100.1, 203.0.113.7",
        )];
        assert_eq!(
            client("127.0.0.1", "127.0.0.1", &spoofed),
            ip("203.0.113.7")
        );
        // A client claiming to be a trusted proxy is skipped only when it is the next hop.
        let claimed = [("x-forwarded-for", "10.0.0.1, 203.0.113.7")];
        assert_eq!(
            client("127.0.0.1", "127.0.0.1, 10.0.0.0/8", &claimed),
            ip("203.0.113.7")
        );
    }

    #[test]
    fn ipv6_hops_and_ports_are_read() {
        let list = "::1, fd00::/8";
        let chain = [("x-forwarded-for", "2001:db8::7, fd00::2")];
        assert_eq!(client("::1", list, &chain), ip("2001:db8::7"));
        for entry in ["[2001:db8::7]", "[2001:db8::7]:4711"] {
            assert_eq!(
                client("::1", list, &[("x-forwarded-for", entry)]),
                ip("2001:db8::7"),
                "{entry}"
            );
        }
        assert_eq!(
            client("::1", list, &[("x-forwarded-for", "203.0.113.7:4711")]),
            ip("203.0.113.7")
        );
        // An IPv4-mapped hop is its IPv4 address.
        assert_eq!(
            client("::1", list, &[("x-forwarded-for", "::ffff:203.0.113.7")]),
            ip("203.0.113.7")
        );
    }

    #[test]
    fn garbage_falls_back_to_the_peer() {
        for value in [
            "",
            " , ",
            "garbage",
            "203.0.113.7, garbage",
            "203.0.113.300",
            "unknown",
            "fe80::1%eth0",
            "[203.0.113.7]",
            "203.0.113.7;for=1.2.3.4",
        ] {
            assert_eq!(
                client("127.0.0.1", "127.0.0.1", &[("x-forwarded-for", value)]),
                ip("127.0.0.1"),
                "{value:?}"
            );
        }
        // A value that is not text.
        let mut map = HeaderMap::new();
        map.insert(
            header::X_FORWARDED_FOR,
            HeaderValue::from_bytes(b"203.0.113.\xff").unwrap(),
        );
        assert_eq!(
            client_address_of(Some(ip("127.0.0.1")), &map, &trusted("127.0.0.1")),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn forwarded_is_read_when_there_is_no_x_forwarded_for() {
        let list = "127.0.0.1, 10.0.0.0/8";
        let from = |value| client("127.0.0.1", list, &[("forwarded", value)]);
        assert_eq!(from("for=203.0.113.7"), ip("203.0.113.7"));
        assert_eq!(
            from(
                "for=198.51.100.1, For=\"203.0.113.7:4711\";proto=https, for=10.0.0.2;by=10.0.0.3"
            ),
            ip("203.0.113.7")
        );
        assert_eq!(from("for=\"[2001:db8::7]:4711\""), ip("2001:db8::7"));
        for garbage in [
            "for=unknown",
            "for=_hidden",
            "proto=https",
            "for=\"",
            "nonsense",
        ] {
            assert_eq!(from(garbage), ip("127.0.0.1"), "{garbage}");
        }
        // X-Forwarded-For, when there is one, is the list read.
        assert_eq!(
            client(
                "127.0.0.1",
                list,
                &[
                    ("forwarded", "for=198.51.100.1"),
                    ("x-forwarded-for", "203.0.113.7")
                ]
            ),
            ip("203.0.113.7")
        );
    }
}
