//! Shops: created by the operator, addressed by their 32-hex identifier.

use crate::kernel::ids::ShopId;
use serde::Serialize;

use crate::access::AccessRepositories;
use crate::access::budgets::{BudgetChange, RequestBudgets};
use crate::access::credentials::{ScopeSet, Secret, TokenSource, mint_token, random_hex};
use crate::access::secrets::{SecretKind, rotate_secret};
use crate::kernel::error::{DomainError, FieldError, Problems};
use crate::kernel::money::{Cents, CurrencyCode};
use crate::kernel::time::Timestamp;

/// A shop's `shop_identifier`: 32 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct ShopIdentifier(String);

impl ShopIdentifier {
    /// The identifier in `text`, if it is exactly 32 lowercase hex characters.
    pub fn parse(text: &str) -> Option<Self> {
        let valid = text.len() == 32
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then(|| ShopIdentifier(text.to_string()))
    }

    /// A new random identifier.
    pub fn generate() -> Self {
        ShopIdentifier(random_hex(16))
    }

    /// The identifier as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A shop: the tenant that API tokens, shared secrets and every other resource belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shop {
    /// The shop's row id (the service's integer).
    pub id: ShopId,
    /// The 32-hex identifier that paths name the shop by.
    pub identifier: ShopIdentifier,
    /// The platform domain (`example.myshop.test`), lowercase; no two shops share one.
    pub shop_domain: String,
    /// The storefront's own domain, if it has one.
    pub custom_domain: Option<String>,
    /// The commerce platform the shop runs on (1..32 of a-z, 0-9 and _; `custom` by default).
    pub platform_type: String,
    /// IANA time zone (`UTC` by default), in which subscription orders are scheduled.
    pub timezone: String,
    /// ISO 4217 currency code (`USD` by default).
    pub currency: String,
    /// How amounts are shown, `${{amount}}` style, following the currency.
    pub currency_format: String,
    /// The owner's name (the shop domain when none was given).
    pub shop_owner: String,
    /// The admin's email address (`admin@` and the shop domain when none was given).
    pub admin_email: String,
    /// When the shop's personal data was redacted, if it was.
    pub pii_redacted_at: Option<Timestamp>,
    /// When the shop was created.
    pub created_at: Timestamp,
    /// When its settings last changed.
    pub updated_at: Timestamp,
    /// When the shop was deleted; a deleted shop is found by no route ([`find_shop`]).
    pub deleted_at: Option<Timestamp>,
    /// Seconds before a failed subscription order is tried again (the scheduler, issue 14).
    pub order_retry_interval_seconds: i64,
    /// How many times a failed subscription order is retried before the subscription ends.
    pub order_max_retries: i64,
    /// Days before a subscription's payment method expires that `subscription_expiring_payment`
    /// is emitted.
    pub expiring_payment_notice_days: i64,
    /// The headless checkout's settings (issue 15).
    pub checkout: CheckoutSettings,
    /// Registering a connector (Create and Update Destination) needs its verification answer to
    /// prove the secret with `X-Verification-Proof`, not only echo `X-HMAC` (off by default).
    pub require_message_signatures: bool,
    /// The shop's request budgets (rate limits); unset ones follow the server's defaults.
    pub budgets: RequestBudgets,
}

/// A shop's settings of the headless checkout (docs/checkout.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutSettings {
    /// The shop's built-in abandoned-cart emails: while on, `order/abandoned` is not sent.
    pub abandoned_cart_emails: bool,
    /// `gift_card/created` is sent for the SKUs below only while on.
    pub gift_cards_enabled: bool,
    /// The SKUs the shop marked as gift cards.
    pub gift_card_skus: Vec<String>,
    /// The one shipping line offered when no `shipping` override is registered.
    pub flat_shipping_rate: Cents,
}

impl Default for CheckoutSettings {
    /// A new shop's: its own abandoned-cart emails on, gift cards off, free flat shipping.
    fn default() -> Self {
        CheckoutSettings {
            abandoned_cart_emails: true,
            gift_cards_enabled: false,
            gift_card_skus: Vec::new(),
            flat_shipping_rate: Cents::ZERO,
        }
    }
}

/// At most this many gift-card SKUs a shop.
pub(crate) const MAX_GIFT_CARD_SKUS: usize = 100;
/// A gift-card SKU is 1 to this many characters.
pub(crate) const MAX_SKU_CHARS: usize = 255;
/// `flat_shipping_rate` is 0 to this many cents.
pub(crate) const FLAT_SHIPPING_RATE_RANGE: std::ops::RangeInclusive<i64> = 0..=100_000_000;

/// A new shop's `order_retry_interval_seconds`: a day.
pub const DEFAULT_ORDER_RETRY_INTERVAL_SECONDS: i64 = 86_400;
/// A new shop's `order_max_retries`.
pub const DEFAULT_ORDER_MAX_RETRIES: i64 = 3;
/// `order_retry_interval_seconds` is one second to thirty days.
pub(crate) const ORDER_RETRY_INTERVAL_RANGE: std::ops::RangeInclusive<i64> = 1..=30 * 86_400;
/// `order_max_retries` is 0 (the first failure ends it) to 100.
pub(crate) const ORDER_MAX_RETRIES_RANGE: std::ops::RangeInclusive<i64> = 0..=100;
/// A new shop's `expiring_payment_notice_days`.
pub const DEFAULT_EXPIRING_PAYMENT_NOTICE_DAYS: i64 = 30;
/// `expiring_payment_notice_days` is 0 (on the day it expires) to a year.
pub(crate) const EXPIRING_PAYMENT_NOTICE_DAYS_RANGE: std::ops::RangeInclusive<i64> = 0..=365;

/// What the operator gives to create a shop; everything but the domain has a default.
#[derive(Debug, Clone, Default)]
pub struct ShopInput {
    /// The platform domain, a host name such as `example.myshop.test`; required.
    pub shop_domain: String,
    /// The storefront's own domain, if it has one.
    pub custom_domain: Option<String>,
    /// The commerce platform (1..32 of a-z, 0-9 and _); `custom` when None.
    pub platform_type: Option<String>,
    /// IANA time zone name; `UTC` when None.
    pub timezone: Option<String>,
    /// ISO 4217 currency code; `USD` when None.
    pub currency: Option<String>,
    /// The owner's name; the shop domain when None.
    pub shop_owner: Option<String>,
    /// The admin's email address; `admin@` and the shop domain when None.
    pub admin_email: Option<String>,
}

/// A validated shop, ready to store.
#[derive(Debug, Clone)]
pub struct NewShop {
    /// A new random identifier.
    pub identifier: ShopIdentifier,
    /// The platform domain, lowercase.
    pub shop_domain: String,
    /// The storefront's own domain, lowercase, if it has one.
    pub custom_domain: Option<String>,
    /// The commerce platform.
    pub platform_type: String,
    /// IANA time zone name.
    pub timezone: String,
    /// ISO 4217 currency code, uppercase.
    pub currency: String,
    /// How amounts are shown, following the currency.
    pub currency_format: String,
    /// The owner's name.
    pub shop_owner: String,
    /// The admin's email address.
    pub admin_email: String,
    /// When the shop is created.
    pub created_at: Timestamp,
}

pub(crate) const DEFAULT_PLATFORM_TYPE: &str = "custom";

fn check_domain(field: &str, value: &str) -> Result<String, FieldError> {
    let value = value.trim().to_ascii_lowercase();
    let labels_ok = value.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    });
    if value.is_empty() || value.len() > 253 || !labels_ok || !value.contains('.') {
        return Err(FieldError::new(
            field,
            "invalid_domain",
            format!("{field} must be a host name such as example.myshop.test"),
        ));
    }
    Ok(value)
}

fn check_platform_type(value: &str) -> Result<String, FieldError> {
    let ok = !value.is_empty()
        && value.len() <= 32
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(value.to_string())
    } else {
        Err(FieldError::new(
            "platform_type",
            "invalid_format",
            "platform_type must be 1..32 of a-z, 0-9 and _",
        ))
    }
}

fn check_currency(value: &str) -> Result<String, FieldError> {
    match CurrencyCode::parse(value) {
        Some(code) => Ok(code.as_str().to_string()),
        None => Err(FieldError::new(
            "currency",
            "invalid_format",
            "currency must be an ISO 4217 code such as USD",
        )),
    }
}

fn check_timezone(value: &str) -> Result<String, FieldError> {
    // A zone of the IANA database (`UTC`, `America/Toronto`), which orders are scheduled in.
    match value.parse::<chrono_tz::Tz>() {
        Ok(zone) => Ok(zone.name().to_string()),
        Err(_) => Err(FieldError::new(
            "timezone",
            "invalid_format",
            "timezone must be an IANA zone name such as America/Toronto",
        )),
    }
}

fn check_email(field: &str, value: &str) -> Result<String, FieldError> {
    let value = value.trim();
    let ok = match value.split_once('@') {
        Some((local, host)) => !local.is_empty() && host.contains('.') && !value.contains(' '),
        None => false,
    };
    if ok {
        Ok(value.to_string())
    } else {
        Err(FieldError::new(
            field,
            "invalid_email",
            format!("{field} must be an email address"),
        ))
    }
}

impl ShopInput {
    /// Checks every field and fills in the defaults; every invalid field is reported at once.
    pub fn validate(self, now: Timestamp) -> Result<NewShop, DomainError> {
        let mut problems = Problems::new();
        let shop_domain = problems.check(check_domain("shop_domain", &self.shop_domain));
        let custom_domain = match &self.custom_domain {
            Some(domain) => problems
                .check(check_domain("custom_domain", domain))
                .map(Some),
            None => Some(None),
        };
        let platform_type = problems.check(check_platform_type(
            self.platform_type
                .as_deref()
                .unwrap_or(DEFAULT_PLATFORM_TYPE),
        ));
        let timezone = problems.check(check_timezone(self.timezone.as_deref().unwrap_or("UTC")));
        let currency = problems.check(check_currency(self.currency.as_deref().unwrap_or("USD")));
        let admin_email = match (&self.admin_email, &shop_domain) {
            (Some(email), _) => problems.check(check_email("admin_email", email)),
            (None, Some(domain)) => Some(format!("admin@{domain}")),
            (None, None) => None,
        };
        problems.into_result()?;
        match (
            shop_domain,
            custom_domain,
            platform_type,
            timezone,
            currency,
            admin_email,
        ) {
            (
                Some(shop_domain),
                Some(custom_domain),
                Some(platform_type),
                Some(timezone),
                Some(currency),
                Some(admin_email),
            ) => Ok(NewShop {
                identifier: ShopIdentifier::generate(),
                currency_format: currency_format(&currency),
                shop_owner: self.shop_owner.unwrap_or_else(|| shop_domain.clone()),
                shop_domain,
                custom_domain,
                platform_type,
                timezone,
                currency,
                admin_email,
                created_at: now,
            }),
            // Every None above recorded a problem, so into_result() has returned already.
            _ => Err(DomainError::invalid(
                "shop_domain",
                "invalid",
                "the shop is invalid",
            )),
        }
    }
}

/// How amounts of a currency are shown, `${{amount}}` style as platforms write it.
fn currency_format(currency: &str) -> String {
    let symbol = match currency {
        "USD" | "CAD" | "AUD" | "NZD" | "MXN" => "$",
        "EUR" => "€",
        "GBP" => "£",
        "JPY" => "¥",
        _ => return format!("{{{{amount}}}} {currency}"),
    };
    format!("{symbol}{{{{amount}}}}")
}

/// Creates a shop from the operator's input.
pub fn create_shop(
    tx: &mut dyn AccessRepositories,
    input: ShopInput,
    now: Timestamp,
) -> Result<Shop, DomainError> {
    let new_shop = input.validate(now)?;
    let taken = || DomainError::Conflict {
        code: "shop.domain_taken",
        message: format!("a shop with domain {} already exists", new_shop.shop_domain),
    };
    if tx.shop_by_domain(&new_shop.shop_domain)?.is_some() {
        return Err(taken());
    }
    // Another writer may have stored the same domain since the check: the unique index says so.
    let shop = tx.insert_shop(&new_shop).map_err(|error| {
        if error.is_unique_violation() {
            taken()
        } else {
            DomainError::from(error)
        }
    })?;
    // Every shop has a connector secret from the start, so a destination can be registered
    // at once; its creator reads it once (`connector_secret`).
    rotate_secret(tx, shop.id, SecretKind::Connector, now)?;
    Ok(shop)
}

/// What the operator may change of a shop (`mercer shop update`); `None` keeps the value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShopSettings {
    /// IANA time zone, in which subscription orders are scheduled.
    pub timezone: Option<String>,
    /// ISO 4217 currency; its display format follows.
    pub currency: Option<String>,
    /// Seconds before a failed subscription order is tried again.
    pub order_retry_interval_seconds: Option<i64>,
    /// How many times a failed subscription order is retried.
    pub order_max_retries: Option<i64>,
    /// Days before a payment method expires that the subscription's webhook says so.
    pub expiring_payment_notice_days: Option<i64>,
    /// Checkout: the shop's built-in abandoned-cart emails on or off.
    pub abandoned_cart_emails: Option<bool>,
    /// Checkout: gift cards on or off.
    pub gift_cards_enabled: Option<bool>,
    /// Checkout: the SKUs marked as gift cards (the whole list, replacing the one before).
    pub gift_card_skus: Option<Vec<String>>,
    /// Checkout: the flat shipping rate, in cents.
    pub flat_shipping_rate: Option<i64>,
    /// Connectors: a destination is registered only when its verification answer proves the
    /// secret (`X-Verification-Proof`).
    pub require_message_signatures: Option<bool>,
    /// Request budgets: per API token, connector events, storefront and checkout.
    pub budgets: BudgetChanges,
}

/// Changes of a shop's request budgets; `None` keeps one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetChanges {
    /// Per API token.
    pub per_token: Option<BudgetChange>,
    /// Connector events.
    pub connector_events: Option<BudgetChange>,
    /// Storefront and checkout routes.
    pub storefront: Option<BudgetChange>,
}

impl BudgetChanges {
    fn apply(self, budgets: &mut RequestBudgets) {
        let change = |slot: &mut Option<u32>, change: Option<BudgetChange>| {
            if let Some(change) = change {
                *slot = change.applied();
            }
        };
        change(&mut budgets.per_token, self.per_token);
        change(&mut budgets.connector_events, self.connector_events);
        change(&mut budgets.storefront, self.storefront);
    }
}

/// The gift-card SKUs, trimmed and without repeats; each a problem on `gift_card_skus[i]`.
fn check_gift_card_skus(skus: Vec<String>, problems: &mut Problems) -> Option<Vec<String>> {
    if skus.len() > MAX_GIFT_CARD_SKUS {
        problems.push(FieldError::new(
            "gift_card_skus",
            "too_many",
            format!("at most {MAX_GIFT_CARD_SKUS} gift-card SKUs"),
        ));
        return None;
    }
    let mut kept: Vec<String> = Vec::with_capacity(skus.len());
    let mut valid = true;
    for (index, sku) in skus.into_iter().enumerate() {
        let sku = sku.trim().to_string();
        let length = sku.chars().count();
        if length == 0 || length > MAX_SKU_CHARS || sku.contains('\0') {
            problems.push(FieldError::new(
                format!("gift_card_skus[{index}]"),
                "invalid_sku",
                format!("a SKU is 1 to {MAX_SKU_CHARS} characters, without NUL"),
            ));
            valid = false;
        } else if !kept.contains(&sku) {
            kept.push(sku);
        }
    }
    valid.then_some(kept)
}

fn check_range(
    field: &str,
    value: i64,
    range: std::ops::RangeInclusive<i64>,
) -> Result<i64, FieldError> {
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(FieldError::new(
            field,
            "out_of_range",
            format!(
                "{field} must be between {} and {}",
                range.start(),
                range.end()
            ),
        ))
    }
}

/// Changes a shop's settings; every invalid value is reported, and then nothing changes.
pub fn update_shop_settings(
    tx: &mut dyn AccessRepositories,
    identifier: &str,
    settings: ShopSettings,
    now: Timestamp,
) -> Result<Shop, DomainError> {
    let mut shop = find_shop(tx, identifier)?;
    let mut problems = Problems::new();
    let timezone = settings
        .timezone
        .and_then(|zone| problems.check(check_timezone(&zone)));
    let currency = settings
        .currency
        .and_then(|code| problems.check(check_currency(&code)));
    let retry_interval = settings.order_retry_interval_seconds.and_then(|seconds| {
        problems.check(check_range(
            "order_retry_interval_seconds",
            seconds,
            ORDER_RETRY_INTERVAL_RANGE,
        ))
    });
    let max_retries = settings.order_max_retries.and_then(|count| {
        problems.check(check_range(
            "order_max_retries",
            count,
            ORDER_MAX_RETRIES_RANGE,
        ))
    });
    let notice_days = settings.expiring_payment_notice_days.and_then(|days| {
        problems.check(check_range(
            "expiring_payment_notice_days",
            days,
            EXPIRING_PAYMENT_NOTICE_DAYS_RANGE,
        ))
    });
    let skus = settings
        .gift_card_skus
        .and_then(|skus| check_gift_card_skus(skus, &mut problems));
    let flat_rate = settings.flat_shipping_rate.and_then(|cents| {
        problems.check(check_range(
            "flat_shipping_rate",
            cents,
            FLAT_SHIPPING_RATE_RANGE,
        ))
    });
    problems.into_result()?;
    if let Some(on) = settings.abandoned_cart_emails {
        shop.checkout.abandoned_cart_emails = on;
    }
    if let Some(on) = settings.gift_cards_enabled {
        shop.checkout.gift_cards_enabled = on;
    }
    if let Some(skus) = skus {
        shop.checkout.gift_card_skus = skus;
    }
    if let Some(cents) = flat_rate {
        shop.checkout.flat_shipping_rate = Cents(cents);
    }
    if let Some(on) = settings.require_message_signatures {
        shop.require_message_signatures = on;
    }
    settings.budgets.apply(&mut shop.budgets);
    if let Some(days) = notice_days {
        shop.expiring_payment_notice_days = days;
    }
    if let Some(seconds) = retry_interval {
        shop.order_retry_interval_seconds = seconds;
    }
    if let Some(count) = max_retries {
        shop.order_max_retries = count;
    }
    if let Some(timezone) = timezone {
        shop.timezone = timezone;
    }
    if let Some(currency) = currency {
        shop.currency_format = currency_format(&currency);
        shop.currency = currency;
    }
    shop.updated_at = now;
    tx.update_shop_settings(&shop)?;
    Ok(shop)
}

/// The connector shared secret of a shop, to show its creator once.
pub fn connector_secret(
    tx: &mut dyn AccessRepositories,
    shop: &Shop,
) -> Result<Secret, DomainError> {
    tx.shared_secret(shop.id, SecretKind::Connector)?
        .map(|secret| secret.current)
        .ok_or_else(|| {
            DomainError::Storage(crate::StorageError::other(
                "the new shop has no connector secret",
            ))
        })
}

/// The live (not deleted) shop with this identifier, or `NotFound`. Malformed identifiers name
/// no shop, so they are `NotFound` too.
pub fn find_shop(tx: &mut dyn AccessRepositories, identifier: &str) -> Result<Shop, DomainError> {
    let identifier = ShopIdentifier::parse(identifier).ok_or(DomainError::not_found("shop"))?;
    match tx.shop_by_identifier(&identifier)? {
        Some(shop) if shop.deleted_at.is_none() => Ok(shop),
        _ => Err(DomainError::not_found("shop")),
    }
}

/// `mercer shop list`: every shop, deleted ones included.
pub fn list_shops(tx: &mut dyn AccessRepositories) -> Result<Vec<Shop>, DomainError> {
    Ok(tx.list_shops()?)
}

pub(crate) const DEMO_SHOP_DOMAIN: &str = "demo.mercer.test";

/// What the first start of an empty database prints once.
#[derive(Debug)]
pub struct DemoCredentials {
    /// The demo shop.
    pub shop: Shop,
    /// Its all-scope API token, in clear: this is the one time it is shown.
    pub token: Secret,
    /// Its connector shared secret.
    pub connector_secret: Secret,
}

/// On a database with no shop at all, creates the demo shop and an all-scope token for it, in
/// the caller's transaction. Does nothing (None) when any shop exists.
pub fn bootstrap_demo(
    tx: &mut dyn AccessRepositories,
    now: Timestamp,
) -> Result<Option<DemoCredentials>, DomainError> {
    if tx.count_shops()? > 0 {
        return Ok(None);
    }
    // Two processes starting on one new database both see no shop; the second to insert the
    // demo shop finds it taken and leaves the demo to the first.
    let shop = match create_shop(
        tx,
        ShopInput {
            shop_domain: DEMO_SHOP_DOMAIN.to_string(),
            shop_owner: Some("Demo Owner".to_string()),
            ..ShopInput::default()
        },
        now,
    ) {
        Ok(shop) => shop,
        Err(DomainError::Conflict { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    let (token, record) = mint_token(shop.id, "demo", ScopeSet::all(), TokenSource::Demo, now);
    tx.insert_token(&record)?;
    let connector_secret = connector_secret(tx, &shop)?;
    Ok(Some(DemoCredentials {
        shop,
        token,
        connector_secret,
    }))
}

/// The Shop resource, with its own spelling `shop_identifer`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ShopResource<'a> {
    /// The shop's row id (the service's integer).
    #[schema(value_type = i64)]
    pub id: ShopId,
    /// The platform domain.
    pub shop_domain: &'a str,
    /// The storefront's own domain, if it has one.
    pub custom_domain: Option<&'a str>,
    /// The 32-hex identifier, under the documented spelling.
    pub shop_identifer: &'a str,
    /// The commerce platform the shop runs on.
    pub platform_type: &'a str,
    /// IANA time zone, in which subscription orders are scheduled.
    pub timezone: &'a str,
    /// ISO 4217 currency code.
    pub currency: &'a str,
    /// How amounts are shown, `${{amount}}` style.
    pub currency_format: &'a str,
    /// The owner's name.
    pub shop_owner: &'a str,
    /// The admin's email address.
    pub admin_email: &'a str,
    /// When the shop's personal data was redacted, if it was.
    pub pii_redacted_at: Option<Timestamp>,
    /// When the shop was created.
    pub created_at: Timestamp,
    /// When its settings last changed.
    pub updated_at: Timestamp,
    /// When the shop was deleted, if it was.
    pub deleted_at: Option<Timestamp>,
}

impl<'a> From<&'a Shop> for ShopResource<'a> {
    fn from(shop: &'a Shop) -> Self {
        ShopResource {
            id: shop.id,
            shop_domain: &shop.shop_domain,
            custom_domain: shop.custom_domain.as_deref(),
            shop_identifer: shop.identifier.as_str(),
            platform_type: &shop.platform_type,
            timezone: &shop.timezone,
            currency: &shop.currency,
            currency_format: &shop.currency_format,
            shop_owner: &shop.shop_owner,
            admin_email: &shop.admin_email,
            pii_redacted_at: shop.pii_redacted_at,
            created_at: shop.created_at,
            updated_at: shop.updated_at,
            deleted_at: shop.deleted_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::Database;
    use crate::testing::MemoryDatabase;

    fn input(domain: &str) -> ShopInput {
        ShopInput {
            shop_domain: domain.to_string(),
            ..ShopInput::default()
        }
    }

    #[test]
    fn identifiers_are_32_lowercase_hex() {
        assert!(ShopIdentifier::parse("0123456789abcdef0123456789abcdef").is_some());
        assert!(ShopIdentifier::parse("0123456789ABCDEF0123456789abcdef").is_none());
        assert!(ShopIdentifier::parse("0123456789abcdef").is_none());
        assert!(ShopIdentifier::parse("g123456789abcdef0123456789abcdef").is_none());
        let generated = ShopIdentifier::generate();
        assert!(ShopIdentifier::parse(generated.as_str()).is_some());
    }

    #[test]
    fn validation_fills_defaults() {
        let shop = input("Example.MyShop.test")
            .validate(Timestamp::from_micros(5))
            .unwrap();
        assert_eq!(shop.shop_domain, "example.myshop.test");
        assert_eq!(shop.platform_type, "custom");
        assert_eq!(shop.currency, "USD");
        assert_eq!(shop.currency_format, "${{amount}}");
        assert_eq!(shop.timezone, "UTC");
        assert_eq!(shop.admin_email, "admin@example.myshop.test");
    }

    #[test]
    fn validation_reports_every_problem_with_its_field() {
        let bad = ShopInput {
            shop_domain: "not a domain".into(),
            platform_type: Some("Has Spaces".into()),
            currency: Some("usd".into()),
            admin_email: Some("nobody".into()),
            ..ShopInput::default()
        };
        let Err(DomainError::Invalid(problems)) = bad.validate(Timestamp::from_micros(0)) else {
            panic!("expected validation errors");
        };
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            ["shop_domain", "platform_type", "currency", "admin_email"]
        );
    }

    #[test]
    fn a_second_shop_with_the_same_domain_is_a_conflict() {
        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(0);
        db.write(|tx| create_shop(tx, input("a.shop.test"), now))
            .unwrap();
        let again = db.write(|tx| create_shop(tx, input("a.shop.test"), now));
        assert!(matches!(
            again,
            Err(DomainError::Conflict {
                code: "shop.domain_taken",
                ..
            })
        ));
    }

    #[test]
    fn demo_bootstrap_happens_once_on_an_empty_database() {
        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(0);
        let demo = db.write(|tx| bootstrap_demo(tx, now)).unwrap().unwrap();
        assert_eq!(demo.shop.shop_domain, DEMO_SHOP_DOMAIN);
        let tokens = db.read(|tx| Ok(tx.tokens_of_shop(demo.shop.id)?)).unwrap();
        assert_eq!(tokens.len(), 1);
        assert_eq!(tokens[0].scopes, ScopeSet::all());
        assert!(db.write(|tx| bootstrap_demo(tx, now)).unwrap().is_none());
    }

    #[test]
    fn find_shop_treats_malformed_unknown_and_deleted_as_not_found() {
        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(0);
        let shop = db
            .write(|tx| create_shop(tx, input("a.shop.test"), now))
            .unwrap();
        let found = db
            .read(|tx| find_shop(tx, shop.identifier.as_str()))
            .unwrap();
        assert_eq!(found.id, shop.id);
        for identifier in ["nope", "0123456789abcdef0123456789abcdef"] {
            let result = db.read(|tx| find_shop(tx, identifier));
            assert!(matches!(
                result,
                Err(DomainError::NotFound { resource: "shop" })
            ));
        }
        db.with_state(|state| state.shops[0].deleted_at = Some(now));
        let deleted = db.read(|tx| find_shop(tx, shop.identifier.as_str()));
        assert!(matches!(deleted, Err(DomainError::NotFound { .. })));
    }
    #[test]
    fn settings_change_only_when_every_value_is_valid() {
        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(1_700_000_000_000_000);
        let shop = db
            .write(|tx| create_shop(tx, input("settings.shop.test"), now))
            .unwrap();
        let id = shop.identifier.as_str().to_string();
        let bad = ShopSettings {
            timezone: Some("Mars/Olympus_Mons".to_string()),
            currency: Some("XYZ".to_string()),
            order_retry_interval_seconds: Some(0),
            order_max_retries: Some(101),
            expiring_payment_notice_days: Some(366),
            abandoned_cart_emails: Some(false),
            gift_cards_enabled: Some(true),
            gift_card_skus: Some(vec!["GC-1".into(), " ".into()]),
            flat_shipping_rate: Some(-1),
            require_message_signatures: Some(true),
            budgets: BudgetChanges::default(),
        };
        let Err(DomainError::Invalid(problems)) =
            db.write(|tx| update_shop_settings(tx, &id, bad, now))
        else {
            panic!("an unknown zone and currency are refused");
        };
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "timezone",
                "currency",
                "order_retry_interval_seconds",
                "order_max_retries",
                "expiring_payment_notice_days",
                "gift_card_skus[1]",
                "flat_shipping_rate"
            ]
        );
        assert_eq!(
            db.read(|tx| find_shop(tx, &id)).unwrap().checkout,
            CheckoutSettings::default(),
            "nothing changed"
        );
        let unchanged = db.read(|tx| find_shop(tx, &id)).unwrap();
        assert_eq!(
            (unchanged.timezone.as_str(), unchanged.currency.as_str()),
            ("UTC", "USD")
        );
        assert!(!unchanged.require_message_signatures, "nothing changed");
        assert_eq!(
            (
                unchanged.order_retry_interval_seconds,
                unchanged.order_max_retries
            ),
            (
                DEFAULT_ORDER_RETRY_INTERVAL_SECONDS,
                DEFAULT_ORDER_MAX_RETRIES
            )
        );

        let good = ShopSettings {
            timezone: Some("America/Toronto".to_string()),
            currency: Some("EUR".to_string()),
            order_retry_interval_seconds: Some(3_600),
            order_max_retries: Some(0),
            expiring_payment_notice_days: Some(0),
            abandoned_cart_emails: Some(false),
            gift_cards_enabled: Some(true),
            gift_card_skus: Some(vec![" GC-1 ".into(), "GC-2".into(), "GC-1".into()]),
            flat_shipping_rate: Some(599),
            require_message_signatures: Some(true),
            budgets: BudgetChanges::default(),
        };
        let later = now.plus_seconds(60);
        db.write(|tx| update_shop_settings(tx, &id, good, later))
            .unwrap();
        let changed = db.read(|tx| find_shop(tx, &id)).unwrap();
        assert_eq!(changed.timezone, "America/Toronto");
        assert_eq!(changed.currency, "EUR");
        assert_eq!(changed.currency_format, "€{{amount}}");
        assert_eq!(
            changed.checkout,
            CheckoutSettings {
                abandoned_cart_emails: false,
                gift_cards_enabled: true,
                gift_card_skus: vec!["GC-1".into(), "GC-2".into()],
                flat_shipping_rate: Cents(599),
            },
            "SKUs trimmed, each once"
        );
        assert_eq!(
            (
                changed.order_retry_interval_seconds,
                changed.order_max_retries
            ),
            (3_600, 0)
        );
        assert_eq!(changed.expiring_payment_notice_days, 0);
        assert_eq!(changed.updated_at, later);
        assert!(changed.require_message_signatures);
    }

    #[test]
    fn message_signatures_are_required_only_once_turned_on() {
        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(1_700_000_000_000_000);
        let shop = db
            .write(|tx| create_shop(tx, input("signatures.shop.test"), now))
            .unwrap();
        assert!(!shop.require_message_signatures, "off for a new shop");
        let id = shop.identifier.as_str().to_string();
        let turn = |on: bool| ShopSettings {
            require_message_signatures: Some(on),
            ..ShopSettings::default()
        };
        let on = db
            .write(|tx| update_shop_settings(tx, &id, turn(true), now))
            .unwrap();
        assert!(on.require_message_signatures);
        assert!(
            db.read(|tx| find_shop(tx, &id))
                .unwrap()
                .require_message_signatures
        );
        let kept = db
            .write(|tx| {
                update_shop_settings(
                    tx,
                    &id,
                    ShopSettings {
                        order_max_retries: Some(5),
                        ..ShopSettings::default()
                    },
                    now,
                )
            })
            .unwrap();
        assert!(
            kept.require_message_signatures,
            "another setting leaves it as it was"
        );
        let off = db
            .write(|tx| update_shop_settings(tx, &id, turn(false), now))
            .unwrap();
        assert!(!off.require_message_signatures);
    }
}
