//! The simulator's HTTP side: the connector operations under
//! `/{version}/shops/{shop}`, checked with the connector kit, and an admin API under `/admin`
//! that changes the platform's data (pushing events to Mercer) and makes it misbehave.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::{Next, from_fn};
use actix_web::{App, HttpMessage, HttpRequest, HttpResponse, web};
use mercer_connector::headers;
use mercer_connector::kit::{
    DEFAULT_MAX_SKEW_SECONDS, NonceCache, SignedHeaders, SignedMessage, VerifiedMessage,
    page_limit, target_uri, verification_answer, verification_proof, verify_call,
};
use mercer_domain::Timestamp;
use mercer_domain::platform::resources::{
    Category, Customer, CustomerAddress, Order, Payment, Product,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::push::{self, EventKind};
use crate::state::{Faults, MercerLink, RequestRecord, ShopData, SimError, SimState};

/// The simulator: its state, shared by its HTTP workers and by tests that embed it.
#[derive(Clone, Default)]
pub struct Simulator {
    state: Arc<Mutex<SimState>>,
    /// The nonces of the message signatures it accepted (a replay is refused).
    nonces: Arc<NonceCache>,
}

impl Simulator {
    pub fn new() -> Self {
        Simulator::default()
    }

    /// A simulator that remembers up to `capacity` live nonces of signed calls (refusing calls
    /// beyond them within the skew window), for loads of more calls in five minutes than the
    /// default allows.
    pub fn with_nonce_capacity(capacity: usize) -> Self {
        Simulator {
            nonces: Arc::new(NonceCache::new(capacity)),
            ..Simulator::default()
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, SimState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers a shop with the connector secret it shares with Mercer.
    pub fn add_shop(&self, shop: &str, secret: &str, mercer: Option<MercerLink>) {
        let mut state = self.lock();
        let data = state.shops.entry(shop.to_string()).or_default();
        data.secret = secret.to_string();
        data.mercer = mercer;
    }
}

fn error_response(error: SimError) -> HttpResponse {
    match error {
        SimError::NotFound => HttpResponse::NotFound().json(json!({ "error": "not found" })),
        SimError::Invalid(message) => HttpResponse::BadRequest().json(json!({ "error": message })),
    }
}

fn path_shop(request: &HttpRequest) -> String {
    request
        .match_info()
        .get("shop")
        .unwrap_or_default()
        .to_string()
}

/// `{"data":{key: T}}` of a request body.
fn entity<T: DeserializeOwned>(body: &[u8], key: &str) -> Result<T, SimError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|error| SimError::Invalid(error.to_string()))?;
    let inner = value
        .get("data")
        .and_then(|data| data.get(key))
        .cloned()
        .ok_or_else(|| SimError::Invalid(format!("missing data.{key}")))?;
    serde_json::from_value(inner).map_err(|error| SimError::Invalid(error.to_string()))
}

fn ok_data(status: StatusCode, key: &str, value: impl serde::Serialize) -> HttpResponse {
    HttpResponse::build(status).json(json!({ "data": { key: value } }))
}

/// Checks the HMAC headers and the message signature with the kit, applies faults, and
/// records the request.
async fn connector_gate(
    mut request: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(sim) = request.app_data::<web::Data<Simulator>>().cloned() else {
        return Ok(request.into_response(HttpResponse::InternalServerError().finish()));
    };
    let shop = path_shop(request.request());
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (timestamp, hmac, compatible) = (
        header(headers::TIMESTAMP),
        header(headers::HMAC),
        header(headers::COMPATIBLE_HMAC),
    );
    let idempotency_key = header(headers::IDEMPOTENCY_KEY);
    let (signature_input, signature, content_digest) = (
        header(headers::SIGNATURE_INPUT),
        header(headers::SIGNATURE),
        header(headers::CONTENT_DIGEST),
    );
    let signing_headers: Vec<String> = [&hmac, &compatible, &signature_input, &signature]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let method = request.method().to_string();
    let path = request.path().to_string();
    let uri = {
        let info = request.connection_info();
        let path_and_query = request
            .uri()
            .path_and_query()
            .map_or_else(|| path.clone(), |p| p.as_str().to_string());
        target_uri(info.scheme(), info.host(), &path_and_query)
    };
    // The body, read here to check its digest, then handed back to the operation.
    let body = request.extract::<web::Bytes>().await?;
    request.set_payload(actix_web::dev::Payload::from(body.clone()));
    let (secret, fault) = {
        let mut state = sim.lock();
        let secret = state.shops.get(&shop).map(|data| data.secret.clone());
        (secret, state.take_fault())
    };
    let record = |status: u16| {
        sim.lock().requests.push(RequestRecord {
            method: method.clone(),
            path: path.clone(),
            idempotency_key: idempotency_key.clone(),
            status,
            signing_headers: signing_headers.clone(),
        });
    };
    let Some(secret) = secret else {
        record(404);
        return Ok(request
            .into_response(HttpResponse::NotFound().json(json!({ "error": "unknown shop" }))));
    };
    let signed = SignedHeaders {
        timestamp: timestamp.as_deref(),
        hmac: hmac.as_deref(),
        compatible_hmac: compatible.as_deref(),
    };
    let message = SignedMessage {
        method: &method,
        target_uri: &uri,
        signature_input: signature_input.as_deref(),
        signature: signature.as_deref(),
        content_digest: content_digest.as_deref(),
        body: &body,
    };
    let verified = verify_call(
        &signed,
        &message,
        &secret,
        Timestamp::now(),
        DEFAULT_MAX_SKEW_SECONDS,
        &sim.nonces,
    );
    match verified {
        Ok(verified) => {
            request.extensions_mut().insert(verified);
        }
        Err(error) => {
            record(401);
            return Ok(request.into_response(
                HttpResponse::Unauthorized().json(json!({ "error": error.to_string() })),
            ));
        }
    }
    if let Some(delay) = fault.as_ref().and_then(|f| f.delay_ms) {
        actix_web::rt::time::sleep(Duration::from_millis(delay)).await;
    }
    if let Some(status) = fault.as_ref().and_then(|f| f.status) {
        record(status);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut answer = HttpResponse::build(status);
        if let Some(location) = fault.as_ref().and_then(|f| f.location.as_deref()) {
            answer.insert_header((actix_web::http::header::LOCATION, location));
        }
        return Ok(request.into_response(answer.json(json!({ "error": "simulated failure" }))));
    }
    let mut response = next.call(request).await?;
    record(response.status().as_u16());
    if let Some(fault) = fault {
        if fault.wrong_hmac
            && let Ok(value) = HeaderValue::from_str(&verification_answer(
                "not-the-shared-secret",
                timestamp.as_deref().unwrap_or_default(),
            ))
        {
            response
                .headers_mut()
                .insert(HeaderName::from_static("x-hmac"), value);
        }
        if fault.wrong_proof
            && response.headers().contains_key(headers::VERIFICATION_PROOF)
            && let Ok(value) = HeaderValue::from_str(&verification_proof(
                "not-the-shared-secret",
                "not-the-nonce",
            ))
        {
            response
                .headers_mut()
                .insert(HeaderName::from_static("x-verification-proof"), value);
        }
        if fault.malformed_json {
            return Ok(response.map_body(|_, _| "{\"data\": not json".boxed()));
        }
    }
    Ok(response)
}

async fn verification(request: HttpRequest, sim: web::Data<Simulator>) -> HttpResponse {
    let shop = path_shop(&request);
    let secret = sim
        .lock()
        .shops
        .get(&shop)
        .map(|data| data.secret.clone())
        .unwrap_or_default();
    let timestamp = request
        .headers()
        .get(headers::TIMESTAMP)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    // The gate verified the message signature: its nonce is proven with the secret.
    let nonce = request
        .extensions()
        .get::<VerifiedMessage>()
        .map(|verified| verified.nonce.clone())
        .unwrap_or_default();
    HttpResponse::Ok()
        .insert_header((headers::HMAC, verification_answer(&secret, timestamp)))
        .insert_header((
            headers::VERIFICATION_PROOF,
            verification_proof(&secret, &nonce),
        ))
        .json(json!({}))
}

#[derive(Deserialize)]
struct ListQuery {
    limit: Option<String>,
    cursor: Option<String>,
    email: Option<String>,
}

/// `{"data":{key: value}}` with `status`, or the error's answer.
fn answer<T: serde::Serialize>(
    status: StatusCode,
    key: &str,
    result: Result<T, SimError>,
) -> HttpResponse {
    match result {
        Ok(value) => ok_data(status, key, value),
        Err(error) => error_response(error),
    }
}

fn no_content(result: Result<impl Sized, SimError>) -> HttpResponse {
    match result {
        Ok(_) => HttpResponse::NoContent().finish(),
        Err(error) => error_response(error),
    }
}

fn page<T: serde::Serialize>(
    key: &str,
    result: Result<(Vec<T>, mercer_domain::platform::resources::Pagination), SimError>,
) -> HttpResponse {
    match result {
        Ok((items, pagination)) => {
            HttpResponse::Ok().json(json!({ "data": { key: items }, "pagination": pagination }))
        }
        Err(error) => error_response(error),
    }
}

type Ids3 = web::Path<(String, String, String)>;
type Ids4 = web::Path<(String, String, String, String)>;

async fn list_customers(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    query: web::Query<ListQuery>,
) -> HttpResponse {
    let limit = page_limit(query.limit.as_deref());
    let result = sim.lock().list_customers(
        &path_shop(&request),
        limit,
        query.cursor.as_deref(),
        query.email.as_deref(),
    );
    page("customers", result)
}

async fn create_customer(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    body: web::Bytes,
) -> HttpResponse {
    let shop = path_shop(&request);
    let result =
        entity(&body, "customer").and_then(|customer| sim.lock().create_customer(&shop, customer));
    if let Ok(customer) = &result {
        push_connector_save(&sim, shop, customer.clone()).await;
    }
    answer(StatusCode::CREATED, "customer", result)
}

/// With `push_connector_saves`, pushes the Saved event of a customer a connector call changed,
/// and waits as long as it says, before the call is answered.
async fn push_connector_save(sim: &Simulator, shop: String, customer: Customer) {
    let Some(hold_ms) = sim.lock().push_connector_saves else {
        return;
    };
    if let Some(link) = link_of(sim, &shop) {
        // The outcome is the test's to look at in Mercer; the connector call is answered anyway.
        let _ = web::block(move || push::saved(&link, &shop, EventKind::Customer, &customer)).await;
    }
    actix_web::rt::time::sleep(Duration::from_millis(hold_ms)).await;
}

async fn update_customer(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    id: Ids3,
    body: web::Bytes,
) -> HttpResponse {
    let result = entity(&body, "customer").and_then(|customer| {
        sim.lock()
            .update_customer(&path_shop(&request), &id.2, customer)
    });
    answer(StatusCode::OK, "customer", result)
}

async fn delete_customer(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    id: Ids3,
) -> HttpResponse {
    no_content(sim.lock().delete_customer(&path_shop(&request), &id.2))
}

async fn validate_customer(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    id: Ids3,
    body: web::Bytes,
) -> HttpResponse {
    let result = entity::<Value>(&body, "token_info").and_then(|info| {
        let token = info
            .get("token")
            .and_then(Value::as_str)
            .unwrap_or_default();
        sim.lock()
            .validate_customer_token(&path_shop(&request), &id.2, token)
    });
    answer(
        StatusCode::OK,
        "token_status",
        result.map(|active| json!({ "active": active })),
    )
}

async fn create_address(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    id: Ids3,
    body: web::Bytes,
) -> HttpResponse {
    let shop = path_shop(&request);
    let result = entity::<CustomerAddress>(&body, "address")
        .and_then(|address| sim.lock().create_address(&shop, &id.2, address));
    if result.is_ok() {
        let customer = sim
            .lock()
            .shops
            .get(&shop)
            .and_then(|data| data.customers.get(id.2.as_str()))
            .cloned();
        if let Some(customer) = customer {
            push_connector_save(&sim, shop, customer).await;
        }
    }
    answer(StatusCode::CREATED, "address", result)
}

async fn update_address(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    ids: Ids4,
    body: web::Bytes,
) -> HttpResponse {
    let result = entity::<CustomerAddress>(&body, "address").and_then(|address| {
        sim.lock()
            .update_address(&path_shop(&request), &ids.2, &ids.3, address)
    });
    answer(StatusCode::OK, "address", result)
}

async fn delete_address(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    ids: Ids4,
) -> HttpResponse {
    no_content(
        sim.lock()
            .delete_address(&path_shop(&request), &ids.2, &ids.3),
    )
}

async fn list_orders(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    query: web::Query<ListQuery>,
) -> HttpResponse {
    let limit = page_limit(query.limit.as_deref());
    page(
        "orders",
        sim.lock()
            .list_orders(&path_shop(&request), limit, query.cursor.as_deref()),
    )
}

async fn list_products(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    query: web::Query<ListQuery>,
) -> HttpResponse {
    let limit = page_limit(query.limit.as_deref());
    page(
        "products",
        sim.lock()
            .list_products(&path_shop(&request), limit, query.cursor.as_deref()),
    )
}

async fn list_categories(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    query: web::Query<ListQuery>,
) -> HttpResponse {
    let limit = page_limit(query.limit.as_deref());
    page(
        "categories",
        sim.lock()
            .list_categories(&path_shop(&request), limit, query.cursor.as_deref()),
    )
}

async fn create_order(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    body: web::Bytes,
) -> HttpResponse {
    let key = request
        .headers()
        .get(headers::IDEMPOTENCY_KEY)
        .and_then(|v| v.to_str().ok());
    let result = entity::<Order>(&body, "order")
        .and_then(|order| sim.lock().create_order(&path_shop(&request), order, key));
    answer(StatusCode::CREATED, "order", result.map(|(order, _)| order))
}

async fn get_order(request: HttpRequest, sim: web::Data<Simulator>, id: Ids3) -> HttpResponse {
    answer(
        StatusCode::OK,
        "order",
        sim.lock().get_order(&path_shop(&request), &id.2),
    )
}

async fn update_order(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    id: Ids3,
    body: web::Bytes,
) -> HttpResponse {
    let result = entity::<Order>(&body, "order")
        .and_then(|order| sim.lock().update_order(&path_shop(&request), &id.2, order));
    answer(StatusCode::OK, "order", result)
}

async fn create_payment(
    request: HttpRequest,
    sim: web::Data<Simulator>,
    id: Ids3,
    body: web::Bytes,
) -> HttpResponse {
    let result = entity::<Payment>(&body, "payment").and_then(|payment| {
        sim.lock()
            .create_payment(&path_shop(&request), &id.2, payment)
    });
    answer(StatusCode::CREATED, "payment", result)
}

// ---- admin API -------------------------------------------------------------------------

#[derive(Deserialize)]
struct ShopSettings {
    secret: String,
    mercer_url: Option<String>,
    mercer_token: Option<String>,
}

async fn admin_put_shop(
    sim: web::Data<Simulator>,
    shop: web::Path<String>,
    settings: web::Json<ShopSettings>,
) -> HttpResponse {
    let settings = settings.into_inner();
    let link = match (settings.mercer_url, settings.mercer_token) {
        (Some(base_url), Some(token)) => Some(MercerLink { base_url, token }),
        _ => None,
    };
    sim.add_shop(&shop, &settings.secret, link);
    HttpResponse::Ok().json(json!({ "shop": shop.as_str() }))
}

fn link_of(sim: &Simulator, shop: &str) -> Option<MercerLink> {
    sim.lock()
        .shops
        .get(shop)
        .and_then(|data: &ShopData| data.mercer.clone())
}

/// A platform-side save: runs `change`, then pushes a Saved event of what it saved to Mercer
/// (off the async thread), and answers with the entity and the push's outcome.
async fn save_and_push<T: serde::Serialize + Send + 'static>(
    sim: web::Data<Simulator>,
    shop: String,
    kind: EventKind,
    change: impl FnOnce(&mut SimState, &str) -> Result<T, SimError>,
) -> HttpResponse {
    let saved = {
        let mut state = sim.lock();
        change(&mut state, &shop)
    };
    let saved = match saved {
        Ok(saved) => saved,
        Err(error) => return error_response(error),
    };
    let entity = serde_json::to_value(&saved).unwrap_or_default();
    let push = match link_of(&sim, &shop) {
        Some(link) => web::block(move || push::saved(&link, &shop, kind, &saved))
            .await
            .ok(),
        None => None,
    };
    HttpResponse::Ok().json(json!({ "data": entity, "push": push }))
}

async fn admin_create_customer(
    sim: web::Data<Simulator>,
    shop: web::Path<String>,
    customer: web::Json<Customer>,
) -> HttpResponse {
    save_and_push(
        sim,
        shop.into_inner(),
        EventKind::Customer,
        |state, shop| state.create_customer(shop, customer.into_inner()),
    )
    .await
}

async fn admin_update_customer(
    sim: web::Data<Simulator>,
    ids: web::Path<(String, String)>,
    patch: web::Json<Customer>,
) -> HttpResponse {
    let (shop, id) = ids.into_inner();
    save_and_push(sim, shop, EventKind::Customer, |state, shop| {
        state.update_customer(shop, &id, patch.into_inner())
    })
    .await
}

async fn admin_delete_customer(
    sim: web::Data<Simulator>,
    ids: web::Path<(String, String)>,
) -> HttpResponse {
    let (shop, id) = ids.into_inner();
    let deleted = sim.lock().delete_customer(&shop, &id);
    let at = match deleted {
        Ok(at) => at,
        Err(error) => return error_response(error),
    };
    let entity = json!({ "platform_id": id, "platform_deleted_at": at });
    let push = match link_of(&sim, &shop) {
        Some(link) => web::block(move || push::deleted(&link, &shop, EventKind::Customer, &id, at))
            .await
            .ok(),
        None => None,
    };
    HttpResponse::Ok().json(json!({ "data": entity, "push": push }))
}

async fn admin_customer_token(
    sim: web::Data<Simulator>,
    ids: web::Path<(String, String)>,
) -> HttpResponse {
    match sim.lock().issue_customer_token(&ids.0, &ids.1) {
        Ok(token) => HttpResponse::Ok().json(json!({ "token": token })),
        Err(error) => error_response(error),
    }
}

async fn admin_revoke_customer_tokens(
    sim: web::Data<Simulator>,
    ids: web::Path<(String, String)>,
) -> HttpResponse {
    match sim.lock().revoke_customer_tokens(&ids.0, &ids.1) {
        Ok(revoked) => HttpResponse::Ok().json(json!({ "revoked": revoked })),
        Err(error) => error_response(error),
    }
}

async fn admin_create_order(
    sim: web::Data<Simulator>,
    shop: web::Path<String>,
    order: web::Json<Order>,
) -> HttpResponse {
    save_and_push(sim, shop.into_inner(), EventKind::Order, |state, shop| {
        state
            .create_order(shop, order.into_inner(), None)
            .map(|(order, _)| order)
    })
    .await
}

async fn admin_update_order(
    sim: web::Data<Simulator>,
    ids: web::Path<(String, String)>,
    patch: web::Json<Order>,
) -> HttpResponse {
    let (shop, id) = ids.into_inner();
    save_and_push(sim, shop, EventKind::Order, |state, shop| {
        state.update_order(shop, &id, patch.into_inner())
    })
    .await
}

async fn admin_save_product(
    sim: web::Data<Simulator>,
    shop: web::Path<String>,
    product: web::Json<Product>,
) -> HttpResponse {
    save_and_push(sim, shop.into_inner(), EventKind::Product, |state, shop| {
        state.save_product(shop, product.into_inner())
    })
    .await
}

async fn admin_save_category(
    sim: web::Data<Simulator>,
    shop: web::Path<String>,
    category: web::Json<Category>,
) -> HttpResponse {
    save_and_push(
        sim,
        shop.into_inner(),
        EventKind::Category,
        |state, shop| state.save_category(shop, category.into_inner()),
    )
    .await
}

#[derive(Deserialize)]
struct SeedRequest {
    #[serde(default)]
    customers: usize,
    #[serde(default)]
    orders: usize,
    /// Products of two variants each, in categories of ten.
    #[serde(default)]
    products: usize,
}

/// The `n`th seeded product: two variants priced from `n`, in category `n / 10`.
fn seeded_product(n: usize, category: &Category) -> Product {
    let cents = 100 + (n % 50) * 25;
    serde_json::from_value(json!({
        "name": format!("Product {n:05}"),
        "vendor": "Seed Farm",
        "published": true,
        "categories": [category],
        "variants": [
            {"name": format!("Product {n:05} small"), "sku": format!("SEED-{n:05}-S"),
             "price": format!("{}.{:02}", cents / 100, cents % 100), "require_shipping": true},
            {"name": format!("Product {n:05} large"), "sku": format!("SEED-{n:05}-L"),
             "price": format!("{}.{:02}", 2 * cents / 100, 2 * cents % 100), "require_shipping": true}
        ]
    }))
    .unwrap_or_default()
}

/// Fills the platform with customers (two addresses each), orders, and products (two variants
/// each, in categories of ten), pushing nothing: for syncs.
async fn admin_seed(
    sim: web::Data<Simulator>,
    shop: web::Path<String>,
    seed: web::Json<SeedRequest>,
) -> HttpResponse {
    let mut state = sim.lock();
    for n in 0..seed.customers {
        let customer: Customer = serde_json::from_value(json!({
            "email": format!("customer{n:05}@example.test"),
            "first_name": format!("First{n:05}"),
            "last_name": format!("Last{:05}", seed.customers - n),
            "phone": format!("+1555{n:07}"),
            "addresses": [
                {"address_type": "shipping", "first_name": "Ship", "street_1": format!("{n} Main St"), "city": "Springfield", "postal_code": "12345", "country": "United States", "country_code": "US", "is_default": true},
                {"address_type": "billing", "first_name": "Bill", "street_1": format!("{n} Side St"), "city": "Shelbyville", "postal_code": "54321", "country": "United States", "country_code": "US", "is_default": false}
            ]
        }))
        .unwrap_or_default();
        if let Err(error) = state.create_customer(&shop, customer) {
            return error_response(error);
        }
    }
    for n in 0..seed.orders {
        let order: Order = serde_json::from_value(json!({"order_number": format!("{}", 1000 + n), "total": "10.00", "currency": "USD", "fulfillment_status": "unfulfilled"})).unwrap_or_default();
        if let Err(error) = state.create_order(&shop, order, None) {
            return error_response(error);
        }
    }
    let mut category: Option<Category> = None;
    for n in 0..seed.products {
        if n % 10 == 0 {
            let made = Category {
                name: Some(format!("Category {:03}", n / 10)),
                ..Category::default()
            };
            match state.save_category(&shop, made) {
                Ok(saved) => category = Some(saved),
                Err(error) => return error_response(error),
            }
        }
        let product = seeded_product(n, category.as_ref().unwrap_or(&Category::default()));
        if let Err(error) = state.save_product(&shop, product) {
            return error_response(error);
        }
    }
    HttpResponse::Ok().json(json!({
        "customers": seed.customers,
        "orders": seed.orders,
        "products": seed.products,
    }))
}

/// Everything the platform holds for a shop, and the connector requests it received.
async fn admin_state(sim: web::Data<Simulator>, shop: web::Path<String>) -> HttpResponse {
    let state = sim.lock();
    let Some(data) = state.shops.get(shop.as_str()) else {
        return error_response(SimError::NotFound);
    };
    let prefix = format!("/shops/{}/", shop.as_str());
    let requests: Vec<&RequestRecord> = state
        .requests
        .iter()
        .filter(|r| r.path.contains(&prefix))
        .collect();
    HttpResponse::Ok().json(json!({
        "customers": data.customers.values().collect::<Vec<_>>(),
        "deleted_customers": data.deleted_customers.keys().collect::<Vec<_>>(),
        "deleted_addresses": data.deleted_addresses.keys().collect::<Vec<_>>(),
        "orders": data.orders.values().collect::<Vec<_>>(),
        "products": data.products.values().collect::<Vec<_>>(),
        "categories": data.categories.values().collect::<Vec<_>>(),
        "requests": requests,
    }))
}

async fn admin_put_faults(sim: web::Data<Simulator>, faults: web::Json<Faults>) -> HttpResponse {
    sim.lock().faults = faults.into_inner();
    HttpResponse::Ok().json(json!({ "faults": sim.lock().faults.clone() }))
}

async fn admin_clear_faults(sim: web::Data<Simulator>) -> HttpResponse {
    sim.lock().faults = Faults::default();
    HttpResponse::NoContent().finish()
}

/// The whole simulator app.
pub fn app(
    sim: web::Data<Simulator>,
) -> App<
    impl actix_web::dev::ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .app_data(sim)
        .app_data(web::PayloadConfig::new(16 * 1024 * 1024))
        .app_data(web::JsonConfig::default().limit(16 * 1024 * 1024))
        .service(
            web::scope("/admin")
                .route("/faults", web::put().to(admin_put_faults))
                .route("/faults", web::delete().to(admin_clear_faults))
                .route("/shops/{shop}", web::put().to(admin_put_shop))
                .route("/shops/{shop}/state", web::get().to(admin_state))
                .route("/shops/{shop}/seed", web::post().to(admin_seed))
                .route(
                    "/shops/{shop}/customers",
                    web::post().to(admin_create_customer),
                )
                .route(
                    "/shops/{shop}/customers/{id}",
                    web::patch().to(admin_update_customer),
                )
                .route(
                    "/shops/{shop}/customers/{id}",
                    web::delete().to(admin_delete_customer),
                )
                .route(
                    "/shops/{shop}/customers/{id}/token",
                    web::post().to(admin_customer_token),
                )
                .route(
                    "/shops/{shop}/customers/{id}/token",
                    web::delete().to(admin_revoke_customer_tokens),
                )
                .route("/shops/{shop}/orders", web::post().to(admin_create_order))
                .route(
                    "/shops/{shop}/orders/{id}",
                    web::patch().to(admin_update_order),
                )
                .route("/shops/{shop}/products", web::post().to(admin_save_product))
                .route(
                    "/shops/{shop}/categories",
                    web::post().to(admin_save_category),
                ),
        )
        .service(
            web::scope("/{version}/shops/{shop}")
                .wrap(from_fn(connector_gate))
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
                    "/customers/{customer}/addresses/{id}",
                    web::patch().to(update_address),
                )
                .route(
                    "/customers/{customer}/addresses/{id}",
                    web::delete().to(delete_address),
                )
                .route("/orders", web::get().to(list_orders))
                .route("/products", web::get().to(list_products))
                .route("/categories", web::get().to(list_categories))
                .route("/orders", web::post().to(create_order))
                .route("/orders/{id}", web::get().to(get_order))
                .route("/orders/{id}", web::patch().to(update_order))
                .route("/orders/{id}/payments", web::post().to(create_payment)),
        )
}

/// A running simulator on a local port, for tests that embed it.
pub struct RunningSimulator {
    pub base_url: String,
    pub simulator: Simulator,
    handle: actix_web::dev::ServerHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RunningSimulator {
    /// Serves the simulator on `127.0.0.1` and a free port, in a thread of its own.
    pub fn start() -> std::io::Result<RunningSimulator> {
        RunningSimulator::serve(Simulator::new(), 0)
    }

    /// Serves `simulator` (its shops and faults as they are) on `127.0.0.1:port` (a free one
    /// for 0): after [`RunningSimulator::stop`], the same platform back on the same address.
    pub fn serve(simulator: Simulator, port: u16) -> std::io::Result<RunningSimulator> {
        let data = web::Data::new(simulator.clone());
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
        let address = listener.local_addr()?;
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let system = actix_web::rt::System::new();
            let server = match actix_web::HttpServer::new(move || app(data.clone()))
                .workers(2)
                .disable_signals()
                .shutdown_timeout(1)
                .listen(listener)
            {
                Ok(server) => server.run(),
                Err(error) => {
                    let _ = handle_tx.send(Err(error));
                    return;
                }
            };
            let _ = handle_tx.send(Ok(server.handle()));
            let _ = system.block_on(server);
        });
        let handle = handle_rx.recv().map_err(std::io::Error::other)??;
        Ok(RunningSimulator {
            base_url: format!("http://{address}"),
            simulator,
            handle,
            thread: Some(thread),
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.base_url
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .unwrap_or(0)
    }

    /// Stops listening: connections to its address are refused until it is served again.
    /// Answers the simulator, to serve again.
    pub fn stop(self) -> Simulator {
        self.simulator.clone()
    }
}

impl Drop for RunningSimulator {
    fn drop(&mut self) {
        let handle = self.handle.clone();
        actix_web::rt::System::new().block_on(handle.stop(false));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
