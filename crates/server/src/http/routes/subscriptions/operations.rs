//! Subscriptions (seed 002 §4.2, contract §5): create (idempotent), list (keyset cursor), get,
//! update and the nine actions, each emitting its webhooks.

use actix_web::{HttpRequest, HttpResponse, web};
use mercer_domain::access::auth::Access;
use mercer_domain::subscriptions::input::{
    parse_frequency, parse_payment_method_change, parse_quantity, parse_shipping_address_change,
    parse_skip, parse_subscription_update,
};
use mercer_domain::subscriptions::operations::{
    ActionRequest, create_subscription_from_body, get_subscription, list_subscriptions,
    take_subscription_action, update_subscription,
};
use mercer_domain::subscriptions::query::parse_list_query;
use mercer_domain::subscriptions::resources::{Actor, ActorType};
use serde_json::json;

use super::customers::{json_value, path_id, wake};
use crate::http::error::ApiError;
use crate::http::extract::{Authorized, JsonBody, query_pairs, scopes};
use crate::http::state::AppState;

/// Who acts, for the status log: the API token (an app's OAuth token carries the app's name).
fn actor(access: &Access) -> Actor {
    Actor {
        kind: ActorType::Api,
        id: access.token.id,
        name: access.token.name.clone(),
    }
}

fn subscription_answer(
    subscription: &mercer_domain::subscriptions::resources::Subscription,
) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "subscription": subscription }))
}

/// `POST …/subscriptions` `{customer, subscription}` → 200 `{"subscription"}`; the same
/// `idempotency_key` and body again → 200 with the first; another body → 409; 422 per field.
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
    Ok(subscription_answer(&subscription))
}

/// `GET …/subscriptions?subscription_status=&svc_platform_customer_id=&expand=&filter=&limit=&cursor=`.
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
    Ok(
        HttpResponse::Ok()
            .json(json!({ "subscriptions": subscriptions, "pagination": pagination })),
    )
}

/// `GET …/subscriptions/{id}?expand=customer` → `{"subscription"}`.
pub async fn get(
    state: web::Data<AppState>,
    request: Authorized<scopes::ReadSubscriptions>,
    path: web::Path<(String, String)>,
    http: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "subscription")?;
    let expand = parse_list_query(&query_pairs(&http)?)?.expand_customer;
    let shop = request.access.shop.clone();
    let subscription = state
        .read(move |tx| get_subscription(tx, &shop, id, expand))
        .await?;
    Ok(subscription_answer(&subscription))
}

/// `PUT …/subscriptions/{id}` `{"subscription": {…}}`.
pub async fn update(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "subscription")?;
    let (shop, now) = (request.access.shop.clone(), state.now());
    let update = parse_subscription_update(&json_value(body)?, &shop)?;
    let actor = actor(&request.access);
    let subscription = state
        .write(move |tx| update_subscription(tx, &shop, id, update, actor, now))
        .await?;
    wake(&state);
    Ok(subscription_answer(&subscription))
}

async fn act(
    state: web::Data<AppState>,
    access: &Access,
    id: i64,
    action: ActionRequest,
) -> Result<HttpResponse, ApiError> {
    let (shop, now, actor) = (access.shop.clone(), state.now(), actor(access));
    let subscription = state
        .write(move |tx| take_subscription_action(tx, &shop, id, action, actor, now))
        .await?;
    wake(&state);
    Ok(subscription_answer(&subscription))
}

macro_rules! bodiless_action {
    ($name:ident, $action:expr) => {
        pub async fn $name(
            state: web::Data<AppState>,
            request: Authorized<scopes::WriteSubscriptions>,
            path: web::Path<(String, String)>,
        ) -> Result<HttpResponse, ApiError> {
            let id = path_id(&path.1, "subscription")?;
            act(state, &request.access, id, $action).await
        }
    };
}

bodiless_action!(cancel, ActionRequest::Cancel);
bodiless_action!(reactivate, ActionRequest::Reactivate);
bodiless_action!(pause, ActionRequest::Pause);
bodiless_action!(resume, ActionRequest::Resume);

/// `POST …/subscriptions/{id}/skip` `{"order_datetime"}`.
pub async fn skip(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "subscription")?;
    let order_datetime = parse_skip(&json_value(body)?)?;
    act(
        state,
        &request.access,
        id,
        ActionRequest::Skip { order_datetime },
    )
    .await
}

/// `PUT …/subscriptions/{id}/line_items/{line_item_id}/quantity` `{"quantity"}`.
pub async fn change_quantity(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "subscription")?;
    let line_item_id = path_id(&path.2, "line_item")?;
    let quantity = parse_quantity(&json_value(body)?)?;
    let action = ActionRequest::ChangeQuantity {
        line_item_id,
        quantity,
    };
    act(state, &request.access, id, action).await
}

/// `PUT …/subscriptions/{id}/frequency` `{"order_rrule"}`.
pub async fn change_frequency(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "subscription")?;
    let schedule = parse_frequency(&json_value(body)?, &request.access.shop)?;
    let action = ActionRequest::ChangeFrequency(Box::new(schedule));
    act(state, &request.access, id, action).await
}

/// `PUT …/subscriptions/{id}/shipping_address` `{"shipping_address"}` or `{"address_id"}`.
pub async fn change_shipping_address(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "subscription")?;
    let change = parse_shipping_address_change(&json_value(body)?)?;
    act(
        state,
        &request.access,
        id,
        ActionRequest::ChangeShippingAddress(change),
    )
    .await
}

/// `PUT …/subscriptions/{id}/payment_method` `{"payment_method_token",
/// "payment_gateway_public_id"}`.
pub async fn change_payment_method(
    state: web::Data<AppState>,
    request: Authorized<scopes::WriteSubscriptions>,
    path: web::Path<(String, String)>,
    body: JsonBody,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&path.1, "subscription")?;
    let change = parse_payment_method_change(&json_value(body)?)?;
    act(
        state,
        &request.access,
        id,
        ActionRequest::ChangePaymentMethod(change),
    )
    .await
}
