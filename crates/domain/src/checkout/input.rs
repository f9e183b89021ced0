//! The bodies of Init Order and of the storefront routes, checked into typed values. Every
//! problem is a 422 naming its field by its path in the body (`cart_items[0].quantity`), all
//! at once. The storefront's bodies are the frontend library's (`lib/types`).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::checkout::state::{
    CheckoutAddress, CheckoutMetaData, MAX_LINE_ITEM_PROPERTIES_BYTES, StoredOrderOverride,
};
use crate::checkout::storefront::InventoryStage;
use crate::kernel::body::{
    BodyObject, Check, Field, FieldValue, LooseText, RawText, TextId, check_email, parse_object,
    path, read_body, wrong_type,
};
use crate::kernel::error::{DomainError, FieldError};
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

/// An object of texts as the client wrote it, its entries in the order given (so that their
/// problems are listed in that order): a string is kept as it is, a number or a boolean as
/// the text it writes (`"subscription_group_id": 42` keeps `"42"`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TextMap(Vec<(String, Field<LooseText>)>);

impl FieldValue for TextMap {
    fn read(value: Value) -> Field<Self> {
        match value {
            Value::Object(map) => Field::Given(TextMap(
                map.into_iter()
                    .map(|(key, item)| {
                        let item = match item {
                            Value::Null => Field::Null,
                            item => LooseText::read(item),
                        };
                        (key, item)
                    })
                    .collect(),
            )),
            _ => Field::Invalid(wrong_type("an object of strings")),
        }
    }
}

/// The object of texts at field `name`, when given; each value that is not text (null
/// included) is a problem of its own.
fn text_map(
    check: &mut Check<'_>,
    name: &str,
    given: Field<TextMap>,
) -> Option<BTreeMap<String, String>> {
    let TextMap(entries) = check.optional(name, given)?;
    let field = check.field(name);
    let mut texts = BTreeMap::new();
    for (key, item) in entries {
        match item {
            Field::Given(LooseText(text)) => {
                texts.insert(key, text);
            }
            Field::Invalid(mismatch) => check.push(mismatch.at(path(&field, &key))),
            Field::Absent | Field::Null | Field::Blank => {
                check.push(wrong_type("a string").at(path(&field, &key)));
            }
        }
    }
    Some(texts)
}

/// The array of texts at field `name`, when given: at most `max` of them, each kept as it is
/// (not trimmed); an element that is not text (null included) is that element's problem.
pub(crate) fn texts(
    check: &mut Check<'_>,
    name: &str,
    given: Field<Vec<Field<RawText>>>,
    max: usize,
) -> Option<Vec<String>> {
    let items = check.optional(name, given)?;
    let items = check.at_most(name, items, max);
    let field = check.field(name);
    let mut texts = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        match item {
            Field::Given(RawText(text)) => texts.push(text),
            _ => check.push(wrong_type("a string").at(format!("{field}[{index}]"))),
        }
    }
    Some(texts)
}

/// A platform id at field `name`, when given: a string, or an integer kept as its decimal
/// text. Blank text is none.
fn id_text(check: &mut Check<'_>, name: &str, given: Field<TextId>) -> Option<String> {
    match given {
        Field::Given(TextId(id)) => Some(id),
        // Whatever the value is instead, the problem names both kinds an id may be.
        Field::Invalid(_) => {
            check.push(wrong_type("a string or an integer").at(check.field(name)));
            None
        }
        Field::Absent | Field::Null | Field::Blank => None,
    }
}

/// The required `quantity`, from 1 to [`MAX_QUANTITY`].
fn quantity(check: &mut Check<'_>, given: Field<i64>) -> Option<i64> {
    let quantity = check.required("quantity", given)?;
    if (1..=MAX_QUANTITY).contains(&quantity) {
        Some(quantity)
    } else {
        check.problem("quantity", "out_of_range", |field| {
            format!("{field} must be between 1 and {MAX_QUANTITY}")
        });
        None
    }
}

/// Init Order's body as a client writes it.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutInitRequest {
    /// The cart's lines: at most 250; lines of one `line_item_key` are one line.
    #[serde(default)]
    #[schema(value_type = Vec<CheckoutCartItemFields>, required = true, max_items = 250)]
    pub cart_items: Field<Vec<Field<CheckoutCartItemFields>>>,
    /// The guest customer, if known already.
    #[serde(default)]
    #[schema(value_type = Option<CheckoutCustomerFields>)]
    pub customer: Field<CheckoutCustomerFields>,
    /// The order's meta data.
    #[serde(default)]
    #[schema(value_type = Option<CheckoutMetaDataFields>)]
    pub order_meta_data: Field<CheckoutMetaDataFields>,
    /// Overrides for this order only (at most 10), checked as the shop's are; they win over the
    /// shop's.
    #[serde(default)]
    #[schema(value_type = Option<Vec<CheckoutOrderOverrideFields>>, max_items = 10)]
    pub overrides: Field<Vec<Field<CheckoutOrderOverrideFields>>>,
}
impl BodyObject for CheckoutInitRequest {}

impl CheckoutInitRequest {
    fn validate(self, check: &mut Check<'_>, guard: &dyn AddressGuard) -> Option<InitInput> {
        if !self.cart_items.is_given() {
            check.push(FieldError::required(check.field("cart_items")));
        }
        let cart_items = check
            .each(
                "cart_items",
                self.cart_items,
                MAX_LINE_ITEMS,
                |check, item| CheckoutLineItemFields::from(item).validate(check),
            )
            .map(|items| items.into_iter().flatten().collect())
            .unwrap_or_default();
        let customer = check
            .optional("customer", self.customer)
            .and_then(|customer| customer.validate(&mut check.nested("customer")));
        let order_meta_data = check
            .optional("order_meta_data", self.order_meta_data)
            .map(|given| given.validate(&mut check.nested("order_meta_data")))
            .map(MetaDataPatch::into_meta_data);
        let overrides = check
            .each(
                "overrides",
                self.overrides,
                MAX_ORDER_OVERRIDES,
                |check, entry| entry.validate(check, guard),
            )
            .map(|entries| entries.into_iter().flatten().collect())
            .unwrap_or_default();
        Some(InitInput {
            cart_items,
            customer,
            order_meta_data,
            overrides,
        })
    }
}

/// A line of Init Order's cart.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutCartItemFields {
    /// The variant's platform id (an integer is taken as its decimal text).
    #[serde(default)]
    #[schema(value_type = String, required = true, example = "2001")]
    pub platform_id: Field<TextId>,
    /// How many, from 1 to 10000.
    #[serde(default)]
    #[schema(value_type = i64, required = true, example = 1, minimum = 1, maximum = 10_000)]
    pub quantity: Field<i64>,
    /// The key that names the line at the storefront; a random one when absent.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub line_item_key: Field<String>,
    /// The line's properties, name to text (numbers and booleans are taken as their text), at
    /// most 16 KiB written as JSON: a subscription plan's `order_rrule` and
    /// `subscription_group_id` among them.
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub line_item_properties: Field<TextMap>,
    /// The line's properties under the library's other name, read when
    /// `line_item_properties` is left out or is not an object.
    #[serde(default)]
    #[schema(ignore)]
    pub properties: Field<TextMap>,
}
impl BodyObject for CheckoutCartItemFields {}

/// A cart's line is an added line without a SKU: one check serves both.
impl From<CheckoutCartItemFields> for CheckoutLineItemFields {
    fn from(item: CheckoutCartItemFields) -> Self {
        CheckoutLineItemFields {
            platform_id: item.platform_id,
            sku: Field::Absent,
            quantity: item.quantity,
            line_item_key: item.line_item_key,
            line_item_properties: item.line_item_properties,
            properties: item.properties,
        }
    }
}

/// A guest customer as a client writes it (`addGuestCustomer`, `updateCustomer`, Init Order's
/// `customer`).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutCustomerFields {
    /// The customer's first name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub first_name: Field<String>,
    /// The customer's last name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub last_name: Field<String>,
    /// The customer's email address (`email` is read when only it is given).
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub email_address: Field<String>,
    /// The customer's email address under the name the library's type gives it, read when
    /// `email_address` is left out.
    #[serde(default)]
    #[schema(ignore)]
    pub email: Field<String>,
    /// Whether the customer accepts marketing: false for a new customer when absent, unchanged
    /// for one being updated.
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub accepts_marketing: Field<bool>,
}
impl BodyObject for CheckoutCustomerFields {}

impl CheckoutCustomerFields {
    fn validate(self, check: &mut Check<'_>) -> Option<CustomerInput> {
        let first_name = check
            .optional("first_name", self.first_name)
            .unwrap_or_default();
        let last_name = check
            .optional("last_name", self.last_name)
            .unwrap_or_default();
        // The library sends `email_address`; its type names it `email`.
        let (name, email) = if self.email_address.is_given() || !self.email.is_given() {
            ("email_address", self.email_address)
        } else {
            ("email", self.email)
        };
        let email = check.required(name, email);
        if let Some(email) = &email
            && let Err(problem) = check_email(check.field(name), email)
        {
            check.push(problem);
        }
        let accepts_marketing = check.optional("accepts_marketing", self.accepts_marketing);
        Some(CustomerInput {
            first_name,
            last_name,
            email_address: email?,
            accepts_marketing,
        })
    }
}

/// Order meta data as a client writes it (Init Order's `order_meta_data`,
/// `patchOrderMetaData`): a field absent or null keeps the order's.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutMetaDataFields {
    /// The cart's parameters, name to text: the whole map.
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub cart_parameters: Field<TextMap>,
    /// The order's note attributes, name to text: the whole map.
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub note_attributes: Field<TextMap>,
    /// The order's notes.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub notes: Field<RawText>,
    /// The order's tags: the whole list, at most 250.
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>, max_items = 250)]
    pub tags: Field<Vec<Field<RawText>>>,
}
impl BodyObject for CheckoutMetaDataFields {}

impl CheckoutMetaDataFields {
    /// The fields given, checked: the notes as written (Init Order trims them).
    fn validate(self, check: &mut Check<'_>) -> MetaDataPatch {
        let tags = texts(check, "tags", self.tags, MAX_TAGS);
        let cart_parameters = text_map(check, "cart_parameters", self.cart_parameters);
        let note_attributes = text_map(check, "note_attributes", self.note_attributes);
        let notes = check
            .optional("notes", self.notes)
            .map(|RawText(notes)| notes);
        MetaDataPatch {
            cart_parameters,
            note_attributes,
            notes,
            tags,
        }
    }
}

/// An override for one order, given to Init Order: every field is needed, checked as Create API
/// Override checks them.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutOrderOverrideFields {
    /// The checkout function the override takes over.
    #[serde(default)]
    #[schema(value_type = OverrideType, required = true)]
    pub override_type: Field<RawText>,
    /// The URL Mercer calls: absolute http(s), at most 2048 characters, not into a private
    /// network.
    #[serde(default)]
    #[schema(value_type = String, required = true, format = "uri", max_length = 2048)]
    pub url: Field<RawText>,
    /// The secret that signs Mercer's calls, 8 to 255 characters.
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 8, max_length = 255)]
    pub shared_secret: Field<RawText>,
}
impl BodyObject for CheckoutOrderOverrideFields {}

impl CheckoutOrderOverrideFields {
    fn validate(
        self,
        check: &mut Check<'_>,
        guard: &dyn AddressGuard,
    ) -> Option<StoredOrderOverride> {
        // A value that is not text is as good as left out: the override's checks then call
        // for it.
        let text = |given: Field<RawText>| given.into_value().map(|RawText(text)| text);
        let input = OverrideInput {
            override_type: text(self.override_type),
            url: text(self.url),
            shared_secret: text(self.shared_secret),
        };
        match check_input(&input, guard, true) {
            Ok(checked) => Some(StoredOrderOverride {
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
                // The override's checks name its fields alone: told here under its path.
                for problem in problems {
                    check.push(FieldError {
                        field: check.field(&problem.field),
                        ..problem
                    });
                }
                None
            }
        }
    }
}

/// Reads Init Order's body: `{"cart_items": [{"platform_id", "quantity", "line_item_key",
/// "line_item_properties"?}], "customer"?, "order_meta_data"?, "overrides"?: [{"override_type",
/// "url", "shared_secret"}]}`. Overrides given here are checked as the shop's are, with `guard`.
pub fn parse_init(body: &Value, guard: &dyn AddressGuard) -> Result<InitInput, DomainError> {
    read_body(body, |fields: CheckoutInitRequest, check| {
        fields.validate(check, guard)
    })
}

/// `addGuestCustomer` / `updateCustomer`.
pub fn parse_customer(body: &Value) -> Result<CustomerInput, DomainError> {
    read_body(body, CheckoutCustomerFields::validate)
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
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutAddressFields {
    /// The first name on the address.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub first_name: Field<String>,
    /// The last name on the address.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub last_name: Field<String>,
    /// The first street line.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub address_line_1: Field<String>,
    /// The second street line.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub address_line_2: Field<String>,
    /// The city.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub city: Field<String>,
    /// The postal code.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub postal_code: Field<String>,
    /// The province or state, by name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub province: Field<String>,
    /// The province or state, by code.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub province_code: Field<String>,
    /// The country, by name.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub country: Field<String>,
    /// The country's ISO 3166-1 alpha-2 code (kept upper case).
    #[serde(default)]
    #[schema(value_type = String, required = true, pattern = "^[A-Za-z]{2}$")]
    pub country_code: Field<String>,
    /// The company on the address.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub business_name: Field<String>,
    /// The phone number on the address.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub phone_number: Field<String>,
}
impl BodyObject for CheckoutAddressFields {}

impl CheckoutAddressFields {
    fn validate(self, check: &mut Check<'_>) -> Option<CheckoutAddress> {
        let mut text =
            |name: &str, given: Field<String>| check.optional(name, given).unwrap_or_default();
        let mut address = CheckoutAddress {
            first_name: text("first_name", self.first_name),
            last_name: text("last_name", self.last_name),
            address_line_1: String::new(),
            address_line_2: text("address_line_2", self.address_line_2),
            country: text("country", self.country),
            city: String::new(),
            province: text("province", self.province),
            country_code: String::new(),
            province_code: text("province_code", self.province_code),
            postal_code: text("postal_code", self.postal_code),
            business_name: text("business_name", self.business_name),
            phone_number: text("phone_number", self.phone_number),
        };
        address.address_line_1 = check
            .required("address_line_1", self.address_line_1)
            .unwrap_or_default();
        address.city = check.required("city", self.city).unwrap_or_default();
        if let Some(code) = check.required("country_code", self.country_code) {
            if code.len() == 2 && code.bytes().all(|b| b.is_ascii_alphabetic()) {
                address.country_code = code.to_ascii_uppercase();
            } else {
                check.push(FieldError::new(
                    check.field("country_code"),
                    "invalid_country_code",
                    "country_code must be an ISO 3166-1 alpha-2 code such as US",
                ));
            }
        }
        Some(address)
    }
}

/// An address (`IAddress`): `address_line_1`, `city` and `country_code` (two letters) are
/// needed; the rest may be empty.
pub fn parse_address(body: &Value) -> Result<CheckoutAddress, DomainError> {
    read_body(body, CheckoutAddressFields::validate)
}

/// The body of `deleteGiftCardPayment`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutPaymentIdFields {
    /// The payment's id.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub id: Field<String>,
}
impl BodyObject for CheckoutPaymentIdFields {}

/// `deleteGiftCardPayment`: `{"id"}`, the payment's. Anything but a text id (a wrong type
/// too) is told as a missing id.
pub fn parse_payment_id(body: &Value) -> Result<String, DomainError> {
    match parse_object::<CheckoutPaymentIdFields>(body).id {
        Field::Given(id) => Ok(id),
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
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutLineItemFields {
    /// The variant's platform id (an integer is taken as its decimal text).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub platform_id: Field<TextId>,
    /// The variant's SKU, read when there is no `platform_id`.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub sku: Field<String>,
    /// How many, from 1 to 10000; added to the line's when its key is taken.
    #[serde(default)]
    #[schema(value_type = i64, required = true, minimum = 1, maximum = 10_000)]
    pub quantity: Field<i64>,
    /// The key that names the line at the storefront; a random one when absent.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub line_item_key: Field<String>,
    /// The line's properties, name to text, at most 16 KiB written as JSON.
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub line_item_properties: Field<TextMap>,
    /// The line's properties under the library's other name, read when
    /// `line_item_properties` is left out or is not an object.
    #[serde(default)]
    #[schema(ignore)]
    pub properties: Field<TextMap>,
}
impl BodyObject for CheckoutLineItemFields {}

impl CheckoutLineItemFields {
    fn validate(self, check: &mut Check<'_>) -> Option<CartItem> {
        let platform_id = id_text(check, "platform_id", self.platform_id);
        let sku = check.optional("sku", self.sku);
        if platform_id.is_none() && sku.is_none() && !check.has_problem("platform_id") {
            check.push(FieldError::required(check.field("platform_id")));
        }
        let quantity = quantity(check, self.quantity);
        let line_item_key = check.optional("line_item_key", self.line_item_key);
        // The size problem names the field the client gave, even one that did not read.
        let named = if self.line_item_properties.is_given() {
            "line_item_properties"
        } else {
            "properties"
        };
        let properties = match text_map(check, "line_item_properties", self.line_item_properties) {
            Some(properties) => properties,
            None => text_map(check, "properties", self.properties).unwrap_or_default(),
        };
        let properties_size = serde_json::to_vec(&properties).map_or(usize::MAX, |json| json.len());
        if properties_size > MAX_LINE_ITEM_PROPERTIES_BYTES {
            check.problem(named, "too_large", |field| {
                format!(
                    "{field} holds {properties_size} bytes of JSON, over its limit of \
                     {MAX_LINE_ITEM_PROPERTIES_BYTES} (16 KiB)"
                )
            });
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
}

/// The body of `updateLineItemQuantity`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutLineItemQuantityFields {
    /// The line's key.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub line_item_key: Field<String>,
    /// The line's new quantity, from 1 to 10000.
    #[serde(default)]
    #[schema(value_type = i64, required = true, minimum = 1, maximum = 10_000)]
    pub quantity: Field<i64>,
}
impl BodyObject for CheckoutLineItemQuantityFields {}

/// The body of `deleteLineItem`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutLineItemKeyFields {
    /// The line's key.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub line_item_key: Field<String>,
}
impl BodyObject for CheckoutLineItemKeyFields {}

/// `addLineItem`: `{"platform_id" | "sku", "quantity", "line_item_key"}`.
pub fn parse_add_line_item(body: &Value) -> Result<CartItem, DomainError> {
    read_body(body, CheckoutLineItemFields::validate)
}

/// `updateLineItemQuantity`: `{"line_item_key", "quantity"}`.
pub fn parse_line_item_quantity(body: &Value) -> Result<(String, i64), DomainError> {
    read_body(body, |fields: CheckoutLineItemQuantityFields, check| {
        let key = check.required("line_item_key", fields.line_item_key);
        let quantity = quantity(check, fields.quantity);
        Some((key?, quantity?))
    })
}

/// `deleteLineItem`: `{"line_item_key"}`.
pub fn parse_line_item_key(body: &Value) -> Result<String, DomainError> {
    read_body(body, |fields: CheckoutLineItemKeyFields, check| {
        check.required("line_item_key", fields.line_item_key)
    })
}

/// The body of `changeShippingLine`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutShippingLineChoice {
    /// The shipping line offered: its id, or its position among those offered (from 0).
    #[serde(default)]
    #[schema(schema_with = id_or_position, required = true)]
    pub index: Field<TextId>,
}
impl BodyObject for CheckoutShippingLineChoice {}

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
    read_body(body, |fields: CheckoutShippingLineChoice, check| {
        if fields.index.is_given() {
            // Blank text names no line, and no field either: the body could not be read.
            id_text(check, "index", fields.index)
        } else {
            check.push(FieldError::required(check.field("index")));
            None
        }
    })
}

/// The body of `addDiscount` and `deleteDiscount`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutDiscountCodeFields {
    /// The discount code, up to 255 characters (trimmed). To add one, no invisible character.
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub code: Field<String>,
}
impl BodyObject for CheckoutDiscountCodeFields {}

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
    read_body(body, |fields: CheckoutDiscountCodeFields, check| {
        let code = check.required("code", fields.code)?;
        if code.chars().count() > 255 {
            check.push(FieldError::new(
                "code",
                "length",
                "code must be at most 255 characters",
            ));
        } else if refuse_invisible
            && let Err(problem) = crate::kernel::limits::check_visible("code", &code)
        {
            check.push(problem);
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
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutPaymentFields {
    /// The payment's id: names the payment to change or delete (else its `token` does).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub id: Field<String>,
    /// The gateway's public id: `test`, the built-in test gateway, is the only one.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub gateway_public_id: Field<String>,
    /// The payment method's token at the gateway: the test gateway approves `tok_success`
    /// only.
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub token: Field<String>,
    /// Cents, at least 1; the order's balance (what is left to pay) when absent.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 1)]
    pub amount: Field<i64>,
    /// The kind of payment method (`credit_card` when absent).
    #[serde(rename = "type", default)]
    #[schema(value_type = Option<String>)]
    pub payment_type: Field<String>,
    /// How the storefront shows the payment method.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub display_string: Field<String>,
    /// Whether the shopper asked to keep the payment method (false when absent).
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub retain: Field<bool>,
    /// What the gateway tells of the payment method.
    #[serde(default)]
    #[schema(value_type = Option<CheckoutExtraPaymentData>)]
    pub extra_payment_data: Field<CheckoutExtraPaymentData>,
}
impl BodyObject for CheckoutPaymentFields {}

/// `extra_payment_data` of a payment.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CheckoutExtraPaymentData {
    /// The month the payment method expires (`YYYY-MM`): a subscription the order makes
    /// carries it.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^[0-9]{4}-[0-9]{2}$")]
    pub expires_at: Field<String>,
}
impl BodyObject for CheckoutExtraPaymentData {}

impl CheckoutPaymentFields {
    fn validate(self, check: &mut Check<'_>) -> Option<PaymentInput> {
        let gateway = check.required("gateway_public_id", self.gateway_public_id);
        let token = check.required("token", self.token);
        let amount = check.optional("amount", self.amount);
        if let Some(amount) = amount
            && amount < 1
        {
            check.push(FieldError::new(
                "amount",
                "out_of_range",
                "amount must be at least 1 (cents)",
            ));
        }
        let r#type = check
            .optional("type", self.payment_type)
            .unwrap_or_else(|| "credit_card".to_string());
        let display_string = check
            .optional("display_string", self.display_string)
            .unwrap_or_default();
        let retain = check.optional("retain", self.retain).unwrap_or(false);
        let id = check.optional("id", self.id);
        let expires_at = match check.optional("extra_payment_data", self.extra_payment_data) {
            Some(extra) => {
                let mut extra_check = check.nested("extra_payment_data");
                match extra_check.optional("expires_at", extra.expires_at) {
                    Some(text) if PaymentExpiry::parse(&text).is_none() => {
                        extra_check.problem("expires_at", "invalid_value", |field| {
                            format!("{field} must be a year and month such as 2027-03")
                        });
                        None
                    }
                    other => other,
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
    }
}

/// `addPayment`, `updatePayment`, `deletePayment`: `gateway_public_id` and `token` are
/// needed (the library's README); `amount`, when given, is cents of at least 1;
/// `extra_payment_data.expires_at`, when given, a month `YYYY-MM`.
pub fn parse_payment(body: &Value) -> Result<PaymentInput, DomainError> {
    read_body(body, CheckoutPaymentFields::validate)
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

impl MetaDataPatch {
    /// A new order's meta data: what is not given is empty, and the notes are trimmed.
    fn into_meta_data(self) -> CheckoutMetaData {
        CheckoutMetaData {
            cart_parameters: self.cart_parameters.unwrap_or_default(),
            note_attributes: self.note_attributes.unwrap_or_default(),
            notes: self
                .notes
                .map(|notes| notes.trim().to_string())
                .unwrap_or_default(),
            tags: self.tags.unwrap_or_default(),
        }
    }
}

/// `patchOrderMetaData`: `{"cart_parameters", "note_attributes", "notes", "tags"}`, each may
/// be null (kept as it is).
pub fn parse_meta_data_patch(body: &Value) -> Result<MetaDataPatch, DomainError> {
    read_body(body, |fields: CheckoutMetaDataFields, check| {
        Some(fields.validate(check))
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

    fn problem_list(result: Result<impl std::fmt::Debug, DomainError>) -> Vec<(String, String)> {
        match result {
            Err(DomainError::Invalid(problems)) => problems
                .into_iter()
                .map(|problem| (problem.field, problem.message))
                .collect(),
            other => panic!("expected 422, got {other:?}"),
        }
    }

    fn pairs(expected: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
        expected
            .iter()
            .map(|(field, code)| (field.to_string(), *code))
            .collect()
    }

    #[test]
    fn init_names_wrong_types_text_numbers_and_blanks_in_body_order() {
        let body = json!({
            "cart_items": [
                {"platform_id": true, "quantity": "2", "line_item_key": 7,
                 "line_item_properties": "x", "properties": {"a": 1, "b": null, "c": [], "d": "x"}},
                {"platform_id": " ", "quantity": " ", "line_item_properties": {"k": {}}},
                {"platform_id": 1.5, "quantity": "10001"},
                null,
                {"platform_id": 42, "quantity": "3", "line_item_key": "  "}
            ],
            "customer": {"first_name": 1, "last_name": "  ", "email": "ada@example.test",
                         "accepts_marketing": "yes"},
            "order_meta_data": {"tags": ["a", 1, null], "cart_parameters": [],
                                "note_attributes": {"x": null}, "notes": 5},
            "overrides": [{"override_type": 5, "url": "  ", "shared_secret": "short"}, "x"]
        });
        assert_eq!(
            problems(parse_init(&body, &AllowAll)),
            pairs(&[
                ("cart_items[0].platform_id", "invalid_type"),
                ("cart_items[0].line_item_key", "invalid_type"),
                ("cart_items[0].line_item_properties", "invalid_type"),
                ("cart_items[0].properties.b", "invalid_type"),
                ("cart_items[0].properties.c", "invalid_type"),
                ("cart_items[1].platform_id", "required"),
                ("cart_items[1].quantity", "invalid_type"),
                ("cart_items[1].line_item_properties.k", "invalid_type"),
                ("cart_items[2].platform_id", "invalid_type"),
                ("cart_items[2].quantity", "out_of_range"),
                ("cart_items[3]", "invalid_type"),
                ("customer.first_name", "invalid_type"),
                ("customer.accepts_marketing", "invalid_type"),
                ("order_meta_data.tags[1]", "invalid_type"),
                ("order_meta_data.tags[2]", "invalid_type"),
                ("order_meta_data.cart_parameters", "invalid_type"),
                ("order_meta_data.note_attributes.x", "invalid_type"),
                ("order_meta_data.notes", "invalid_type"),
                ("overrides[0].override_type", "required"),
                ("overrides[0].url", "invalid_url"),
                ("overrides[0].shared_secret", "length"),
                ("overrides[1]", "invalid_type"),
            ])
        );
        let messages = problem_list(parse_init(&body, &AllowAll));
        assert_eq!(
            messages[0].1,
            "cart_items[0].platform_id must be a string or an integer"
        );
        assert_eq!(
            messages[2].1,
            "cart_items[0].line_item_properties must be an object of strings"
        );
        assert_eq!(messages[18].1, "override_type is required");
        // Text numbers, integer ids, `properties`, the `email` name and untrimmed tags.
        let init = parse_init(
            &json!({
                "cart_items": [{"platform_id": " 7 ", "quantity": "2", "line_item_key": " k ",
                                "properties": {"n": 1, "b": true}}],
                "customer": {"email": " ada@example.test ", "first_name": " Ada "},
                "order_meta_data": {"tags": [" a ", ""], "notes": "  hi  ",
                                    "cart_parameters": {"z": 1, "a": "b"}},
                "overrides": [{"override_type": "shipping", "url": "https://example.test/x",
                               "shared_secret": "long enough"}]
            }),
            &AllowAll,
        )
        .unwrap();
        let item = &init.cart_items[0];
        assert_eq!(item.platform_id.as_deref(), Some("7"));
        assert_eq!(
            (item.quantity, item.line_item_key.as_deref()),
            (2, Some("k"))
        );
        assert_eq!(item.properties["n"], "1");
        assert_eq!(item.properties["b"], "true");
        let customer = init.customer.unwrap();
        assert_eq!(customer.email_address, "ada@example.test");
        assert_eq!(customer.first_name, "Ada");
        let meta_data = init.order_meta_data.unwrap();
        assert_eq!(meta_data.notes, "hi");
        assert_eq!(meta_data.tags, [" a ", ""]);
        assert_eq!(meta_data.cart_parameters["z"], "1");
        assert_eq!(init.overrides[0].override_type, "shipping");
    }

    #[test]
    fn storefront_bodies_name_wrong_types_text_numbers_and_blanks() {
        assert_eq!(
            problems(parse_customer(
                &json!({"first_name": [], "email_address": "  ",
                                             "email": "ada@example.test",
                                             "accepts_marketing": 1})
            )),
            pairs(&[
                ("first_name", "invalid_type"),
                ("email_address", "required"),
                ("accepts_marketing", "invalid_type"),
            ])
        );
        assert_eq!(
            problems(parse_address(
                &json!({"first_name": 5, "address_line_1": "  ", "city": 7,
                                            "country_code": " usa ", "phone_number": null})
            )),
            pairs(&[
                ("first_name", "invalid_type"),
                ("address_line_1", "required"),
                ("city", "invalid_type"),
                ("country_code", "invalid_country_code"),
            ])
        );
        assert_eq!(
            problems(parse_payment(
                &json!({"id": 9, "gateway_public_id": " ", "token": 5,
                                           "amount": "0", "type": false, "display_string": [],
                                           "retain": "yes",
                                           "extra_payment_data": {"expires_at": "2027-3"}})
            )),
            pairs(&[
                ("gateway_public_id", "required"),
                ("token", "invalid_type"),
                ("amount", "out_of_range"),
                ("type", "invalid_type"),
                ("display_string", "invalid_type"),
                ("retain", "invalid_type"),
                ("id", "invalid_type"),
                ("extra_payment_data.expires_at", "invalid_value"),
            ])
        );
        assert_eq!(
            problems(parse_payment(
                &json!({"gateway_public_id": "test", "token": "t",
                                           "extra_payment_data": "2027-03"})
            )),
            pairs(&[("extra_payment_data", "invalid_type")])
        );
        let payment = parse_payment(
            &json!({"gateway_public_id": " test ", "token": "tok_success",
                                            "amount": " 250 ",
                                            "extra_payment_data": {"expires_at": " 2027-03 "}}),
        )
        .unwrap();
        assert_eq!(payment.amount, Some(250));
        assert_eq!(payment.gateway_public_id, "test");
        assert_eq!(payment.r#type, "credit_card");
        assert_eq!(payment.expires_at.as_deref(), Some("2027-03"));
        // Any id that is not text is told as a missing id.
        assert_eq!(
            problems(parse_payment_id(&json!({"id": 9}))),
            pairs(&[("id", "required")])
        );
        assert_eq!(
            parse_payment_id(&json!({"id": " pay-1 "})).unwrap(),
            "pay-1"
        );
    }

    #[test]
    fn line_item_bodies_name_wrong_types_text_numbers_and_blanks() {
        assert_eq!(
            problems(parse_add_line_item(
                &json!({"platform_id": [], "sku": 5, "quantity": 0,
                                                 "line_item_key": {},
                                                 "line_item_properties": {"a": null}})
            )),
            pairs(&[
                ("platform_id", "invalid_type"),
                ("sku", "invalid_type"),
                ("quantity", "out_of_range"),
                ("line_item_key", "invalid_type"),
                ("line_item_properties.a", "invalid_type"),
            ])
        );
        let item = parse_add_line_item(
            &json!({"sku": " SKU-1 ", "quantity": "4", "properties": {"n": 2}}),
        )
        .unwrap();
        assert_eq!((item.sku.as_deref(), item.quantity), (Some("SKU-1"), 4));
        assert_eq!(item.properties["n"], "2");
        assert_eq!(
            problems(parse_line_item_quantity(
                &json!({"line_item_key": " ", "quantity": "x"})
            )),
            pairs(&[("line_item_key", "required"), ("quantity", "invalid_type")])
        );
        assert_eq!(
            parse_line_item_quantity(&json!({"line_item_key": " k ", "quantity": "5"})).unwrap(),
            ("k".to_string(), 5)
        );
        assert_eq!(
            problems(parse_line_item_key(&json!({"line_item_key": 5}))),
            pairs(&[("line_item_key", "invalid_type")])
        );
    }

    #[test]
    fn choice_code_and_meta_data_bodies_name_wrong_types_and_blanks() {
        // Blank text names no line, and no field either.
        assert_eq!(
            problems(parse_shipping_line_choice(&json!({"index": "  "}))),
            pairs(&[("body", "invalid_value")])
        );
        for index in [json!(1.5), json!(true)] {
            assert_eq!(
                problem_list(parse_shipping_line_choice(&json!({ "index": index }))),
                [(
                    "index".to_string(),
                    "index must be a string or an integer".to_string()
                )]
            );
        }
        assert_eq!(
            problems(parse_shipping_line_choice(&json!({"index": null}))),
            pairs(&[("index", "required")])
        );
        assert_eq!(
            problems(parse_discount_code(&json!({"code": "x".repeat(256)}))),
            pairs(&[("code", "length")])
        );
        assert_eq!(
            problems(parse_applied_discount_code(&json!({"code": 12}))),
            pairs(&[("code", "invalid_type")])
        );
        assert_eq!(
            problems(parse_meta_data_patch(
                &json!({"cart_parameters": {"b": [], "a": 1, "c": null},
                                                   "note_attributes": "x", "notes": ["n"],
                                                   "tags": "t"})
            )),
            pairs(&[
                ("tags", "invalid_type"),
                ("cart_parameters.b", "invalid_type"),
                ("cart_parameters.c", "invalid_type"),
                ("note_attributes", "invalid_type"),
                ("notes", "invalid_type"),
            ])
        );
        // A patch keeps notes and tags as written.
        let patch = parse_meta_data_patch(&json!({"cart_parameters": null, "notes": "  ",
                                                  "tags": [" a "],
                                                  "note_attributes": {"k": false}}))
        .unwrap();
        assert_eq!(patch.cart_parameters, None);
        assert_eq!(patch.notes.as_deref(), Some("  "));
        assert_eq!(patch.tags, Some(vec![" a ".to_string()]));
        assert_eq!(
            patch.note_attributes,
            Some(BTreeMap::from([("k".to_string(), "false".to_string())]))
        );
    }

    #[test]
    fn a_long_array_is_one_problem_and_its_rest_is_not_read() {
        let body = json!({"cart_items": vec![json!({}); MAX_LINE_ITEMS + 5],
                          "order_meta_data": {"tags": vec![json!(1); MAX_TAGS + 1]}});
        let found = problems(parse_init(&body, &AllowAll));
        assert_eq!(found[0], ("cart_items".to_string(), "too_many"));
        assert_eq!(
            found[1],
            ("cart_items[0].platform_id".to_string(), "required")
        );
        assert!(
            !found
                .iter()
                .any(|(field, _)| field.starts_with("cart_items[250]"))
        );
    }
}
