//! The bodies of Init Order and of the storefront routes, checked into typed values. Every
//! problem is a 422 naming its field by its path in the body (`cart_items[0].quantity`), all
//! at once. The storefront's bodies are the frontend library's (`lib/types`).

use std::collections::BTreeMap;

use serde_json::Value;
use utoipa::ToSchema;

use crate::checkout::state::{
    CheckoutAddress, CheckoutMetaData, MAX_LINE_ITEM_PROPERTIES_BYTES, StoredOrderOverride,
};
use crate::checkout::storefront::InventoryStage;
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::fields::{Fields, check_email, read_body, type_error};
use crate::kernel::outbound::AddressGuard;
use crate::overrides::{OverrideInput, OverrideType, check_input};
use crate::subscriptions::resources::PaymentExpiry;

/// At most this many line items in one checkout.
pub(crate) const MAX_LINE_ITEMS: usize = 250;
/// At most this many tags in an order's meta data.
pub(crate) const MAX_TAGS: usize = 250;
/// At most this many overrides given to Init Order for the one order.
pub(crate) const MAX_ORDER_OVERRIDES: usize = 10;
/// A quantity is 1 to this.
pub(crate) const MAX_QUANTITY: i64 = crate::kernel::money::MAX_QUANTITY;

/// A line of the cart, by the variant's platform id (or its SKU, from the storefront).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CartItem {
    /// The variant's platform id, integers kept as their decimal text.
    pub platform_id: Option<String>,
    /// The variant's SKU, used when there is no platform id (`addLineItem` only).
    pub sku: Option<String>,
    /// How many, from 1 to 10000.
    pub quantity: i64,
    /// The key that names the line at the storefront; a random one when absent.
    pub line_item_key: Option<String>,
    /// The line's properties (`line_item_properties` or `properties`), such as `order_rrule`.
    pub properties: BTreeMap<String, String>,
}

/// A guest customer (`addGuestCustomer`, `updateCustomer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomerInput {
    /// The customer's first name (`""` when absent).
    pub first_name: String,
    /// The customer's last name (`""` when absent).
    pub last_name: String,
    /// The customer's email, checked (`email_address`, or `email` when only that is given).
    pub email_address: String,
    /// Absent: false for a new customer, unchanged for one being updated.
    pub accepts_marketing: Option<bool>,
}

/// Init Order's body.
#[derive(Debug, Clone, PartialEq)]
pub struct InitInput {
    /// The cart's lines, at most 250.
    pub cart_items: Vec<CartItem>,
    /// The guest customer, if the body gives one.
    pub customer: Option<CustomerInput>,
    /// The order's meta data (cart parameters, note attributes, notes, tags), if given.
    pub order_meta_data: Option<CheckoutMetaData>,
    /// Overrides for this order only, checked as the shop's are.
    pub overrides: Vec<StoredOrderOverride>,
}

fn quantity(fields: &mut Fields<'_, '_>) -> Option<i64> {
    let field = fields.field("quantity");
    match fields.get("quantity") {
        None => {
            fields.problems.push(FieldError::required(field));
            None
        }
        Some(_) => {
            let quantity = fields.integer("quantity")?;
            if (1..=MAX_QUANTITY).contains(&quantity) {
                Some(quantity)
            } else {
                let message = format!("{field} must be between 1 and {MAX_QUANTITY}");
                fields
                    .problems
                    .push(FieldError::new(field, "out_of_range", message));
                None
            }
        }
    }
}

/// A variant's platform id: a string, or an integer kept as its decimal text.
fn id_text(fields: &mut Fields<'_, '_>, name: &str) -> Option<String> {
    match fields.get(name)? {
        Value::Number(number) if number.is_i64() || number.is_u64() => Some(number.to_string()),
        Value::String(_) => fields.text(name),
        _ => {
            fields
                .problems
                .push(type_error(fields.field(name), "a string or an integer"));
            None
        }
    }
}

fn cart_item(fields: &mut Fields<'_, '_>, by_sku_too: bool) -> Option<CartItem> {
    let platform_id = id_text(fields, "platform_id");
    let sku = if by_sku_too { fields.text("sku") } else { None };
    if platform_id.is_none() && sku.is_none() && !fields.problems.has(&fields.field("platform_id"))
    {
        fields
            .problems
            .push(FieldError::required(fields.field("platform_id")));
    }
    let quantity = quantity(fields);
    let line_item_key = fields.text("line_item_key");
    let properties = fields
        .text_map("line_item_properties")
        .or_else(|| fields.text_map("properties"))
        .unwrap_or_default();
    let properties_size = serde_json::to_vec(&properties).map_or(usize::MAX, |json| json.len());
    if properties_size > MAX_LINE_ITEM_PROPERTIES_BYTES {
        let name = if fields.get("line_item_properties").is_some() {
            "line_item_properties"
        } else {
            "properties"
        };
        let field = fields.field(name);
        let message = format!(
            "{field} holds {properties_size} bytes of JSON, over its limit of \
             {MAX_LINE_ITEM_PROPERTIES_BYTES} (16 KiB)"
        );
        fields
            .problems
            .push(FieldError::new(field, "too_large", message));
        return None;
    }
    Some(CartItem {
        platform_id,
        sku,
        quantity: quantity?,
        line_item_key,
        properties,
    })
}

fn customer(fields: &mut Fields<'_, '_>) -> Option<CustomerInput> {
    let first_name = fields.text("first_name").unwrap_or_default();
    let last_name = fields.text("last_name").unwrap_or_default();
    // The library sends `email_address`; its type names it `email`.
    let name = if fields.get("email_address").is_some() || fields.get("email").is_none() {
        "email_address"
    } else {
        "email"
    };
    let email = fields.required_text(name);
    if let Some(email) = &email
        && let Err(problem) = check_email(fields.field(name), email)
    {
        fields.problems.push(problem);
    }
    let accepts_marketing = fields.boolean("accepts_marketing");
    Some(CustomerInput {
        first_name,
        last_name,
        email_address: email?,
        accepts_marketing,
    })
}

fn meta_data(fields: &mut Fields<'_, '_>) -> CheckoutMetaData {
    let tags = match fields.array("tags", MAX_TAGS) {
        Some(tags) => tags
            .iter()
            .enumerate()
            .filter_map(|(index, tag)| match tag {
                Value::String(text) => Some(text.clone()),
                _ => {
                    fields.problems.push(type_error(
                        format!("{}[{index}]", fields.field("tags")),
                        "a string",
                    ));
                    None
                }
            })
            .collect(),
        None => Vec::new(),
    };
    CheckoutMetaData {
        cart_parameters: fields.text_map("cart_parameters").unwrap_or_default(),
        note_attributes: fields.text_map("note_attributes").unwrap_or_default(),
        notes: fields.text("notes").unwrap_or_default(),
        tags,
    }
}

/// Init Order's body as a client writes it.
#[derive(ToSchema)]
pub struct CheckoutInitRequest {
    /// The cart's lines: at most 250; lines of one `line_item_key` are one line.
    #[schema(max_items = 250)]
    pub cart_items: Vec<CheckoutCartItemFields>,
    /// The guest customer, if known already.
    pub customer: Option<CheckoutCustomerFields>,
    /// The order's meta data.
    pub order_meta_data: Option<CheckoutMetaDataFields>,
    /// Overrides for this order only (at most 10), checked as the shop's are; they win over the
    /// shop's.
    #[schema(max_items = 10)]
    pub overrides: Option<Vec<CheckoutOrderOverrideFields>>,
}

/// A line of Init Order's cart.
#[derive(ToSchema)]
pub struct CheckoutCartItemFields {
    /// The variant's platform id (an integer is taken as its decimal text).
    #[schema(example = "2001")]
    pub platform_id: String,
    /// How many, from 1 to 10000.
    #[schema(example = 1, minimum = 1, maximum = 10_000)]
    pub quantity: i64,
    /// The key that names the line at the storefront; a random one when absent.
    pub line_item_key: Option<String>,
    /// The line's properties, name to text (numbers and booleans are taken as their text), at
    /// most 16 KiB written as JSON: a subscription plan's `order_rrule` and
    /// `subscription_group_id` among them.
    pub line_item_properties: Option<BTreeMap<String, String>>,
}

/// A guest customer as a client writes it (`addGuestCustomer`, `updateCustomer`, Init Order's
/// `customer`).
#[derive(ToSchema)]
pub struct CheckoutCustomerFields {
    /// The customer's first name.
    pub first_name: Option<String>,
    /// The customer's last name.
    pub last_name: Option<String>,
    /// The customer's email address (`email` is read when only it is given).
    pub email_address: String,
    /// Whether the customer accepts marketing: false for a new customer when absent, unchanged
    /// for one being updated.
    pub accepts_marketing: Option<bool>,
}

/// Order meta data as a client writes it (Init Order's `order_meta_data`,
/// `patchOrderMetaData`): a field absent or null keeps the order's.
#[derive(ToSchema)]
pub struct CheckoutMetaDataFields {
    /// The cart's parameters, name to text: the whole map.
    pub cart_parameters: Option<BTreeMap<String, String>>,
    /// The order's note attributes, name to text: the whole map.
    pub note_attributes: Option<BTreeMap<String, String>>,
    /// The order's notes.
    pub notes: Option<String>,
    /// The order's tags: the whole list, at most 250.
    #[schema(max_items = 250)]
    pub tags: Option<Vec<String>>,
}

/// An override for one order, given to Init Order: every field is needed, checked as Create API
/// Override checks them.
#[derive(ToSchema)]
pub struct CheckoutOrderOverrideFields {
    /// The checkout function the override takes over.
    pub override_type: OverrideType,
    /// The URL Mercer calls: absolute http(s), at most 2048 characters, not into a private
    /// network.
    #[schema(format = "uri", max_length = 2048)]
    pub url: String,
    /// The secret that signs Mercer's calls, 8 to 255 characters.
    #[schema(min_length = 8, max_length = 255)]
    pub shared_secret: String,
}

/// Reads Init Order's body: `{"cart_items": [{"platform_id", "quantity", "line_item_key",
/// "line_item_properties"?}], "customer"?, "order_meta_data"?, "overrides"?: [{"override_type",
/// "url", "shared_secret"}]}`. Overrides given here are checked as the shop's are, with `guard`.
pub fn parse_init(body: &Value, guard: &dyn AddressGuard) -> Result<InitInput, DomainError> {
    read_body(body, |fields| {
        let mut cart_items = Vec::new();
        match fields.get("cart_items") {
            None => fields
                .problems
                .push(FieldError::required(fields.field("cart_items"))),
            Some(_) => {
                let items = fields
                    .array("cart_items", MAX_LINE_ITEMS)
                    .unwrap_or_default();
                for (index, item) in items.iter().enumerate() {
                    if let Some(mut item_fields) = fields.element("cart_items", index, item)
                        && let Some(item) = cart_item(&mut item_fields, false)
                    {
                        cart_items.push(item);
                    }
                }
            }
        }
        let customer = fields.object("customer").and_then(|mut c| customer(&mut c));
        let order_meta_data = fields
            .object("order_meta_data")
            .map(|mut m| meta_data(&mut m));
        let mut overrides = Vec::new();
        let given = fields
            .array("overrides", MAX_ORDER_OVERRIDES)
            .unwrap_or_default();
        for (index, entry) in given.iter().enumerate() {
            let Some(entry_fields) = fields.element("overrides", index, entry) else {
                continue;
            };
            let text = |name: &str| entry_fields.map.get(name).and_then(Value::as_str);
            let input = OverrideInput {
                override_type: text("override_type").map(str::to_string),
                url: text("url").map(str::to_string),
                shared_secret: text("shared_secret").map(str::to_string),
            };
            match check_input(&input, guard, true) {
                Ok(checked) => overrides.push(StoredOrderOverride {
                    override_type: checked
                        .override_type
                        .map(|kind| kind.as_str().to_string())
                        .unwrap_or_default(),
                    url: checked.url.unwrap_or_default(),
                    shared_secret: checked
                        .shared_secret
                        .map(|secret| secret.expose().to_string())
                        .unwrap_or_default(),
                }),
                Err(problems) => {
                    for problem in problems {
                        fields.problems.push(FieldError {
                            field: format!("overrides[{index}].{}", problem.field),
                            ..problem
                        });
                    }
                }
            }
        }
        Some(InitInput {
            cart_items,
            customer,
            order_meta_data,
            overrides,
        })
    })
}

/// `addGuestCustomer` / `updateCustomer`.
pub fn parse_customer(body: &Value) -> Result<CustomerInput, DomainError> {
    read_body(body, customer)
}

/// The fields of an address (`IAddress`), as [`parse_address`] reads them (`validateAddress`
/// sends them as query parameters).
pub const ADDRESS_FIELDS: [&str; 12] = [
    "first_name",
    "last_name",
    "address_line_1",
    "address_line_2",
    "city",
    "postal_code",
    "province",
    "province_code",
    "country",
    "country_code",
    "business_name",
    "phone_number",
];

/// An address as a client writes it (`IAddress`): `address_line_1`, `city` and `country_code`
/// are needed; the rest may be empty.
#[derive(ToSchema)]
pub struct CheckoutAddressFields {
    /// The first name on the address.
    pub first_name: Option<String>,
    /// The last name on the address.
    pub last_name: Option<String>,
    /// The first street line.
    pub address_line_1: String,
    /// The second street line.
    pub address_line_2: Option<String>,
    /// The city.
    pub city: String,
    /// The postal code.
    pub postal_code: Option<String>,
    /// The province or state, by name.
    pub province: Option<String>,
    /// The province or state, by code.
    pub province_code: Option<String>,
    /// The country, by name.
    pub country: Option<String>,
    /// The country's ISO 3166-1 alpha-2 code (kept upper case).
    #[schema(pattern = "^[A-Za-z]{2}$")]
    pub country_code: String,
    /// The company on the address.
    pub business_name: Option<String>,
    /// The phone number on the address.
    pub phone_number: Option<String>,
}

/// An address (`IAddress`): `address_line_1`, `city` and `country_code` (two letters) are
/// needed; the rest may be empty.
pub fn parse_address(body: &Value) -> Result<CheckoutAddress, DomainError> {
    read_body(body, |fields| {
        let mut text = |name: &str| fields.text(name).unwrap_or_default();
        let mut address = CheckoutAddress {
            first_name: text("first_name"),
            last_name: text("last_name"),
            address_line_1: String::new(),
            address_line_2: text("address_line_2"),
            country: text("country"),
            city: String::new(),
            province: text("province"),
            country_code: String::new(),
            province_code: text("province_code"),
            postal_code: text("postal_code"),
            business_name: text("business_name"),
            phone_number: text("phone_number"),
        };
        address.address_line_1 = fields.required_text("address_line_1").unwrap_or_default();
        address.city = fields.required_text("city").unwrap_or_default();
        if let Some(code) = fields.required_text("country_code") {
            if code.len() == 2 && code.bytes().all(|b| b.is_ascii_alphabetic()) {
                address.country_code = code.to_ascii_uppercase();
            } else {
                fields.problems.push(FieldError::new(
                    fields.field("country_code"),
                    "invalid_country_code",
                    "country_code must be an ISO 3166-1 alpha-2 code such as US",
                ));
            }
        }
        Some(address)
    })
}

/// The body of `deleteGiftCardPayment`.
#[derive(ToSchema)]
pub struct CheckoutPaymentIdFields {
    /// The payment's id.
    pub id: String,
}

/// `deleteGiftCardPayment`: `{"id"}`, the payment's.
pub fn parse_payment_id(body: &Value) -> Result<String, DomainError> {
    match body.get("id") {
        Some(Value::String(id)) if !id.trim().is_empty() => Ok(id.trim().to_string()),
        _ => Err(DomainError::invalid("id", "required", "id is required")),
    }
}

/// `checkInventory`'s `stage`: `initial` (the default) or `final`.
pub fn parse_inventory_stage(given: Option<&str>) -> Result<InventoryStage, DomainError> {
    InventoryStage::parse(given.unwrap_or("initial")).ok_or_else(|| {
        DomainError::invalid("stage", "invalid_value", "stage must be initial or final")
    })
}

/// The body of `addLineItem`: the variant by its `platform_id`, or by its `sku` when the shop
/// has one variant with it.
#[derive(ToSchema)]
pub struct CheckoutLineItemFields {
    /// The variant's platform id (an integer is taken as its decimal text).
    pub platform_id: Option<String>,
    /// The variant's SKU, read when there is no `platform_id`.
    pub sku: Option<String>,
    /// How many, from 1 to 10000; added to the line's when its key is taken.
    #[schema(minimum = 1, maximum = 10_000)]
    pub quantity: i64,
    /// The key that names the line at the storefront; a random one when absent.
    pub line_item_key: Option<String>,
    /// The line's properties, name to text, at most 16 KiB written as JSON.
    pub line_item_properties: Option<BTreeMap<String, String>>,
}

/// The body of `updateLineItemQuantity`.
#[derive(ToSchema)]
pub struct CheckoutLineItemQuantityFields {
    /// The line's key.
    pub line_item_key: String,
    /// The line's new quantity, from 1 to 10000.
    #[schema(minimum = 1, maximum = 10_000)]
    pub quantity: i64,
}

/// The body of `deleteLineItem`.
#[derive(ToSchema)]
pub struct CheckoutLineItemKeyFields {
    /// The line's key.
    pub line_item_key: String,
}

/// `addLineItem`: `{"platform_id" | "sku", "quantity", "line_item_key"}`.
pub fn parse_add_line_item(body: &Value) -> Result<CartItem, DomainError> {
    read_body(body, |fields| cart_item(fields, true))
}

/// `updateLineItemQuantity`: `{"line_item_key", "quantity"}`.
pub fn parse_line_item_quantity(body: &Value) -> Result<(String, i64), DomainError> {
    read_body(body, |fields| {
        let key = fields.required_text("line_item_key");
        let quantity = quantity(fields);
        Some((key?, quantity?))
    })
}

/// `deleteLineItem`: `{"line_item_key"}`.
pub fn parse_line_item_key(body: &Value) -> Result<String, DomainError> {
    read_body(body, |fields| fields.required_text("line_item_key"))
}

/// The body of `changeShippingLine`.
#[derive(ToSchema)]
pub struct CheckoutShippingLineChoice {
    /// The shipping line offered: its id, or its position among those offered (from 0).
    #[schema(schema_with = id_or_position)]
    pub index: String,
}

fn id_or_position() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::String))
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
        )
        .description(Some(
            "The shipping line offered: its id, or its position among those offered (from 0).",
        ))
        .into()
}

/// `changeShippingLine`: `{"index"}`, a string or a number: the line's id or position.
pub fn parse_shipping_line_choice(body: &Value) -> Result<String, DomainError> {
    read_body(body, |fields| match fields.get("index") {
        None => {
            fields
                .problems
                .push(FieldError::required(fields.field("index")));
            None
        }
        Some(_) => id_text(fields, "index"),
    })
}

/// The body of `addDiscount` and `deleteDiscount`.
#[derive(ToSchema)]
pub struct CheckoutDiscountCodeFields {
    /// The discount code, up to 255 characters (trimmed). To add one, no invisible character.
    #[schema(min_length = 1, max_length = 255)]
    pub code: String,
}

/// `addDiscount` / `validateDiscount`: `{"code"}`, trimmed. A code holding an invisible
/// character is refused: it would look like another code, and could be taken for it.
pub fn parse_discount_code(body: &Value) -> Result<String, DomainError> {
    read_code(body, true)
}

/// `deleteDiscount`: `{"code"}`, trimmed: a code applied already, whatever it holds (one
/// applied before invisible characters were refused can still be taken off).
pub fn parse_applied_discount_code(body: &Value) -> Result<String, DomainError> {
    read_code(body, false)
}

fn read_code(body: &Value, refuse_invisible: bool) -> Result<String, DomainError> {
    read_body(body, |fields| {
        let code = fields.required_text("code")?;
        if code.chars().count() > 255 {
            fields.problems.push(FieldError::new(
                "code",
                "length",
                "code must be at most 255 characters",
            ));
        } else if refuse_invisible
            && let Err(problem) = crate::kernel::limits::check_visible("code", &code)
        {
            fields.problems.push(problem);
        }
        Some(code)
    })
}

/// A payment (`IAddPaymentRequest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentInput {
    /// The payment's id, when the request names one (updates and deletions).
    pub id: Option<String>,
    /// The gateway's public id; the only one is `test`, the built-in test gateway.
    pub gateway_public_id: String,
    /// The payment method's token at the gateway: the test gateway approves `tok_success` only.
    pub token: String,
    /// Cents; the order's balance when absent.
    pub amount: Option<i64>,
    /// The kind of payment method (`type`, `credit_card` when absent).
    pub r#type: String,
    /// How the storefront shows the payment method (`""` when absent).
    pub display_string: String,
    /// Whether the shopper asked to keep the payment method; stored and shown as given.
    pub retain: bool,
    /// The month the payment method expires, `YYYY-MM`, from `extra_payment_data.expires_at`
    /// (a Mercer reading of the library's free-form field): a subscription the order makes
    /// carries it, and is announced as expiring like any other.
    pub expires_at: Option<String>,
}

/// A payment as a client writes it (`IAddPaymentRequest`: `addPayment`, `updatePayment`,
/// `deletePayment`).
#[derive(ToSchema)]
pub struct CheckoutPaymentFields {
    /// The payment's id: names the payment to change or delete (else its `token` does).
    pub id: Option<String>,
    /// The gateway's public id: `test`, the built-in test gateway, is the only one.
    pub gateway_public_id: String,
    /// The payment method's token at the gateway: the test gateway approves `tok_success`
    /// only.
    pub token: String,
    /// Cents, at least 1; the order's balance (what is left to pay) when absent.
    #[schema(minimum = 1)]
    pub amount: Option<i64>,
    /// The kind of payment method (`credit_card` when absent).
    #[schema(rename = "type")]
    pub payment_type: Option<String>,
    /// How the storefront shows the payment method.
    pub display_string: Option<String>,
    /// Whether the shopper asked to keep the payment method (false when absent).
    pub retain: Option<bool>,
    /// What the gateway tells of the payment method.
    pub extra_payment_data: Option<CheckoutExtraPaymentData>,
}

/// `extra_payment_data` of a payment.
#[derive(ToSchema)]
pub struct CheckoutExtraPaymentData {
    /// The month the payment method expires (`YYYY-MM`): a subscription the order makes
    /// carries it.
    #[schema(pattern = "^[0-9]{4}-[0-9]{2}$")]
    pub expires_at: Option<String>,
}

/// `addPayment`, `updatePayment`, `deletePayment`: `gateway_public_id` and `token` are
/// needed (the library's README); `amount`, when given, is cents of at least 1;
/// `extra_payment_data.expires_at`, when given, a month `YYYY-MM`.
pub fn parse_payment(body: &Value) -> Result<PaymentInput, DomainError> {
    read_body(body, |fields| {
        let gateway = fields.required_text("gateway_public_id");
        let token = fields.required_text("token");
        let amount = fields.integer("amount");
        if let Some(amount) = amount
            && amount < 1
        {
            fields.problems.push(FieldError::new(
                "amount",
                "out_of_range",
                "amount must be at least 1 (cents)",
            ));
        }
        let r#type = fields
            .text("type")
            .unwrap_or_else(|| "credit_card".to_string());
        let display_string = fields.text("display_string").unwrap_or_default();
        let retain = fields.boolean("retain").unwrap_or(false);
        let id = fields.text("id");
        let expires_at = match fields.object("extra_payment_data") {
            Some(mut extra) => {
                let text = extra.text("expires_at");
                match text {
                    Some(text) if PaymentExpiry::parse(text.trim()).is_none() => {
                        let field = extra.field("expires_at");
                        let message = format!("{field} must be a year and month such as 2027-03");
                        extra
                            .problems
                            .push(FieldError::new(field, "invalid_value", message));
                        None
                    }
                    other => other.map(|text| text.trim().to_string()),
                }
            }
            None => None,
        };
        Some(PaymentInput {
            id,
            gateway_public_id: gateway?,
            token: token?,
            amount,
            r#type,
            display_string,
            retain,
            expires_at,
        })
    })
}

/// The fields of `patchOrderMetaData` given (not null) replace the order's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaDataPatch {
    /// The new cart parameters, the whole map; none keeps them.
    pub cart_parameters: Option<BTreeMap<String, String>>,
    /// The new note attributes, the whole map; none keeps them.
    pub note_attributes: Option<BTreeMap<String, String>>,
    /// The new notes; none (absent, null or not a string) keeps them.
    pub notes: Option<String>,
    /// The new tags, the whole list; none keeps them.
    pub tags: Option<Vec<String>>,
}

/// `patchOrderMetaData`: `{"cart_parameters", "note_attributes", "notes", "tags"}`, each may
/// be null (kept as it is).
pub fn parse_meta_data_patch(body: &Value) -> Result<MetaDataPatch, DomainError> {
    read_body(body, |fields| {
        let present = |fields: &Fields<'_, '_>, name: &str| fields.get(name).is_some();
        let given = meta_data(fields);
        Some(MetaDataPatch {
            cart_parameters: present(fields, "cart_parameters").then_some(given.cart_parameters),
            note_attributes: present(fields, "note_attributes").then_some(given.note_attributes),
            notes: match fields.get("notes") {
                Some(Value::String(text)) => Some(text.clone()),
                _ => None,
            },
            tags: present(fields, "tags").then_some(given.tags),
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    struct AllowAll;

    impl AddressGuard for AllowAll {
        fn check(&self, _: &str) -> Result<(), String> {
            Ok(())
        }
    }

    fn problems(result: Result<impl std::fmt::Debug, DomainError>) -> Vec<(String, &'static str)> {
        match result {
            Err(DomainError::Invalid(problems)) => problems
                .into_iter()
                .map(|problem| (problem.field, problem.code))
                .collect(),
            other => panic!("expected 422, got {other:?}"),
        }
    }

    #[test]
    fn init_reads_the_cart_and_names_each_problem() {
        let body = json!({
            "cart_items": [
                {"platform_id": "var-1", "quantity": 2, "line_item_key": "a",
                 "line_item_properties": {"order_rrule": "RRULE:FREQ=WEEKLY"}},
                {"platform_id": 42, "quantity": 1}
            ],
            "customer": {"email_address": "ada@example.test", "first_name": "Ada"}
        });
        let init = parse_init(&body, &AllowAll).unwrap();
        assert_eq!(init.cart_items.len(), 2);
        assert_eq!(init.cart_items[1].platform_id.as_deref(), Some("42"));
        assert_eq!(
            init.cart_items[0].properties["order_rrule"],
            "RRULE:FREQ=WEEKLY"
        );
        assert_eq!(init.customer.unwrap().email_address, "ada@example.test");
        let bad = json!({"cart_items": [{"quantity": 0}, {"platform_id": "v", "quantity": "x"}],
                         "customer": {"email_address": "nope"},
                         "overrides": [{"override_type": "weather", "url": "http://127.0.0.1/x",
                                        "shared_secret": "long enough"}]});
        assert_eq!(
            problems(parse_init(&bad, &AllowAll)),
            [
                ("cart_items[0].platform_id".to_string(), "required"),
                ("cart_items[0].quantity".to_string(), "out_of_range"),
                ("cart_items[1].quantity".to_string(), "invalid_type"),
                ("customer.email_address".to_string(), "invalid_email"),
                ("overrides[0].override_type".to_string(), "invalid_value"),
            ]
        );
        assert_eq!(
            problems(parse_init(&json!({}), &AllowAll)),
            [("cart_items".to_string(), "required")]
        );
    }

    #[test]
    fn storefront_bodies_are_checked() {
        let address = parse_address(&json!({"address_line_1": "1 Main", "city": "Ottawa",
                                             "country_code": "ca", "province_code": "ON"}))
        .unwrap();
        assert_eq!(address.country_code, "CA");
        assert_eq!(
            problems(parse_address(&json!({"country_code": "Canada"}))),
            [
                ("address_line_1".to_string(), "required"),
                ("city".to_string(), "required"),
                ("country_code".to_string(), "invalid_country_code"),
            ]
        );
        assert_eq!(
            parse_shipping_line_choice(&json!({"index": 0})).unwrap(),
            "0"
        );
        assert_eq!(
            parse_shipping_line_choice(&json!({"index": "rate-1"})).unwrap(),
            "rate-1"
        );
        assert_eq!(
            problems(parse_payment(&json!({"token": "tok_success", "amount": 0}))),
            [
                ("gateway_public_id".to_string(), "required"),
                ("amount".to_string(), "out_of_range"),
            ]
        );
        let patch = parse_meta_data_patch(&json!({"notes": "gift", "tags": ["a"],
                                                  "cart_parameters": null}))
        .unwrap();
        assert_eq!(patch.notes.as_deref(), Some("gift"));
        assert_eq!(patch.tags, Some(vec!["a".to_string()]));
        assert_eq!(patch.cart_parameters, None);
    }
}
