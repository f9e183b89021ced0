//! API overrides.

use mercer_domain::access::credentials::Secret;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::overrides::{NewApiOverride, OverrideType};
use mercer_domain::ports::Database;

use crate::{at, shop};

fn overrides_are_kept_per_shop(db: &impl Database) {
    let shop = shop(db, "a.shop.test");
    let other = self::shop(db, "b.shop.test");
    let new = |shop_id: ShopId, override_type: OverrideType, seconds: i64| NewApiOverride {
        shop_id,
        override_type,
        url: format!("https://hooks.test/{seconds}"),
        shared_secret: Secret::new("override-secret"),
        created_at: at(seconds),
    };
    let (tax, shipping, tax_again) = db
        .write(|tx| {
            Ok((
                tx.insert_override(&new(shop.id, OverrideType::Tax, 1))?,
                tx.insert_override(&new(shop.id, OverrideType::Shipping, 2))?,
                tx.insert_override(&new(shop.id, OverrideType::Tax, 3))?,
            ))
        })
        .unwrap();
    db.write(|tx| Ok(tx.insert_override(&new(other.id, OverrideType::Tax, 4))?))
        .unwrap();
    assert_eq!(tax.public_id.len(), 32);
    assert_eq!((tax.created_at, tax.updated_at), (at(1), at(1)));
    let found = db
        .read(|tx| Ok(tx.override_by_public_id(shop.id, &tax.public_id)?))
        .unwrap();
    assert_eq!(found, Some(tax.clone()));
    assert!(
        db.read(|tx| Ok(tx.override_by_public_id(other.id, &tax.public_id)?))
            .unwrap()
            .is_none()
    );
    assert_eq!(
        db.read(|tx| Ok(tx.overrides_of_shop(shop.id)?))
            .unwrap()
            .iter()
            .map(|o| o.id)
            .collect::<Vec<_>>(),
        [tax.id, shipping.id, tax_again.id],
        "oldest first"
    );
    let newest = db
        .read(|tx| Ok(tx.newest_override(shop.id, OverrideType::Tax)?))
        .unwrap();
    assert_eq!(newest.map(|o| o.id), Some(tax_again.id));
    assert!(
        db.read(|tx| Ok(tx.newest_override(shop.id, OverrideType::Discount)?))
            .unwrap()
            .is_none()
    );
    let mut changed = shipping.clone();
    changed.override_type = OverrideType::Discount;
    changed.url = "https://hooks.test/changed".into();
    changed.shared_secret = Secret::new("rotated");
    changed.updated_at = at(10);
    db.write(|tx| Ok(tx.update_override(&changed)?)).unwrap();
    let updated = db
        .read(|tx| Ok(tx.override_by_public_id(shop.id, &shipping.public_id)?))
        .unwrap();
    assert_eq!(updated, Some(changed));
    db.write(|tx| Ok(tx.delete_override(tax.id)?)).unwrap();
    assert_eq!(
        db.read(|tx| Ok(tx.overrides_of_shop(shop.id)?))
            .unwrap()
            .iter()
            .map(|o| o.id)
            .collect::<Vec<_>>(),
        [shipping.id, tax_again.id]
    );
}
every_database!(overrides_are_kept_per_shop);
