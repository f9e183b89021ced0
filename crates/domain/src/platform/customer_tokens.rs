//! A shopper proves to be a customer of the platform with a token the platform issued them;
//! Mercer asks the shop's customers connector whether it is active (Validate Customer
//! JWT). The box builder's customer routes are opened this way.

use crate::access::shop::{Shop, find_shop};
use crate::kernel::error::DomainError;
use crate::kernel::time::Timestamp;
use crate::platform::PlatformDatabase;
use crate::platform::connector::{ConnectorError, PlatformConnector};
use crate::platform::destinations::{Topic, live_target};

/// The shop, when `token` is an active token of its customer `platform_customer_id`.
///
/// 404 for no such shop; 409 `destination.missing` when the shop has no customers connector to
/// ask; 401 when the connector says the token is not active (or knows no such customer); 502
/// `connector.failed` when the connector fails, 504 `connector.timeout` when it does not answer
/// in its destination's `timeout_ms`. The call is made outside any transaction.
pub fn check_customer_token(
    db: &impl PlatformDatabase,
    connector: &dyn PlatformConnector,
    shop_identifier: &str,
    platform_customer_id: &str,
    token: &str,
    now: Timestamp,
) -> Result<Shop, DomainError> {
    let (shop, target) = db.read_tx(|tx| {
        let shop = find_shop(tx, shop_identifier)?;
        let target = live_target(tx, &shop, Topic::Customers, now)?
            .map(|(_, target)| target)
            .ok_or_else(|| DomainError::Conflict {
                code: "destination.missing",
                message: "the shop has no customers destination to check customer tokens with"
                    .to_string(),
            })?;
        Ok((shop, target))
    })?;
    match connector.validate_customer_jwt(&target, platform_customer_id, token) {
        Ok(true) => Ok(shop),
        Ok(false) | Err(ConnectorError::NotFound) => Err(DomainError::Unauthenticated),
        Err(error @ ConnectorError::Timeout(_)) => Err(error.into_domain("connector.timeout")),
        Err(error) => Err(error.into_domain("connector.failed")),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::access::shop::{ShopInput, create_shop};
    use crate::platform::destinations::DestinationSettings;
    use crate::ports::Database;
    use crate::testing::{MemoryDatabase, MemoryPlatform};

    fn now() -> Timestamp {
        Timestamp::parse_rfc3339("2030-01-02T00:00:00Z").unwrap()
    }

    fn shop(db: &MemoryDatabase, with_destination: bool) -> Shop {
        db.write(|tx| {
            let shop = create_shop(
                tx,
                ShopInput {
                    shop_domain: "tokens.shop.test".into(),
                    ..ShopInput::default()
                },
                now(),
            )?;
            if with_destination {
                tx.insert_destination(
                    shop.id,
                    &DestinationSettings {
                        topic: Topic::Customers,
                        url: "http://127.0.0.1:9".into(),
                        version: "v1".into(),
                        timeout_ms: 5000,
                    },
                    now(),
                )?;
            }
            Ok(shop)
        })
        .unwrap()
    }

    #[test]
    fn a_token_opens_its_customer_only_and_failures_are_told_apart() {
        let db = MemoryDatabase::default();
        let shop = shop(&db, true);
        let platform = MemoryPlatform::default();
        platform.state(|s| {
            s.customer_tokens
                .insert("tok-ada".into(), "cust-ada".into());
        });
        let check = |customer: &str, token: &str| {
            check_customer_token(
                &db,
                &platform,
                shop.identifier.as_str(),
                customer,
                token,
                now(),
            )
        };
        assert_eq!(check("cust-ada", "tok-ada").unwrap().id, shop.id);
        assert!(matches!(
            check("cust-bob", "tok-ada"),
            Err(DomainError::Unauthenticated)
        ));
        assert!(matches!(
            check("cust-ada", "forged"),
            Err(DomainError::Unauthenticated)
        ));
        let failing = |error: ConnectorError| {
            platform.state(|s| s.failing_token_checks = Some(error));
            check("cust-ada", "tok-ada")
        };
        assert!(matches!(
            failing(ConnectorError::NotFound),
            Err(DomainError::Unauthenticated)
        ));
        assert!(matches!(
            failing(ConnectorError::Failed { status: 500 }),
            Err(DomainError::Remote {
                code: "connector.failed",
                timed_out: false,
                ..
            })
        ));
        assert!(matches!(
            failing(ConnectorError::Timeout(Duration::from_secs(5))),
            Err(DomainError::Remote {
                code: "connector.timeout",
                timed_out: true,
                ..
            })
        ));
        assert!(matches!(
            check_customer_token(
                &db,
                &platform,
                "0123456789abcdef0123456789abcdef",
                "cust-ada",
                "tok-ada",
                now()
            ),
            Err(DomainError::NotFound { resource: "shop" })
        ));
    }

    #[test]
    fn a_shop_without_a_customers_destination_cannot_check_tokens() {
        let db = MemoryDatabase::default();
        let shop = shop(&db, false);
        let platform = MemoryPlatform::default();
        let checked = check_customer_token(
            &db,
            &platform,
            shop.identifier.as_str(),
            "cust-ada",
            "tok-ada",
            now(),
        );
        assert!(matches!(
            checked,
            Err(DomainError::Conflict {
                code: "destination.missing",
                ..
            })
        ));
        assert_eq!(platform.state(|s| s.token_checks), 0);
    }
}
