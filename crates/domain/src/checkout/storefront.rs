//! Init Order and the storefront routes (docs/checkout.md): every change reads
//! the order, works out the new order (calling an override when one applies, outside any
//! transaction), and saves it only if nobody saved it meanwhile (its version), else starts
//! again. Every answer carries the whole `application_state`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::access::credentials::random_hex;
use crate::access::shop::{Shop, find_shop};
use crate::checkout::input::{
    CartItem, CustomerInput, InitInput, MAX_LINE_ITEMS, MAX_QUANTITY, MetaDataPatch, PaymentInput,
};
use crate::checkout::repository::{
    CheckoutDatabase, CheckoutOrder, CheckoutRepositories, CheckoutStatus, NewCheckoutOrder,
};
use crate::checkout::shown::{
    ApplicationState, EmptyList, EmptyObject, ItemReference, ProductData, ShownAddress,
    ShownCustomer, ShownDiscount, ShownLineItem, ShownPayment,
};
use crate::checkout::state::{
    CheckoutAddress, CheckoutCustomer, CheckoutDiscount, CheckoutDocument, CheckoutLineItem,
    CheckoutMetaData, CheckoutPayment, CheckoutShippingLine, CheckoutTax,
};
use crate::checkout::token;
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::GroupId;
use crate::kernel::money::{Cents, CurrencyCode, MAX_PRICE};
use crate::kernel::time::Timestamp;
use crate::overrides::{OverrideAnswer, OverrideCaller, OverrideDatabase, OverrideType};
use crate::platform::catalogue::{self, CatalogueVariant};
use crate::subscriptions::recurrence::{OrderSchedule, ShopZone};

/// The one payment gateway: Mercer's built-in test gateway.
pub(crate) const TEST_GATEWAY: &str = "test";
/// The test gateway's token that approves; `tok_decline` (and any other) declines.
pub(crate) const APPROVING_TOKEN: &str = "tok_success";
/// The line item property naming a subscription plan's rule (docs/checkout.md).
pub(crate) const ORDER_RRULE_PROPERTY: &str = "order_rrule";
/// The line item property naming a subscription plan's group.
pub(crate) const SUBSCRIPTION_GROUP_PROPERTY: &str = "subscription_group_id";
/// Saves retried when another change of the same order came first.
const SAVE_ATTEMPTS: usize = 5;

/// What a storefront call presents: the shop and order of its path and its bearer token.
#[derive(Debug, Clone)]
pub struct StorefrontCall {
    /// The shop's identifier, from the path.
    pub shop_identifier: String,
    /// The order's id at the storefront, from the path.
    pub public_order_id: String,
    /// The bearer token Init Order answered for the order.
    pub token: String,
}

/// What the checkout's use cases need besides storage.
pub struct CheckoutContext<'a, D> {
    /// The database.
    pub db: &'a D,
    /// How the shop's and the order's overrides are called.
    pub overrides: &'a dyn OverrideCaller,
    /// The time of the call.
    pub now: Timestamp,
}

/// What a storefront call answers (the `data` of its answer): what the call itself shows, and
/// the order's `application_state` after it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StorefrontAnswer<T> {
    /// What the call itself shows, flattened beside `application_state`.
    #[serde(flatten)]
    pub shown: T,
    /// The order after the call.
    pub application_state: ApplicationState,
}

/// A call that shows nothing of its own, only the order.
pub(crate) type OrderAnswer = StorefrontAnswer<EmptyObject>;

/// The order after a call, with what the call shows.
fn answer<T>(order: &CheckoutOrder, shown: T) -> StorefrontAnswer<T> {
    StorefrontAnswer {
        shown,
        application_state: order.document.application_state(&order.public_order_id),
    }
}

fn processed() -> DomainError {
    DomainError::Unprocessable {
        code: "order.processed",
        message: "the order is processed: it cannot change".to_string(),
    }
}

/// The shop of a storefront call whose token opens its order; 401 otherwise (an unknown shop
/// too: the token names the shop).
pub fn authorize(
    tx: &mut dyn CheckoutRepositories,
    call: &StorefrontCall,
    now: Timestamp,
) -> Result<Shop, DomainError> {
    let shop = find_shop(tx, &call.shop_identifier).map_err(|error| match error {
        DomainError::NotFound { .. } => DomainError::Unauthenticated,
        other => other,
    })?;
    token::verify(tx, &shop, &call.public_order_id, &call.token, now)?;
    Ok(shop)
}

/// The shop and order of a storefront call whose token opens it.
fn open(
    tx: &mut dyn CheckoutRepositories,
    call: &StorefrontCall,
    now: Timestamp,
) -> Result<(Shop, CheckoutOrder), DomainError> {
    let shop = authorize(tx, call, now)?;
    let order = tx
        .checkout_order(shop.id, &call.public_order_id)?
        .ok_or(DomainError::not_found("order"))?;
    Ok((shop, order))
}

/// Reads the order for the call (any status).
pub fn read<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    now: Timestamp,
) -> Result<(Shop, CheckoutOrder), DomainError> {
    db.read_tx(|tx| open(tx, call, now))
}

/// Changes an open order: `work` gets the shop and the order as read and changes the order,
/// answering what the call shows; the order is saved if no other change came first, else the
/// whole is done again from a fresh read. A processed order refuses (422).
/// The changed order must still be storable ([`CheckoutDocument::check_storable`]: its amounts
/// work out, and it is at most 512 KiB), else 422 on `field`, the part the call changes.
fn change<D: CheckoutDatabase, T>(
    db: &D,
    call: &StorefrontCall,
    now: Timestamp,
    field: &str,
    mut work: impl FnMut(&Shop, &mut CheckoutOrder) -> Result<T, DomainError>,
) -> Result<StorefrontAnswer<T>, DomainError> {
    for _ in 0..SAVE_ATTEMPTS {
        let (shop, mut order) = read(db, call, now)?;
        if order.status != CheckoutStatus::Open {
            return Err(processed());
        }
        let before = order.document.stored_size();
        let shown = work(&shop, &mut order)?;
        order.document.check_storable(field, Some(before))?;
        order.last_activity_at = now;
        order.updated_at = now;
        if db.write_tx(|tx| Ok(tx.save_checkout_order(&order)?))? {
            order.version += 1;
            return Ok(answer(&order, shown));
        }
    }
    Err(DomainError::Conflict {
        code: "order.busy",
        message: "the order kept changing while this change was made; try again".to_string(),
    })
}

/// Runs the checkout function `kind` through its override: `None` when none applies.
fn through_override<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    shop: &Shop,
    order: &CheckoutOrder,
    kind: OverrideType,
    data: &impl Serialize,
) -> Result<Option<OverrideAnswer>, DomainError> {
    // A request's fields are plain typed values with text keys: serializing cannot fail.
    let data = serde_json::to_value(data).unwrap_or(Value::Null);
    crate::overrides::run(
        context.db,
        context.overrides,
        shop,
        &order.document.order_overrides(),
        &order.public_order_id,
        kind,
        data,
    )
}

// ---------------------------------------------------------------------------------------
// Init Order

/// A line item of a catalogue variant.
fn line_item(
    found: &CatalogueVariant,
    variant_id: &str,
    key: String,
    quantity: i64,
    properties: BTreeMap<String, String>,
    currency: &CurrencyCode,
) -> Result<CheckoutLineItem, String> {
    let (product, variant) = (&found.product, &found.variant);
    let money = |decimal: Option<&crate::platform::resources::Decimal>| {
        decimal.map_or(Some(Cents::ZERO), |d| {
            Cents::from_decimal(d.as_str(), currency)
        })
    };
    let price = money(variant.price.as_ref()).ok_or_else(|| {
        format!(
            "the variant's price is not an amount of {}",
            currency.as_str()
        )
    })?;
    // Refused at intake since; a price stored before that is not sold.
    if price < Cents::ZERO {
        return Err("the variant's price is below zero".to_string());
    }
    if price > MAX_PRICE {
        return Err(format!(
            "the variant's price is over {} minor units, the most a price may be",
            MAX_PRICE.0
        ));
    }
    let product_title = product.name.clone().unwrap_or_default();
    Ok(CheckoutLineItem {
        line_item_key: key,
        product_id: product
            .platform_id
            .as_ref()
            .map(|id| id.as_str().to_string())
            .unwrap_or_default(),
        variant_id: variant_id.to_string(),
        title: variant
            .name
            .clone()
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| product_title.clone()),
        product_title,
        sku: variant.sku.clone().unwrap_or_default(),
        barcode: variant.barcode.clone().unwrap_or_default(),
        image_url: found.image_url().unwrap_or_default(),
        description: product.description.clone().unwrap_or_default(),
        vendor: product.vendor.clone().unwrap_or_default(),
        tags: product.tags.clone().unwrap_or_default(),
        price,
        compare_at_price: money(variant.compare_at_price.as_ref())
            .filter(|amount| *amount >= Cents::ZERO)
            .unwrap_or(Cents::ZERO),
        quantity,
        weight: variant
            .weight
            .as_ref()
            .and_then(|w| w.as_str().parse::<f64>().ok())
            .or(variant.grams)
            .unwrap_or(0.0),
        weight_unit: variant
            .weight_unit
            .clone()
            .unwrap_or_else(|| "g".to_string()),
        requires_shipping: variant.require_shipping.unwrap_or(true),
        taxable: !variant.tax_exempt.unwrap_or(false),
        properties,
    })
}

/// Checks the subscription plan a line item's properties may carry (`order_rrule`, with an
/// optional `subscription_group_id`) as Create Subscription checks its rule: it reads, and it
/// has an order date at `now` or later; the group is an integer id. Problems are named under
/// `at` (`cart_items[0].line_item_properties`). An order is never paid for a plan that would
/// make no subscription.
pub(crate) fn check_plan(
    shop: &Shop,
    properties: &BTreeMap<String, String>,
    at: &str,
    now: Timestamp,
) -> Result<(), FieldError> {
    if let Some(group) = properties.get(SUBSCRIPTION_GROUP_PROPERTY)
        && group.trim().parse::<i64>().is_err()
    {
        return Err(FieldError::new(
            format!("{at}.{SUBSCRIPTION_GROUP_PROPERTY}"),
            "invalid_type",
            "a subscription group is named by its integer id",
        ));
    }
    if let Some(rule) = properties.get(ORDER_RRULE_PROPERTY) {
        let field = format!("{at}.{ORDER_RRULE_PROPERTY}");
        OrderSchedule::parse(rule, ShopZone::of_shop(&shop.timezone), &field)?.upcoming_order(
            now,
            &[],
            &field,
        )?;
    }
    Ok(())
}

/// The line items of cart items, priced from the catalogue; each unknown variant (or a plan
/// [`check_plan`] refuses) a 422 on `{prefix}[i]`.
fn priced_items(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    items: &[CartItem],
    prefix: &str,
    first_index: usize,
    now: Timestamp,
) -> Result<Vec<CheckoutLineItem>, DomainError> {
    let currency = CurrencyCode::parse(&shop.currency).ok_or_else(|| {
        DomainError::invalid(
            "currency",
            "invalid_currency",
            "the shop's currency is unknown",
        )
    })?;
    let ids: Vec<&str> = items
        .iter()
        .filter_map(|i| i.platform_id.as_deref())
        .collect();
    let found = catalogue::variants(tx, shop.id, &ids)?;
    let mut problems = Vec::new();
    let mut priced = Vec::with_capacity(items.len());
    for (offset, item) in items.iter().enumerate() {
        let at = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}[{}].", first_index + offset)
        };
        let Some(variant_id) = item.platform_id.as_deref() else {
            problems.push(FieldError::new(
                format!("{at}platform_id"),
                "unknown_variant",
                "a line item is added by its variant's platform_id",
            ));
            continue;
        };
        let Some(variant) = found.get(variant_id) else {
            problems.push(FieldError::new(
                format!("{at}platform_id"),
                "unknown_variant",
                format!("no product of the shop has a variant {variant_id:?}"),
            ));
            continue;
        };
        if let Err(problem) = check_plan(
            shop,
            &item.properties,
            &format!("{at}line_item_properties"),
            now,
        ) {
            problems.push(problem);
            continue;
        }
        // A plan's group is one of the shop's, as Create Subscription requires.
        if let Some(group) = item
            .properties
            .get(SUBSCRIPTION_GROUP_PROPERTY)
            .and_then(|group| group.trim().parse::<i64>().ok())
            && tx.subscription_group(shop.id, GroupId(group))?.is_none()
        {
            problems.push(FieldError::new(
                format!("{at}line_item_properties.{SUBSCRIPTION_GROUP_PROPERTY}"),
                "unknown_group",
                format!("the shop has no subscription group {group}"),
            ));
            continue;
        }
        let key = item.line_item_key.clone().unwrap_or_else(|| random_hex(8));
        match line_item(
            variant,
            variant_id,
            key,
            item.quantity,
            item.properties.clone(),
            &currency,
        ) {
            Ok(line) => priced.push(line),
            Err(why) => problems.push(FieldError::new(
                format!("{at}platform_id"),
                "unpriced_variant",
                why,
            )),
        }
    }
    if problems.is_empty() {
        Ok(priced)
    } else {
        Err(DomainError::Invalid(problems))
    }
}

/// What Init Order answers.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = CheckoutInitAnswer)]
pub struct InitAnswer {
    /// The token that opens the order at the storefront, good for 24 hours.
    pub jwt_token: String,
    /// The new order's id at the storefront (32 random hex digits).
    pub public_order_id: String,
    /// The new order.
    pub application_state: ApplicationState,
    /// What the storefront shows around the order.
    pub initial_data: InitialData,
    /// Mercer's test gateway keeps no payment methods.
    pub vaulting_enabled: bool,
}

/// Init Order: a new order of the cart's items, and the token that opens it.
pub fn init(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    input: InitInput,
    now: Timestamp,
) -> Result<InitAnswer, DomainError> {
    let line_items = merge_same_keys(priced_items(
        tx,
        shop,
        &input.cart_items,
        "cart_items",
        0,
        now,
    )?)?;
    let public_order_id = random_hex(16);
    let link = resumable_link(shop, &public_order_id);
    let mut document = CheckoutDocument::new(&shop.currency, link);
    document.line_items = line_items;
    document.customer = input.customer.map(new_customer);
    if let Some(meta) = input.order_meta_data {
        document.order_meta_data = meta;
    }
    document.order_overrides = input.overrides;
    document.check_storable(largest_part(&document), None)?;
    let order = tx.insert_checkout_order(&NewCheckoutOrder {
        shop_id: shop.id,
        public_order_id: public_order_id.clone(),
        document,
        created_at: now,
    })?;
    let jwt_token = token::mint(tx, shop, &public_order_id, now)?;
    Ok(InitAnswer {
        jwt_token,
        application_state: order.document.application_state(&public_order_id),
        public_order_id,
        initial_data: InitialData::of(shop, &order.document),
        vaulting_enabled: false,
    })
}

/// The part of Init Order's body that weighs most in a new order: what a 422 for an order over
/// its size names.
fn largest_part(document: &CheckoutDocument) -> &'static str {
    let size = |value: Result<Vec<u8>, serde_json::Error>| value.map_or(0, |json| json.len());
    let parts = [
        ("cart_items", size(serde_json::to_vec(&document.line_items))),
        ("customer", size(serde_json::to_vec(&document.customer))),
        (
            "order_meta_data",
            size(serde_json::to_vec(&document.order_meta_data)),
        ),
    ];
    parts
        .iter()
        .max_by_key(|(_, size)| *size)
        .map_or("cart_items", |(name, _)| name)
}

/// Items with one key are one line: quantities add up, up to [`MAX_QUANTITY`]. One key for two
/// variants is 422 on the later item's `line_item_key`.
fn merge_same_keys(items: Vec<CheckoutLineItem>) -> Result<Vec<CheckoutLineItem>, DomainError> {
    let mut merged: Vec<CheckoutLineItem> = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        match merged
            .iter_mut()
            .find(|m| m.line_item_key == item.line_item_key)
        {
            Some(existing) => add_to(existing, &item, &format!("cart_items[{index}]."))?,
            None => merged.push(item),
        }
    }
    Ok(merged)
}

/// `item` added to the line of its key: the same variant, a quantity within bounds.
fn add_to(
    existing: &mut CheckoutLineItem,
    item: &CheckoutLineItem,
    at: &str,
) -> Result<(), DomainError> {
    if existing.variant_id != item.variant_id {
        return Err(DomainError::invalid(
            format!("{at}line_item_key"),
            "key_taken",
            format!(
                "the line item {:?} is another variant's",
                item.line_item_key
            ),
        ));
    }
    let quantity = existing.quantity.saturating_add(item.quantity);
    if quantity > MAX_QUANTITY {
        return Err(DomainError::invalid(
            format!("{at}quantity"),
            "out_of_range",
            format!("a line item's quantity is at most {MAX_QUANTITY}"),
        ));
    }
    existing.quantity = quantity;
    Ok(())
}

/// Where a customer resumes the checkout: the shop's storefront, which knows the order by its
/// public id.
pub fn resumable_link(shop: &Shop, public_order_id: &str) -> String {
    let domain = shop.custom_domain.as_deref().unwrap_or(&shop.shop_domain);
    format!("https://{domain}/checkout/resume/{public_order_id}")
}

/// `initial_data` (`IOrderInitialData`): what the storefront shows around the order. Mercer
/// offers no countries, languages, external gateways or fraud tools of its own: those lists
/// are empty.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = CheckoutInitialData)]
pub struct InitialData {
    /// The shop's domain on the platform.
    pub shop_name: String,
    /// Always `[]`: Mercer offers no countries of its own.
    pub country_info: EmptyList,
    /// Always `[]`: Mercer offers no languages of its own.
    pub supported_languages: EmptyList,
    /// The checkout form's options.
    pub general_settings: GeneralSettings,
    /// Always `[]`: the only gateway is the built-in test gateway.
    pub external_payment_gateways: EmptyList,
    /// Always `[]`.
    pub life_elements: EmptyList,
    /// Always `[]`: Mercer has no fraud tools.
    pub fraud_tools: EmptyList,
    /// Always `{}`.
    pub flow_settings: EmptyObject,
    /// Whether any line item is shipped.
    pub requires_shipping: bool,
    /// Always `{}`.
    pub eps_gateways: EmptyObject,
}

/// `general_settings` of `initial_data`: the checkout form's options.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = CheckoutGeneralSettings)]
pub struct GeneralSettings {
    /// The checkout form's options.
    pub checkout_process: CheckoutProcess,
    /// No address autocomplete provider.
    pub address_autocomplete: AddressAutocomplete,
}

/// The checkout form's options, as Mercer's checkout has them.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CheckoutProcess {
    /// Always `optional`: the address's company may be given.
    pub company_name_option: &'static str,
    /// Always false: an address needs no phone number.
    pub phone_number_required: bool,
    /// Always `unchecked`: marketing is not accepted unless the customer says so.
    pub accepts_marketing_checkbox_option: &'static str,
    /// Always false: the storefront offers no tax exemption.
    pub tax_exempt_checkbox_enabled: bool,
    /// Always false.
    pub tax_shipping: bool,
    /// Always false.
    pub rsa_enabled: bool,
}

/// No address autocomplete provider.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AddressAutocomplete {
    /// Always none.
    pub provider: Option<String>,
    /// Always none.
    pub api_key: Option<String>,
}

impl InitialData {
    fn of(shop: &Shop, document: &CheckoutDocument) -> InitialData {
        InitialData {
            shop_name: shop.shop_domain.clone(),
            country_info: EmptyList,
            supported_languages: EmptyList,
            general_settings: GeneralSettings {
                checkout_process: CheckoutProcess {
                    company_name_option: "optional",
                    phone_number_required: false,
                    accepts_marketing_checkbox_option: "unchecked",
                    tax_exempt_checkbox_enabled: false,
                    tax_shipping: false,
                    rsa_enabled: false,
                },
                address_autocomplete: AddressAutocomplete {
                    provider: None,
                    api_key: None,
                },
            },
            external_payment_gateways: EmptyList,
            life_elements: EmptyList,
            fraud_tools: EmptyList,
            flow_settings: EmptyObject {},
            requires_shipping: document.requires_shipping(),
            eps_gateways: EmptyObject {},
        }
    }
}

fn new_customer(input: CustomerInput) -> CheckoutCustomer {
    CheckoutCustomer {
        public_id: random_hex(16),
        first_name: input.first_name,
        last_name: input.last_name,
        email_address: input.email_address,
        accepts_marketing: input.accepts_marketing.unwrap_or(false),
    }
}

// ---------------------------------------------------------------------------------------
// Customer

/// What the customer calls show: the customer after the call.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CustomerShown {
    /// The customer after the call.
    pub customer: ShownCustomer,
}

/// `addGuestCustomer` (and `updateCustomer`: the same, keeping the customer's public id).
pub fn set_customer<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    input: CustomerInput,
    now: Timestamp,
) -> Result<StorefrontAnswer<CustomerShown>, DomainError> {
    change(db, call, now, "customer", |_, order| {
        let customer = match order.document.customer.take() {
            // The same customer, changed: marketing consent kept unless given.
            Some(existing) => CheckoutCustomer {
                public_id: existing.public_id,
                accepts_marketing: input
                    .accepts_marketing
                    .unwrap_or(existing.accepts_marketing),
                ..new_customer(input.clone())
            },
            None => new_customer(input.clone()),
        };
        order.document.customer = Some(customer);
        Ok(CustomerShown {
            customer: order.document.shown_customer(None),
        })
    })
}

/// `deleteCustomer`.
pub fn delete_customer<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    now: Timestamp,
) -> Result<StorefrontAnswer<CustomerShown>, DomainError> {
    change(db, call, now, "customer", |_, order| {
        order.document.customer = None;
        Ok(CustomerShown {
            customer: order.document.shown_customer(None),
        })
    })
}

/// What a validation that passed shows (one that fails is a 422 on its field).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Valid {
    /// Always true: a validation that fails is a 422.
    pub valid: bool,
}

/// `validateEmail`: `{"valid": true}`, or 422 on `email_address`.
pub fn validate_email<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    email: &str,
    now: Timestamp,
) -> Result<StorefrontAnswer<Valid>, DomainError> {
    let (_, order) = read(db, call, now)?;
    crate::kernel::body::check_email("email_address".to_string(), email)
        .map_err(|problem| DomainError::Invalid(vec![problem]))?;
    Ok(answer(&order, Valid { valid: true }))
}

// ---------------------------------------------------------------------------------------
// Addresses

/// Which address a route sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum AddressType {
    /// The shipping address.
    Shipping,
    /// The billing address.
    Billing,
}

impl AddressType {
    /// The type as the `address_validate` override is told it (`shipping` or `billing`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Checks an address through the `address_validate` override, when one applies: its errors,
/// each a 422 on its field.
fn validate_address_override<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    shop: &Shop,
    order: &CheckoutOrder,
    kind: AddressType,
    address: &CheckoutAddress,
) -> Result<(), DomainError> {
    #[derive(Serialize)]
    struct AddressValidateRequest<'a> {
        address_type: &'static str,
        address: &'a CheckoutAddress,
    }
    let data = AddressValidateRequest {
        address_type: kind.as_str(),
        address,
    };
    let Some(OverrideAnswer::AddressValidate(validation)) =
        through_override(context, shop, order, OverrideType::AddressValidate, &data)?
    else {
        return Ok(());
    };
    if validation.valid {
        return Ok(());
    }
    let mut problems: Vec<FieldError> = validation
        .errors
        .into_iter()
        .map(|error| FieldError::new(error.field, "invalid_address", error.message))
        .collect();
    if problems.is_empty() {
        problems.push(FieldError::new(
            "address",
            "invalid_address",
            "the address was not accepted",
        ));
    }
    Err(DomainError::Invalid(problems))
}

/// What the address calls show: the address after the call (`{}` when deleted).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AddressShown {
    /// The address after the call, `{}` when deleted.
    pub address: ShownAddress,
}

/// `setShippingAddress`, `updateShippingAddress`, `setBillingAddress`,
/// `updateBillingAddress`: checked through the `address_validate` override when one applies.
/// A new shipping address drops the shipping lines and taxes worked out for the old one.
pub fn set_address<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    call: &StorefrontCall,
    kind: AddressType,
    address: CheckoutAddress,
) -> Result<StorefrontAnswer<AddressShown>, DomainError> {
    change(context.db, call, context.now, "address", |shop, order| {
        validate_address_override(context, shop, order, kind, &address)?;
        match kind {
            AddressType::Shipping => {
                order.document.shipping_address = Some(address.clone());
                forget_prices(&mut order.document);
            }
            AddressType::Billing => order.document.billing_address = Some(address.clone()),
        }
        Ok(AddressShown {
            address: ShownAddress(Some(address.clone())),
        })
    })
}

/// `deleteShippingAddress`, `deleteBillingAddress`.
pub fn delete_address<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    kind: AddressType,
    now: Timestamp,
) -> Result<StorefrontAnswer<AddressShown>, DomainError> {
    change(db, call, now, "address", |_, order| {
        match kind {
            AddressType::Shipping => {
                order.document.shipping_address = None;
                forget_prices(&mut order.document);
            }
            AddressType::Billing => order.document.billing_address = None,
        }
        Ok(AddressShown {
            address: ShownAddress(None),
        })
    })
}

/// What `validateAddress` shows when the address passed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AddressValid {
    /// Always true: an address that fails is a 422.
    pub valid: bool,
    /// Always `[]`.
    pub errors: EmptyList,
}

/// `validateAddress`: through the `address_validate` override when one applies, else the
/// address's own checks; `{"valid": true}` or 422.
pub fn validate_address<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    call: &StorefrontCall,
    address: &CheckoutAddress,
) -> Result<StorefrontAnswer<AddressValid>, DomainError> {
    let (shop, order) = read(context.db, call, context.now)?;
    validate_address_override(context, &shop, &order, AddressType::Shipping, address)?;
    Ok(answer(
        &order,
        AddressValid {
            valid: true,
            errors: EmptyList,
        },
    ))
}

/// What the shipping lines and taxes were worked out from changed: they are worked out again.
fn forget_prices(document: &mut CheckoutDocument) {
    document.available_shipping_lines.clear();
    document.selected_shipping = None;
    document.taxes.clear();
}

// ---------------------------------------------------------------------------------------
// Shipping lines

/// The shipping lines offered: the `shipping` override's, or the shop's flat rate.
fn offered_shipping_lines<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    shop: &Shop,
    order: &CheckoutOrder,
) -> Result<Vec<CheckoutShippingLine>, DomainError> {
    #[derive(Serialize)]
    struct ShippingRequest<'a> {
        shipping_address: ShownAddress,
        line_items: Vec<ShownLineItem>,
        subtotal: Cents,
        currency: &'a str,
    }
    let document = &order.document;
    let data = ShippingRequest {
        shipping_address: ShownAddress::of(document.shipping_address.as_ref()),
        line_items: document.shown_line_items(),
        subtotal: document.amounts().items,
        currency: &document.currency,
    };
    Ok(
        match through_override(context, shop, order, OverrideType::Shipping, &data)? {
            Some(OverrideAnswer::Shipping(lines)) => lines
                .into_iter()
                .map(|line| CheckoutShippingLine {
                    id: line.id,
                    description: line.description,
                    amount: Cents::from_unsigned(line.amount),
                    code: String::new(),
                })
                .collect(),
            _ => vec![CheckoutShippingLine {
                id: "flat_rate".to_string(),
                description: "Flat rate shipping".to_string(),
                amount: shop.checkout.flat_shipping_rate,
                code: "flat_rate".to_string(),
            }],
        },
    )
}

/// What `getShippingLines` shows: the lines offered.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ShippingLinesShown {
    /// The shipping lines offered now.
    pub shipping_lines: Vec<CheckoutShippingLine>,
}

/// `getShippingLines`: the lines offered now; a selected line no longer offered is dropped.
pub fn shipping_lines<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    call: &StorefrontCall,
) -> Result<StorefrontAnswer<ShippingLinesShown>, DomainError> {
    change(
        context.db,
        call,
        context.now,
        "shipping_lines",
        |shop, order| {
            let lines = offered_shipping_lines(context, shop, order)?;
            let document = &mut order.document;
            if let Some(selected) = &document.selected_shipping
                && !lines.iter().any(|line| line.id == selected.id)
            {
                document.selected_shipping = None;
                document.taxes.clear();
            }
            document.available_shipping_lines = lines.clone();
            Ok(ShippingLinesShown {
                shipping_lines: lines,
            })
        },
    )
}

/// What `changeShippingLine` shows: the line chosen.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SelectedShippingShown {
    /// The shipping line chosen.
    pub selected_shipping: CheckoutShippingLine,
}

/// `changeShippingLine`: by the line's id, or its position among those offered.
pub fn select_shipping_line<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    call: &StorefrontCall,
    choice: &str,
) -> Result<StorefrontAnswer<SelectedShippingShown>, DomainError> {
    change(context.db, call, context.now, "index", |shop, order| {
        if order.document.available_shipping_lines.is_empty() {
            order.document.available_shipping_lines = offered_shipping_lines(context, shop, order)?;
        }
        let lines = &order.document.available_shipping_lines;
        let chosen = lines
            .iter()
            .find(|line| line.id == choice)
            .or_else(|| {
                choice
                    .parse::<usize>()
                    .ok()
                    .and_then(|index| lines.get(index))
            })
            .cloned()
            .ok_or_else(|| {
                DomainError::invalid(
                    "index",
                    "unknown_shipping_line",
                    format!("no shipping line offered has the id or position {choice:?}"),
                )
            })?;
        if order.document.selected_shipping.as_ref() != Some(&chosen) {
            order.document.taxes.clear();
        }
        order.document.selected_shipping = Some(chosen.clone());
        Ok(SelectedShippingShown {
            selected_shipping: chosen.clone(),
        })
    })
}

// ---------------------------------------------------------------------------------------
// Taxes

/// The taxes of the order as it is: the `tax` override's; none when none applies.
fn taxes_of<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    shop: &Shop,
    order: &CheckoutOrder,
) -> Result<Vec<CheckoutTax>, DomainError> {
    #[derive(Serialize)]
    struct TaxRequest<'a> {
        shipping_address: ShownAddress,
        billing_address: ShownAddress,
        line_items: Vec<ShownLineItem>,
        shipping: Option<&'a CheckoutShippingLine>,
        subtotal: Cents,
        discounts: Cents,
        currency: &'a str,
    }
    let document = &order.document;
    let amounts = document.amounts();
    let data = TaxRequest {
        shipping_address: ShownAddress::of(document.shipping_address.as_ref()),
        billing_address: ShownAddress::of(document.billing_address.as_ref()),
        line_items: document.shown_line_items(),
        shipping: document.selected_shipping.as_ref(),
        subtotal: amounts.items,
        discounts: amounts.discounts,
        currency: &document.currency,
    };
    Ok(
        match through_override(context, shop, order, OverrideType::Tax, &data)? {
            Some(OverrideAnswer::Tax(lines)) => lines
                .into_iter()
                .map(|line| CheckoutTax {
                    name: line.name,
                    value: Cents::from_unsigned(line.amount),
                    is_included: false,
                })
                .collect(),
            _ => Vec::new(),
        },
    )
}

/// What `setTaxes` shows: the order's taxes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaxesShown {
    /// The order's taxes after the call.
    pub taxes: Vec<CheckoutTax>,
}

/// `setTaxes`: through the `tax` override; none when none applies.
pub fn set_taxes<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    call: &StorefrontCall,
) -> Result<StorefrontAnswer<TaxesShown>, DomainError> {
    change(context.db, call, context.now, "taxes", |shop, order| {
        order.document.taxes = taxes_of(context, shop, order)?;
        Ok(TaxesShown {
            taxes: order.document.taxes.clone(),
        })
    })
}

// ---------------------------------------------------------------------------------------
// Discounts

/// What the `discount` override says of a code: its value, or `None` when it is not valid. No
/// override, no discount codes. The override is shown every discount applied already (a code
/// that differs from the one asked about by letter case alone included), so it can refuse a
/// second of a kind; only `revaluing`, the applied discount being valued again, is left out.
/// The discount is kept under the code the override answers (`canon` answered as `CANON` is
/// the discount `CANON`), else under the code as typed.
pub(crate) fn value_discount<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    shop: &Shop,
    order: &CheckoutOrder,
    code: &str,
    revaluing: Option<usize>,
) -> Result<Option<CheckoutDiscount>, DomainError> {
    #[derive(Serialize)]
    struct AppliedDiscount<'a> {
        code: &'a str,
        amount: Cents,
        text: &'a str,
    }
    #[derive(Serialize)]
    struct DiscountRequest<'a> {
        code: &'a str,
        applied_discounts: Vec<AppliedDiscount<'a>>,
        line_items: Vec<ShownLineItem>,
        subtotal: Cents,
        currency: &'a str,
    }
    let document = &order.document;
    let values = document.discount_values();
    let data = DiscountRequest {
        code,
        applied_discounts: document
            .discounts
            .iter()
            .zip(values)
            .enumerate()
            .filter(|(index, _)| Some(*index) != revaluing)
            .map(|(_, (discount, amount))| AppliedDiscount {
                code: &discount.code,
                amount,
                text: &discount.text,
            })
            .collect(),
        line_items: document.shown_line_items(),
        subtotal: document.amounts().items,
        currency: &document.currency,
    };
    Ok(
        match through_override(context, shop, order, OverrideType::Discount, &data)? {
            Some(OverrideAnswer::Discount(answer)) if answer.valid => {
                answer.discount.map(|discount| {
                    let answered = discount.code.trim();
                    CheckoutDiscount {
                        code: if answered.is_empty() { code } else { answered }.to_string(),
                        text: discount.text,
                        value: Cents::from_unsigned(discount.amount),
                    }
                })
            }
            _ => None,
        },
    )
}

fn not_valid(code: &str) -> DomainError {
    DomainError::invalid(
        "code",
        "invalid_discount",
        format!("the discount code {code:?} is not valid for this order"),
    )
}

/// What `addDiscount` shows: the discount applied.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DiscountShown {
    /// The discount applied, with what it takes off the order.
    pub discount: ShownDiscount,
}

/// What `validateDiscount` shows of a valid code.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DiscountValid {
    /// Always true: a code that is not valid is a 422.
    pub valid: bool,
    /// The discount the code would apply, with what it would take off.
    pub discount: ShownDiscount,
}

/// `addDiscount`: valued through the `discount` override (shown every discount applied
/// already), and kept once: a discount applied already whose code is the code typed or the
/// code the override answered, in any letter case, is replaced by the new value, never
/// applied a second time.
pub fn add_discount<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    call: &StorefrontCall,
    code: &str,
) -> Result<StorefrontAnswer<DiscountShown>, DomainError> {
    change(context.db, call, context.now, "code", |shop, order| {
        let discount =
            value_discount(context, shop, order, code, None)?.ok_or_else(|| not_valid(code))?;
        let discounts = &mut order.document.discounts;
        let same = |applied: &CheckoutDiscount| {
            same_code(&applied.code, code) || same_code(&applied.code, &discount.code)
        };
        match discounts.iter().position(same) {
            Some(index) => {
                discounts[index] = discount.clone();
                // Spellings applied before this rule each kept their own entry: one is left.
                let mut seen = 0;
                discounts.retain(|applied| {
                    let repeat = same(applied) && seen > 0;
                    seen += usize::from(same(applied));
                    !repeat
                });
            }
            None => discounts.push(discount.clone()),
        }
        // Taxes worked out before depend on the discounts: worked out again.
        if !order.document.taxes.is_empty() {
            order.document.taxes = taxes_of(context, shop, order)?;
        }
        Ok(DiscountShown {
            discount: ShownDiscount::of(&discount, discount.value),
        })
    })
}

/// `validateDiscount`: `{"valid": true, "discount"}` or 422.
pub fn validate_discount<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    call: &StorefrontCall,
    code: &str,
) -> Result<StorefrontAnswer<DiscountValid>, DomainError> {
    let (shop, order) = read(context.db, call, context.now)?;
    let discount =
        value_discount(context, &shop, &order, code, None)?.ok_or_else(|| not_valid(code))?;
    Ok(answer(
        &order,
        DiscountValid {
            valid: true,
            discount: ShownDiscount::of(&discount, discount.value),
        },
    ))
}

/// Whether two codes are one, letter case aside, as a shopper's spelling and the code the
/// override answered often are (`canon`, `CANON`).
pub(crate) fn same_code(a: &str, b: &str) -> bool {
    a == b || a.to_lowercase() == b.to_lowercase()
}

/// Where the applied discount `code` names is: the one of that code, else the only one whose
/// code differs from it by letter case alone.
fn applied_discount(discounts: &[CheckoutDiscount], code: &str) -> Option<usize> {
    discounts.iter().position(|d| d.code == code).or_else(|| {
        let mut by_case = discounts
            .iter()
            .enumerate()
            .filter(|(_, d)| same_code(&d.code, code));
        match (by_case.next(), by_case.next()) {
            (Some((index, _)), None) => Some(index),
            _ => None,
        }
    })
}

/// `deleteDiscount`: 422 when the code is not applied. Taxes worked out before are worked out
/// again.
pub fn delete_discount<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    call: &StorefrontCall,
    code: &str,
) -> Result<OrderAnswer, DomainError> {
    change(context.db, call, context.now, "code", |shop, order| {
        let Some(index) = applied_discount(&order.document.discounts, code) else {
            return Err(DomainError::invalid(
                "code",
                "not_applied",
                format!("the discount code {code:?} is not applied"),
            ));
        };
        order.document.discounts.remove(index);
        if !order.document.taxes.is_empty() {
            order.document.taxes = taxes_of(context, shop, order)?;
        }
        Ok(EmptyObject {})
    })
}

// ---------------------------------------------------------------------------------------
// Payments

fn check_gateway(input: &PaymentInput) -> Result<(), DomainError> {
    if input.gateway_public_id == TEST_GATEWAY {
        Ok(())
    } else {
        Err(DomainError::invalid(
            "gateway_public_id",
            "unknown_gateway",
            format!("the only payment gateway is {TEST_GATEWAY:?}, the built-in test gateway"),
        ))
    }
}

/// A payment of `amount` where `room` is left for it (the order's balance, or for a payment
/// changed, the balance without that payment): at least a cent, never more than the room. The
/// message names the order's own `balance`.
fn check_payment_amount(amount: Cents, room: Cents, balance: Cents) -> Result<(), DomainError> {
    let refuse = |code, message: String| Err(DomainError::invalid("amount", code, message));
    if room < Cents(1) {
        refuse(
            "nothing_to_pay",
            format!(
                "the order has nothing left to pay: its balance is {} cents",
                balance.0
            ),
        )
    } else if amount < Cents(1) {
        refuse(
            "invalid_amount",
            "a payment's amount must be at least 1 cent".to_string(),
        )
    } else if amount > room {
        refuse(
            "exceeds_balance",
            format!(
                "a payment of {} cents is more than the {} cents left to pay (the order's \
                 balance is {} cents)",
                amount.0, room.0, balance.0
            ),
        )
    } else {
        Ok(())
    }
}

/// What the payment calls show: the payment after the call.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PaymentShown {
    /// The payment after the call.
    pub payment: ShownPayment,
}

/// `addPayment`: through the test gateway, for the amount given or the order's balance; never
/// more than the balance.
pub fn add_payment<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    input: PaymentInput,
    now: Timestamp,
) -> Result<StorefrontAnswer<PaymentShown>, DomainError> {
    check_gateway(&input)?;
    change(db, call, now, "payment", |_, order| {
        let balance = order.document.try_amounts()?.balance;
        let amount = Cents(input.amount.unwrap_or(balance.0));
        check_payment_amount(amount, balance, balance)?;
        let payment = CheckoutPayment {
            id: random_hex(12),
            gateway_public_id: input.gateway_public_id.clone(),
            token: input.token.clone(),
            amount,
            r#type: input.r#type.clone(),
            display_string: input.display_string.clone(),
            retain: input.retain,
            expires_at: input.expires_at.clone(),
        };
        order.document.payments.push(payment.clone());
        Ok(PaymentShown {
            payment: ShownPayment::of(&payment, &order.document.currency),
        })
    })
}

/// `updatePayment`: only the amount of the payment with this token changes (the library's
/// README); without an amount, the balance is added to it.
pub fn update_payment<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    input: PaymentInput,
    now: Timestamp,
) -> Result<StorefrontAnswer<PaymentShown>, DomainError> {
    check_gateway(&input)?;
    change(db, call, now, "payment", |_, order| {
        let document = &mut order.document;
        let balance = document.try_amounts()?.balance;
        let Some(index) = payment_index(&document.payments, input.id.as_deref(), &input.token)
        else {
            return Err(DomainError::invalid(
                "token",
                "unknown_payment",
                "no payment of the order has this token",
            ));
        };
        // The balance as it would be without this payment.
        let room = document.payments[index]
            .amount
            .checked_add(balance)
            .ok_or_else(crate::checkout::state::too_large)?;
        let amount = Cents(input.amount.unwrap_or(room.0));
        check_payment_amount(amount, room, balance)?;
        document.payments[index].amount = amount;
        let payment = document.payments[index].clone();
        Ok(PaymentShown {
            payment: ShownPayment::of(&payment, &document.currency),
        })
    })
}

/// The payment a request names: by its `id` when it gives one (the library passes payments
/// from the state), else the first with its `token`.
fn payment_index(payments: &[CheckoutPayment], id: Option<&str>, token: &str) -> Option<usize> {
    match id {
        Some(id) => payments.iter().position(|p| p.id == id),
        None => payments.iter().position(|p| p.token == token),
    }
}

/// `deletePayment` (by id, else token) and `deleteGiftCardPayment` (by id): one payment.
pub fn delete_payment<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    id: Option<&str>,
    token: &str,
    now: Timestamp,
) -> Result<OrderAnswer, DomainError> {
    change(db, call, now, "payment", |_, order| {
        let payments = &mut order.document.payments;
        let Some(index) = payment_index(payments, id, token) else {
            return Err(DomainError::invalid(
                if id.is_some() { "id" } else { "token" },
                "unknown_payment",
                "no payment of the order is the one named",
            ));
        };
        payments.remove(index);
        Ok(EmptyObject {})
    })
}

/// What `getPaymentList` shows.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PaymentsShown {
    /// The order's payments.
    pub payments: Vec<ShownPayment>,
}

/// `getPaymentList`.
pub fn payments<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    now: Timestamp,
) -> Result<StorefrontAnswer<PaymentsShown>, DomainError> {
    let (_, order) = read(db, call, now)?;
    let payments = order.document.shown_payments();
    Ok(answer(&order, PaymentsShown { payments }))
}

// ---------------------------------------------------------------------------------------
// Line items

/// What `addLineItem` shows: the line item.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LineItemShown {
    /// The line after the call, if it is in the order.
    pub line_item: Option<ShownLineItem>,
}

/// What `updateLineItemQuantity` shows: the line item's `product_data`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LineItemQuantityShown {
    /// The line's `product_data` after the call, if it is in the order.
    pub line_item: Option<ProductData>,
}

/// `addLineItem`: a variant of the catalogue; the same key adds to its quantity.
pub fn add_line_item<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    item: CartItem,
    now: Timestamp,
) -> Result<StorefrontAnswer<LineItemShown>, DomainError> {
    let mut resolved = None;
    change(db, call, now, "line_item_properties", |shop, order| {
        if resolved.is_none() {
            let mut priced = db.read_tx(|tx| {
                let mut item = item.clone();
                if item.platform_id.is_none()
                    && let Some(sku) = &item.sku
                {
                    item.platform_id = Some(variant_of_sku(tx, shop, sku)?);
                }
                priced_items(tx, shop, std::slice::from_ref(&item), "", 0, now)
            })?;
            resolved = priced.pop();
        }
        let Some(line) = resolved.clone() else {
            return Err(DomainError::invalid(
                "platform_id",
                "unknown_variant",
                "unknown variant",
            ));
        };
        let document = &mut order.document;
        let count = document.line_items.len();
        match document
            .line_items
            .iter_mut()
            .find(|existing| existing.line_item_key == line.line_item_key)
        {
            Some(existing) => add_to(existing, &line, "")?,
            None if count >= MAX_LINE_ITEMS => {
                return Err(DomainError::invalid(
                    "line_item_key",
                    "too_many",
                    format!("an order has at most {MAX_LINE_ITEMS} line items"),
                ));
            }
            None => document.line_items.push(line.clone()),
        }
        forget_prices(document);
        Ok(LineItemShown {
            line_item: document.shown_line_item(&line.line_item_key),
        })
    })
}

/// `addLineItem` by SKU alone: the platform id of the shop's one live variant with that SKU.
fn variant_of_sku(
    tx: &mut dyn CheckoutRepositories,
    shop: &Shop,
    sku: &str,
) -> Result<String, DomainError> {
    let ids = tx.variant_ids_of_sku(shop.id, sku)?;
    match ids.as_slice() {
        [id] => Ok(id.clone()),
        [] => Err(DomainError::invalid(
            "sku",
            "unknown_variant",
            format!("no product of the shop has a variant with SKU {sku:?}"),
        )),
        several => Err(DomainError::invalid(
            "sku",
            "ambiguous_sku",
            format!(
                "{} variants have SKU {sku:?}: add one by its platform_id",
                several.len()
            ),
        )),
    }
}

fn unknown_line_item(key: &str) -> DomainError {
    DomainError::invalid(
        "line_item_key",
        "unknown_line_item",
        format!("no line item has the key {key:?}"),
    )
}

/// `updateLineItemQuantity`.
pub fn set_line_item_quantity<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    key: &str,
    quantity: i64,
    now: Timestamp,
) -> Result<StorefrontAnswer<LineItemQuantityShown>, DomainError> {
    change(db, call, now, "quantity", |_, order| {
        let document = &mut order.document;
        let item = document
            .line_items
            .iter_mut()
            .find(|item| item.line_item_key == key)
            .ok_or_else(|| unknown_line_item(key))?;
        item.quantity = quantity;
        forget_prices(document);
        Ok(LineItemQuantityShown {
            line_item: document.shown_line_item(key).map(|line| line.product_data),
        })
    })
}

/// `deleteLineItem`.
pub fn delete_line_item<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    key: &str,
    now: Timestamp,
) -> Result<OrderAnswer, DomainError> {
    change(db, call, now, "line_item_key", |_, order| {
        let document = &mut order.document;
        let before = document.line_items.len();
        document.line_items.retain(|item| item.line_item_key != key);
        if document.line_items.len() == before {
            return Err(unknown_line_item(key));
        }
        forget_prices(document);
        Ok(EmptyObject {})
    })
}

// ---------------------------------------------------------------------------------------
// Inventory, meta data, refresh

/// The stage of an inventory check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum InventoryStage {
    /// `initial`: a check while the order is made (the default of `checkInventory`).
    Initial,
    /// `final`: the last check before the order is placed; Process Order makes it.
    Final,
}

impl InventoryStage {
    /// The stage named `text` (`initial` or `final`), if it is one.
    pub fn parse(text: &str) -> Option<InventoryStage> {
        text.parse().ok()
    }

    /// The stage's name, as the `inventory` override is told it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// How an inventory check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = CheckoutInventoryResult)]
pub enum InventoryResult {
    /// Every line item is available in its quantity.
    Pass,
    /// Some line items are short: `failed_items` names them.
    Fail,
    /// No `inventory` override applies: nothing was checked.
    NotEnabled,
}

/// A line item the `inventory` override says is short.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = CheckoutInventoryFailedItem)]
pub struct FailedItem {
    /// The line's key.
    pub line_item_key: String,
    /// The variant's platform id.
    pub platform_variant_id: String,
    /// How many are available, as the override says (0 when it gives no number).
    pub available_quantity: u64,
}

/// `inventory_check` (`IInventoryCheck`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = CheckoutInventoryCheck)]
pub struct InventoryCheck {
    /// How the check came out.
    pub result: InventoryResult,
    /// The line items that are short; empty unless the check failed.
    pub failed_items: Vec<FailedItem>,
}

/// The inventory check of the order: through the `inventory` override; `not_enabled` when
/// none applies.
pub(crate) fn inventory_check<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    shop: &Shop,
    order: &CheckoutOrder,
    stage: InventoryStage,
) -> Result<InventoryCheck, DomainError> {
    #[derive(Serialize)]
    struct InventoryRequest {
        stage: &'static str,
        items: Vec<ItemReference>,
    }
    let data = InventoryRequest {
        stage: stage.as_str(),
        items: order
            .document
            .line_items
            .iter()
            .map(ItemReference::of)
            .collect(),
    };
    let Some(OverrideAnswer::Inventory(answers)) =
        through_override(context, shop, order, OverrideType::Inventory, &data)?
    else {
        return Ok(InventoryCheck {
            result: InventoryResult::NotEnabled,
            failed_items: Vec::new(),
        });
    };
    let failed_items: Vec<FailedItem> = order
        .document
        .line_items
        .iter()
        .filter_map(|item| {
            let answer = answers
                .iter()
                .find(|a| a.line_item_key == item.line_item_key)?;
            let short = !answer.available
                || answer.quantity.is_some_and(|quantity| {
                    i64::try_from(quantity).unwrap_or(i64::MAX) < item.quantity
                });
            short.then(|| FailedItem {
                line_item_key: item.line_item_key.clone(),
                platform_variant_id: item.variant_id.clone(),
                available_quantity: answer.quantity.unwrap_or(0),
            })
        })
        .collect();
    let result = if failed_items.is_empty() {
        InventoryResult::Pass
    } else {
        InventoryResult::Fail
    };
    Ok(InventoryCheck {
        result,
        failed_items,
    })
}

/// What `checkInventory` shows.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct InventoryShown {
    /// The inventory check of the order.
    pub inventory_check: InventoryCheck,
}

/// `checkInventory`: `{"inventory_check", "application_state"}`.
pub fn check_inventory<D: CheckoutDatabase + OverrideDatabase>(
    context: &CheckoutContext<'_, D>,
    call: &StorefrontCall,
    stage: InventoryStage,
) -> Result<StorefrontAnswer<InventoryShown>, DomainError> {
    let (shop, order) = read(context.db, call, context.now)?;
    let inventory_check = inventory_check(context, &shop, &order, stage)?;
    Ok(answer(&order, InventoryShown { inventory_check }))
}

/// What `patchOrderMetaData` shows: the meta data after the call.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MetaDataShown {
    /// The order's meta data after the call.
    pub order_meta_data: CheckoutMetaData,
}

/// `patchOrderMetaData`.
pub fn patch_meta_data<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    patch: MetaDataPatch,
    now: Timestamp,
) -> Result<StorefrontAnswer<MetaDataShown>, DomainError> {
    change(db, call, now, "order_meta_data", |_, order| {
        let meta = &mut order.document.order_meta_data;
        if let Some(parameters) = patch.cart_parameters.clone() {
            meta.cart_parameters = parameters;
        }
        if let Some(attributes) = patch.note_attributes.clone() {
            meta.note_attributes = attributes;
        }
        if let Some(notes) = patch.notes.clone() {
            meta.notes = notes;
        }
        if let Some(tags) = patch.tags.clone() {
            meta.tags = tags;
        }
        Ok(MetaDataShown {
            order_meta_data: meta.clone(),
        })
    })
}

/// `getRefreshedApplicationState`.
pub fn refresh<D: CheckoutDatabase>(
    db: &D,
    call: &StorefrontCall,
    now: Timestamp,
) -> Result<OrderAnswer, DomainError> {
    let (_, order) = read(db, call, now)?;
    Ok(shown(&order))
}

/// The answer of a route that only shows the order (`GET /refresh` and the like).
pub fn shown(order: &CheckoutOrder) -> OrderAnswer {
    answer(order, EmptyObject {})
}
