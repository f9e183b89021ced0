//! Which IP addresses an outgoing call may reach: none inside the network Mercer runs in.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address may not be called, or None when it may.
///
/// IPv6 addresses that carry an IPv4 address (IPv4-mapped and -compatible, NAT64, 6to4,
/// Teredo) are judged by that IPv4 address too: a gateway or the kernel would deliver them to
/// it, so `64:ff9b::7f00:1` is as much loopback as `127.0.0.1`.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => {
            forbidden_v6(v6).or_else(|| embedded_ipv4(v6).into_iter().find_map(forbidden_v4))
        }
    }
}

/// The IPv4 addresses an IPv6 address stands for, by the forms that embed one. Teredo carries
/// two (its server's and, inverted, its client's); the others one; a plain IPv6 address none.
pub fn embedded_ipv4(ip: Ipv6Addr) -> Vec<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |high: u16, low: u16| Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
    if let Some(mapped) = ip.to_ipv4_mapped() {
        // ::ffff:a.b.c.d
        vec![mapped]
    } else if s[..6] == [0; 6] {
        // IPv4-compatible ::a.b.c.d (deprecated, but still routed by some stacks). `::` and
        // `::1` land here too, as 0.0.0.0 and 0.0.0.1: refused either way.
        vec![v4(s[6], s[7])]
    } else if s[..6] == [0, 0, 0, 0, 0xffff, 0] {
        // IPv4-translated ::ffff:0:a.b.c.d (RFC 2765 SIIT).
        vec![v4(s[6], s[7])]
    } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64 well-known prefix 64:ff9b::/96 (RFC 6052).
        vec![v4(s[6], s[7])]
    } else if s[0] == 0x2002 {
        // 6to4 2002:AABB:CCDD::/48 (RFC 3056).
        vec![v4(s[1], s[2])]
    } else if s[..2] == [0x2001, 0] {
        // Teredo 2001:0::/32 (RFC 4380): the server in bits 32..64, the client's address
        // inverted in the last 32 bits.
        vec![v4(s[2], s[3]), v4(!s[6], !s[7])]
    } else {
        Vec::new()
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) {
        Some("cloud metadata")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared (carrier-grade NAT)")
    } else if ip.is_unspecified() || a == 0 {
        Some("unspecified")
    } else if ip.is_broadcast() || ip.is_multicast() || a >= 240 {
        Some("broadcast, multicast or reserved")
    } else if (a, b, c) == (192, 0, 0) || (a, b) == (198, 18) || (a, b) == (198, 19) {
        Some("reserved for protocols and benchmarks")
    } else if matches!((a, b, c), (192, 0, 2) | (198, 51, 100) | (203, 0, 113)) {
        Some("reserved for documentation")
    } else if (a, b, c) == (192, 88, 99) {
        // The 6to4 relay anycast (RFC 7526, deprecated): a relay in someone's network.
        Some("6to4 relay")
    } else {
        None
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if s[..4] == [0xfd00, 0x0ec2, 0, 0] {
        Some("cloud metadata")
    } else if s[0] & 0xfe00 == 0xfc00 {
        Some("private (unique local)")
    } else if s[0] & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if s[0] & 0xffc0 == 0xfec0 {
        Some("site-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if s[..2] == [0x2001, 0x0db8] {
        Some("reserved for documentation")
    } else if s[..4] == [0x0100, 0, 0, 0] {
        // RFC 6666: routed nowhere on purpose; a call there is never meant.
        Some("discard-only")
    } else if s[..3] == [0x64, 0xff9b, 1] {
        // Local-use NAT64 (RFC 8215): translates into the operator's own network, with the
        // IPv4 address at a place that depends on the prefix length, so all of it is refused.
        Some("local-use NAT64")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn v6(text: &str) -> Ipv6Addr {
        text.parse().unwrap()
    }

    fn v4(text: &str) -> Ipv4Addr {
        text.parse().unwrap()
    }

    #[test]
    fn classifies_addresses() {
        for (address, expected) in [
            ("127.0.0.1", Some("loopback")),
            ("10.1.2.3", Some("private")),
            ("172.16.0.1", Some("private")),
            ("192.168.1.1", Some("private")),
            ("169.254.169.254", Some("cloud metadata")),
            ("169.254.1.1", Some("link-local")),
            ("100.64.0.1", Some("shared (carrier-grade NAT)")),
            ("0.0.0.0", Some("unspecified")),
            ("::1", Some("loopback")),
            ("fd00::1", Some("private (unique local)")),
            ("fe80::1", Some("link-local")),
            ("fec0::1", Some("site-local")),
            ("::ffff:10.0.0.1", Some("private")),
            ("fd00:ec2::254", Some("cloud metadata")),
            ("100::1", Some("discard-only")),
            ("64:ff9b:1::a00:1", Some("local-use NAT64")),
            ("::ffff:0:10.0.0.1", Some("private")),
            ("::ffff:0:127.0.0.1", Some("loopback")),
            ("192.0.2.1", Some("reserved for documentation")),
            ("198.51.100.7", Some("reserved for documentation")),
            ("203.0.113.9", Some("reserved for documentation")),
            ("192.88.99.1", Some("6to4 relay")),
            ("2001:db8::1", Some("reserved for documentation")),
            ("93.184.216.34", None),
            ("2606:4700::1111", None),
        ] {
            assert_eq!(forbidden(ip(address)), expected, "{address}");
        }
    }

    #[test]
    fn refuses_broadcast_multicast_and_the_reserved_ipv4_blocks() {
        for (address, expected) in [
            ("255.255.255.255", Some("broadcast, multicast or reserved")),
            ("224.0.0.1", Some("broadcast, multicast or reserved")),
            ("239.255.255.250", Some("broadcast, multicast or reserved")),
            ("240.0.0.1", Some("broadcast, multicast or reserved")),
            ("192.0.0.8", Some("reserved for protocols and benchmarks")),
            ("198.18.0.1", Some("reserved for protocols and benchmarks")),
            (
                "198.19.255.254",
                Some("reserved for protocols and benchmarks"),
            ),
            // Their public neighbours.
            ("223.255.255.254", None),
            ("192.0.1.1", None),
            ("198.17.255.254", None),
            ("198.20.0.1", None),
        ] {
            assert_eq!(forbidden(ip(address)), expected, "{address}");
        }
    }

    #[test]
    fn unwraps_each_ipv6_form_that_embeds_ipv4() {
        for (address, embedded) in [
            ("::ffff:127.0.0.1", vec!["127.0.0.1"]),
            ("::10.0.0.1", vec!["10.0.0.1"]),
            ("::1", vec!["0.0.0.1"]),
            ("64:ff9b::a9fe:a9fe", vec!["169.254.169.254"]),
            ("64:ff9b::10.1.2.3", vec!["10.1.2.3"]),
            ("2002:c0a8:0101::1", vec!["192.168.1.1"]),
            ("2002:7f00:1:5:6:7:8:9", vec!["127.0.0.1"]),
            // Teredo: server 65.54.227.120, client 10.0.0.1 inverted (f5ff:fffe).
            (
                "2001:0:4136:e378:8000:63bf:f5ff:fffe",
                vec!["65.54.227.120", "10.0.0.1"],
            ),
            ("2606:4700::1111", vec![]),
            ("2001:db8::1", vec![]),
        ] {
            let expected: Vec<Ipv4Addr> = embedded.iter().map(|text| v4(text)).collect();
            assert_eq!(embedded_ipv4(v6(address)), expected, "{address}");
        }
    }

    #[test]
    fn refuses_ipv6_forms_whose_ipv4_is_forbidden() {
        for (address, expected) in [
            ("::ffff:7f00:1", "loopback"),
            ("::10.0.0.1", "private"),
            ("::169.254.169.254", "cloud metadata"),
            ("64:ff9b::7f00:1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "cloud metadata"),
            ("2002:a00:1::", "private"),
            ("2002:a9fe:1::1", "link-local"),
            // A Teredo address whose client is 127.0.0.1 behind a public server…
            ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),
            // …and one whose server is 192.168.0.1 with a public client (8.8.8.8).
            ("2001:0:c0a8:1:0:0:f7f7:f7f7", "private"),
        ] {
            assert_eq!(forbidden(ip(address)), Some(expected), "{address}");
        }
        // The same forms around public IPv4 addresses are allowed.
        for address in [
            "::ffff:93.184.216.34",
            "64:ff9b::93.184.216.34",
            "2002:5db8:d822::1",
            "2001:0:4136:e378:8000:63bf:a247:27dd",
        ] {
            assert_eq!(forbidden(ip(address)), None, "{address}");
        }
    }
}
