//! How a shop brands its portal (`mercer shop update --portal-accent … --portal-logo-url …`): an
//! accent colour and a logo. The shop's name on the pages is its storefront's own domain when it
//! has one, else its platform domain ([`shop_name`]).

use crate::access::shop::{Shop, find_shop};
use crate::kernel::error::{DomainError, FieldError, Problems};
use crate::kernel::time::Timestamp;
use crate::portal::repository::PortalRepositories;

/// The longest logo URL, in bytes.
const MAX_LOGO_URL_BYTES: usize = 2048;

/// A shop's branding of its portal pages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortalBranding {
    /// The accent colour, `#rgb` or `#rrggbb` in lowercase; the pages' own when None.
    pub accent: Option<String>,
    /// The logo's URL: https, or http to this machine (for trying the portal out); none when
    /// None.
    pub logo_url: Option<String>,
}

/// A change of branding: `None` keeps a value, `Some("")` clears it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrandingChange {
    /// The new accent colour, or empty to clear it.
    pub accent: Option<String>,
    /// The new logo URL, or empty to clear it.
    pub logo_url: Option<String>,
}

impl BrandingChange {
    /// Whether the change changes nothing.
    pub fn is_empty(&self) -> bool {
        self.accent.is_none() && self.logo_url.is_none()
    }
}

/// The name the portal shows for the shop: its storefront's own domain when it has one, else
/// its platform domain.
pub fn shop_name(shop: &Shop) -> &str {
    shop.custom_domain
        .as_deref()
        .map(str::trim)
        .filter(|domain| !domain.is_empty())
        .unwrap_or(&shop.shop_domain)
}

/// An accent colour: `#` and 3 or 6 hex digits, kept in lowercase.
pub fn check_accent(text: &str) -> Result<String, FieldError> {
    let text = text.trim();
    let digits = text.strip_prefix('#').unwrap_or("");
    if matches!(digits.len(), 3 | 6) && digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(text.to_ascii_lowercase())
    } else {
        Err(FieldError::new(
            "portal_accent",
            "invalid_value",
            "portal_accent must be a colour written #rgb or #rrggbb, such as #0a7",
        ))
    }
}

/// Whether `host` names this machine: `localhost`, 127.0.0.0/8 or ::1.
fn is_loopback_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(address) => address.is_loopback(),
        url::Host::Ipv6(address) => address.is_loopback(),
    }
}

/// A logo URL: an absolute https URL with a host and no user name or password (or http to
/// this machine), at most 2 KiB.
pub fn check_logo_url(text: &str) -> Result<String, FieldError> {
    let problem = |message: &str| {
        FieldError::new(
            "portal_logo_url",
            "invalid_url",
            format!("portal_logo_url {message}"),
        )
    };
    let text = text.trim();
    if text.len() > MAX_LOGO_URL_BYTES {
        return Err(problem("must be at most 2048 bytes"));
    }
    let url = url::Url::parse(text).map_err(|_| problem("must be an absolute https URL"))?;
    let Some(host) = url.host() else {
        return Err(problem("must have a host"));
    };
    let allowed = match url.scheme() {
        "https" => true,
        "http" => is_loopback_host(&host),
        _ => false,
    };
    if !allowed {
        return Err(problem(
            "must be an https URL (http only to this machine's loopback address)",
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(problem("must not hold a user name or password"));
    }
    Ok(url.to_string())
}

/// Changes the branding of the shop `shop_identifier` (404 for no such shop): every value is
/// checked first (422 naming `portal_accent` or `portal_logo_url`), and then nothing changes
/// unless all are right. Answers the shop and its branding as stored.
pub fn set_branding(
    tx: &mut dyn PortalRepositories,
    shop_identifier: &str,
    change: BrandingChange,
    now: Timestamp,
) -> Result<(Shop, PortalBranding), DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    let mut branding = tx.portal_branding(shop.id)?;
    let mut problems = Problems::new();
    if let Some(accent) = change.accent {
        branding.accent = if accent.trim().is_empty() {
            None
        } else {
            problems.check(check_accent(&accent))
        };
    }
    if let Some(url) = change.logo_url {
        branding.logo_url = if url.trim().is_empty() {
            None
        } else {
            problems.check(check_logo_url(&url))
        };
    }
    problems.into_result()?;
    if !tx.set_portal_branding(shop.id, &branding, now)? {
        return Err(DomainError::not_found("shop"));
    }
    Ok((shop, branding))
}

/// The shop's branding, as its pages show it.
pub fn branding(
    tx: &mut dyn PortalRepositories,
    shop: &Shop,
) -> Result<PortalBranding, DomainError> {
    Ok(tx.portal_branding(shop.id)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::shop::ShopInput;
    use crate::access::shop::create_shop;
    use crate::ports::Database;
    use crate::testing::MemoryDatabase;

    #[test]
    fn accents_are_three_or_six_hex_digits() {
        assert_eq!(check_accent("#0A7").unwrap(), "#0a7");
        assert_eq!(check_accent(" #00aa77 ").unwrap(), "#00aa77");
        for wrong in ["0a7", "#0a", "#0a77", "#gggggg", "red", "#0a7;}", ""] {
            assert!(check_accent(wrong).is_err(), "{wrong}");
        }
    }

    #[test]
    fn logos_are_https_or_http_to_this_machine() {
        for right in [
            "https://cdn.example.com/logo.png",
            "http://127.0.0.1:8080/logo.svg",
            "http://localhost/logo.png",
            "http://[::1]/logo.png",
        ] {
            assert!(check_logo_url(right).is_ok(), "{right}");
        }
        for wrong in [
            "http://cdn.example.com/logo.png",
            "javascript:alert(1)",
            "data:image/png;base64,AAAA",
            "/logo.png",
            "https://user:pass@example.com/logo.png",
            "ftp://example.com/logo.png",
        ] {
            assert!(check_logo_url(wrong).is_err(), "{wrong}");
        }
    }

    #[test]
    fn the_shop_is_named_by_its_own_domain_else_its_platform_domain() {
        let db = MemoryDatabase::default();
        let shop = db
            .write(|tx| {
                create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "brand.myshop.test".into(),
                        ..ShopInput::default()
                    },
                    Timestamp::from_micros(0),
                )
            })
            .unwrap();
        assert_eq!(shop_name(&shop), "brand.myshop.test");
        let mut own = shop.clone();
        own.custom_domain = Some("www.brand.test".into());
        assert_eq!(shop_name(&own), "www.brand.test");
    }

    #[test]
    fn branding_changes_all_or_nothing_and_clears_with_empty_text() {
        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(0);
        let shop = db
            .write(|tx| {
                create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "brand.myshop.test".into(),
                        ..ShopInput::default()
                    },
                    now,
                )
            })
            .unwrap();
        let id = shop.identifier.as_str().to_string();
        let set = |accent: Option<&str>, logo: Option<&str>| {
            db.write(|tx| {
                set_branding(
                    tx,
                    &id,
                    BrandingChange {
                        accent: accent.map(str::to_string),
                        logo_url: logo.map(str::to_string),
                    },
                    now,
                )
            })
        };
        let (_, set_once) = set(Some("#0A7"), Some("https://cdn.example.com/l.png")).unwrap();
        assert_eq!(set_once.accent.as_deref(), Some("#0a7"));
        let Err(DomainError::Invalid(problems)) = set(Some("#0a7"), Some("http://x.test/l.png"))
        else {
            panic!("refused");
        };
        assert_eq!(problems[0].field, "portal_logo_url");
        let kept = db.read(|tx| branding(tx, &shop)).unwrap();
        assert_eq!(kept, set_once);
        let (_, cleared) = set(Some(""), None).unwrap();
        assert_eq!(cleared.accent, None);
        assert_eq!(cleared.logo_url, set_once.logo_url);
        assert!(matches!(
            db.write(|tx| set_branding(
                tx,
                "0123456789abcdef0123456789abcdef",
                BrandingChange::default(),
                now
            )),
            Err(DomainError::NotFound { resource: "shop" })
        ));
    }
}
