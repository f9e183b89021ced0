//! API overrides: an integration takes over a checkout function
//! (address validation, shipping, discounts, inventory, tax) by naming a URL that Mercer calls,
//! signed with the override's shared secret, whenever checkout needs that function.
//!
//! This module keeps the overrides (create, list, update, delete), picks the one that applies
//! to an order, and checks what the override answered. The call itself goes through the
//! [`OverrideCaller`] port: `mercer-webhooks` implements it over HTTP.

use crate::kernel::ids::ShopId;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::OverrideDatabase;
use super::OverrideRepositories;
use crate::access::credentials::Secret;
use crate::access::secrets::check_client_secret;
use crate::access::shop::Shop;
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::OverrideId;
use crate::kernel::lenient;
use crate::kernel::outbound::{AddressGuard, check_callback_url};
use crate::kernel::time::Timestamp;

/// The checkout functions an override can take over.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, ToSchema, strum::IntoStaticStr, strum::EnumString,
)]
#[strum(serialize_all = "snake_case")]
#[schema(rename_all = "snake_case")]
pub enum OverrideType {
    /// `address_validate`: accepts or refuses a billing or shipping address.
    AddressValidate,
    /// `shipping`: the shipping lines offered for the order.
    Shipping,
    /// `discount`: whether a discount code applies, and for how much.
    Discount,
    /// `inventory`: whether the order's items are available.
    Inventory,
    /// `tax`: the order's taxes.
    Tax,
}

impl OverrideType {
    /// Every type, in the documented order.
    pub const ALL: [OverrideType; 5] = [
        OverrideType::AddressValidate,
        OverrideType::Shipping,
        OverrideType::Discount,
        OverrideType::Inventory,
        OverrideType::Tax,
    ];

    /// The type's name, as bodies write it (`address_validate`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The type named `text`; None for an unknown name.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// A stored override of a shop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiOverride {
    /// The override's row id (the service's integer).
    pub id: OverrideId,
    /// The 32-hex id clients see.
    pub public_id: String,
    /// The shop the override belongs to (the service's integer).
    pub shop_id: ShopId,
    /// The checkout function it takes over.
    pub override_type: OverrideType,
    /// The URL Mercer calls: absolute http(s), checked not to lead into a private network.
    pub url: String,
    /// The secret the client chose (8 to 255 characters), which signs Mercer's calls.
    pub shared_secret: Secret,
    /// When the override was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// An override to store; the store gives it its ids.
#[derive(Debug, Clone)]
pub struct NewApiOverride {
    /// The shop the override belongs to (the service's integer).
    pub shop_id: ShopId,
    /// The checkout function it takes over.
    pub override_type: OverrideType,
    /// The URL Mercer calls, already checked.
    pub url: String,
    /// The secret the client chose, already checked.
    pub shared_secret: Secret,
    /// When it is created.
    pub created_at: Timestamp,
}

/// The body of Create API Override, as sent: every field is needed, and a missing one is a 422
/// `required` on its name.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(default)]
pub struct OverrideInput {
    /// The function's name (`shipping`).
    #[schema(value_type = OverrideType, required = true)]
    pub override_type: Option<String>,
    /// The URL Mercer calls: absolute http(s), at most 2048 characters, not into a private
    /// network.
    #[schema(value_type = String, required = true, format = "uri", max_length = 2048)]
    pub url: Option<String>,
    /// The secret that signs the calls, 8 to 255 characters.
    #[schema(value_type = String, required = true, min_length = 8, max_length = 255)]
    pub shared_secret: Option<String>,
}

/// The body of Update API Override, as sent: the fields it gives replace the stored ones.
// A body of the wrong type is told it expected an `OverrideInput`, as before this type had a
// name of its own.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(default, expecting = "struct OverrideInput")]
pub struct OverrideUpdateInput {
    /// The function's name (`shipping`).
    #[schema(value_type = Option<OverrideType>)]
    pub override_type: Option<String>,
    /// The URL Mercer calls: absolute http(s), at most 2048 characters, not into a private
    /// network.
    #[schema(format = "uri", max_length = 2048)]
    pub url: Option<String>,
    /// The secret that signs the calls, 8 to 255 characters.
    #[schema(min_length = 8, max_length = 255)]
    pub shared_secret: Option<String>,
}

impl From<OverrideUpdateInput> for OverrideInput {
    fn from(input: OverrideUpdateInput) -> Self {
        OverrideInput {
            override_type: input.override_type,
            url: input.url,
            shared_secret: input.shared_secret,
        }
    }
}

/// The fields of an override body that passed their checks; `None` where a field was absent.
#[derive(Debug, Clone, Default)]
pub struct OverrideChanges {
    /// The checkout function to take over.
    pub override_type: Option<OverrideType>,
    /// The URL Mercer calls, checked and allowed by the address guard.
    pub url: Option<String>,
    /// The secret that signs the calls.
    pub shared_secret: Option<Secret>,
}

/// Checks an override body on its own: the type, the URL (form and, through the guard, where
/// it leads) and the secret's length. Runs before any transaction, since the guard resolves
/// names. With `creating`, every field is required.
pub fn check_input(
    input: &OverrideInput,
    guard: &dyn AddressGuard,
    creating: bool,
) -> Result<OverrideChanges, Vec<FieldError>> {
    let mut problems = Vec::new();
    let mut changes = OverrideChanges::default();
    match input.override_type.as_deref() {
        None if creating => problems.push(FieldError::required("override_type")),
        None => {}
        Some(text) => match OverrideType::parse(text) {
            Some(kind) => changes.override_type = Some(kind),
            None => problems.push(FieldError::new(
                "override_type",
                "invalid_value",
                "override_type must be one of address_validate, shipping, discount, inventory, tax",
            )),
        },
    }
    match input.url.as_deref() {
        None if creating => problems.push(FieldError::required("url")),
        None => {}
        Some(url) => match check_callback_url("url", url).and_then(|url| {
            guard.check(&url).map(|()| url).map_err(|reason| {
                FieldError::new(
                    "url",
                    "address_not_allowed",
                    format!("url is not allowed: {reason}"),
                )
            })
        }) {
            Ok(url) => changes.url = Some(url),
            Err(problem) => problems.push(problem),
        },
    }
    if creating || input.shared_secret.is_some() {
        match check_client_secret("shared_secret", input.shared_secret.as_deref()) {
            Ok(secret) => changes.shared_secret = Some(secret),
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() {
        Ok(changes)
    } else {
        Err(problems)
    }
}

/// Create API Override, with the body already checked by [`check_input`].
pub fn create(
    tx: &mut dyn OverrideRepositories,
    shop: &Shop,
    changes: Result<OverrideChanges, Vec<FieldError>>,
    now: Timestamp,
) -> Result<ApiOverride, DomainError> {
    let changes = changes.map_err(DomainError::Invalid)?;
    let missing: Vec<FieldError> = [
        ("override_type", changes.override_type.is_none()),
        ("url", changes.url.is_none()),
        ("shared_secret", changes.shared_secret.is_none()),
    ]
    .into_iter()
    .filter(|(_, absent)| *absent)
    .map(|(field, _)| FieldError::required(field))
    .collect();
    let (Some(override_type), Some(url), Some(shared_secret)) =
        (changes.override_type, changes.url, changes.shared_secret)
    else {
        return Err(DomainError::Invalid(missing));
    };
    Ok(tx.insert_override(&NewApiOverride {
        shop_id: shop.id,
        override_type,
        url,
        shared_secret,
        created_at: now,
    })?)
}

/// An override of the shop by its 32-hex id, or 404.
pub fn find(
    tx: &mut dyn OverrideRepositories,
    shop: &Shop,
    public_id: &str,
) -> Result<ApiOverride, DomainError> {
    tx.override_by_public_id(shop.id, public_id)?
        .ok_or(DomainError::not_found("override"))
}

/// List API Overrides, oldest first.
pub fn list(
    tx: &mut dyn OverrideRepositories,
    shop: &Shop,
) -> Result<Vec<ApiOverride>, DomainError> {
    Ok(tx.overrides_of_shop(shop.id)?)
}

/// Update API Override: the fields present replace the stored ones (404 before 422).
pub fn update(
    tx: &mut dyn OverrideRepositories,
    shop: &Shop,
    public_id: &str,
    changes: Result<OverrideChanges, Vec<FieldError>>,
    now: Timestamp,
) -> Result<ApiOverride, DomainError> {
    let mut stored = find(tx, shop, public_id)?;
    let changes = changes.map_err(DomainError::Invalid)?;
    if let Some(kind) = changes.override_type {
        stored.override_type = kind;
    }
    if let Some(url) = changes.url {
        stored.url = url;
    }
    if let Some(secret) = changes.shared_secret {
        stored.shared_secret = secret;
    }
    stored.updated_at = now;
    tx.update_override(&stored)?;
    Ok(stored)
}

/// Delete API Override.
pub fn delete(
    tx: &mut dyn OverrideRepositories,
    shop: &Shop,
    public_id: &str,
) -> Result<(), DomainError> {
    let stored = find(tx, shop, public_id)?;
    tx.delete_override(stored.id)?;
    Ok(())
}

/// An override as clients see it: never its secret. Times as `YYYY-MM-DD HH:MM:SS`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct OverrideResource {
    /// The override's 32-hex id.
    pub id: String,
    /// The function's name (`shipping`).
    #[schema(value_type = OverrideType)]
    pub override_type: &'static str,
    /// The URL Mercer calls.
    pub url: String,
    /// When the override was created (UTC, `YYYY-MM-DD HH:MM:SS`).
    #[schema(pattern = "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}$")]
    pub created_at: String,
    /// When it last changed (UTC, `YYYY-MM-DD HH:MM:SS`).
    #[schema(pattern = "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}$")]
    pub updated_at: String,
}

/// An override as clients see it.
pub fn resource(stored: &ApiOverride) -> OverrideResource {
    OverrideResource {
        id: stored.public_id.clone(),
        override_type: stored.override_type.as_str(),
        url: stored.url.clone(),
        created_at: stored.created_at.to_date_time_seconds(),
        updated_at: stored.updated_at.to_date_time_seconds(),
    }
}

/// Where an override request goes, and the secret that signs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideTarget {
    /// The URL the request is sent to.
    pub url: String,
    /// The secret that signs it.
    pub shared_secret: Secret,
}

/// An override given in the checkout init body for one order; it wins over the shop's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderOverride {
    /// The checkout function it takes over.
    pub override_type: OverrideType,
    /// Where its requests go and what signs them.
    pub target: OverrideTarget,
}

/// What checkout asks an override.
#[derive(Debug, Clone, PartialEq)]
pub struct OverrideRequest {
    /// The checkout function asked for.
    pub override_type: OverrideType,
    /// The shop's 32-hex identifier.
    pub shop_identifier: String,
    /// The order's public id.
    pub public_order_id: String,
    /// The function's input (the address, the cart, the discount code…).
    pub data: Value,
}

impl OverrideRequest {
    /// The JSON body sent to the override.
    pub fn body(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Body<'a> {
            override_type: &'static str,
            shop_identifier: &'a str,
            public_order_id: &'a str,
            data: &'a Value,
        }
        let body = Body {
            override_type: self.override_type.as_str(),
            shop_identifier: &self.shop_identifier,
            public_order_id: &self.public_order_id,
            data: &self.data,
        };
        // Text keys and plain values: serializing cannot fail.
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

/// A problem the `address_validate` override found with an address.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AddressError {
    /// The address field to blame; checkout's 422 names this field.
    #[serde(deserialize_with = "lenient::text")]
    pub field: String,
    /// Why the field is not accepted.
    #[serde(deserialize_with = "lenient::text")]
    pub message: String,
}

/// The answer of an `address_validate` override.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AddressValidation {
    /// Whether the address is accepted.
    #[serde(deserialize_with = "lenient::boolean")]
    pub valid: bool,
    /// What is wrong when it is not; when empty, checkout blames the address as a whole.
    #[serde(default)]
    pub errors: Vec<AddressError>,
}

/// A shipping line the `shipping` override offers.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ShippingLine {
    /// The line's id.
    #[serde(deserialize_with = "lenient::text")]
    pub id: String,
    /// What the customer sees of the line.
    #[serde(deserialize_with = "lenient::text")]
    pub description: String,
    /// Minor units (cents).
    #[serde(deserialize_with = "lenient::unsigned")]
    pub amount: u64,
}

/// A tax the `tax` override sets on the order.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TaxLine {
    /// The tax's name (`VAT`).
    #[serde(deserialize_with = "lenient::text")]
    pub name: String,
    /// Minor units (cents).
    #[serde(deserialize_with = "lenient::unsigned")]
    pub amount: u64,
    /// The rate, as a fraction (0.05 is 5%); at least 0. Checkout keeps the name and amount.
    #[serde(deserialize_with = "lenient::number")]
    pub rate: f64,
    /// A label the override may add to the tax.
    #[serde(default)]
    pub tag: Option<String>,
}

/// The discount the `discount` override grants.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Discount {
    /// The code the discount is kept under; left out or empty, the code as typed.
    #[serde(default)]
    pub code: String,
    /// Minor units (cents).
    #[serde(deserialize_with = "lenient::unsigned")]
    pub amount: u64,
    /// The text shown with the discount.
    #[serde(default)]
    pub text: String,
}

/// The answer of a `discount` override.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DiscountAnswer {
    /// Whether the code applies.
    #[serde(deserialize_with = "lenient::boolean")]
    pub valid: bool,
    /// What the discount is; required when it applies.
    #[serde(default)]
    pub discount: Option<Discount>,
}

/// Whether one of the order's items is available, as the `inventory` override says.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InventoryItem {
    /// The order's line item this is about, by its key.
    #[serde(deserialize_with = "lenient::text")]
    pub line_item_key: String,
    /// Whether the item is available at all.
    #[serde(deserialize_with = "lenient::boolean")]
    pub available: bool,
    /// How many are available, if the override says; fewer than ordered makes the item short.
    #[serde(default, deserialize_with = "lenient::optional_unsigned")]
    pub quantity: Option<u64>,
}

/// An override's answer, checked against the shape of its type.
#[derive(Debug, Clone, PartialEq)]
pub enum OverrideAnswer {
    /// The answer of `address_validate`.
    AddressValidate(AddressValidation),
    /// The `shipping_lines` of a `shipping` answer: the lines to offer.
    Shipping(Vec<ShippingLine>),
    /// The `taxes` of a `tax` answer.
    Tax(Vec<TaxLine>),
    /// The answer of `discount`.
    Discount(DiscountAnswer),
    /// The `items` of an `inventory` answer.
    Inventory(Vec<InventoryItem>),
}

#[derive(Deserialize)]
struct ShippingAnswer {
    shipping_lines: Vec<ShippingLine>,
}

#[derive(Deserialize)]
struct TaxAnswer {
    taxes: Vec<TaxLine>,
}

#[derive(Deserialize)]
struct InventoryAnswer {
    items: Vec<InventoryItem>,
}

/// What is wrong with an override's answer: the field of the answer (`taxes[0].rate`), when
/// one is to blame, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrongAnswer {
    /// The answer's field to blame (`taxes[0].rate`), when one is.
    pub field: Option<String>,
    /// Why the answer is wrong.
    pub message: String,
}

impl WrongAnswer {
    fn at(field: &str, message: &str) -> Self {
        WrongAnswer {
            field: Some(field.to_string()),
            message: message.to_string(),
        }
    }
}

impl std::fmt::Display for WrongAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{field}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

fn parse_as<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, WrongAnswer> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let message = error.inner().to_string();
        // A missing field is reported at its object, with its name in the message.
        let missing = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
            .map(str::to_string);
        let field = match (path.as_str(), missing) {
            (".", None) => None,
            (".", Some(name)) => Some(name),
            (_, Some(name)) => Some(format!("{path}.{name}")),
            (_, None) => Some(path),
        };
        WrongAnswer { field, message }
    })
}

impl OverrideAnswer {
    /// Checks an answer's body against its type's shape; `Err` names the field that is wrong.
    pub fn parse(override_type: OverrideType, body: &[u8]) -> Result<OverrideAnswer, WrongAnswer> {
        let answer = match override_type {
            OverrideType::AddressValidate => OverrideAnswer::AddressValidate(parse_as(body)?),
            OverrideType::Shipping => {
                OverrideAnswer::Shipping(parse_as::<ShippingAnswer>(body)?.shipping_lines)
            }
            OverrideType::Tax => OverrideAnswer::Tax(parse_as::<TaxAnswer>(body)?.taxes),
            OverrideType::Discount => {
                let answer: DiscountAnswer = parse_as(body)?;
                if answer.valid && answer.discount.is_none() {
                    return Err(WrongAnswer::at(
                        "discount",
                        "a valid discount must say what it is",
                    ));
                }
                OverrideAnswer::Discount(answer)
            }
            OverrideType::Inventory => {
                OverrideAnswer::Inventory(parse_as::<InventoryAnswer>(body)?.items)
            }
        };
        // Amounts past what money holds (i64 minor units) are no amounts.
        let too_large = |amount: &u64| i64::try_from(*amount).is_err();
        let oversized = match &answer {
            OverrideAnswer::Shipping(lines) => lines
                .iter()
                .position(|line| too_large(&line.amount))
                .map(|index| format!("shipping_lines[{index}].amount")),
            OverrideAnswer::Tax(taxes) => taxes
                .iter()
                .position(|tax| too_large(&tax.amount))
                .map(|index| format!("taxes[{index}].amount")),
            OverrideAnswer::Discount(answer) => answer
                .discount
                .as_ref()
                .filter(|discount| too_large(&discount.amount))
                .map(|_| "discount.amount".to_string()),
            _ => None,
        };
        if let Some(field) = oversized {
            return Err(WrongAnswer::at(
                &field,
                &format!("must be an amount of at most {} minor units", i64::MAX),
            ));
        }
        if let OverrideAnswer::Tax(taxes) = &answer
            && let Some(bad) = taxes.iter().position(|tax| tax.rate < 0.0)
        {
            return Err(WrongAnswer::at(
                &format!("taxes[{bad}].rate"),
                "must be a number of at least 0",
            ));
        }
        Ok(answer)
    }
}

/// Why an override call failed; both end the checkout step with 502 `override.failed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverrideFailure {
    /// No answer within the time limit (5 s).
    TimedOut,
    /// Refused, unreachable, or a non-2xx status.
    Failed(String),
    /// An answer of the wrong shape.
    WrongAnswer(WrongAnswer),
}

impl From<OverrideFailure> for DomainError {
    fn from(failure: OverrideFailure) -> Self {
        let (field, message) = match failure {
            OverrideFailure::TimedOut => (None, "the override did not answer in time".to_string()),
            OverrideFailure::Failed(why) => (None, format!("the override failed: {why}")),
            OverrideFailure::WrongAnswer(wrong) => (
                wrong.field.clone(),
                format!("the override answered wrongly: {wrong}"),
            ),
        };
        DomainError::Remote {
            code: "override.failed",
            // A slow override is a 502 too.
            timed_out: false,
            message,
            field,
        }
    }
}

/// The port through which checkout calls an override: sends the request signed with the
/// target's secret, within the time limit, and checks the answer with
/// [`OverrideAnswer::parse`]. It blocks.
pub trait OverrideCaller: Send + Sync {
    /// Sends `request` to `target`, signed with its secret, and checks the answer's shape.
    fn call(
        &self,
        target: &OverrideTarget,
        request: &OverrideRequest,
    ) -> Result<OverrideAnswer, OverrideFailure>;
}

/// The override that applies: one given for the order wins (the last of its type); then the
/// shop's newest of the type. `None` when checkout does the function itself.
pub fn pick(
    tx: &mut dyn OverrideRepositories,
    shop_id: ShopId,
    order_overrides: &[OrderOverride],
    override_type: OverrideType,
) -> Result<Option<OverrideTarget>, DomainError> {
    if let Some(order_level) = order_overrides
        .iter()
        .rev()
        .find(|given| given.override_type == override_type)
    {
        return Ok(Some(order_level.target.clone()));
    }
    Ok(tx
        .newest_override(shop_id, override_type)?
        .map(|stored| OverrideTarget {
            url: stored.url,
            shared_secret: stored.shared_secret,
        }))
}

/// Runs a checkout function through its override, if there is one: `Ok(None)` means no
/// override applies; a failed call is [`DomainError::Remote`] `override.failed`. Blocks (a read,
/// then the call outside any transaction).
pub fn run<D: OverrideDatabase>(
    database: &D,
    caller: &dyn OverrideCaller,
    shop: &Shop,
    order_overrides: &[OrderOverride],
    public_order_id: &str,
    override_type: OverrideType,
    data: Value,
) -> Result<Option<OverrideAnswer>, DomainError> {
    let shop_id = shop.id;
    let Some(target) = database.read_tx(|tx| pick(tx, shop_id, order_overrides, override_type))?
    else {
        return Ok(None);
    };
    let request = OverrideRequest {
        override_type,
        shop_identifier: shop.identifier.as_str().to_string(),
        public_order_id: public_order_id.to_string(),
        data,
    };
    Ok(Some(caller.call(&target, &request)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_update_body_reads_and_fails_as_the_create_body_does() {
        let given = serde_json::json!({"url": "https://a.test/"});
        let input =
            OverrideInput::from(serde_json::from_value::<OverrideUpdateInput>(given).unwrap());
        assert_eq!(input.url.as_deref(), Some("https://a.test/"));
        assert_eq!((input.override_type, input.shared_secret), (None, None));
        for wrong in [
            serde_json::json!([]),
            serde_json::json!("text"),
            serde_json::json!({"url": 5}),
        ] {
            let create = serde_json::from_value::<OverrideInput>(wrong.clone());
            let update = serde_json::from_value::<OverrideUpdateInput>(wrong.clone());
            assert_eq!(
                create.map(drop).map_err(|error| error.to_string()),
                update.map(drop).map_err(|error| error.to_string()),
                "{wrong}"
            );
        }
    }

    #[test]
    fn answers_are_checked_against_their_type() {
        let shipping = br#"{"shipping_lines":[{"id":1,"description":"Ground","amount":500}]}"#;
        assert_eq!(
            OverrideAnswer::parse(OverrideType::Shipping, shipping),
            Ok(OverrideAnswer::Shipping(vec![ShippingLine {
                id: "1".to_string(),
                description: "Ground".to_string(),
                amount: 500
            }]))
        );
        let field = |kind, body: &[u8]| OverrideAnswer::parse(kind, body).unwrap_err().field;
        let wrong = br#"{"shipping_lines":[{"id":"a","description":"Ground","amount":-5}]}"#;
        assert_eq!(
            field(OverrideType::Shipping, wrong).as_deref(),
            Some("shipping_lines[0].amount")
        );
        let missing = br#"{"shipping_lines":[{"id":"a","amount":5}]}"#;
        assert_eq!(
            field(OverrideType::Shipping, missing).as_deref(),
            Some("shipping_lines[0].description")
        );
        assert_eq!(field(OverrideType::Tax, b"not json"), None);
        assert_eq!(
            field(OverrideType::Discount, br#"{"valid":true}"#).as_deref(),
            Some("discount")
        );
        assert_eq!(
            OverrideAnswer::parse(OverrideType::Discount, br#"{"valid":false}"#),
            Ok(OverrideAnswer::Discount(DiscountAnswer {
                valid: false,
                discount: None
            }))
        );
        let huge = br#"{"shipping_lines":[{"id":"a","description":"Ground","amount":9223372036854775808}]}"#;
        assert_eq!(
            OverrideAnswer::parse(OverrideType::Shipping, huge)
                .unwrap_err()
                .field
                .as_deref(),
            Some("shipping_lines[0].amount")
        );
        let taxes = br#"{"taxes":[{"name":"VAT","amount":100,"rate":-0.2}]}"#;
        assert_eq!(
            field(OverrideType::Tax, taxes).as_deref(),
            Some("taxes[0].rate")
        );
        let items = br#"{"items":[{"line_item_key":"k1","available":true,"quantity":3}]}"#;
        assert!(OverrideAnswer::parse(OverrideType::Inventory, items).is_ok());
        let address = br#"{"valid":false,"errors":[{"field":"zip","message":"unknown"}]}"#;
        assert!(OverrideAnswer::parse(OverrideType::AddressValidate, address).is_ok());
    }

    #[test]
    fn numbers_and_booleans_given_as_text_are_read() {
        // As an override server in PHP or Ruby writes them.
        let taxes = br#"{"taxes":[{"name":"GST","amount":"125","rate":"0.05"}]}"#;
        assert_eq!(
            OverrideAnswer::parse(OverrideType::Tax, taxes),
            Ok(OverrideAnswer::Tax(vec![TaxLine {
                name: "GST".to_string(),
                amount: 125,
                rate: 0.05,
                tag: None
            }]))
        );
        let discount =
            br#"{"valid":"true","discount":{"code":"TEN","amount":"1000","text":"10 off"}}"#;
        assert!(matches!(
            OverrideAnswer::parse(OverrideType::Discount, discount),
            Ok(OverrideAnswer::Discount(DiscountAnswer {
                valid: true,
                discount: Some(Discount { amount: 1000, .. })
            }))
        ));
        let items = br#"{"items":[{"line_item_key":"k1","available":"false","quantity":"0"}]}"#;
        assert_eq!(
            OverrideAnswer::parse(OverrideType::Inventory, items),
            Ok(OverrideAnswer::Inventory(vec![InventoryItem {
                line_item_key: "k1".to_string(),
                available: false,
                quantity: Some(0)
            }]))
        );
        let wrong = br#"{"taxes":[{"name":"GST","amount":"12.5","rate":"0.05"}]}"#;
        let error = DomainError::from(OverrideFailure::WrongAnswer(
            OverrideAnswer::parse(OverrideType::Tax, wrong).unwrap_err(),
        ));
        assert!(matches!(
            error,
            DomainError::Remote { code: "override.failed", field: Some(ref field), .. }
                if field == "taxes[0].amount"
        ));
    }

    struct AllowAll;

    impl AddressGuard for AllowAll {
        fn check(&self, _url: &str) -> Result<(), String> {
            Ok(())
        }
    }

    fn input(kind: Option<&str>, url: Option<&str>, secret: Option<&str>) -> OverrideInput {
        OverrideInput {
            override_type: kind.map(str::to_string),
            url: url.map(str::to_string),
            shared_secret: secret.map(str::to_string),
        }
    }

    fn fields(problems: Vec<FieldError>) -> Vec<String> {
        problems.into_iter().map(|p| p.field).collect()
    }

    #[test]
    fn input_rules() {
        let all_wrong = input(Some("refunds"), Some("ftp://x.test/"), Some("short"));
        assert_eq!(
            fields(check_input(&all_wrong, &AllowAll, true).unwrap_err()),
            ["override_type", "url", "shared_secret"]
        );
        assert_eq!(
            fields(check_input(&input(None, None, None), &AllowAll, true).unwrap_err()),
            ["override_type", "url", "shared_secret"]
        );
        // An update may name any subset; what it names must still be valid.
        assert!(check_input(&input(None, None, None), &AllowAll, false).is_ok());
        assert_eq!(
            fields(
                check_input(&input(None, Some("/relative"), None), &AllowAll, false).unwrap_err()
            ),
            ["url"]
        );
        let long = "x".repeat(256);
        assert!(check_input(&input(None, None, Some(&long)), &AllowAll, false).is_err());
        assert!(check_input(&input(None, None, Some(&long[..255])), &AllowAll, false).is_ok());
    }

    #[test]
    fn the_order_override_wins_then_the_shops_newest_of_the_type() {
        use crate::access::shop::{ShopInput, create_shop};
        use crate::ports::Database;
        use crate::testing::MemoryDatabase;

        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(0);
        let target = |url: &str| OverrideTarget {
            url: url.to_string(),
            shared_secret: Secret::new("secret-123"),
        };
        let picked = db
            .write(|tx| {
                let shop = create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "o.shop.test".into(),
                        ..ShopInput::default()
                    },
                    now,
                )?;
                let mut add = |kind: &str, url: &str| {
                    let changes = check_input(
                        &input(Some(kind), Some(url), Some("secret-123")),
                        &AllowAll,
                        true,
                    );
                    create(tx, &shop, changes, now)
                };
                add("shipping", "https://old.test/ship")?;
                add("shipping", "https://new.test/ship")?;
                add("tax", "https://tax.test/")?;
                let order = [OrderOverride {
                    override_type: OverrideType::Tax,
                    target: target("https://order.test/tax"),
                }];
                Ok((
                    pick(tx, shop.id, &order, OverrideType::Shipping)?,
                    pick(tx, shop.id, &order, OverrideType::Tax)?,
                    pick(tx, shop.id, &[], OverrideType::Tax)?,
                    pick(tx, shop.id, &order, OverrideType::Discount)?,
                ))
            })
            .unwrap();
        assert_eq!(
            picked.0.map(|t| t.url).as_deref(),
            Some("https://new.test/ship")
        );
        assert_eq!(
            picked.1.map(|t| t.url).as_deref(),
            Some("https://order.test/tax")
        );
        assert_eq!(
            picked.2.map(|t| t.url).as_deref(),
            Some("https://tax.test/")
        );
        assert_eq!(picked.3, None);
    }

    #[test]
    fn failures_are_override_failed_with_502() {
        let error = DomainError::from(OverrideFailure::TimedOut);
        assert!(matches!(
            error,
            DomainError::Remote {
                code: "override.failed",
                timed_out: false,
                ..
            }
        ));
    }
}
