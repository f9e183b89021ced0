//! The SSRF guard: a callback URL must not reach into the network Mercer runs in.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};

use mercer_domain::webhooks::AddressGuard;

/// Why an address may not be called, or None when it may.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => forbidden_v4(v4),
            None => forbidden_v6(v6),
        },
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
    } else {
        None
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.segments()[..4] == [0xfd00, 0x0ec2, 0, 0] {
        Some("cloud metadata")
    } else if first & 0xfe00 == 0xfc00 {
        Some("private (unique local)")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else {
        None
    }
}

/// Refuses URLs whose host resolves to a forbidden address, unless private addresses were
/// allowed (local development, tests). Only http and https are ever allowed.
#[derive(Debug, Clone, Copy)]
pub struct PrivateAddressGuard {
    pub allow_private: bool,
}

impl AddressGuard for PrivateAddressGuard {
    fn check(&self, url: &str) -> Result<(), String> {
        let parsed = url::Url::parse(url).map_err(|_| "not an absolute URL".to_string())?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("only http and https callback URLs are allowed".to_string());
        }
        if self.allow_private {
            return Ok(());
        }
        let host = parsed.host_str().ok_or("the URL has no host")?;
        let port = parsed.port_or_known_default().unwrap_or(80);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => (host, port)
                .to_socket_addrs()
                .map_err(|_| format!("{host} does not resolve"))?
                .map(|address| address.ip())
                .collect(),
        };
        match addresses
            .iter()
            .find_map(|ip| forbidden(*ip).map(|why| (ip, why)))
        {
            Some((ip, why)) => Err(format!("{host} resolves to {ip}, a {why} address")),
            None if addresses.is_empty() => Err(format!("{host} does not resolve")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
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
            ("::ffff:10.0.0.1", Some("private")),
            ("fd00:ec2::254", Some("cloud metadata")),
            ("93.184.216.34", None),
            ("2606:4700::1111", None),
        ] {
            assert_eq!(forbidden(ip(address)), expected, "{address}");
        }
    }

    #[test]
    fn guards_urls_unless_private_is_allowed() {
        let strict = PrivateAddressGuard {
            allow_private: false,
        };
        assert!(
            strict
                .check("http://127.0.0.1:8080/hook")
                .unwrap_err()
                .contains("loopback")
        );
        assert!(strict.check("http://localhost/hook").is_err());
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
        let open = PrivateAddressGuard {
            allow_private: true,
        };
        assert!(open.check("http://127.0.0.1:8080/hook").is_ok());
        assert!(open.check("file:///etc/passwd").is_err());
    }
}
