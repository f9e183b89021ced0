//! Property tests of the SSRF guard: every loopback, private, link-local, shared and metadata
//! IPv4 address is refused in every spelling generated here: as itself, inside each IPv6 form
//! that embeds IPv4, and in the URL forms a client may register. Nothing here connects.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use mercer_domain::kernel::outbound::AddressGuard;
use mercer_outbound::{GuardedResolver, PrivateAddressGuard, forbidden, refusal};
use proptest::prelude::*;
use ureq::unversioned::resolver::Resolver;
use ureq::unversioned::transport::NextTimeout;

/// IPv4 addresses no outgoing call may reach, from every range the guard refuses by name.
fn forbidden_v4() -> impl Strategy<Value = Ipv4Addr> {
    prop_oneof![
        any::<[u8; 3]>().prop_map(|[b, c, d]| Ipv4Addr::new(127, b, c, d)),
        any::<[u8; 3]>().prop_map(|[b, c, d]| Ipv4Addr::new(10, b, c, d)),
        (16u8..32, any::<[u8; 2]>()).prop_map(|(b, [c, d])| Ipv4Addr::new(172, b, c, d)),
        any::<[u8; 2]>().prop_map(|[c, d]| Ipv4Addr::new(192, 168, c, d)),
        any::<[u8; 2]>().prop_map(|[c, d]| Ipv4Addr::new(169, 254, c, d)),
        Just(Ipv4Addr::new(169, 254, 169, 254)),
        Just(Ipv4Addr::new(100, 100, 100, 200)),
        (64u8..128, any::<[u8; 2]>()).prop_map(|(b, [c, d])| Ipv4Addr::new(100, b, c, d)),
        any::<[u8; 3]>().prop_map(|[b, c, d]| Ipv4Addr::new(0, b, c, d)),
    ]
}

fn v6(segments: [u16; 8]) -> Ipv6Addr {
    Ipv6Addr::from(segments)
}

fn halves(ip: Ipv4Addr) -> (u16, u16) {
    let bits = u32::from(ip);
    ((bits >> 16) as u16, bits as u16)
}

/// The IPv6 spellings of `ip`: mapped, compatible, NAT64, 6to4, and Teredo with `ip` as the
/// client (inverted, in the last 32 bits) and as the server (bits 32..64). `other` and `noise`
/// fill the bits each form leaves free.
fn ipv6_spellings(ip: Ipv4Addr, other: Ipv4Addr, noise: [u16; 5]) -> Vec<Ipv6Addr> {
    let (high, low) = halves(ip);
    let (other_high, other_low) = halves(other);
    let [n0, n1, n2, n3, n4] = noise;
    vec![
        ip.to_ipv6_mapped(),
        v6([0, 0, 0, 0, 0, 0, high, low]),
        v6([0x64, 0xff9b, 0, 0, 0, 0, high, low]),
        v6([0x2002, high, low, n0, n1, n2, n3, n4]),
        v6([0x2001, 0, other_high, other_low, n0, n1, !high, !low]),
        v6([0x2001, 0, high, low, n0, n1, !other_high, !other_low]),
    ]
}

/// URL spellings of an IPv4 host: dotted, decimal, hexadecimal, octal, and bracketed IPv6.
fn url_spellings(ip: Ipv4Addr, ipv6: &[Ipv6Addr]) -> Vec<String> {
    let [a, b, c, d] = ip.octets();
    let bits = u32::from(ip);
    let mut urls = vec![
        format!("http://{ip}/hook"),
        format!("https://{bits}:8443/hook"),
        format!("http://0x{bits:x}/hook"),
        format!("http://0{a:o}.0{b:o}.0{c:o}.0{d:o}/hook"),
        format!("http://[::ffff:{ip}]/hook"),
    ];
    urls.extend(ipv6.iter().map(|v6| format!("http://[{v6}]:8080/hook")));
    urls
}

fn resolve(url: &str) -> Result<(), ureq::Error> {
    let uri: ureq::http::Uri = url.parse().expect("a valid URI");
    let config = ureq::Agent::config_builder().build();
    GuardedResolver::new(PrivateAddressGuard::STRICT)
        .resolve(&uri, &config, NextTimeout::default())
        .map(drop)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_spelling_of_a_forbidden_address_is_refused(
        ip in forbidden_v4(),
        other in any::<u32>().prop_map(Ipv4Addr::from),
        noise in any::<[u16; 5]>(),
    ) {
        prop_assert!(forbidden(IpAddr::V4(ip)).is_some(), "{ip}");
        let ipv6 = ipv6_spellings(ip, other, noise);
        for spelled in &ipv6 {
            prop_assert!(forbidden(IpAddr::V6(*spelled)).is_some(), "{ip} as {spelled}");
        }
        for url in url_spellings(ip, &ipv6) {
            let registered = PrivateAddressGuard::STRICT.check(&url);
            prop_assert!(registered.is_err(), "{url} registered");
            prop_assert!(
                PrivateAddressGuard::ALLOW_PRIVATE.check(&url).is_ok(),
                "{url} refused with private targets allowed"
            );
        }
    }

    #[test]
    fn the_resolver_refuses_every_address_literal_of_a_forbidden_address(
        ip in forbidden_v4(),
        other in any::<u32>().prop_map(Ipv4Addr::from),
        noise in any::<[u16; 5]>(),
    ) {
        let ipv6 = ipv6_spellings(ip, other, noise);
        let mut urls = vec![
            format!("http://{ip}:80/"),
            format!("http://{}:80/", u32::from(ip)),
        ];
        urls.extend(ipv6.iter().map(|v6| format!("http://[{v6}]:80/")));
        for url in urls {
            let refused = resolve(&url).err();
            prop_assert!(
                refused.as_ref().and_then(refusal).is_some(),
                "{url}: {refused:?}"
            );
        }
    }
}

#[test]
fn public_addresses_pass_in_each_form() {
    let public = Ipv4Addr::new(93, 184, 216, 34);
    let also_public = Ipv4Addr::new(8, 8, 8, 8);
    for spelled in ipv6_spellings(public, also_public, [1, 2, 3, 4, 5]) {
        assert_eq!(forbidden(IpAddr::V6(spelled)), None, "{spelled}");
    }
    assert!(resolve("http://[64:ff9b::5db8:d822]:80/").is_ok());
}
