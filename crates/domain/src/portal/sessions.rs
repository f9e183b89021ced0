//! The portal's sessions. A shop's storefront sends a signed-in customer to the portal's entry
//! with the token its platform issued them; once the platform's connector has said the token is
//! the customer's (Validate Customer JWT, checked by the caller), a session opens for that one
//! shop and that one customer. Its token lives only in the browser's cookie; the database keeps
//! its SHA-256. A session lasts [`SESSION_LIFETIME_SECONDS`] from its last use, and signing out
//! deletes it. Every form carries a CSRF token derived from the session's token.

use crate::access::credentials::{Secret, hash_token, random_hex};
use crate::access::shop::Shop;
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::{PortalSessionId, ShopId};
use crate::kernel::limits::check_parameter;
use crate::kernel::time::Timestamp;
use crate::portal::repository::PortalRepositories;

/// What a session's token starts with, so a leaked one is recognisable.
pub const SESSION_PREFIX: &str = "mps_";
/// A session ends this long after its last use (8 hours).
pub const SESSION_LIFETIME_SECONDS: i64 = 8 * 60 * 60;
/// A session's renewal is written at most this often (not on every page).
const RENEW_EVERY_SECONDS: i64 = 60;
/// The longest platform customer id a session keeps, in characters.
const MAX_CUSTOMER_ID_CHARS: usize = 255;

/// A session to store: the token's hash, never the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPortalSession {
    /// SHA-256 (hex) of the session's token.
    pub token_hash: String,
    /// The shop whose portal it is.
    pub shop_id: ShopId,
    /// The customer's id on the shop's platform, as their token proved it.
    pub platform_customer_id: String,
    /// When the session opened.
    pub created_at: Timestamp,
    /// When it ends unless used before.
    pub expires_at: Timestamp,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortalSession {
    /// The session's row id.
    pub id: PortalSessionId,
    /// The shop whose portal it is.
    pub shop_id: ShopId,
    /// The customer's id on the shop's platform.
    pub platform_customer_id: String,
    /// When the session opened.
    pub created_at: Timestamp,
    /// When it was last used (written at most every minute).
    pub last_seen_at: Timestamp,
    /// When it ends unless used before.
    pub expires_at: Timestamp,
}

/// The customer a portal page is for, by their live session.
#[derive(Debug, Clone)]
pub struct Visitor {
    /// The session's row id.
    pub session_id: PortalSessionId,
    /// The shop whose portal it is: the only one the session reaches.
    pub shop: Shop,
    /// The customer's id on the shop's platform: the only customer the session reaches.
    pub platform_customer_id: String,
    /// The token every form of this session carries.
    pub csrf_token: String,
    /// Whether the session's last use is old enough to renew it ([`renew`]).
    pub stale: bool,
}

/// Opens a session of `shop` for its customer `platform_customer_id`, whose platform token the
/// caller has checked, and forgets the sessions that have ended. The answer is the session's
/// token, for the cookie only.
pub fn open_session(
    tx: &mut dyn PortalRepositories,
    shop: &Shop,
    platform_customer_id: &str,
    now: Timestamp,
) -> Result<Secret, DomainError> {
    let customer = platform_customer_id.trim();
    if customer.is_empty() {
        return Err(DomainError::Invalid(vec![FieldError::required("customer")]));
    }
    check_parameter("customer", customer, MAX_CUSTOMER_ID_CHARS)
        .map_err(|problem| DomainError::BadRequest(vec![problem]))?;
    let token = Secret::new(format!("{SESSION_PREFIX}{}", random_hex(32)));
    tx.forget_portal_sessions(now)?;
    tx.insert_portal_session(&NewPortalSession {
        token_hash: hash_token(token.expose()),
        shop_id: shop.id,
        platform_customer_id: customer.to_string(),
        created_at: now,
        expires_at: now.plus_seconds(SESSION_LIFETIME_SECONDS),
    })?;
    Ok(token)
}

/// The visitor whose session `token` is, on the portal of the shop `shop_identifier`, while the
/// session lasts; None for an unknown or ended session, or one of another shop. It only reads:
/// [`renew`] notes the use when [`Visitor::stale`] says.
pub fn session(
    tx: &mut dyn PortalRepositories,
    shop_identifier: &str,
    token: &str,
    now: Timestamp,
) -> Result<Option<Visitor>, DomainError> {
    if !token.starts_with(SESSION_PREFIX) {
        return Ok(None);
    }
    let Some(session) = tx.portal_session_by_hash(&hash_token(token))? else {
        return Ok(None);
    };
    if session.expires_at <= now {
        return Ok(None);
    }
    let Some(shop) = tx.shop_by_id(session.shop_id)? else {
        return Ok(None);
    };
    if shop.identifier.as_str() != shop_identifier || shop.deleted_at.is_some() {
        return Ok(None);
    }
    Ok(Some(Visitor {
        session_id: session.id,
        shop,
        platform_customer_id: session.platform_customer_id,
        csrf_token: csrf_token(token),
        stale: session.last_seen_at <= now.plus_seconds(-RENEW_EVERY_SECONDS),
    }))
}

/// Renews the visitor's session: it now ends [`SESSION_LIFETIME_SECONDS`] after `now`.
pub fn renew(
    tx: &mut dyn PortalRepositories,
    visitor: &Visitor,
    now: Timestamp,
) -> Result<(), DomainError> {
    Ok(tx.renew_portal_session(
        visitor.session_id,
        now,
        now.plus_seconds(SESSION_LIFETIME_SECONDS),
    )?)
}

/// Ends the session `token` is, if it is one.
pub fn sign_out(tx: &mut dyn PortalRepositories, token: &str) -> Result<(), DomainError> {
    Ok(tx.delete_portal_session(&hash_token(token))?)
}

/// The CSRF token of a session: derived from its token, so it needs no storage, and tells
/// nothing of the token.
pub fn csrf_token(session_token: &str) -> String {
    hash_token(&format!("mercer-portal-csrf\n{session_token}"))
}

/// Whether a form's CSRF token is the session's. Both sides are hashed first, so the
/// comparison's time tells nothing about the expected value.
pub fn csrf_matches(visitor: &Visitor, given: &str) -> bool {
    !given.is_empty() && hash_token(given) == hash_token(&visitor.csrf_token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::shop::{ShopInput, create_shop};
    use crate::ports::Database;
    use crate::testing::MemoryDatabase;

    fn shop(db: &MemoryDatabase, domain: &str) -> Shop {
        db.write(|tx| {
            create_shop(
                tx,
                ShopInput {
                    shop_domain: domain.into(),
                    ..ShopInput::default()
                },
                Timestamp::from_micros(0),
            )
        })
        .unwrap()
    }

    #[test]
    fn a_session_lasts_eight_hours_from_its_last_use_and_ends_when_signed_out() {
        let db = MemoryDatabase::default();
        let shop = shop(&db, "portal.shop.test");
        let start = Timestamp::from_micros(1_000_000_000_000);
        let at = |seconds| start.plus_seconds(seconds);
        let token = db
            .write(|tx| open_session(tx, &shop, " cust-ada ", start))
            .unwrap();
        let token = token.expose().to_string();
        assert!(token.starts_with(SESSION_PREFIX));
        // Only the token's hash is stored.
        db.with_state(|state| {
            assert!(state.portal_sessions.iter().all(|(_, hash)| *hash != token));
        });
        let identifier = shop.identifier.as_str().to_string();
        let find = |now| {
            let visitor = db.read(|tx| session(tx, &identifier, &token, now)).unwrap();
            if let Some(visitor) = visitor.as_ref().filter(|visitor| visitor.stale) {
                db.write(|tx| renew(tx, visitor, now)).unwrap();
            }
            visitor
        };
        let visitor = find(at(10)).expect("a session");
        assert_eq!(visitor.shop.id, shop.id);
        assert_eq!(visitor.platform_customer_id, "cust-ada");
        assert!(csrf_matches(&visitor, &csrf_token(&token)));
        assert!(!csrf_matches(&visitor, ""));
        assert!(!csrf_matches(&visitor, &csrf_token("mps_other")));
        // Used every 7 hours, it lasts well past its first 8.
        for hours in [7, 14, 21, 28] {
            assert!(find(at(hours * 3600)).is_some(), "at {hours} h");
        }
        // Unused for 8 hours: ended.
        assert!(find(at(28 * 3600 + SESSION_LIFETIME_SECONDS)).is_none());
        // Signed out: ended at once.
        let again = db
            .write(|tx| open_session(tx, &shop, "cust-ada", start))
            .unwrap();
        let again = again.expose().to_string();
        assert!(
            db.read(|tx| session(tx, &identifier, &again, at(5)))
                .unwrap()
                .is_some()
        );
        db.write(|tx| sign_out(tx, &again)).unwrap();
        assert!(
            db.read(|tx| session(tx, &identifier, &again, at(6)))
                .unwrap()
                .is_none()
        );
        // Not a session token at all.
        for other in ["", "mps_nope", "mss_console"] {
            assert!(
                db.read(|tx| session(tx, &identifier, other, at(1)))
                    .unwrap()
                    .is_none()
            );
        }
    }

    #[test]
    fn a_session_reaches_only_its_own_shop() {
        let db = MemoryDatabase::default();
        let first = shop(&db, "first.shop.test");
        let second = shop(&db, "second.shop.test");
        let now = Timestamp::from_micros(1_000_000_000_000);
        let token = db
            .write(|tx| open_session(tx, &first, "cust-ada", now))
            .unwrap();
        let on = |shop: &Shop| {
            db.read(|tx| session(tx, shop.identifier.as_str(), token.expose(), now))
                .unwrap()
        };
        assert!(on(&first).is_some());
        assert!(on(&second).is_none());
    }

    #[test]
    fn opening_a_session_forgets_the_ended_ones_and_refuses_an_unusable_customer_id() {
        let db = MemoryDatabase::default();
        let shop = shop(&db, "portal.shop.test");
        let now = Timestamp::from_micros(1_000_000_000_000);
        db.write(|tx| open_session(tx, &shop, "cust-old", now))
            .unwrap();
        let later = now.plus_seconds(SESSION_LIFETIME_SECONDS + 1);
        db.write(|tx| open_session(tx, &shop, "cust-new", later))
            .unwrap();
        let kept: Vec<String> = db.with_state(|state| {
            state
                .portal_sessions
                .iter()
                .map(|(session, _)| session.platform_customer_id.clone())
                .collect()
        });
        assert_eq!(kept, ["cust-new"]);
        assert!(matches!(
            db.write(|tx| open_session(tx, &shop, "  ", now)),
            Err(DomainError::Invalid(_))
        ));
        assert!(matches!(
            db.write(|tx| open_session(tx, &shop, "a\0b", now)),
            Err(DomainError::BadRequest(_))
        ));
        assert!(matches!(
            db.write(|tx| open_session(tx, &shop, &"x".repeat(256), now)),
            Err(DomainError::BadRequest(_))
        ));
    }
}
