//! Table rows and their conversion to and from domain types.

use diesel::prelude::*;
use mercer_domain::StorageError;
use mercer_domain::Timestamp;
use mercer_domain::access::budgets::{MAX_RATE_LIMIT_PER_S, RequestBudgets};
use mercer_domain::access::credentials::{ApiToken, NewApiToken, ScopeSet, Secret, TokenSource};
use mercer_domain::access::secrets::{SecretKind, SharedSecret};
use mercer_domain::access::shop::{
    CheckoutSettings, DEFAULT_EXPIRING_PAYMENT_NOTICE_DAYS, DEFAULT_ORDER_MAX_RETRIES,
    DEFAULT_ORDER_RETRY_INTERVAL_SECONDS, NewShop, Shop, ShopIdentifier,
};
use mercer_domain::kernel::ids::{ShopId, TokenId};
use mercer_domain::kernel::money::Cents;

use crate::schema::{api_tokens, shared_secrets, shop_settings, shops};

fn time(micros: i64) -> Timestamp {
    Timestamp::from_micros(micros)
}

fn corrupt(what: &str, value: &str) -> StorageError {
    StorageError::other(format!("stored {what} {value:?} is not valid"))
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = shops)]
pub struct ShopRow {
    pub id: i64,
    pub identifier: String,
    pub shop_domain: String,
    pub custom_domain: Option<String>,
    pub platform_type: String,
    pub timezone: String,
    pub currency: String,
    pub currency_format: String,
    pub shop_owner: String,
    pub admin_email: String,
    pub pii_redacted_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub deleted_at: Option<i64>,
}

/// A shop's row of `shop_settings`.
#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = shop_settings)]
pub struct ShopSettingsRow {
    pub shop_id: i64,
    pub order_retry_interval_seconds: i64,
    pub order_max_retries: i64,
    pub expiring_payment_notice_days: i64,
    pub updated_at: i64,
    pub abandoned_cart_emails: bool,
    pub gift_cards_enabled: bool,
    /// A JSON array of strings.
    pub gift_card_skus: String,
    pub flat_shipping_rate_cents: i64,
    /// Connector destinations need a verification proof (`X-Verification-Proof`).
    pub require_message_signatures: bool,
    /// Request budgets, requests per second (NULL: the server's default).
    pub rate_limit_per_s: Option<i64>,
    pub connector_events_rate_limit_per_s: Option<i64>,
    pub storefront_rate_limit_per_s: Option<i64>,
}

impl ShopSettingsRow {
    pub fn of(shop: &Shop) -> ShopSettingsRow {
        let checkout = &shop.checkout;
        ShopSettingsRow {
            shop_id: shop.id.0,
            order_retry_interval_seconds: shop.order_retry_interval_seconds,
            order_max_retries: shop.order_max_retries,
            expiring_payment_notice_days: shop.expiring_payment_notice_days,
            updated_at: shop.updated_at.as_micros(),
            abandoned_cart_emails: checkout.abandoned_cart_emails,
            gift_cards_enabled: checkout.gift_cards_enabled,
            gift_card_skus: serde_json::Value::from(checkout.gift_card_skus.clone()).to_string(),
            flat_shipping_rate_cents: checkout.flat_shipping_rate.0,
            require_message_signatures: shop.require_message_signatures,
            rate_limit_per_s: shop.budgets.per_token.map(i64::from),
            connector_events_rate_limit_per_s: shop.budgets.connector_events.map(i64::from),
            storefront_rate_limit_per_s: shop.budgets.storefront.map(i64::from),
        }
    }

    /// A new shop's settings: the defaults.
    pub fn defaults(shop_id: i64, at: i64) -> ShopSettingsRow {
        let checkout = CheckoutSettings::default();
        ShopSettingsRow {
            shop_id,
            order_retry_interval_seconds: DEFAULT_ORDER_RETRY_INTERVAL_SECONDS,
            order_max_retries: DEFAULT_ORDER_MAX_RETRIES,
            expiring_payment_notice_days: DEFAULT_EXPIRING_PAYMENT_NOTICE_DAYS,
            updated_at: at,
            abandoned_cart_emails: checkout.abandoned_cart_emails,
            gift_cards_enabled: checkout.gift_cards_enabled,
            gift_card_skus: "[]".to_string(),
            flat_shipping_rate_cents: checkout.flat_shipping_rate.0,
            require_message_signatures: false,
            rate_limit_per_s: None,
            connector_events_rate_limit_per_s: None,
            storefront_rate_limit_per_s: None,
        }
    }

    /// The stored budgets; a value out of range (written by hand) is corrupt.
    fn budgets(&self) -> Result<RequestBudgets, StorageError> {
        let rate = |value: Option<i64>| {
            value
                .map(|rate| {
                    u32::try_from(rate)
                        .ok()
                        .filter(|rate| (1..=MAX_RATE_LIMIT_PER_S).contains(rate))
                        .ok_or_else(|| corrupt("rate limit", &rate.to_string()))
                })
                .transpose()
        };
        Ok(RequestBudgets {
            per_token: rate(self.rate_limit_per_s)?,
            connector_events: rate(self.connector_events_rate_limit_per_s)?,
            storefront: rate(self.storefront_rate_limit_per_s)?,
        })
    }

    fn checkout(&self) -> Result<CheckoutSettings, StorageError> {
        let gift_card_skus: Vec<String> = serde_json::from_str(&self.gift_card_skus)
            .map_err(|_| corrupt("gift_card_skus", &self.gift_card_skus))?;
        Ok(CheckoutSettings {
            abandoned_cart_emails: self.abandoned_cart_emails,
            gift_cards_enabled: self.gift_cards_enabled,
            gift_card_skus,
            flat_shipping_rate: Cents(self.flat_shipping_rate_cents),
        })
    }
}

impl ShopRow {
    /// The shop, with its settings.
    pub fn into_shop(self, settings: ShopSettingsRow) -> Result<Shop, StorageError> {
        let row = self;
        let identifier = ShopIdentifier::parse(&row.identifier)
            .ok_or_else(|| corrupt("shop identifier", &row.identifier))?;
        Ok(Shop {
            id: ShopId(row.id),
            identifier,
            shop_domain: row.shop_domain,
            custom_domain: row.custom_domain,
            platform_type: row.platform_type,
            timezone: row.timezone,
            currency: row.currency,
            currency_format: row.currency_format,
            shop_owner: row.shop_owner,
            admin_email: row.admin_email,
            pii_redacted_at: row.pii_redacted_at.map(time),
            created_at: time(row.created_at),
            updated_at: time(row.updated_at),
            deleted_at: row.deleted_at.map(time),
            order_retry_interval_seconds: settings.order_retry_interval_seconds,
            order_max_retries: settings.order_max_retries,
            expiring_payment_notice_days: settings.expiring_payment_notice_days,
            checkout: settings.checkout()?,
            require_message_signatures: settings.require_message_signatures,
            budgets: settings.budgets()?,
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = shops)]
pub struct NewShopRow<'a> {
    pub identifier: &'a str,
    pub shop_domain: &'a str,
    pub custom_domain: Option<&'a str>,
    pub platform_type: &'a str,
    pub timezone: &'a str,
    pub currency: &'a str,
    pub currency_format: &'a str,
    pub shop_owner: &'a str,
    pub admin_email: &'a str,
    pub created_at: i64,
    pub updated_at: i64,
}

impl<'a> From<&'a NewShop> for NewShopRow<'a> {
    fn from(shop: &'a NewShop) -> Self {
        NewShopRow {
            identifier: shop.identifier.as_str(),
            shop_domain: &shop.shop_domain,
            custom_domain: shop.custom_domain.as_deref(),
            platform_type: &shop.platform_type,
            timezone: &shop.timezone,
            currency: &shop.currency,
            currency_format: &shop.currency_format,
            shop_owner: &shop.shop_owner,
            admin_email: &shop.admin_email,
            created_at: shop.created_at.as_micros(),
            updated_at: shop.created_at.as_micros(),
        }
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = api_tokens)]
pub struct TokenRow {
    pub id: i64,
    pub shop_id: i64,
    pub name: String,
    pub token_prefix: String,
    pub scopes: String,
    pub source: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
    pub last_used_at: Option<i64>,
}

impl TryFrom<TokenRow> for ApiToken {
    type Error = StorageError;

    fn try_from(row: TokenRow) -> Result<Self, StorageError> {
        Ok(ApiToken {
            id: TokenId(row.id),
            shop_id: ShopId(row.shop_id),
            name: row.name,
            token_prefix: row.token_prefix,
            scopes: ScopeSet::parse(&row.scopes).map_err(|_| corrupt("scopes", &row.scopes))?,
            source: TokenSource::parse(&row.source)
                .ok_or_else(|| corrupt("token source", &row.source))?,
            created_at: time(row.created_at),
            revoked_at: row.revoked_at.map(time),
            last_used_at: row.last_used_at.map(time),
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = api_tokens)]
pub struct NewTokenRow<'a> {
    pub shop_id: i64,
    pub name: &'a str,
    pub token_hash: &'a str,
    pub token_prefix: &'a str,
    pub scopes: String,
    pub source: &'static str,
    pub created_at: i64,
}

impl<'a> From<&'a NewApiToken> for NewTokenRow<'a> {
    fn from(token: &'a NewApiToken) -> Self {
        NewTokenRow {
            shop_id: token.shop_id.0,
            name: &token.name,
            token_hash: &token.token_hash,
            token_prefix: &token.token_prefix,
            scopes: token.scopes.to_string(),
            source: token.source.as_str(),
            created_at: token.created_at.as_micros(),
        }
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = shared_secrets)]
pub struct SecretRow {
    pub shop_id: i64,
    pub kind: String,
    pub current_secret: String,
    pub previous_secret: Option<String>,
    pub previous_valid_until: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl TryFrom<SecretRow> for SharedSecret {
    type Error = StorageError;

    fn try_from(row: SecretRow) -> Result<Self, StorageError> {
        Ok(SharedSecret {
            shop_id: ShopId(row.shop_id),
            kind: SecretKind::parse(&row.kind).ok_or_else(|| corrupt("secret kind", &row.kind))?,
            current: Secret::new(row.current_secret),
            previous: row.previous_secret.map(Secret::new),
            previous_valid_until: row.previous_valid_until.map(time),
            created_at: time(row.created_at),
            updated_at: time(row.updated_at),
        })
    }
}

#[derive(Insertable, AsChangeset)]
#[diesel(table_name = shared_secrets, treat_none_as_null = true)]
pub struct SecretValues<'a> {
    pub shop_id: i64,
    pub kind: &'static str,
    pub current_secret: &'a str,
    pub previous_secret: Option<&'a str>,
    pub previous_valid_until: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl<'a> From<&'a SharedSecret> for SecretValues<'a> {
    fn from(secret: &'a SharedSecret) -> Self {
        SecretValues {
            shop_id: secret.shop_id.0,
            kind: secret.kind.as_str(),
            current_secret: secret.current.expose(),
            previous_secret: secret.previous.as_ref().map(Secret::expose),
            previous_valid_until: secret.previous_valid_until.map(Timestamp::as_micros),
            created_at: secret.created_at.as_micros(),
            updated_at: secret.updated_at.as_micros(),
        }
    }
}
