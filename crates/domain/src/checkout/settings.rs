//! The shop's checkout settings as `GET`/`PATCH /checkout/shop/{shop}/settings` show and take
//! them (the same as `mercer shop update`'s checkout flags).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::kernel::money::Cents;

use crate::access::shop::{CheckoutSettings, MAX_GIFT_CARD_SKUS, ShopSettings};
use crate::checkout::input::texts;
use crate::kernel::body::{BodyObject, Check, Field, RawText, read_body};
use crate::kernel::error::DomainError;

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
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutSettingsPatch {
    /// Whether the shop sends its own abandoned-cart emails.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub abandoned_cart_emails: Field<bool>,
    /// Whether `gift_card/created` is sent for the gift-card SKUs.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub gift_cards_enabled: Field<bool>,
    /// The gift-card SKUs, the whole list: at most 100, each 1 to 255 characters (trimmed;
    /// duplicates kept once).
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>, max_items = 100)]
    pub gift_card_skus: Field<Vec<Field<RawText>>>,
    /// The flat shipping rate, in cents: 0 to 100000000.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 100_000_000)]
    pub flat_shipping_rate: Field<i64>,
    /// Every other field the body gives, in its order: each is refused.
    #[serde(flatten)]
    #[schema(ignore)]
    pub others: Map<String, Value>,
}
impl BodyObject for CheckoutSettingsPatch {}

impl CheckoutSettingsPatch {
    fn validate(self, check: &mut Check<'_>) -> Option<ShopSettings> {
        let abandoned_cart_emails =
            check.optional("abandoned_cart_emails", self.abandoned_cart_emails);
        let gift_cards_enabled = check.optional("gift_cards_enabled", self.gift_cards_enabled);
        let flat_shipping_rate = check.optional("flat_shipping_rate", self.flat_shipping_rate);
        let gift_card_skus = texts(
            check,
            "gift_card_skus",
            self.gift_card_skus,
            MAX_GIFT_CARD_SKUS,
        );
        for name in self.others.keys() {
            check.problem(name, "unknown_field", |field| {
                format!("{field} is not a checkout setting")
            });
        }
        Some(ShopSettings {
            abandoned_cart_emails,
            gift_cards_enabled,
            gift_card_skus,
            flat_shipping_rate,
            ..ShopSettings::default()
        })
    }
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
    read_body(body, CheckoutSettingsPatch::validate)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_patch_names_wrong_types_then_unknown_fields_in_body_order() {
        let body = json!({"zeta": 1, "abandoned_cart_emails": "true", "gift_cards_enabled": 1,
                          "gift_card_skus": ["a", 2, null], "flat_shipping_rate": "x",
                          "alpha": null});
        let found = match parse_settings_patch(&body) {
            Err(DomainError::Invalid(problems)) => problems
                .into_iter()
                .map(|problem| (problem.field, problem.code, problem.message))
                .collect::<Vec<_>>(),
            other => panic!("expected 422, got {other:?}"),
        };
        let fields: Vec<(&str, &str)> = found
            .iter()
            .map(|(field, code, _)| (field.as_str(), *code))
            .collect();
        assert_eq!(
            fields,
            [
                ("abandoned_cart_emails", "invalid_type"),
                ("gift_cards_enabled", "invalid_type"),
                ("flat_shipping_rate", "invalid_type"),
                ("gift_card_skus[1]", "invalid_type"),
                ("gift_card_skus[2]", "invalid_type"),
                ("zeta", "unknown_field"),
                ("alpha", "unknown_field"),
            ]
        );
        assert_eq!(found[3].2, "gift_card_skus[1] must be a string");
        assert_eq!(found[5].2, "zeta is not a checkout setting");
    }

    #[test]
    fn the_patch_reads_text_numbers_and_keeps_skus_as_written() {
        let patch = parse_settings_patch(&json!({"flat_shipping_rate": " 500 ",
                                                 "gift_card_skus": [" G1 ", ""],
                                                 "gift_cards_enabled": null}))
        .unwrap();
        assert_eq!(patch.flat_shipping_rate, Some(500));
        assert_eq!(
            patch.gift_card_skus,
            Some(vec![" G1 ".to_string(), String::new()])
        );
        assert_eq!(patch.gift_cards_enabled, None);
        assert_eq!(patch.abandoned_cart_emails, None);
    }
}
