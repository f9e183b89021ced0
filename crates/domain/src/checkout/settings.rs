//! The shop's checkout settings as `GET`/`PATCH /checkout/shop/{shop}/settings` show and take
//! them (the same as `mercer shop update`'s checkout flags).

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::kernel::money::Cents;

use crate::access::shop::{CheckoutSettings, MAX_GIFT_CARD_SKUS, ShopSettings};
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::fields::{read_body, type_error};

/// The settings as the routes show them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = CheckoutSettingsResource)]
pub struct SettingsResource {
    /// Whether the shop sends its own abandoned-cart emails; while on, no `order/abandoned`.
    pub abandoned_cart_emails: bool,
    /// Whether `gift_card/created` is sent for the gift-card SKUs.
    pub gift_cards_enabled: bool,
    /// The SKUs the shop marked as gift cards.
    pub gift_card_skus: Vec<String>,
    /// The one shipping line's price when no `shipping` override is registered.
    #[schema(value_type = i64)]
    pub flat_shipping_rate: Cents,
}

/// The body of `PATCH /checkout/shop/{shop}/settings`: the settings given change, the others
/// stay; any other field is refused (422).
#[derive(ToSchema)]
pub struct CheckoutSettingsPatch {
    /// Whether the shop sends its own abandoned-cart emails.
    pub abandoned_cart_emails: Option<bool>,
    /// Whether `gift_card/created` is sent for the gift-card SKUs.
    pub gift_cards_enabled: Option<bool>,
    /// The gift-card SKUs, the whole list: at most 100, each 1 to 255 characters (trimmed;
    /// duplicates kept once).
    #[schema(max_items = 100)]
    pub gift_card_skus: Option<Vec<String>>,
    /// The flat shipping rate, in cents: 0 to 100000000.
    #[schema(minimum = 0, maximum = 100_000_000)]
    pub flat_shipping_rate: Option<i64>,
}

/// The settings as the routes show them.
pub fn settings_resource(settings: &CheckoutSettings) -> SettingsResource {
    SettingsResource {
        abandoned_cart_emails: settings.abandoned_cart_emails,
        gift_cards_enabled: settings.gift_cards_enabled,
        gift_card_skus: settings.gift_card_skus.clone(),
        flat_shipping_rate: settings.flat_shipping_rate,
    }
}

/// `PATCH`'s body: any of `abandoned_cart_emails`, `gift_cards_enabled` (booleans),
/// `gift_card_skus` (strings; the whole list), `flat_shipping_rate` (cents). Ranges are checked
/// when they are applied (`update_shop_settings`).
pub fn parse_settings_patch(body: &Value) -> Result<ShopSettings, DomainError> {
    read_body(body, |fields| {
        let abandoned_cart_emails = fields.boolean("abandoned_cart_emails");
        let gift_cards_enabled = fields.boolean("gift_cards_enabled");
        let flat_shipping_rate = fields.integer("flat_shipping_rate");
        let gift_card_skus = fields
            .array("gift_card_skus", MAX_GIFT_CARD_SKUS)
            .map(|skus| {
                skus.iter()
                    .enumerate()
                    .filter_map(|(index, sku)| match sku {
                        Value::String(text) => Some(text.clone()),
                        _ => {
                            fields
                                .problems
                                .push(type_error(format!("gift_card_skus[{index}]"), "a string"));
                            None
                        }
                    })
                    .collect::<Vec<_>>()
            });
        let known = [
            "abandoned_cart_emails",
            "gift_cards_enabled",
            "gift_card_skus",
            "flat_shipping_rate",
        ];
        for name in fields.map.keys() {
            if !known.contains(&name.as_str()) {
                fields.problems.push(FieldError::new(
                    name.clone(),
                    "unknown_field",
                    format!("{name} is not a checkout setting"),
                ));
            }
        }
        Some(ShopSettings {
            abandoned_cart_emails,
            gift_cards_enabled,
            gift_card_skus,
            flat_shipping_rate,
            ..ShopSettings::default()
        })
    })
}
