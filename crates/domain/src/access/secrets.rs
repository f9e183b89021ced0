//! Shared secrets a shop holds with a party outside Mercer: write-only, shown
//! once when set or rotated, never again.

use crate::access::AccessRepositories;
use crate::access::credentials::{Secret, random_hex};
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::ShopId;
use crate::kernel::time::Timestamp;

/// Which party a shop's shared secret is held with, and so what it signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum SecretKind {
    /// Signs Mercer's calls to the shop's platform connector (`X-HMAC`).
    Connector,
    /// Signs checkout webhooks (Configure Integration Settings).
    CheckoutIntegration,
    /// Signs the storefront tokens (JWT) of the headless checkout; made at the shop's first
    /// checkout, never shown.
    CheckoutToken,
}

impl SecretKind {
    /// Every kind of shared secret.
    pub const ALL: [SecretKind; 3] = [
        SecretKind::Connector,
        SecretKind::CheckoutIntegration,
        SecretKind::CheckoutToken,
    ];

    /// The kind as stored: `connector`, `checkout_integration` or `checkout_token`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The kind stored as `text`; None for an unknown one.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// After a rotation the previous secret still signs `X-Compatible-HMAC` for this long.
pub(crate) const ROTATION_GRACE_SECONDS: i64 = 24 * 60 * 60;

/// Bounds of a secret that a client chooses (8..255 characters).
pub(crate) const MIN_SECRET_CHARS: usize = 8;
pub(crate) const MAX_SECRET_CHARS: usize = 255;

/// A shop's shared secret of one kind, and the one a rotation replaced while its grace runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedSecret {
    /// The shop that holds the secret (the service's integer).
    pub shop_id: ShopId,
    /// Which party it is held with.
    pub kind: SecretKind,
    /// The secret in use: what Mercer signs with now.
    pub current: Secret,
    /// The secret a rotation replaced; None when the secret was never rotated or a client set it.
    pub previous: Option<Secret>,
    /// End of the grace period during which `previous` is still honoured.
    pub previous_valid_until: Option<Timestamp>,
    /// When the shop first got a secret of this kind.
    pub created_at: Timestamp,
    /// When the secret was last set or rotated.
    pub updated_at: Timestamp,
}

impl SharedSecret {
    /// The secret that a party still holding the old one would use: the previous secret while
    /// the rotation's grace period runs, the current one otherwise.
    pub fn compatible(&self, now: Timestamp) -> &Secret {
        match (&self.previous, self.previous_valid_until) {
            (Some(previous), Some(until)) if now < until => previous,
            _ => &self.current,
        }
    }
}

/// Replaces the shop's secret of `kind` with a fresh random one and returns the stored record,
/// whose `current` is shown to the caller this one time. The old secret stays valid for
/// `ROTATION_GRACE_SECONDS`.
pub fn rotate_secret(
    tx: &mut dyn AccessRepositories,
    shop_id: ShopId,
    kind: SecretKind,
    now: Timestamp,
) -> Result<SharedSecret, DomainError> {
    let fresh = Secret::new(random_hex(32));
    let existing = tx.shared_secret(shop_id, kind)?;
    let secret = SharedSecret {
        shop_id,
        kind,
        current: fresh,
        previous: existing.as_ref().map(|old| old.current.clone()),
        previous_valid_until: existing
            .as_ref()
            .map(|_| now.plus_seconds(ROTATION_GRACE_SECONDS)),
        created_at: existing.as_ref().map_or(now, |old| old.created_at),
        updated_at: now,
    };
    tx.save_shared_secret(&secret)?;
    Ok(secret)
}

/// Checks a secret chosen by a client: present, a string of 8..255 characters.
pub fn check_client_secret(field: &str, value: Option<&str>) -> Result<Secret, FieldError> {
    let Some(value) = value else {
        return Err(FieldError::required(field));
    };
    let chars = value.chars().count();
    if !(MIN_SECRET_CHARS..=MAX_SECRET_CHARS).contains(&chars) {
        return Err(FieldError::new(
            field,
            "length",
            format!("{field} must be {MIN_SECRET_CHARS} to {MAX_SECRET_CHARS} characters long"),
        ));
    }
    Ok(Secret::new(value))
}

/// Sets the shop's secret of `kind` to one the client chose. Unlike a rotation there is no grace:
/// from now on only the new secret is used.
pub fn configure_secret(
    tx: &mut dyn AccessRepositories,
    shop_id: ShopId,
    kind: SecretKind,
    value: Secret,
    now: Timestamp,
) -> Result<SharedSecret, DomainError> {
    let created_at = tx
        .shared_secret(shop_id, kind)?
        .map_or(now, |old| old.created_at);
    let secret = SharedSecret {
        shop_id,
        kind,
        current: value,
        previous: None,
        previous_valid_until: None,
        created_at,
        updated_at: now,
    };
    tx.save_shared_secret(&secret)?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::Database;
    use crate::testing::MemoryDatabase;

    #[test]
    fn rotation_keeps_the_old_secret_compatible_for_24_hours() {
        let db = MemoryDatabase::default();
        let t0 = Timestamp::from_micros(1_000_000);
        let first = db
            .write(|tx| rotate_secret(tx, ShopId(7), SecretKind::Connector, t0))
            .unwrap()
            .current;
        let stored = db
            .read(|tx| Ok(tx.shared_secret(ShopId(7), SecretKind::Connector)?))
            .unwrap()
            .unwrap();
        assert_eq!(stored.current, first);
        assert_eq!(stored.compatible(t0), &first, "no previous secret yet");

        let t1 = t0.plus_seconds(60);
        let second = db
            .write(|tx| rotate_secret(tx, ShopId(7), SecretKind::Connector, t1))
            .unwrap()
            .current;
        assert_ne!(first, second);
        let stored = db
            .read(|tx| Ok(tx.shared_secret(ShopId(7), SecretKind::Connector)?))
            .unwrap()
            .unwrap();
        assert_eq!(stored.current, second);
        assert_eq!(stored.compatible(t1), &first);
        assert_eq!(
            stored.compatible(t1.plus_seconds(ROTATION_GRACE_SECONDS - 1)),
            &first
        );
        assert_eq!(
            stored.compatible(t1.plus_seconds(ROTATION_GRACE_SECONDS)),
            &second
        );
        assert_eq!(stored.created_at, t0);
    }

    #[test]
    fn client_secrets_must_be_8_to_255_characters() {
        assert_eq!(
            check_client_secret("shared_secret", None).unwrap_err().code,
            "required"
        );
        assert_eq!(
            check_client_secret("shared_secret", Some("short"))
                .unwrap_err()
                .code,
            "length"
        );
        assert!(check_client_secret("shared_secret", Some("12345678")).is_ok());
        assert!(check_client_secret("shared_secret", Some(&"é".repeat(255))).is_ok());
        assert!(check_client_secret("shared_secret", Some(&"x".repeat(256))).is_err());
    }

    #[test]
    fn configuring_replaces_without_grace() {
        let db = MemoryDatabase::default();
        let t0 = Timestamp::from_micros(0);
        db.write(|tx| rotate_secret(tx, ShopId(1), SecretKind::CheckoutIntegration, t0))
            .unwrap();
        let chosen = Secret::new("a-chosen-secret");
        let saved = db
            .write(|tx| {
                configure_secret(
                    tx,
                    ShopId(1),
                    SecretKind::CheckoutIntegration,
                    chosen.clone(),
                    t0,
                )
            })
            .unwrap();
        assert_eq!(saved.current, chosen);
        assert_eq!(saved.compatible(t0), &chosen);
    }
}
