//! Subscriptions: create (idempotent), list (keyset cursor), get,
//! update and the nine actions, each emitting its webhooks (cancel with its reason, pause
//! until a date).

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::access::auth::Access;
use mercer_domain::kernel::ids::{LineItemId, SubscriptionId};
use mercer_domain::subscriptions::cancellation::{SubscriptionCancelRequest, parse_cancel};
use mercer_domain::subscriptions::input::{
    SubscriptionCreateRequest, SubscriptionFrequencyRequest, SubscriptionPaymentMethodRequest,
    SubscriptionQuantityRequest, SubscriptionShippingAddressRequest, SubscriptionSkipRequest,
    SubscriptionUpdateRequest, parse_frequency, parse_payment_method_change, parse_quantity,
    parse_shipping_address_change, parse_skip, parse_subscription_update,
};
use mercer_domain::subscriptions::operations::{
    ActionRequest, CursorPagination, create_subscription_from_body, get_subscription,
    list_subscriptions, take_subscription_action, update_subscription,
};
use mercer_domain::subscriptions::pausing::{SubscriptionPauseRequest, parse_pause};
use mercer_domain::subscriptions::query::parse_list_query;
use mercer_domain::subscriptions::resources::{Actor, ActorType, Subscription};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::customers::{json_value, wake};
use crate::http::error::ApiError;
use crate::http::extract::{
    Authorized, JsonBody, OptionalJsonBody, TypedPath, query_pairs, scopes,
};
use crate::http::state::AppState;

// The routes' paths. Each names the segments its handlers read (an id that is not a number is
// its resource's 404); `{shop}` is read by the access check.

/// `…/subscriptions/{id}` and its actions.
#[derive(Deserialize)]
pub struct SubscriptionPath {
    id: SubscriptionId,
}

/// `…/subscriptions/{id}/line_items/{line_item_id}/quantity`.
#[derive(Deserialize)]
pub struct LineItemPath {
    id: SubscriptionId,
    line_item_id: LineItemId,
}

/// Who acts, for the status log: the API token (an app's OAuth token carries the app's name).
fn actor(access: &Access) -> Actor {
    Actor {
        kind: ActorType::Api,
        id: access.token.id.0,
        name: access.token.name.clone(),
    }
}

/// `{"subscription": {…}}`.
#[derive(Serialize, ToSchema)]
pub struct SubscriptionAnswer {
    subscription: Subscription,
}

/// A page of the shop's subscriptions; `pagination.next` is the cursor of the next one.
#[derive(Serialize, ToSchema)]
pub struct SubscriptionList {
    subscriptions: Vec<Subscription>,
    pagination: CursorPagination,
}

fn subscription_answer(subscription: Subscription) -> HttpResponse {
    HttpResponse::Ok().json(SubscriptionAnswer { subscription })
}

/// Creates a subscription.
///
/// Creates a subscription for the customer given. Sending the same `idempotency_key` with the same
/// body again answers with the subscription created the first time; the same key with another body
/// is a conflict. Each invalid field is reported with its path.
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/subscriptions", operation_id = "create_subscription", summary = "Create a subscription", tag = "Subscriptions",
    request_body = SubscriptionCreateRequest,
    params(("shop" = String, Path, description = "The shop's identifier")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionAnswer)))]
pub async fn create(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let body = json_value(body)?;
    let (shop, now) = (request.access.shop.clone(), state.now());
    let actor = actor(&request.access);
    let (subscription, _created) = state
        .write(move |tx| create_subscription_from_body(tx, &shop, &body, actor, now))
        .await?;
    wake(&state);
    Ok(subscription_answer(subscription))
}

/// Lists subscriptions.
///
/// Filtered by status and platform customer, optionally with each subscription's customer expanded,
/// a page at a time by cursor.
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/subscriptions", operation_id = "list_subscriptions", summary = "List subscriptions", tag = "Subscriptions",
    params(("shop" = String, Path, description = "The shop's identifier"),
        ("subscription_status" = Option<String>, Query, description = "Only these statuses (`active`, `inactive`, `processing`, `scheduled`, `paused`): repeated, as `subscription_status[]`, or joined by commas"),
        ("svc_platform_customer_id" = Option<String>, Query, description = "Only these customers' subscriptions, by customer id (integers): repeated, as `svc_platform_customer_id[]`, or joined by commas; at most 250 ids"),
        ("expand" = Option<String>, Query, description = "`customer`: each subscription's `customer` is filled in"),
        ("filter" = Option<String>, Query, description = "Conditions every subscription listed meets, joined by commas (at most 100): `lt`, `lte`, `gt`, `gte` or `eq` of an integer field (`id`, `shop_id`, `customer_id`, `billing_address_id`, `shipping_address_id`, `orders_processed`, `current_retries`) or a date-time field (`next_order_datetime`, `next_payment_datetime`, `next_processing_datetime`, `last_payment_datetime`, `last_order_datetime`, `last_processed_datetime`, `status_changed_at`, `placed_at`, `created_at`, `updated_at`), such as `gte(next_order_datetime:2024-06-01T00:00:00Z),lt(orders_processed:3)`"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 250, description = "Subscriptions per page (default 50)"),
        ("cursor" = Option<String>, Query, max_length = 255, description = "The `pagination.next` of the page before; the first page without it")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = SubscriptionList)))]
pub async fn list(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let query = parse_list_query(&query_pairs(&http)?)?;
    let shop = request.access.shop.clone();
    let (subscriptions, pagination) = state
        .read(move |tx| list_subscriptions(tx, &shop, &query))
        .await?;
    Ok(HttpResponse::Ok().json(SubscriptionList {
        subscriptions,
        pagination,
    }))
}

/// Gets a subscription.
///
/// Optionally with its customer expanded (`expand=customer`).
#[utoipa::path(get, path = "/subscriptions/v1/shops/{shop}/subscriptions/{id}", operation_id = "get_subscription", summary = "Get a subscription", tag = "Subscriptions",
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The subscription's id"),
        ("expand" = Option<String>, Query, description = "`customer`: the subscription's `customer` is filled in")),
    security(("api_token" = ["read_subscriptions"]), ("oauth2" = ["read_subscriptions"])),
    responses((status = 200, body = SubscriptionAnswer)))]
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: TypedPath<SubscriptionPath>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let expand = parse_list_query(&query_pairs(&http)?)?.expand_customer;
    let shop = request.access.shop.clone();
    let subscription = state
        .read(move |tx| get_subscription(tx, &shop, id, expand))
        .await?;
    Ok(subscription_answer(subscription))
}

/// Updates a subscription.
///
/// The fields given under `subscription` replace the stored ones.
#[utoipa::path(put, path = "/subscriptions/v1/shops/{shop}/subscriptions/{id}", operation_id = "update_subscription", summary = "Update a subscription", tag = "Subscriptions",
    request_body = SubscriptionUpdateRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The subscription's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionAnswer)))]
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<SubscriptionPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let (shop, now) = (request.access.shop.clone(), state.now());
    let update = parse_subscription_update(&json_value(body)?, &shop)?;
    let actor = actor(&request.access);
    let subscription = state
        .write(move |tx| update_subscription(tx, &shop, id, update, actor, now))
        .await?;
    wake(&state);
    Ok(subscription_answer(subscription))
}

async fn act(
    state: web::Data<AppState>,
    access: &Access,
    id: SubscriptionId,
    action: ActionRequest,
) -> Result<HttpResponse, ApiError> {
    let (shop, now, actor) = (access.shop.clone(), state.now(), actor(access));
    let subscription = state
        .write(move |tx| take_subscription_action(tx, &shop, id, action, actor, now))
        .await?;
    wake(&state);
    Ok(subscription_answer(subscription))
}

/// An action without a body, `POST …/subscriptions/{id}/<action>`, that answers with the
/// subscription.
macro_rules! bodiless_action {
    ($name:ident, $action:expr, $path:literal, $operation_id:literal, $summary:literal, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path(post, path = $path, operation_id = $operation_id, summary = $summary, description = $doc, tag = "Subscriptions",
            params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The subscription's id")),
            security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
            responses((status = 200, body = SubscriptionAnswer)))]
        pub async fn $name(
            state: web::Data<AppState>,
            request: Authorized<scopes::WriteSubscriptions>,
            path: TypedPath<SubscriptionPath>,
        ) -> Result<HttpResponse, ApiError> {
            let id = path.get()?.id;
            act(state, &request.access, id, $action).await
        }
    };
}

/// Cancels a subscription.
///
/// An active or paused subscription becomes inactive. The body is optional: a `reason` (the code
/// of one of the shop's cancellation reasons) and a `comment`, kept on the status log entry and
/// sent in `subscription_cancelled`'s `cancellation`. A paused subscription's `resume_on` is
/// dropped.
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/subscriptions/{id}/cancel", operation_id = "cancel_subscription", summary = "Cancel a subscription", tag = "Subscriptions",
    request_body = Option<SubscriptionCancelRequest>,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The subscription's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionAnswer)))]
pub async fn cancel(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<SubscriptionPath>,
    body: OptionalJsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let cancel = parse_cancel(&body.value()?)?;
    act(state, &request.access, id, ActionRequest::Cancel(cancel)).await
}

bodiless_action!(
    reactivate,
    ActionRequest::Reactivate,
    "/subscriptions/v1/shops/{shop}/subscriptions/{id}/reactivate",
    "reactivate_subscription",
    "Reactivate a subscription",
    "An inactive subscription becomes active again."
);
/// Pauses a subscription.
///
/// An active subscription is paused; no order is placed until it is resumed. The body is
/// optional: with `resume_on` (a date after today in the shop's time zone), Mercer resumes it
/// once that day begins in the shop's time zone, as Resume does.
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/subscriptions/{id}/pause", operation_id = "pause_subscription", summary = "Pause a subscription", tag = "Subscriptions",
    request_body = Option<SubscriptionPauseRequest>,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The subscription's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionAnswer)))]
pub async fn pause(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<SubscriptionPath>,
    body: OptionalJsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let pause = parse_pause(&body.value()?)?;
    act(state, &request.access, id, ActionRequest::Pause(pause)).await
}

bodiless_action!(
    resume,
    ActionRequest::Resume,
    "/subscriptions/v1/shops/{shop}/subscriptions/{id}/resume",
    "resume_subscription",
    "Resume a subscription",
    "A paused subscription becomes active again (and its `resume_on` is dropped)."
);

/// Skips a subscription order.
///
/// Skips the order due at the `order_datetime` given.
#[utoipa::path(post, path = "/subscriptions/v1/shops/{shop}/subscriptions/{id}/skip", operation_id = "skip_subscription_order", summary = "Skip a subscription order", tag = "Subscriptions",
    request_body = SubscriptionSkipRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The subscription's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionAnswer)))]
pub async fn skip(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<SubscriptionPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let order_datetime = parse_skip(&json_value(body)?)?;
    act(
        state,
        &request.access,
        id,
        ActionRequest::Skip { order_datetime },
    )
    .await
}

/// Changes a line item's quantity.
///
/// Sets the quantity of one line item of the subscription.
#[utoipa::path(put, path = "/subscriptions/v1/shops/{shop}/subscriptions/{id}/line_items/{line_item_id}/quantity", operation_id = "change_subscription_quantity", summary = "Change a line item's quantity", tag = "Subscriptions",
    request_body = SubscriptionQuantityRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The subscription's id"), ("line_item_id" = i64, Path, description = "The line item's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionAnswer)))]
pub async fn change_quantity(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<LineItemPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let LineItemPath { id, line_item_id } = path.get()?;
    let quantity = parse_quantity(&json_value(body)?)?;
    let action = ActionRequest::ChangeQuantity {
        line_item_id,
        quantity,
    };
    act(state, &request.access, id, action).await
}

/// Changes a subscription's frequency.
///
/// Sets the subscription's `order_rrule`.
#[utoipa::path(put, path = "/subscriptions/v1/shops/{shop}/subscriptions/{id}/frequency", operation_id = "change_subscription_frequency", summary = "Change a subscription's frequency", tag = "Subscriptions",
    request_body = SubscriptionFrequencyRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The subscription's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionAnswer)))]
pub async fn change_frequency(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<SubscriptionPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let schedule = parse_frequency(&json_value(body)?, &request.access.shop)?;
    let action = ActionRequest::ChangeFrequency(Box::new(schedule));
    act(state, &request.access, id, action).await
}

/// Changes a subscription's shipping address.
///
/// Takes a new `shipping_address`, or the `address_id` of one of the customer's addresses.
#[utoipa::path(put, path = "/subscriptions/v1/shops/{shop}/subscriptions/{id}/shipping_address", operation_id = "change_subscription_shipping_address", summary = "Change a subscription's shipping address", tag = "Subscriptions",
    request_body = SubscriptionShippingAddressRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The subscription's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionAnswer)))]
pub async fn change_shipping_address(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<SubscriptionPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let change = parse_shipping_address_change(&json_value(body)?)?;
    act(
        state,
        &request.access,
        id,
        ActionRequest::ChangeShippingAddress(change),
    )
    .await
}

/// Changes a subscription's payment method.
///
/// Takes the payment method's token and the payment gateway's public id.
#[utoipa::path(put, path = "/subscriptions/v1/shops/{shop}/subscriptions/{id}/payment_method", operation_id = "change_subscription_payment_method", summary = "Change a subscription's payment method", tag = "Subscriptions",
    request_body = SubscriptionPaymentMethodRequest,
    params(("shop" = String, Path, description = "The shop's identifier"), ("id" = i64, Path, description = "The subscription's id")),
    security(("api_token" = ["write_subscriptions"]), ("oauth2" = ["write_subscriptions"])),
    responses((status = 200, body = SubscriptionAnswer)))]
pub async fn change_payment_method(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: TypedPath<SubscriptionPath>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path.get()?.id;
    let change = parse_payment_method_change(&json_value(body)?)?;
    act(
        state,
        &request.access,
        id,
        ActionRequest::ChangePaymentMethod(change),
    )
    .await
}
