//! The storefront's token: a JWT (HS256, the `jsonwebtoken` crate) that Init Order answers
//! with, scoped to one order of one shop and good for 24 hours. It is signed with the shop's
//! `checkout_token` secret, made at its first checkout; after `mercer secret rotate --kind
//! checkout_token` tokens signed with the previous secret still verify through the rotation's
//! grace.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::access::AccessRepositories;
use crate::access::credentials::{Secret, random_hex};
use crate::access::secrets::{SecretKind, SharedSecret};
use crate::access::shop::Shop;
use crate::checkout::repository::CheckoutRepositories;
use crate::kernel::error::{DomainError, StorageError};
use crate::kernel::time::Timestamp;

/// How long a storefront token is good for.
pub(crate) const TOKEN_LIFETIME_SECONDS: i64 = 24 * 60 * 60;
/// The audience every storefront token names.
const AUDIENCE: &str = "mercer-checkout-storefront";

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    /// The order's `public_order_id`.
    sub: String,
    /// The shop's identifier.
    shop: String,
    aud: String,
    iat: i64,
    exp: i64,
}

/// The shop's token secret, made on first use. Two first checkouts at once make it one after the
/// other (a lock on PostgreSQL; SQLite has one writer): the second finds the first's.
fn token_secret(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    now: Timestamp,
) -> Result<SharedSecret, DomainError> {
    if let Some(secret) = tx.shared_secret(shop.id, SecretKind::CheckoutToken)? {
        return Ok(secret);
    }
    tx.lock_for_create(&format!("checkout_token:{}", shop.id))?;
    if let Some(secret) = tx.shared_secret(shop.id, SecretKind::CheckoutToken)? {
        return Ok(secret);
    }
    let secret = SharedSecret {
        shop_id: shop.id,
        kind: SecretKind::CheckoutToken,
        current: Secret::new(random_hex(32)),
        previous: None,
        previous_valid_until: None,
        created_at: now,
        updated_at: now,
    };
    tx.save_shared_secret(&secret)?;
    Ok(secret)
}

/// A token for the storefront of one order.
pub(crate) fn mint(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    public_order_id: &str,
    now: Timestamp,
) -> Result<String, DomainError> {
    let secret = token_secret(tx, shop, now)?;
    let seconds = now.as_micros() / 1_000_000;
    let claims = Claims {
        sub: public_order_id.to_string(),
        shop: shop.identifier.as_str().to_string(),
        aud: AUDIENCE.to_string(),
        iat: seconds,
        exp: seconds + TOKEN_LIFETIME_SECONDS,
    };
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(secret.current.expose().as_bytes()),
    )
    .map_err(|error| DomainError::Storage(StorageError::other(format!("cannot sign: {error}"))))
}

/// Whether `token` is a live storefront token of this shop's order `public_order_id`;
/// anything else (another order's, another shop's, expired, forged, not a JWT) is
/// [`DomainError::Unauthenticated`].
pub fn verify(
    tx: &mut dyn AccessRepositories,
    shop: &Shop,
    public_order_id: &str,
    token: &str,
    now: Timestamp,
) -> Result<(), DomainError> {
    let Some(secret) = tx.shared_secret(shop.id, SecretKind::CheckoutToken)? else {
        return Err(DomainError::Unauthenticated);
    };
    let mut keys = vec![&secret.current];
    if let (Some(previous), Some(until)) = (&secret.previous, secret.previous_valid_until)
        && now < until
    {
        keys.push(previous);
    }
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_audience(&[AUDIENCE]);
    validation.set_required_spec_claims(&["exp", "sub", "aud"]);
    // Expiry is checked below against Mercer's clock, not the system's.
    validation.validate_exp = false;
    let seconds = now.as_micros() / 1_000_000;
    for key in keys {
        let Ok(data) = jsonwebtoken::decode::<Claims>(
            token,
            &DecodingKey::from_secret(key.expose().as_bytes()),
            &validation,
        ) else {
            continue;
        };
        let claims = data.claims;
        if claims.sub == public_order_id
            && claims.shop == shop.identifier.as_str()
            && seconds < claims.exp
        {
            return Ok(());
        }
        return Err(DomainError::Unauthenticated);
    }
    Err(DomainError::Unauthenticated)
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
    fn a_token_opens_its_own_order_of_its_own_shop_for_a_day() {
        let db = MemoryDatabase::default();
        let (one, two) = (shop(&db, "one.shop.test"), shop(&db, "two.shop.test"));
        let now = Timestamp::from_micros(1_800_000_000_000_000);
        let token = db.write(|tx| mint(tx, &one, "order-a", now)).unwrap();
        let check = |shop: &Shop, order: &str, token: &str, at: Timestamp| {
            db.write(|tx| verify(tx, shop, order, token, at))
        };
        assert!(check(&one, "order-a", &token, now).is_ok());
        assert!(
            check(
                &one,
                "order-a",
                &token,
                now.plus_seconds(TOKEN_LIFETIME_SECONDS - 1)
            )
            .is_ok()
        );
        let refused =
            |result: Result<(), DomainError>| matches!(result, Err(DomainError::Unauthenticated));
        assert!(refused(check(
            &one,
            "order-a",
            &token,
            now.plus_seconds(TOKEN_LIFETIME_SECONDS)
        )));
        assert!(refused(check(&one, "order-b", &token, now)));
        db.write(|tx| mint(tx, &two, "x", now)).unwrap();
        assert!(
            refused(check(&two, "order-a", &token, now)),
            "another shop's key"
        );
        assert!(refused(check(&one, "order-a", "not.a.jwt", now)));
        let mut forged = token.clone();
        forged.pop();
        forged.push(if token.ends_with('A') { 'B' } else { 'A' });
        assert!(refused(check(&one, "order-a", &forged, now)));
    }
}
