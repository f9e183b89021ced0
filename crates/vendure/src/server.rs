//! The connector's HTTP side: the connector operations under `/{version}/shops/{shop}`, each call
//! checked with the connector kit; `/vendure/events`, where the Mercer plugin pushes Vendure's
//! changes; and `/healthz`, `/readyz`.

use std::sync::Arc;

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::middleware::{Next, from_fn};
use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use mercer_connector::headers;
use mercer_connector::kit::{
    DEFAULT_MAX_SKEW_SECONDS, NonceCache, SignedHeaders, SignedMessage, VerifiedMessage,
    page_limit, target_uri, verification_answer, verification_proof, verify_call,
};
use mercer_domain::Timestamp;
use mercer_domain::platform::resources::{Customer, CustomerAddress, Order, Payment};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::operations;
use crate::relay::{Change, Relay};
use crate::vendure::{Vendure, VendureError};

/// What the connector serves with: the shop it serves, its secret, Vendure, and the relay
/// that sends Vendure's changes on to Mercer.
pub struct Connector {
    /// The shop identifier Mercer calls the connector for.
    pub shop: String,
    /// The shop's connector shared secret: it signs Mercer's calls and the plugin's pushes.
    pub secret: String,
    pub vendure: Vendure,
    pub relay: Relay,
    nonces: NonceCache,
    /// Held through each change the connector makes: a change is several Admin API calls (an
    /// order's draft, lines, addresses, shipping, state), and Vendure on its embedded SQLite
    /// driver mixes up transactions that overlap.
    writes: std::sync::Mutex<()>,
}

impl Connector {
    pub fn new(shop: &str, secret: &str, vendure: Vendure, relay: Relay) -> Connector {
        Connector {
            shop: shop.to_string(),
            secret: secret.to_string(),
            vendure,
            relay,
            nonces: NonceCache::default(),
            writes: std::sync::Mutex::new(()),
        }
    }
}

type State = web::Data<Arc<Connector>>;

fn header<'a>(request: &'a HttpRequest, name: &str) -> Option<&'a str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

fn error_json(status: StatusCode, message: &str) -> HttpResponse {
    HttpResponse::build(status).json(json!({ "error": message }))
}

/// Logs each call: method, path, status and how long it took (no query: it may hold an email).
pub async fn log_call(
    request: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let started = std::time::Instant::now();
    let method = request.method().to_string();
    let path = request.path().to_string();
    let response = next.call(request).await?;
    let status = response.status().as_u16();
    let ms = started.elapsed().as_millis() as u64;
    tracing::info!(method, path, status, ms, "answered");
    Ok(response)
}

/// Checks Mercer's signatures (`X-HMAC` and the message signature) on every operation call,
/// and that the call is for the shop this connector serves.
async fn gate(
    mut request: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(connector) = request.app_data::<State>().cloned() else {
        return Ok(request.into_response(HttpResponse::InternalServerError().finish()));
    };
    if request.match_info().get("shop") != Some(connector.shop.as_str()) {
        let answer = error_json(StatusCode::NOT_FOUND, "unknown shop");
        return Ok(request.into_response(answer));
    }
    let body = request.extract::<web::Bytes>().await?;
    request.set_payload(actix_web::dev::Payload::from(body.clone()));
    let verified = {
        let http = request.request();
        let path_and_query = http
            .uri()
            .path_and_query()
            .map_or_else(|| http.path().to_string(), |p| p.as_str().to_string());
        let info = http.connection_info();
        let uri = target_uri(info.scheme(), info.host(), &path_and_query);
        let signed = SignedHeaders {
            timestamp: header(http, headers::TIMESTAMP),
            hmac: header(http, headers::HMAC),
            compatible_hmac: header(http, headers::COMPATIBLE_HMAC),
        };
        let method = http.method().to_string();
        let message = SignedMessage {
            method: &method,
            target_uri: &uri,
            signature_input: header(http, headers::SIGNATURE_INPUT),
            signature: header(http, headers::SIGNATURE),
            content_digest: header(http, headers::CONTENT_DIGEST),
            body: &body,
        };
        verify_call(
            &signed,
            &message,
            &connector.secret,
            Timestamp::now(),
            DEFAULT_MAX_SKEW_SECONDS,
            &connector.nonces,
        )
    };
    match verified {
        Ok(verified) => {
            request.extensions_mut().insert(verified);
            next.call(request).await
        }
        Err(error) => {
            tracing::warn!(%error, path = request.path(), "refused a call not signed by Mercer");
            let answer = error_json(
                StatusCode::UNAUTHORIZED,
                "the call's signature is not valid",
            );
            Ok(request.into_response(answer))
        }
    }
}

async fn verification(request: HttpRequest, connector: State) -> HttpResponse {
    let timestamp = header(&request, headers::TIMESTAMP).unwrap_or_default();
    let nonce = request
        .extensions()
        .get::<VerifiedMessage>()
        .map(|verified| verified.nonce.clone())
        .unwrap_or_default();
    HttpResponse::Ok()
        .insert_header((
            headers::HMAC,
            verification_answer(&connector.secret, timestamp),
        ))
        .insert_header((
            headers::VERIFICATION_PROOF,
            verification_proof(&connector.secret, &nonce),
        ))
        .json(json!({}))
}

/// Runs a blocking call to Vendure off actix's threads.
async fn blocking<T: Send + 'static>(
    connector: &State,
    work: impl FnOnce(&Connector) -> Result<T, VendureError> + Send + 'static,
) -> Result<T, VendureError> {
    let connector = Arc::clone(connector);
    web::block(move || work(&connector))
        .await
        .unwrap_or_else(|error| Err(VendureError::Unreachable(error.to_string())))
}

/// [`blocking`] for a change: one at a time.
async fn writing<T: Send + 'static>(
    connector: &State,
    work: impl FnOnce(&Connector) -> Result<T, VendureError> + Send + 'static,
) -> Result<T, VendureError> {
    blocking(connector, |c| {
        let _one_at_a_time = c
            .writes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        work(c)
    })
    .await
}

fn failure(error: &VendureError) -> HttpResponse {
    match error {
        VendureError::NotFound => error_json(StatusCode::NOT_FOUND, "not found"),
        VendureError::Refused(message) => {
            tracing::warn!(message, "Vendure refused the call");
            error_json(StatusCode::UNPROCESSABLE_ENTITY, message)
        }
        VendureError::Forbidden | VendureError::Unreachable(_) => {
            tracing::error!(%error, "Vendure did not answer");
            error_json(StatusCode::BAD_GATEWAY, "Vendure did not answer")
        }
    }
}

fn answer<T: serde::Serialize>(
    status: StatusCode,
    key: &str,
    result: Result<T, VendureError>,
) -> HttpResponse {
    match result {
        Ok(value) => HttpResponse::build(status).json(json!({ "data": { key: value } })),
        Err(error) => failure(&error),
    }
}

fn no_content(result: Result<(), VendureError>) -> HttpResponse {
    match result {
        Ok(()) => HttpResponse::NoContent().finish(),
        Err(error) => failure(&error),
    }
}

fn page<T: serde::Serialize>(
    key: &str,
    result: Result<operations::Page<T>, VendureError>,
) -> HttpResponse {
    match result {
        Ok((items, pagination)) => {
            HttpResponse::Ok().json(json!({ "data": { key: items }, "pagination": pagination }))
        }
        Err(error) => failure(&error),
    }
}

/// `{"data":{key: T}}` of a request body; an unknown field is ignored, a wrong shape is 422.
fn entity<T: DeserializeOwned + Default>(body: &[u8], key: &str) -> Result<T, VendureError> {
    if body.is_empty() {
        return Ok(T::default());
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| VendureError::Refused(format!("the body is not JSON: {error}")))?;
    let inner = value
        .pointer(&format!("/data/{key}"))
        .cloned()
        .unwrap_or(Value::Null);
    if inner.is_null() {
        return Err(VendureError::Refused(format!("the body has no data.{key}")));
    }
    serde_json::from_value(inner)
        .map_err(|error| VendureError::Refused(format!("data.{key}: {error}")))
}

#[derive(Deserialize)]
struct ListQuery {
    limit: Option<String>,
    cursor: Option<String>,
    email: Option<String>,
}

type Id = web::Path<(String, String, String)>;
type Ids = web::Path<(String, String, String, String)>;

async fn list_customers(connector: State, query: web::Query<ListQuery>) -> HttpResponse {
    let ListQuery {
        limit,
        cursor,
        email,
    } = query.into_inner();
    let result = blocking(&connector, move |c| {
        let limit = page_limit(limit.as_deref());
        operations::list_customers(&c.vendure, limit, cursor.as_deref(), email.as_deref())
    });
    page("customers", result.await)
}

async fn create_customer(connector: State, body: web::Bytes) -> HttpResponse {
    let result = writing(&connector, move |c| {
        let sent: Customer = entity(&body, "customer")?;
        operations::create_customer(&c.vendure, &sent)
    });
    answer(StatusCode::CREATED, "customer", result.await)
}

async fn update_customer(connector: State, id: Id, body: web::Bytes) -> HttpResponse {
    let result = writing(&connector, move |c| {
        let sent: Customer = entity(&body, "customer")?;
        operations::update_customer(&c.vendure, &id.2, &sent)
    });
    answer(StatusCode::OK, "customer", result.await)
}

async fn delete_customer(connector: State, id: Id) -> HttpResponse {
    no_content(
        writing(&connector, move |c| {
            operations::delete_customer(&c.vendure, &id.2)
        })
        .await,
    )
}

async fn validate_customer(connector: State, id: Id, body: web::Bytes) -> HttpResponse {
    let result = blocking(&connector, move |c| {
        let info: Value = entity(&body, "token_info")?;
        let token = info
            .get("token")
            .and_then(Value::as_str)
            .unwrap_or_default();
        operations::validate_customer_token(&c.vendure, &id.2, token)
    });
    let result = result.await.map(|active| json!({ "active": active }));
    answer(StatusCode::OK, "token_status", result)
}

async fn create_address(connector: State, id: Id, body: web::Bytes) -> HttpResponse {
    let result = writing(&connector, move |c| {
        let sent: CustomerAddress = entity(&body, "address")?;
        operations::create_address(&c.vendure, &id.2, &sent)
    });
    answer(StatusCode::CREATED, "address", result.await)
}

async fn update_address(connector: State, ids: Ids, body: web::Bytes) -> HttpResponse {
    let result = writing(&connector, move |c| {
        let sent: CustomerAddress = entity(&body, "address")?;
        operations::update_address(&c.vendure, &ids.2, &ids.3, &sent)
    });
    answer(StatusCode::OK, "address", result.await)
}

async fn delete_address(connector: State, ids: Ids) -> HttpResponse {
    let result = writing(&connector, move |c| {
        operations::delete_address(&c.vendure, &ids.2, &ids.3)
    });
    no_content(result.await)
}

async fn list_orders(connector: State, query: web::Query<ListQuery>) -> HttpResponse {
    let ListQuery { limit, cursor, .. } = query.into_inner();
    let result = blocking(&connector, move |c| {
        operations::list_orders(&c.vendure, page_limit(limit.as_deref()), cursor.as_deref())
    });
    page("orders", result.await)
}

async fn list_products(connector: State, query: web::Query<ListQuery>) -> HttpResponse {
    let ListQuery { limit, cursor, .. } = query.into_inner();
    let result = blocking(&connector, move |c| {
        operations::list_products(&c.vendure, page_limit(limit.as_deref()), cursor.as_deref())
    });
    page("products", result.await)
}

async fn list_categories(connector: State, query: web::Query<ListQuery>) -> HttpResponse {
    let ListQuery { limit, cursor, .. } = query.into_inner();
    let result = blocking(&connector, move |c| {
        operations::list_categories(&c.vendure, page_limit(limit.as_deref()), cursor.as_deref())
    });
    page("categories", result.await)
}

async fn create_order(request: HttpRequest, connector: State, body: web::Bytes) -> HttpResponse {
    let key = header(&request, headers::IDEMPOTENCY_KEY)
        .filter(|key| !key.trim().is_empty())
        .map(str::to_string);
    let result = writing(&connector, move |c| {
        let sent: Order = entity(&body, "order")?;
        // A key is unique within one Mercer shop only, and several shops (staging and
        // production) may be connected to one Vendure: the order keeps the shop's key.
        let key = key.map(|key| format!("{}:{key}", c.shop));
        operations::create_order(&c.vendure, &sent, key.as_deref())
    });
    answer(StatusCode::CREATED, "order", result.await)
}

async fn get_order(connector: State, id: Id) -> HttpResponse {
    let result = blocking(&connector, move |c| {
        operations::get_order(&c.vendure, &id.2)
    });
    answer(StatusCode::OK, "order", result.await)
}

async fn update_order(connector: State, id: Id, body: web::Bytes) -> HttpResponse {
    let result = writing(&connector, move |c| {
        let sent: Order = entity(&body, "order")?;
        operations::update_order(&c.vendure, &id.2, &sent)
    });
    answer(StatusCode::OK, "order", result.await)
}

async fn create_payment(connector: State, id: Id, body: web::Bytes) -> HttpResponse {
    let result = writing(&connector, move |c| {
        let sent: Payment = entity(&body, "payment")?;
        operations::create_payment(&c.vendure, &id.2, &sent)
    });
    answer(StatusCode::CREATED, "payment", result.await)
}

/// A change the plugin pushed: checked against the secret, then sent on to Mercer before the
/// answer, so the plugin's job queue retries a push that did not reach Mercer.
async fn vendure_event(request: HttpRequest, connector: State, body: web::Bytes) -> HttpResponse {
    let timestamp = header(&request, "x-mercer-timestamp").unwrap_or_default();
    let signature = header(&request, "x-mercer-signature").unwrap_or_default();
    if let Err(reason) = crate::relay::verify_push(
        &connector.secret,
        timestamp,
        signature,
        &body,
        Timestamp::now(),
    ) {
        tracing::warn!(reason, "refused a push not signed by the plugin");
        return error_json(
            StatusCode::UNAUTHORIZED,
            "the push's signature is not valid",
        );
    }
    let change: Change = match serde_json::from_slice(&body) {
        Ok(change) => change,
        Err(error) => {
            return error_json(StatusCode::UNPROCESSABLE_ENTITY, &error.to_string());
        }
    };
    let connector = Arc::clone(&connector);
    let sent = web::block(move || connector.relay.send(&connector.vendure, &change)).await;
    match sent {
        Ok(Ok(())) => HttpResponse::Accepted().finish(),
        Ok(Err(error)) => {
            tracing::warn!(%error, "a change could not be sent to Mercer; the plugin retries it");
            error_json(
                StatusCode::BAD_GATEWAY,
                "the change could not be sent to Mercer",
            )
        }
        Err(error) => error_json(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string()),
    }
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// Ready once Vendure's Admin API answers with the connector's key.
async fn readyz(connector: State) -> HttpResponse {
    match blocking(&connector, |c| operations::channel_currency(&c.vendure)).await {
        Ok(_) => HttpResponse::Ok().json(json!({ "status": "ready" })),
        Err(error) => HttpResponse::ServiceUnavailable()
            .json(json!({ "status": "not ready", "reason": error.to_string() })),
    }
}

/// The connector's routes, for `App::configure`.
pub fn routes(connector: Arc<Connector>) -> impl FnOnce(&mut web::ServiceConfig) {
    move |config: &mut web::ServiceConfig| {
        config
            .app_data(web::Data::new(connector))
            .default_service(web::to(|| async {
                error_json(StatusCode::NOT_FOUND, "no such route")
            }))
            .route("/healthz", web::get().to(healthz))
            .route("/readyz", web::get().to(readyz))
            .route("/vendure/events", web::post().to(vendure_event))
            .service(
                web::scope("/{version}/shops/{shop}")
                    .wrap(from_fn(gate))
                    .route("/verification", web::get().to(verification))
                    .route("/customers", web::get().to(list_customers))
                    .route("/customers", web::post().to(create_customer))
                    .route("/customers/{id}", web::patch().to(update_customer))
                    .route("/customers/{id}", web::delete().to(delete_customer))
                    .route(
                        "/customers/{id}/validate",
                        web::post().to(validate_customer),
                    )
                    .route("/customers/{id}/addresses", web::post().to(create_address))
                    .route(
                        "/customers/{id}/addresses/{address}",
                        web::patch().to(update_address),
                    )
                    .route(
                        "/customers/{id}/addresses/{address}",
                        web::delete().to(delete_address),
                    )
                    .route("/orders", web::get().to(list_orders))
                    .route("/orders", web::post().to(create_order))
                    .route("/orders/{id}", web::get().to(get_order))
                    .route("/orders/{id}", web::patch().to(update_order))
                    .route("/orders/{id}/payments", web::post().to(create_payment))
                    .route("/products", web::get().to(list_products))
                    .route("/categories", web::get().to(list_categories)),
            );
    }
}
