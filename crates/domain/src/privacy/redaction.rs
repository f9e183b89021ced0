//! The use cases: redact a customer, redact a shop, export a customer.

use serde::Serialize;

use crate::access::shop::{Shop, find_shop};
use crate::kernel::error::DomainError;
use crate::kernel::ids::{CustomerId, ShopId};
use crate::kernel::time::Timestamp;
use crate::privacy::repository::{CellKind, PersonalRecord, PrivacyDatabase};
use crate::privacy::scrub::{Needles, erased, scrub_text};

/// What a redaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redaction {
    /// When the customer's personal data was erased (now, or by an earlier request).
    pub pii_redacted_at: Timestamp,
    /// Whether this request erased it (false: it had been erased before, and nothing changed).
    pub erased_now: bool,
    /// How many stored texts outside the customer record this request rewrote.
    pub texts_rewritten: usize,
}

/// Erases the shop's customer `customer` everywhere, in one transaction; 404 for an unknown
/// customer or another shop's. A customer redacted before is left as it is.
pub fn redact_customer(
    db: &impl PrivacyDatabase,
    shop_id: ShopId,
    customer: CustomerId,
    now: Timestamp,
) -> Result<Redaction, DomainError> {
    db.write_tx(|tx| {
        let record =
            (tx.personal_record(shop_id, customer)?).ok_or(DomainError::not_found("customer"))?;
        if let Some(at) = record.pii_redacted_at {
            return Ok(Redaction {
                pii_redacted_at: at,
                erased_now: false,
                texts_rewritten: 0,
            });
        }
        let needles = Needles::of(&record);
        let mut texts = 0;
        for mut cell in tx.cells_mentioning(
            shop_id,
            &needles.email,
            record.platform_id.as_deref(),
            &needles.strong,
        )? {
            let owned = cell.kind == CellKind::Owned;
            let scrubbed = scrub_text(&cell.text, &needles, customer, owned);
            if scrubbed != cell.text {
                cell.text = scrubbed;
                tx.rewrite_cell(&cell)?;
                texts += 1;
            }
        }
        tx.erase_customer(shop_id, &erased(&record, &needles), now)?;
        Ok(Redaction {
            pii_redacted_at: now,
            erased_now: true,
            texts_rewritten: texts,
        })
    })
}

/// Erases every customer of the shop, each in a transaction of their own (so a crash keeps the
/// ones done, and running it again finishes the rest), then sets the shop's `pii_redacted_at`
/// (kept when it was set before).
/// Answers the shop and how many customers were erased now; 404 for an unknown shop.
pub fn redact_shop(
    db: &impl PrivacyDatabase,
    shop_identifier: &str,
    now: Timestamp,
) -> Result<(Shop, usize), DomainError> {
    let (shop, customers) = db.read_tx(|tx| {
        let shop = find_shop(tx, shop_identifier)?;
        let customers = tx.shop_customer_ids(shop.id)?;
        Ok((shop, customers))
    })?;
    let mut erased = 0;
    for customer in customers {
        if redact_customer(db, shop.id, customer, now)?.erased_now {
            erased += 1;
        }
    }
    db.write_tx(|tx| Ok(tx.mark_shop_redacted(shop.id, now)?))?;
    Ok((shop, erased))
}

/// Everything Mercer holds about a customer.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CustomerExport {
    /// The customer's id.
    pub customer_id: CustomerId,
    /// When the customer's personal data was erased, if it was.
    pub pii_redacted_at: Option<Timestamp>,
    /// The stored rows about the customer, by table (`platform_customers`, `customer_addresses`,
    /// `subscriptions`, `subscription_status_logs`, `checkout_orders`, `box_selections`,
    /// `webhook_messages`…), each row an object of its columns; JSON documents inside them
    /// are included as JSON.
    #[schema(value_type = Object)]
    pub records: serde_json::Map<String, serde_json::Value>,
}

/// The export of the shop's customer `customer`; 404 for an unknown customer or another shop's.
pub fn export_customer(
    db: &impl PrivacyDatabase,
    shop_id: ShopId,
    customer: CustomerId,
) -> Result<CustomerExport, DomainError> {
    db.read_tx(|tx| {
        let record: PersonalRecord =
            (tx.personal_record(shop_id, customer)?).ok_or(DomainError::not_found("customer"))?;
        let mut records = serde_json::Map::new();
        for (table, rows) in tx.customer_rows(shop_id, &record)? {
            records.insert(table.to_string(), serde_json::Value::Array(rows));
        }
        Ok(CustomerExport {
            customer_id: customer,
            pii_redacted_at: record.pii_redacted_at,
            records,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::shop::{ShopInput, create_shop};
    use crate::ports::Database;
    use crate::subscriptions::repository::CustomerFields;
    use crate::testing::MemoryDatabase;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_micros(1_700_000_000_000_000).plus_seconds(seconds)
    }

    fn shop(db: &MemoryDatabase, domain: &str) -> Shop {
        let input = ShopInput {
            shop_domain: domain.into(),
            ..ShopInput::default()
        };
        db.write(|tx| create_shop(tx, input, at(0))).expect("shop")
    }

    fn customer(db: &MemoryDatabase, shop: &Shop) -> CustomerId {
        let fields = CustomerFields {
            email: Some("Zelda.Quark@example.com".into()),
            first_name: Some("Zelda".into()),
            last_name: Some("Quark".into()),
            phone: Some("+15550001234".into()),
            notes: Some("likes tea".into()),
        };
        db.write(|tx| Ok(tx.insert_customer(shop.id, &fields, at(1))?))
            .expect("customer")
    }

    #[test]
    fn a_customer_is_erased_once_and_only_in_their_shop() {
        let db = MemoryDatabase::default();
        let (mine, other) = (shop(&db, "a.example"), shop(&db, "b.example"));
        let id = customer(&db, &mine);
        let err = redact_customer(&db, other.id, id, at(2));
        assert!(matches!(
            err,
            Err(DomainError::NotFound {
                resource: "customer"
            })
        ));
        let first = redact_customer(&db, mine.id, id, at(2)).expect("redact");
        assert!(first.erased_now);
        let record = db
            .read(|tx| Ok(tx.personal_record(mine.id, id)?))
            .expect("read")
            .expect("customer");
        assert_eq!(record.email, format!("redacted+{}@invalid", id.0));
        assert_eq!(
            (record.first_name.as_str(), record.phone.as_str()),
            ("redacted", "redacted")
        );
        assert_eq!(record.pii_redacted_at, Some(at(2)));
        let again = redact_customer(&db, mine.id, id, at(3)).expect("again");
        assert_eq!((again.erased_now, again.pii_redacted_at), (false, at(2)));
        let export = export_customer(&db, mine.id, id).expect("export");
        assert_eq!(export.pii_redacted_at, Some(at(2)));
    }

    #[test]
    fn a_shop_is_erased_customer_by_customer() {
        let db = MemoryDatabase::default();
        let shop = shop(&db, "a.example");
        customer(&db, &shop);
        let identifier = shop.identifier.as_str();
        assert_eq!(redact_shop(&db, identifier, at(5)).expect("shop").1, 1);
        assert_eq!(redact_shop(&db, identifier, at(6)).expect("again").1, 0);
        let stored = db
            .read(|tx| Ok(tx.shop_by_id(shop.id)?))
            .expect("read")
            .expect("shop");
        assert_eq!(stored.pii_redacted_at, Some(at(5)));
    }
}
