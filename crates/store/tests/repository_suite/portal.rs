//! The subscriber portal: sessions by their token's hash (renewed, deleted, forgotten once
//! ended), and the shops' branding of their portal.

use mercer_domain::kernel::ids::ShopId;
use mercer_domain::portal::branding::PortalBranding;
use mercer_domain::portal::sessions::NewPortalSession;
use mercer_domain::ports::Database;

use crate::{assert_taken, at, shop};

fn new_session(shop_id: ShopId, hash: &str, customer: &str, expires: i64) -> NewPortalSession {
    NewPortalSession {
        token_hash: hash.to_string(),
        shop_id,
        platform_customer_id: customer.to_string(),
        created_at: at(0),
        expires_at: at(expires),
    }
}

fn portal_sessions_are_found_renewed_deleted_and_forgotten(db: &impl Database) {
    let shop = shop(db, "portal.shop.test");
    db.write(|tx| {
        tx.insert_portal_session(&new_session(shop.id, "hash-a", "cust-a", 100))?;
        Ok(tx.insert_portal_session(&new_session(shop.id, "hash-b", "cust-b", 50))?)
    })
    .unwrap();
    assert_taken(
        db.write(|tx| Ok(tx.insert_portal_session(&new_session(shop.id, "hash-a", "x", 1))?)),
    );
    let found = db
        .read(|tx| Ok(tx.portal_session_by_hash("hash-a")?))
        .unwrap()
        .expect("stored");
    assert_eq!(
        (found.shop_id, found.platform_customer_id.as_str()),
        (shop.id, "cust-a")
    );
    assert_eq!(
        (found.created_at, found.last_seen_at, found.expires_at),
        (at(0), at(0), at(100))
    );
    assert!(
        db.read(|tx| Ok(tx.portal_session_by_hash("hash-z")?))
            .unwrap()
            .is_none()
    );
    db.write(|tx| Ok(tx.renew_portal_session(found.id, at(60), at(160))?))
        .unwrap();
    let renewed = db
        .read(|tx| Ok(tx.portal_session_by_hash("hash-a")?))
        .unwrap()
        .unwrap();
    assert_eq!(
        (renewed.last_seen_at, renewed.expires_at),
        (at(60), at(160))
    );
    // Ended at or before now: forgotten; the other stays.
    db.write(|tx| Ok(tx.forget_portal_sessions(at(50))?))
        .unwrap();
    let (a, b) = db
        .read(|tx| {
            Ok((
                tx.portal_session_by_hash("hash-a")?,
                tx.portal_session_by_hash("hash-b")?,
            ))
        })
        .unwrap();
    assert!(a.is_some() && b.is_none());
    db.write(|tx| Ok(tx.delete_portal_session("hash-a")?))
        .unwrap();
    assert!(
        db.read(|tx| Ok(tx.portal_session_by_hash("hash-a")?))
            .unwrap()
            .is_none()
    );
}
every_database!(portal_sessions_are_found_renewed_deleted_and_forgotten);

fn portal_branding_is_kept_per_shop(db: &impl Database) {
    let first = shop(db, "a.shop.test");
    let second = shop(db, "b.shop.test");
    let none = db.read(|tx| Ok(tx.portal_branding(first.id)?)).unwrap();
    assert_eq!(none, PortalBranding::default());
    let branding = PortalBranding {
        accent: Some("#0a7".to_string()),
        logo_url: Some("https://cdn.example.com/logo.png".to_string()),
    };
    let written = db
        .write(|tx| Ok(tx.set_portal_branding(first.id, &branding, at(5))?))
        .unwrap();
    assert!(written);
    let (read, other, shop_after) = db
        .read(|tx| {
            Ok((
                tx.portal_branding(first.id)?,
                tx.portal_branding(second.id)?,
                tx.shop_by_id(first.id)?,
            ))
        })
        .unwrap();
    assert_eq!(read, branding);
    assert_eq!(other, PortalBranding::default());
    assert_eq!(shop_after.map(|s| s.updated_at), Some(at(5)));
    let cleared = PortalBranding {
        accent: None,
        ..branding
    };
    db.write(|tx| Ok(tx.set_portal_branding(first.id, &cleared, at(6))?))
        .unwrap();
    assert_eq!(
        db.read(|tx| Ok(tx.portal_branding(first.id)?)).unwrap(),
        cleared
    );
    assert!(
        !db.write(|tx| Ok(tx.set_portal_branding(ShopId(999_999), &cleared, at(7))?))
            .unwrap()
    );
}
every_database!(portal_branding_is_kept_per_shop);
