//! Who may call a shop's route: a bearer token bound to one shop, with scopes.
//!
//! The order of the checks fixes the status a client sees: no or unknown token is 401; a valid
//! token on a path naming no shop is 404; on another shop's path, or without the route's scope, 403.

use crate::access::AccessRepositories;
use crate::access::credentials::{ApiToken, Scope, hash_token};
use crate::access::shop::{Shop, find_shop};
use crate::kernel::error::{DomainError, Forbidden};

/// A request that passed the checks: the shop of the path and the token used.
#[derive(Debug, Clone)]
pub struct Access {
    /// The shop the path names.
    pub shop: Shop,
    /// The token the request carried, bound to that shop.
    pub token: ApiToken,
}

/// Every check for a request: its bearer token (None or empty when it had none) on the shop the
/// path names, and the route's scope if it requires one. 401, 404, then 403, in that order.
pub fn authorize(
    tx: &mut dyn AccessRepositories,
    bearer: Option<&str>,
    shop_identifier: &str,
    required: Option<Scope>,
) -> Result<Access, DomainError> {
    let bearer = bearer
        .filter(|token| !token.is_empty())
        .ok_or(DomainError::Unauthenticated)?;
    let access = authorize_hashed(tx, &hash_token(bearer), shop_identifier)?;
    check_scope(&access, required)?;
    Ok(access)
}

/// The checks that need storage, for a token already hashed: 401, 404, 403 (other shop).
/// The scope is checked apart ([`check_scope`]) so a caller may keep the access for a while.
pub fn authorize_hashed(
    tx: &mut dyn AccessRepositories,
    token_hash: &str,
    shop_identifier: &str,
) -> Result<Access, DomainError> {
    let token = tx
        .active_token_by_hash(token_hash)?
        .ok_or(DomainError::Unauthenticated)?;
    let shop = find_shop(tx, shop_identifier)?;
    if token.shop_id != shop.id {
        return Err(DomainError::Forbidden(Forbidden::OtherShop));
    }
    Ok(Access { shop, token })
}

/// 403 when the access lacks the route's scope.
pub fn check_scope(access: &Access, required: Option<Scope>) -> Result<(), DomainError> {
    match required {
        Some(scope) if !access.token.scopes.contains(scope) => Err(DomainError::Forbidden(
            Forbidden::MissingScope(scope.as_str()),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::credentials::{ScopeSet, TokenSource, mint_token};
    use crate::access::shop::{ShopInput, create_shop};
    use crate::kernel::time::Timestamp;
    use crate::ports::Database;
    use crate::testing::MemoryDatabase;

    struct World {
        db: MemoryDatabase,
        shop_a: Shop,
        shop_b: Shop,
        token_a: String,
        token_a_readonly: String,
    }

    fn world() -> World {
        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(0);
        let (shop_a, shop_b, token_a, token_a_readonly) = db
            .write(|tx| {
                let shop = |domain: &str| ShopInput {
                    shop_domain: domain.into(),
                    ..ShopInput::default()
                };
                let a = create_shop(tx, shop("a.shop.test"), now)?;
                let b = create_shop(tx, shop("b.shop.test"), now)?;
                let (full, record) =
                    mint_token(a.id, "full", ScopeSet::all(), TokenSource::Cli, now);
                tx.insert_token(&record)?;
                let read_only = ScopeSet::parse("read_shop_settings").unwrap_or_default();
                let (limited, record) = mint_token(a.id, "ro", read_only, TokenSource::Cli, now);
                tx.insert_token(&record)?;
                Ok((a, b, full, limited))
            })
            .unwrap();
        World {
            db,
            shop_a,
            shop_b,
            token_a: token_a.expose().to_string(),
            token_a_readonly: token_a_readonly.expose().to_string(),
        }
    }

    fn check(
        w: &World,
        bearer: Option<&str>,
        shop: &str,
        scope: Option<Scope>,
    ) -> Result<Access, DomainError> {
        w.db.read(|tx| authorize(tx, bearer, shop, scope))
    }

    #[test]
    fn the_right_token_on_its_own_shop_with_the_scope_passes() {
        let w = world();
        let access = check(
            &w,
            Some(&w.token_a),
            w.shop_a.identifier.as_str(),
            Some(Scope::ReadSubscriptions),
        )
        .unwrap();
        assert_eq!(access.shop.id, w.shop_a.id);
    }

    #[test]
    fn missing_or_unknown_tokens_are_unauthenticated_even_on_unknown_shops() {
        let w = world();
        for bearer in [None, Some(""), Some("mct_0000")] {
            for shop in [
                w.shop_a.identifier.as_str(),
                "ffffffffffffffffffffffffffffffff",
            ] {
                assert!(matches!(
                    check(&w, bearer, shop, None),
                    Err(DomainError::Unauthenticated)
                ));
            }
        }
    }

    #[test]
    fn a_valid_token_on_an_unknown_shop_is_not_found() {
        let w = world();
        let result = check(
            &w,
            Some(&w.token_a),
            "ffffffffffffffffffffffffffffffff",
            None,
        );
        assert!(matches!(
            result,
            Err(DomainError::NotFound { resource: "shop" })
        ));
    }

    #[test]
    fn another_shops_path_or_a_missing_scope_is_forbidden() {
        let w = world();
        let other = check(&w, Some(&w.token_a), w.shop_b.identifier.as_str(), None);
        assert!(matches!(
            other,
            Err(DomainError::Forbidden(Forbidden::OtherShop))
        ));
        let scope = check(
            &w,
            Some(&w.token_a_readonly),
            w.shop_a.identifier.as_str(),
            Some(Scope::ReadSubscriptions),
        );
        assert!(matches!(
            scope,
            Err(DomainError::Forbidden(Forbidden::MissingScope(
                "read_subscriptions"
            )))
        ));
    }

    #[test]
    fn revoked_tokens_are_unauthenticated() {
        let w = world();
        let token =
            w.db.read(|tx| Ok(tx.active_token_by_hash(&hash_token(&w.token_a))?))
                .unwrap()
                .unwrap();
        w.db.write(|tx| Ok(tx.revoke_token(w.shop_a.id, token.id, Timestamp::from_micros(1))?))
            .unwrap();
        let result = check(&w, Some(&w.token_a), w.shop_a.identifier.as_str(), None);
        assert!(matches!(result, Err(DomainError::Unauthenticated)));
    }
}
