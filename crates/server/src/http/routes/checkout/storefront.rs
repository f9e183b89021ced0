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
    ADDRESS_FIELDS, parse_add_line_item, parse_address, parse_applied_discount_code,
    parse_customer, parse_discount_code, parse_inventory_stage, parse_line_item_key,
    parse_line_item_quantity, parse_meta_data_patch, parse_payment, parse_payment_id,
    parse_shipping_line_choice,
};
use mercer_domain::checkout::processing::process_order as process;
use mercer_domain::checkout::state::CheckoutAddress;
use mercer_domain::checkout::storefront::{self, AddressType, CheckoutContext, StorefrontCall};
use mercer_domain::kernel::limits::check_parameter;
use mercer_domain::overrides::OverrideCaller;
use mercer_store::Store;
use serde::Serialize;
use serde_json::{Value, json};

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

/// Runs a use case off the async threads and answers `{"data": …}`.
async fn answer<T: Serialize + Send + 'static>(
    state: &AppState,
    work: impl FnOnce(Run) -> Result<T, DomainError> + Send + 'static,
) -> Result<HttpResponse, ApiError> {
    let run = Run::of(state);
    let data = run_blocking(move || work(run)).await?;
    Ok(HttpResponse::Ok().json(json!({ "data": data })))
}

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

pub async fn add_guest_customer(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_customer(&body(given)?)?;
    answer(&state, move |run| {
        storefront::set_customer(&run.store, &call.0, input, run.now)
    })
    .await
}

pub async fn update_customer(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    add_guest_customer(state, call, given).await
}

pub async fn delete_customer(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(&state, move |run| {
        storefront::delete_customer(&run.store, &call.0, run.now)
    })
    .await
}

pub async fn validate_email(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let email = query(&request, "email_address", 320)?.unwrap_or_default();
    answer(&state, move |run| {
        storefront::validate_email(&run.store, &call.0, &email, run.now)
    })
    .await
}

async fn set_address(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
    kind: AddressType,
) -> Result<HttpResponse, ApiError> {
    let address = parse_address(&body(given)?)?;
    answer(&state, move |run| {
        storefront::set_address(&run.context(), &call.0, kind, address)
    })
    .await
}

pub async fn set_shipping_address(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    set_address(state, call, given, AddressType::Shipping).await
}

pub async fn set_billing_address(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    set_address(state, call, given, AddressType::Billing).await
}

pub async fn delete_shipping_address(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(&state, move |run| {
        storefront::delete_address(&run.store, &call.0, AddressType::Shipping, run.now)
    })
    .await
}

pub async fn delete_billing_address(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(&state, move |run| {
        storefront::delete_address(&run.store, &call.0, AddressType::Billing, run.now)
    })
    .await
}

/// `validateAddress`: the address in the query.
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
    answer(&state, move |run| {
        storefront::validate_address(&run.context(), &call.0, &address)
    })
    .await
}

pub async fn shipping_lines(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(&state, move |run| {
        storefront::shipping_lines(&run.context(), &call.0)
    })
    .await
}

pub async fn select_shipping_line(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let choice = parse_shipping_line_choice(&body(given)?)?;
    answer(&state, move |run| {
        storefront::select_shipping_line(&run.context(), &call.0, &choice)
    })
    .await
}

pub async fn set_taxes(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(&state, move |run| {
        storefront::set_taxes(&run.context(), &call.0)
    })
    .await
}

pub async fn add_discount(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let code = parse_discount_code(&body(given)?)?;
    answer(&state, move |run| {
        storefront::add_discount(&run.context(), &call.0, &code)
    })
    .await
}

pub async fn delete_discount(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let code = parse_applied_discount_code(&optional_body(&request, given)?)?;
    answer(&state, move |run| {
        storefront::delete_discount(&run.context(), &call.0, &code)
    })
    .await
}

pub async fn validate_discount(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let code = query(&request, "discount_code", 255)?.unwrap_or_default();
    let code = parse_discount_code(&json!({ "code": code }))?;
    answer(&state, move |run| {
        storefront::validate_discount(&run.context(), &call.0, &code)
    })
    .await
}

pub async fn payments(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(&state, move |run| {
        storefront::payments(&run.store, &call.0, run.now)
    })
    .await
}

pub async fn add_payment(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_payment(&body(given)?)?;
    answer(&state, move |run| {
        storefront::add_payment(&run.store, &call.0, input, run.now)
    })
    .await
}

pub async fn update_payment(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_payment(&body(given)?)?;
    answer(&state, move |run| {
        storefront::update_payment(&run.store, &call.0, input, run.now)
    })
    .await
}

pub async fn delete_payment(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let input = parse_payment(&optional_body(&request, given)?)?;
    answer(&state, move |run| {
        storefront::delete_payment(
            &run.store,
            &call.0,
            input.id.as_deref(),
            &input.token,
            run.now,
        )
    })
    .await
}

/// `deleteGiftCardPayment`: `{"id"}`.
pub async fn delete_gift_card_payment(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = parse_payment_id(&optional_body(&request, given)?)?;
    answer(&state, move |run| {
        storefront::delete_payment(&run.store, &call.0, Some(&id), "", run.now)
    })
    .await
}

pub async fn add_line_item(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let item = parse_add_line_item(&body(given)?)?;
    answer(&state, move |run| {
        storefront::add_line_item(&run.store, &call.0, item, run.now)
    })
    .await
}

pub async fn update_line_item(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let (key, quantity) = parse_line_item_quantity(&body(given)?)?;
    answer(&state, move |run| {
        storefront::set_line_item_quantity(&run.store, &call.0, &key, quantity, run.now)
    })
    .await
}

pub async fn delete_line_item(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let key = parse_line_item_key(&optional_body(&request, given)?)?;
    answer(&state, move |run| {
        storefront::delete_line_item(&run.store, &call.0, &key, run.now)
    })
    .await
}

pub async fn check_inventory(
    state: web::Data<AppState>,
    call: Storefront,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let stage = parse_inventory_stage(query(&request, "stage", 16)?.as_deref())?;
    answer(&state, move |run| {
        storefront::check_inventory(&run.context(), &call.0, stage)
    })
    .await
}

pub async fn patch_meta_data(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let patch = parse_meta_data_patch(&body(given)?)?;
    answer(&state, move |run| {
        storefront::patch_meta_data(&run.store, &call.0, patch, run.now)
    })
    .await
}

pub async fn refresh(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    answer(&state, move |run| {
        storefront::refresh(&run.store, &call.0, run.now)
    })
    .await
}

/// `processOrder`: then the webhooks and the push to the platform run at once.
pub async fn process_order(
    state: web::Data<AppState>,
    call: Storefront,
) -> Result<HttpResponse, ApiError> {
    let run = Run::of(&state);
    let result = run_blocking(move || process(&run.context(), &call.0)).await;
    // A declined payment emits order/failed even though the answer is an error.
    state.webhooks.notify();
    state.jobs.notify();
    Ok(HttpResponse::Ok().json(json!({ "data": result? })))
}

/// `addLog`: the storefront's message, logged; `{"data": {"success": true}}`.
pub async fn log(
    state: web::Data<AppState>,
    call: Storefront,
    given: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let given = body(given)?;
    let message = given
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .take(1000)
        .collect::<String>();
    let public_order_id = call.0.public_order_id.clone();
    answer(&state, move |run| {
        storefront::read(&run.store, &call.0, run.now)?;
        log::info!(
            target: "mercer::checkout",
            "storefront of {public_order_id}: {}",
            message.escape_debug()
        );
        Ok(json!({"success": true}))
    })
    .await
}
