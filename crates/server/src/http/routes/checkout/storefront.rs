//! The storefront routes the vendor's frontend library calls (`lib/variables`), each with the
//! bearer JWT of its one order. Every answer is `{"data": {…, "application_state"}}`; errors
//! are the library's `errors[]`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, HttpResponse, web};
use mercer_domain::DomainError;
use mercer_domain::checkout::input::{
    ADDRESS_FIELDS, CheckoutAddressFields, CheckoutCustomerFields, CheckoutDiscountCodeFields,
    CheckoutLineItemFields, CheckoutLineItemKeyFields, CheckoutLineItemQuantityFields,
    CheckoutMetaDataFields, CheckoutPaymentFields, CheckoutPaymentIdFields,
    CheckoutShippingLineChoice, parse_add_line_item, parse_address, parse_applied_discount_code,
    parse_customer, parse_discount_code, parse_inventory_stage, parse_line_item_key,
    parse_line_item_quantity, parse_meta_data_patch, parse_payment, parse_payment_id,
    parse_shipping_line_choice,
};
use mercer_domain::checkout::processing::process_order as process;
use mercer_domain::checkout::shown::EmptyObject;
use mercer_domain::checkout::state::CheckoutAddress;
use mercer_domain::checkout::storefront::{
    self, AddressShown, AddressType, AddressValid, CheckoutContext, CustomerShown, DiscountShown,
    DiscountValid, InventoryShown, LineItemQuantityShown, LineItemShown, MetaDataShown,
    PaymentShown, PaymentsShown, SelectedShippingShown, ShippingLinesShown, StorefrontAnswer,
    StorefrontCall, TaxesShown, Valid,
};
use mercer_domain::kernel::body::{BodyObject, Field, RawText, parse_object};
use mercer_domain::kernel::limits::check_parameter;
use mercer_domain::overrides::OverrideCaller;
use mercer_store::Store;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::http::error::ApiError;
use crate::http::extract::{JsonBody, bearer_token, query_pairs};
use crate::http::state::{AppState, run_blocking};

/// The shop and order of the path, and the request's bearer token, checked before anything
/// else of the request (its body): 401 for none, a token of another order, an expired one.
/// The use case checks it again, as every use case of the storefront does.
pub struct Storefront(StorefrontCall);

impl FromRequest for Storefront {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = request.app_data::<web::Data<AppState>>().cloned();
        let call = presented(request);
        Box::pin(async move {
            let (state, call) = (state.ok_or_else(ApiError::internal)?, call?);
            let (checked, now) = (call.clone(), state.now());
            state
                .read(move |tx| storefront::authorize(tx, &checked, now))
                .await?;
            Ok(Storefront(call))
        })
    }
}

/// The call a request presents: the path's shop and order, its bearer token.
fn presented(request: &HttpRequest) -> Result<StorefrontCall, ApiError> {
    let info = request.match_info();
    let token = bearer_token(request)
        .map(|token| token.expose().to_string())
        .filter(|token| !token.is_empty());
    match token {
        None => Err(ApiError::from(DomainError::Unauthenticated)),
        Some(token) => Ok(StorefrontCall {
            shop_identifier: info.get("shop").unwrap_or_default().to_string(),
            public_order_id: info.get("public_order_id").unwrap_or_default().to_string(),
            token,
        }),
    }
}

/// What a use case runs with: the store, the override caller, now.
struct Run {
    store: Store,
    overrides: Arc<dyn OverrideCaller>,
    now: mercer_domain::Timestamp,
}

impl Run {
    fn of(state: &AppState) -> Run {
        Run {
            store: state.store.clone(),
            overrides: state.overrides.clone(),
            now: state.now(),
        }
    }

    fn context(&self) -> CheckoutContext<'_, Store> {
        CheckoutContext {
            db: &self.store,
            overrides: self.overrides.as_ref(),
            now: self.now,
        }
    }
}

/// Runs a use case off the async threads and answers `{"data": …}`, in the route's
/// `envelope`.
async fn answer<T: Send + 'static, E: Serialize>(
    state: &AppState,
    envelope: impl FnOnce(T) -> E,
    work: impl FnOnce(Run) -> Result<T, DomainError> + Send + 'static,
) -> Result<HttpResponse, ApiError> {
    let run = Run::of(state);
    let data = run_blocking(move || work(run)).await?;
    Ok(HttpResponse::Ok().json(envelope(data)))
}

/// `{"data": {"customer", "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontCustomerAnswer {
    data: StorefrontAnswer<CustomerShown>,
}

/// `{"data": {"valid": true, "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontValidAnswer {
    data: StorefrontAnswer<Valid>,
}

/// `{"data": {"address", "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontAddressAnswer {
    data: StorefrontAnswer<AddressShown>,
}

/// `{"data": {"valid": true, "errors": [], "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontAddressValidAnswer {
    data: StorefrontAnswer<AddressValid>,
}

/// `{"data": {"shipping_lines", "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontShippingLinesAnswer {
    data: StorefrontAnswer<ShippingLinesShown>,
}

/// `{"data": {"selected_shipping", "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontSelectedShippingAnswer {
    data: StorefrontAnswer<SelectedShippingShown>,
}

/// `{"data": {"taxes", "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontTaxesAnswer {
    data: StorefrontAnswer<TaxesShown>,
}

/// `{"data": {"discount", "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontDiscountAnswer {
    data: StorefrontAnswer<DiscountShown>,
}

/// `{"data": {"valid": true, "discount", "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontDiscountValidAnswer {
    data: StorefrontAnswer<DiscountValid>,
}

/// `{"data": {"payments", "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontPaymentsAnswer {
    data: StorefrontAnswer<PaymentsShown>,
}

/// `{"data": {"payment", "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontPaymentAnswer {
    data: StorefrontAnswer<PaymentShown>,
}

/// `{"data": {"line_item", "application_state"}}`: the line item.
#[derive(Serialize, ToSchema)]
pub struct StorefrontLineItemAnswer {
    data: StorefrontAnswer<LineItemShown>,
}

/// `{"data": {"line_item", "application_state"}}`: the line item's `product_data`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontLineItemQuantityAnswer {
    data: StorefrontAnswer<LineItemQuantityShown>,
}

/// `{"data": {"inventory_check", "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontInventoryAnswer {
    data: StorefrontAnswer<InventoryShown>,
}

/// `{"data": {"order_meta_data", "application_state"}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontMetaDataAnswer {
    data: StorefrontAnswer<MetaDataShown>,
}

/// `{"data": {"application_state"}}`: the order after the call.
#[derive(Serialize, ToSchema)]
pub struct StorefrontOrderAnswer {
    data: StorefrontAnswer<EmptyObject>,
}

/// `{"success": true}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontLogged {
    /// Always true: the message was logged.
    success: bool,
}

/// `{"data": {"success": true}}`.
#[derive(Serialize, ToSchema)]
pub struct StorefrontLogAnswer {
    data: StorefrontLogged,
}

/// The body of `addLog`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct StorefrontLogMessage {
    /// The storefront's message, logged (its first 1000 characters).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    message: Field<RawText>,
}
impl BodyObject for StorefrontLogMessage {}

/// A storefront body: JSON, or nothing at all (`{}`), as the library sends on some routes.
fn body(body: JsonBody) -> Result<Value, ApiError> {
    let bytes = body.bytes()?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(&bytes).map_err(ApiError::malformed_json)
}

/// A body that may be absent altogether, without a JSON content type (a DELETE from a client
/// other than the library): `{}`.
fn optional_body(request: &HttpRequest, given: JsonBody) -> Result<Value, ApiError> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    let typed = request.headers().contains_key(header::CONTENT_TYPE);
    if !typed && declared.is_none_or(|length| length == 0) {
        return Ok(json!({}));
    }
    body(given)
}

/// The query parameter `name`, checked (no NUL, at most `max` characters).
fn query(request: &HttpRequest, name: &str, max: usize) -> Result<Option<String>, ApiError> {
    let pairs = query_pairs(request)?;
    let value = pairs
        .into_iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value);
    if let Some(value) = &value {
        check_parameter(name, value, max)
            .map_err(|problem| ApiError::from(DomainError::BadRequest(vec![problem])))?;
    }
    Ok(value)
}

/// Adds a guest customer.
///
/// Sets the guest customer of the order (`addGuestCustomer`).
#[utoipa::path(post, path = "/checkout/storefront/{shop}/{public_order_id}/customer/guest", operation_id = "add_checkout_guest_customer", summary = "Add a guest customer", tag = "Checkout: storefront",
    request_body = CheckoutCustomerFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontCustomerAnswer)))]
pub async fn add_guest_customer(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_customer(&body(given)?)?;
    answer(
        &state,
        |data| StorefrontCustomerAnswer { data },
        move |run| storefront::set_customer(&run.store, &call.0, input, run.now),
    )
    .await
}

/// Updates the customer.
///
/// The same as adding a guest customer, keeping the customer's public id, and their marketing
/// consent unless it is given (`updateCustomer`).
#[utoipa::path(put, path = "/checkout/storefront/{shop}/{public_order_id}/customer", operation_id = "update_checkout_customer", summary = "Update the customer", tag = "Checkout: storefront",
    request_body = CheckoutCustomerFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontCustomerAnswer)))]
pub async fn update_customer(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    add_guest_customer(state, call, given).await
}

/// Removes the customer.
///
/// Removes the order's customer (`deleteCustomer`).
#[utoipa::path(delete, path = "/checkout/storefront/{shop}/{public_order_id}/customer", operation_id = "delete_checkout_customer", summary = "Remove the customer", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontCustomerAnswer)))]
pub async fn delete_customer(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(
        &state,
        |data| StorefrontCustomerAnswer { data },
        move |run| storefront::delete_customer(&run.store, &call.0, run.now),
    )
    .await
}

/// Validates an email address.
///
/// Answers that the address is valid, or reports a validation error on `email_address`
/// (`validateEmail`).
#[utoipa::path(get, path = "/checkout/storefront/{shop}/{public_order_id}/validate_email_address", operation_id = "validate_checkout_email_address", summary = "Validate an email address", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)"),
        ("email_address" = Option<String>, Query, max_length = 320, description = "The email address to check (needed: none is 422)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontValidAnswer)))]
pub async fn validate_email(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let email = query(&request, "email_address", 320)?.unwrap_or_default();
    answer(
        &state,
        |data| StorefrontValidAnswer { data },
        move |run| storefront::validate_email(&run.store, &call.0, &email, run.now),
    )
    .await
}

async fn set_address(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
    kind: AddressType,
) -> Result<HttpResponse, ApiError> {
    let address = parse_address(&body(given)?)?;
    answer(
        &state,
        |data| StorefrontAddressAnswer { data },
        move |run| storefront::set_address(&run.context(), &call.0, kind, address),
    )
    .await
}

async fn delete_address(
    state: web::Data<AppState>,
    call: Storefront,
    kind: AddressType,
) -> Result<HttpResponse, ApiError> {
    answer(
        &state,
        |data| StorefrontAddressAnswer { data },
        move |run| storefront::delete_address(&run.store, &call.0, kind, run.now),
    )
    .await
}

/// Sets the shipping address.
///
/// Checked through the `address_validate` override when one applies. The shipping lines and taxes
/// worked out for the old address are dropped (`setShippingAddress`).
#[utoipa::path(post, path = "/checkout/storefront/{shop}/{public_order_id}/addresses/shipping", operation_id = "set_checkout_shipping_address", summary = "Set the shipping address", tag = "Checkout: storefront",
    request_body = CheckoutAddressFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontAddressAnswer)))]
pub async fn set_shipping_address(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    set_address(state, call, given, AddressType::Shipping).await
}

/// Updates the shipping address.
///
/// The same as setting it (`updateShippingAddress`).
#[utoipa::path(put, path = "/checkout/storefront/{shop}/{public_order_id}/addresses/shipping", operation_id = "update_checkout_shipping_address", summary = "Update the shipping address", tag = "Checkout: storefront",
    request_body = CheckoutAddressFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontAddressAnswer)))]
pub async fn update_shipping_address(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    set_address(state, call, given, AddressType::Shipping).await
}

/// Removes the shipping address.
///
/// The order's shipping address is empty afterwards (`deleteShippingAddress`).
#[utoipa::path(delete, path = "/checkout/storefront/{shop}/{public_order_id}/addresses/shipping", operation_id = "delete_checkout_shipping_address", summary = "Remove the shipping address", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontAddressAnswer)))]
pub async fn delete_shipping_address(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    delete_address(state, call, AddressType::Shipping).await
}

/// Sets the billing address.
///
/// Checked through the `address_validate` override when one applies (`setBillingAddress`).
#[utoipa::path(post, path = "/checkout/storefront/{shop}/{public_order_id}/addresses/billing", operation_id = "set_checkout_billing_address", summary = "Set the billing address", tag = "Checkout: storefront",
    request_body = CheckoutAddressFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontAddressAnswer)))]
pub async fn set_billing_address(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    set_address(state, call, given, AddressType::Billing).await
}

/// Updates the billing address.
///
/// The same as setting it (`updateBillingAddress`).
#[utoipa::path(put, path = "/checkout/storefront/{shop}/{public_order_id}/addresses/billing", operation_id = "update_checkout_billing_address", summary = "Update the billing address", tag = "Checkout: storefront",
    request_body = CheckoutAddressFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontAddressAnswer)))]
pub async fn update_billing_address(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    set_address(state, call, given, AddressType::Billing).await
}

/// Removes the billing address.
///
/// The order's billing address is empty afterwards (`deleteBillingAddress`).
#[utoipa::path(delete, path = "/checkout/storefront/{shop}/{public_order_id}/addresses/billing", operation_id = "delete_checkout_billing_address", summary = "Remove the billing address", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontAddressAnswer)))]
pub async fn delete_billing_address(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    delete_address(state, call, AddressType::Billing).await
}

/// Validates an address.
///
/// Checks the address given in the query, through the `address_validate` override when one applies,
/// and answers that it is valid or reports why not (`validateAddress`).
#[utoipa::path(get, path = "/checkout/storefront/{shop}/{public_order_id}/validate_address", operation_id = "validate_checkout_address", summary = "Validate an address", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)"),
        ("first_name" = Option<String>, Query, max_length = 255, description = "The first name on the address"),
        ("last_name" = Option<String>, Query, max_length = 255, description = "The last name on the address"),
        ("address_line_1" = Option<String>, Query, max_length = 255, description = "The first street line (needed)"),
        ("address_line_2" = Option<String>, Query, max_length = 255, description = "The second street line"),
        ("city" = Option<String>, Query, max_length = 255, description = "The city (needed)"),
        ("postal_code" = Option<String>, Query, max_length = 255, description = "The postal code"),
        ("province" = Option<String>, Query, max_length = 255, description = "The province or state, by name"),
        ("province_code" = Option<String>, Query, max_length = 255, description = "The province or state, by code"),
        ("country" = Option<String>, Query, max_length = 255, description = "The country, by name"),
        ("country_code" = Option<String>, Query, max_length = 255, description = "The country's ISO 3166-1 alpha-2 code (needed)"),
        ("business_name" = Option<String>, Query, max_length = 255, description = "The company on the address"),
        ("phone_number" = Option<String>, Query, max_length = 255, description = "The phone number on the address")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontAddressValidAnswer)))]
pub async fn validate_address(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let mut fields = serde_json::Map::new();
    for name in ADDRESS_FIELDS {
        if let Some(value) = query(&request, name, 255)? {
            fields.insert(name.to_string(), Value::String(value));
        }
    }
    let address: CheckoutAddress = parse_address(&Value::Object(fields))?;
    answer(
        &state,
        |data| StorefrontAddressValidAnswer { data },
        move |run| storefront::validate_address(&run.context(), &call.0, &address),
    )
    .await
}

/// Lists shipping lines.
///
/// The lines offered now: the `shipping` override's, or the shop's flat rate. A selected line that
/// is no longer offered is dropped (`getShippingLines`).
#[utoipa::path(get, path = "/checkout/storefront/{shop}/{public_order_id}/shipping_lines", operation_id = "list_checkout_shipping_lines", summary = "List shipping lines", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontShippingLinesAnswer)))]
pub async fn shipping_lines(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(
        &state,
        |data| StorefrontShippingLinesAnswer { data },
        move |run| storefront::shipping_lines(&run.context(), &call.0),
    )
    .await
}

/// Selects a shipping line.
///
/// Selects a line by its id, or by its position among those offered (`changeShippingLine`).
#[utoipa::path(post, path = "/checkout/storefront/{shop}/{public_order_id}/shipping_lines", operation_id = "select_checkout_shipping_line", summary = "Select a shipping line", tag = "Checkout: storefront",
    request_body = CheckoutShippingLineChoice,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontSelectedShippingAnswer)))]
pub async fn select_shipping_line(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let choice = parse_shipping_line_choice(&body(given)?)?;
    answer(
        &state,
        |data| StorefrontSelectedShippingAnswer { data },
        move |run| storefront::select_shipping_line(&run.context(), &call.0, &choice),
    )
    .await
}

/// Sets the taxes.
///
/// Works the taxes out through the `tax` override; none when no override applies (`setTaxes`).
#[utoipa::path(post, path = "/checkout/storefront/{shop}/{public_order_id}/taxes", operation_id = "set_checkout_taxes", summary = "Set the taxes", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontTaxesAnswer)))]
pub async fn set_taxes(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(
        &state,
        |data| StorefrontTaxesAnswer { data },
        move |run| storefront::set_taxes(&run.context(), &call.0),
    )
    .await
}

/// Adds a discount code.
///
/// Values the code through the `discount` override; a code that is not valid is reported as a
/// validation error (`addDiscount`).
#[utoipa::path(post, path = "/checkout/storefront/{shop}/{public_order_id}/discounts", operation_id = "add_checkout_discount", summary = "Add a discount code", tag = "Checkout: storefront",
    request_body = CheckoutDiscountCodeFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontDiscountAnswer)))]
pub async fn add_discount(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let code = parse_discount_code(&body(given)?)?;
    answer(
        &state,
        |data| StorefrontDiscountAnswer { data },
        move |run| storefront::add_discount(&run.context(), &call.0, &code),
    )
    .await
}

/// Removes a discount code.
///
/// Removes the code applied, in any letter case; a code that is not applied is reported as a
/// validation error (`deleteDiscount`).
#[utoipa::path(delete, path = "/checkout/storefront/{shop}/{public_order_id}/discounts", operation_id = "delete_checkout_discount", summary = "Remove a discount code", tag = "Checkout: storefront",
    request_body = CheckoutDiscountCodeFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontOrderAnswer)))]
pub async fn delete_discount(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let code = parse_applied_discount_code(&optional_body(&request, given)?)?;
    answer(
        &state,
        |data| StorefrontOrderAnswer { data },
        move |run| storefront::delete_discount(&run.context(), &call.0, &code),
    )
    .await
}

/// Validates a discount code.
///
/// Answers that the code is valid, with the discount it gives, or reports a code that is not valid
/// (`validateDiscount`).
#[utoipa::path(get, path = "/checkout/storefront/{shop}/{public_order_id}/validate_discount_code", operation_id = "validate_checkout_discount_code", summary = "Validate a discount code", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)"),
        ("discount_code" = Option<String>, Query, max_length = 255, description = "The discount code to value (needed: none is 422)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontDiscountValidAnswer)))]
pub async fn validate_discount(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let code = query(&request, "discount_code", 255)?.unwrap_or_default();
    let code = parse_discount_code(&json!({ "code": code }))?;
    answer(
        &state,
        |data| StorefrontDiscountValidAnswer { data },
        move |run| storefront::validate_discount(&run.context(), &call.0, &code),
    )
    .await
}

/// Lists payments.
///
/// The order's payments (`getPaymentList`).
#[utoipa::path(get, path = "/checkout/storefront/{shop}/{public_order_id}/payments", operation_id = "list_checkout_payments", summary = "List payments", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontPaymentsAnswer)))]
pub async fn payments(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(
        &state,
        |data| StorefrontPaymentsAnswer { data },
        move |run| storefront::payments(&run.store, &call.0, run.now),
    )
    .await
}

/// Adds a payment.
///
/// Pays through the test gateway, for the amount given or the order's balance, and never more than
/// the balance (`addPayment`).
#[utoipa::path(post, path = "/checkout/storefront/{shop}/{public_order_id}/payments", operation_id = "add_checkout_payment", summary = "Add a payment", tag = "Checkout: storefront",
    request_body = CheckoutPaymentFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontPaymentAnswer)))]
pub async fn add_payment(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_payment(&body(given)?)?;
    answer(
        &state,
        |data| StorefrontPaymentAnswer { data },
        move |run| storefront::add_payment(&run.store, &call.0, input, run.now),
    )
    .await
}

/// Updates a payment.
///
/// Only the amount of the payment named, by its `id` or else its `token`, changes; without an
/// amount, the balance is added to it (`updatePayment`).
#[utoipa::path(put, path = "/checkout/storefront/{shop}/{public_order_id}/payments", operation_id = "update_checkout_payment", summary = "Update a payment", tag = "Checkout: storefront",
    request_body = CheckoutPaymentFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontPaymentAnswer)))]
pub async fn update_payment(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_payment(&body(given)?)?;
    answer(
        &state,
        |data| StorefrontPaymentAnswer { data },
        move |run| storefront::update_payment(&run.store, &call.0, input, run.now),
    )
    .await
}

/// Removes a payment.
///
/// Removes the payment named by its `id`, or else its `token` (`deletePayment`).
#[utoipa::path(delete, path = "/checkout/storefront/{shop}/{public_order_id}/payments", operation_id = "delete_checkout_payment", summary = "Remove a payment", tag = "Checkout: storefront",
    request_body = CheckoutPaymentFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontOrderAnswer)))]
pub async fn delete_payment(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_payment(&optional_body(&request, given)?)?;
    answer(
        &state,
        |data| StorefrontOrderAnswer { data },
        move |run| {
            storefront::delete_payment(
                &run.store,
                &call.0,
                input.id.as_deref(),
                &input.token,
                run.now,
            )
        },
    )
    .await
}

/// Removes a gift card payment.
///
/// Removes the gift card payment of the `id` given (`deleteGiftCardPayment`).
#[utoipa::path(delete, path = "/checkout/storefront/{shop}/{public_order_id}/payments/gift_card", operation_id = "delete_checkout_gift_card_payment", summary = "Remove a gift card payment", tag = "Checkout: storefront",
    request_body = CheckoutPaymentIdFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontOrderAnswer)))]
pub async fn delete_gift_card_payment(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = parse_payment_id(&optional_body(&request, given)?)?;
    answer(
        &state,
        |data| StorefrontOrderAnswer { data },
        move |run| storefront::delete_payment(&run.store, &call.0, Some(&id), "", run.now),
    )
    .await
}

/// Adds a line item.
///
/// Adds a variant of the catalogue to the order; the same key again adds to its quantity
/// (`addLineItem`).
#[utoipa::path(post, path = "/checkout/storefront/{shop}/{public_order_id}/items", operation_id = "add_checkout_line_item", summary = "Add a line item", tag = "Checkout: storefront",
    request_body = CheckoutLineItemFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontLineItemAnswer)))]
pub async fn add_line_item(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let item = parse_add_line_item(&body(given)?)?;
    answer(
        &state,
        |data| StorefrontLineItemAnswer { data },
        move |run| storefront::add_line_item(&run.store, &call.0, item, run.now),
    )
    .await
}

/// Updates a line item's quantity.
///
/// `updateLineItemQuantity`.
#[utoipa::path(put, path = "/checkout/storefront/{shop}/{public_order_id}/items", operation_id = "update_checkout_line_item_quantity", summary = "Update a line item's quantity", tag = "Checkout: storefront",
    request_body = CheckoutLineItemQuantityFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontLineItemQuantityAnswer)))]
pub async fn update_line_item(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let (key, quantity) = parse_line_item_quantity(&body(given)?)?;
    answer(
        &state,
        |data| StorefrontLineItemQuantityAnswer { data },
        move |run| storefront::set_line_item_quantity(&run.store, &call.0, &key, quantity, run.now),
    )
    .await
}

/// Removes a line item.
///
/// `deleteLineItem`.
#[utoipa::path(delete, path = "/checkout/storefront/{shop}/{public_order_id}/items", operation_id = "delete_checkout_line_item", summary = "Remove a line item", tag = "Checkout: storefront",
    request_body = CheckoutLineItemKeyFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontOrderAnswer)))]
pub async fn delete_line_item(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let key = parse_line_item_key(&optional_body(&request, given)?)?;
    answer(
        &state,
        |data| StorefrontOrderAnswer { data },
        move |run| storefront::delete_line_item(&run.store, &call.0, &key, run.now),
    )
    .await
}

/// Checks the inventory.
///
/// Checks the order's items through the `inventory` override; `not_enabled` when no override
/// applies (`checkInventory`).
#[utoipa::path(get, path = "/checkout/storefront/{shop}/{public_order_id}/check_inventory", operation_id = "check_checkout_inventory", summary = "Check the inventory", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)"),
        ("stage" = Option<String>, Query, max_length = 16, description = "The stage of the check: `initial` (the default) or `final`")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontInventoryAnswer)))]
pub async fn check_inventory(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let stage = parse_inventory_stage(query(&request, "stage", 16)?.as_deref())?;
    answer(
        &state,
        |data| StorefrontInventoryAnswer { data },
        move |run| storefront::check_inventory(&run.context(), &call.0, stage),
    )
    .await
}

/// Updates the order's metadata.
///
/// The fields given, when not null, replace the order's (`patchOrderMetaData`).
#[utoipa::path(patch, path = "/checkout/storefront/{shop}/{public_order_id}/meta_data", operation_id = "patch_checkout_meta_data", summary = "Update the order's metadata", tag = "Checkout: storefront",
    request_body = CheckoutMetaDataFields,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontMetaDataAnswer)))]
pub async fn patch_meta_data(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let patch = parse_meta_data_patch(&body(given)?)?;
    answer(
        &state,
        |data| StorefrontMetaDataAnswer { data },
        move |run| storefront::patch_meta_data(&run.store, &call.0, patch, run.now),
    )
    .await
}

/// Refreshes the order.
///
/// The order's current application state (`getRefreshedApplicationState`).
#[utoipa::path(get, path = "/checkout/storefront/{shop}/{public_order_id}/refresh", operation_id = "refresh_checkout_order", summary = "Refresh the order", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontOrderAnswer)))]
pub async fn refresh(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(
        &state,
        |data| StorefrontOrderAnswer { data },
        move |run| storefront::refresh(&run.store, &call.0, run.now),
    )
    .await
}

/// Processes the order.
///
/// Completes the order; the webhooks and the push to the platform then run at once
/// (`processOrder`).
#[utoipa::path(post, path = "/checkout/storefront/{shop}/{public_order_id}/process_order", operation_id = "process_checkout_order", summary = "Process the order", tag = "Checkout: storefront",
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontOrderAnswer)))]
pub async fn process_order(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    let run = Run::of(&state);
    let result = run_blocking(move || process(&run.context(), &call.0)).await;
    // A declined payment emits order/failed even though the answer is an error.
    state.webhooks.notify();
    state.jobs.notify();
    Ok(HttpResponse::Ok().json(StorefrontOrderAnswer { data: result? }))
}

/// Logs a storefront message.
///
/// Logs the storefront's message and answers with success (`addLog`).
#[utoipa::path(post, path = "/checkout/storefront/{shop}/{public_order_id}/log", operation_id = "log_checkout_message", summary = "Log a storefront message", tag = "Checkout: storefront",
    request_body = StorefrontLogMessage,
    params(("shop" = String, Path, description = "The shop's identifier"), ("public_order_id" = String, Path, description = "The order's id at the storefront, as Init Order answered it (32 hex characters)")),
    security(("checkout_jwt" = [])),
    responses((status = 200, body = StorefrontLogAnswer)))]
pub async fn log(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    // The message is logged as written; one that is not text is logged empty, not refused.
    let message = parse_object::<StorefrontLogMessage>(&body(given)?)
        .message
        .into_value()
        .map(|RawText(text)| text.chars().take(1000).collect::<String>())
        .unwrap_or_default();
    let public_order_id = call.0.public_order_id.clone();
    answer(
        &state,
        |data| StorefrontLogAnswer { data },
        move |run| {
            storefront::read(&run.store, &call.0, run.now)?;
            log::info!(
                target: "mercer::checkout",
                "storefront of {public_order_id}: {}",
                message.escape_debug()
            );
            Ok(StorefrontLogged { success: true })
        },
    )
    .await
}
