//! Extractors: the authorized shop of a request, and a JSON body whose problems are reported
//! in the JSON error body.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::{StatusCode, header};
use actix_web::{FromRequest, HttpMessage, HttpRequest, web};
use mercer_domain::DomainError;
use mercer_domain::access::auth::{Access, authorize_hashed, check_scope};
use mercer_domain::access::credentials::{Scope, Secret, hash_token, note_token_use};
use mercer_domain::access::shop::Shop;
use mercer_domain::kernel::limits;
use mercer_domain::platform::customer_tokens::check_customer_token;
use serde::de::DeserializeOwned;

use super::budgets;
use super::error::ApiError;
use super::state::{AppState, run_blocking};
use mercer_domain::access::budgets::BudgetKind;

/// The scope a route needs, as a type, so the route declares it in its signature.
pub trait RequiredScope {
    const SCOPE: Option<Scope>;
}

macro_rules! scope_markers {
    ($($marker:ident => $scope:ident),+ $(,)?) => {
        $(
            #[doc = concat!("Routes that need the `", stringify!($scope), "` scope.")]
            pub struct $marker;
            impl RequiredScope for $marker {
                const SCOPE: Option<Scope> = Some(Scope::$scope);
            }
        )+
    };
}

/// Routes open to any valid token of the shop.
#[allow(dead_code)]
pub struct AnyScope;
impl RequiredScope for AnyScope {
    const SCOPE: Option<Scope> = None;
}

/// One marker per API scope; routes adopt them as they land.
#[allow(dead_code)]
pub mod scopes {
    use super::*;
    scope_markers!(
        ReadCustomers => ReadCustomers,
        WriteCustomers => WriteCustomers,
        ReadOrders => ReadOrders,
        WriteOrders => WriteOrders,
        ReadProducts => ReadProducts,
        WriteProducts => WriteProducts,
        ReadShopSettings => ReadShopSettings,
        ModifyShopSettings => ModifyShopSettings,
        ReadSubscriptions => ReadSubscriptions,
        WriteSubscriptions => WriteSubscriptions,
        ReadSubscriptionGroups => ReadSubscriptionGroups,
        WriteSubscriptionGroups => WriteSubscriptionGroups,
    );
}

/// The bearer token of the request, if it has one in the `Bearer` scheme.
pub(crate) fn bearer_token(request: &HttpRequest) -> Option<Secret> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| Secret::new(token.trim()))
}

/// A request whose bearer token may act on the shop named by the path's `{shop}` with scope `S`.
/// Extracting it answers 401 for a missing or unknown token, 404 for another shop's, and 403 for a missing scope.
pub struct Authorized<S: RequiredScope> {
    pub access: Access,
    scope: PhantomData<S>,
}

impl<S: RequiredScope> FromRequest for Authorized<S> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = request.app_data::<web::Data<AppState>>().cloned();
        let shop = request
            .match_info()
            .get("shop")
            .unwrap_or_default()
            .to_string();
        let token_hash = bearer_token(request)
            .filter(|token| !token.expose().is_empty())
            .map(|token| hash_token(token.expose()));
        let request = request.clone();
        Box::pin(async move {
            let state = state.ok_or_else(ApiError::internal)?;
            let token_hash =
                token_hash.ok_or_else(|| ApiError::from(DomainError::Unauthenticated))?;
            let key = (token_hash.clone(), shop.clone());
            let access = match state.access_cache.get(&key) {
                Some(access) => access,
                None => {
                    let (hash, identifier) = (token_hash.clone(), shop.clone());
                    let access = state
                        .read(move |tx| authorize_hashed(tx, &hash, &identifier))
                        .await?;
                    state.access_cache.put(key, access.clone());
                    access
                }
            };
            token_budget(&state, &request, &access).await?;
            check_scope(&access, S::SCOPE)?;
            note_use(&state, &access);
            Ok(Authorized {
                access,
                scope: PhantomData,
            })
        })
    }
}

/// Counts the request against its token's budget, when the shop or the server sets one: 429
/// past it. Every request the token makes counts, whatever its scope.
async fn token_budget(
    state: &AppState,
    request: &HttpRequest,
    access: &Access,
) -> Result<(), ApiError> {
    let Some(per_s) = state
        .budgets
        .effective(&access.shop.budgets, BudgetKind::Token)
    else {
        return Ok(());
    };
    let decision = state
        .budgets
        .admit(BudgetKind::Token, access.token.id.0, per_s)
        .await;
    budgets::record(&mut request.extensions_mut(), decision);
    if decision.allowed {
        Ok(())
    } else {
        Err(budgets::refusal(
            BudgetKind::Token,
            access.shop.identifier.as_str(),
            &decision,
        ))
    }
}

/// Writes the token's last use, at most once a minute per token (by this process; the write
/// itself skips a use another process noted lately), on the blocking pool and without waiting
/// for it: the request goes on at once, and a failed write is only logged.
fn note_use(state: &web::Data<AppState>, access: &Access) {
    let id = access.token.id;
    if state.token_uses.get(&id.0).is_some() {
        return;
    }
    state.token_uses.put(id.0, ());
    let (state, now) = (state.clone(), state.now());
    actix_web::rt::spawn(async move {
        if let Err(error) = state.write(move |tx| note_token_use(tx, id, now)).await {
            tracing::debug!(target: "mercer::http", token = id.0, "last use not written: {error}");
        }
    });
}

/// A shopper proved to be the shop's customer `{platform_customer_id}` by the `token` query
/// parameter their platform issued them (the box builder's customer routes). The
/// shop's customers connector checks the token (Validate Customer JWT); an active one is kept
/// for [`CUSTOMER_TOKEN_TTL`](super::short_cache::CUSTOMER_TOKEN_TTL) per shop, token and
/// customer, a refused one is asked about again next time.
pub struct CustomerAuthorized {
    pub shop: Shop,
    pub platform_customer_id: String,
}

fn customer_token_refused() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "auth.unauthenticated",
        "invalid_token",
        "an active customer token of this customer is required: ?token=<the platform's token>",
    )
}

impl FromRequest for CustomerAuthorized {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = request.app_data::<web::Data<AppState>>().cloned();
        let path = |name: &str| {
            request
                .match_info()
                .get(name)
                .unwrap_or_default()
                .to_string()
        };
        let (shop, customer) = (path("shop"), path("platform_customer_id"));
        let token = query_pairs(request)
            .ok()
            .and_then(|pairs| pairs.into_iter().find(|(key, _)| key == "token"))
            .map(|(_, token)| token.trim().to_string())
            .filter(|token| !token.is_empty());
        Box::pin(async move {
            let state = state.ok_or_else(ApiError::internal)?;
            let token = token.ok_or_else(customer_token_refused)?;
            let found = check_customer(&state, shop, customer.clone(), token).await?;
            Ok(CustomerAuthorized {
                shop: found,
                platform_customer_id: customer,
            })
        })
    }
}

/// The shop whose customer `platform_customer_id` a `token` their platform issued proves the
/// shopper to be, as [`CustomerAuthorized`] checks it (the subscriber portal's entry checks
/// it so too): a token the connector found active lately is taken from the
/// `customer_tokens` cache, else the shop's customers connector is asked (Validate Customer
/// JWT). 401 when it is not active; the connector's failures as the domain tells them.
pub async fn check_customer(
    state: &AppState,
    shop: String,
    platform_customer_id: String,
    token: String,
) -> Result<Shop, ApiError> {
    let key = customer_token_key(&shop, &platform_customer_id, &token);
    if let Some(found) = state.customer_tokens.get(&key) {
        return Ok(found);
    }
    let (store, connector, now) = (state.store.clone(), state.connector.clone(), state.now());
    let checked = run_blocking(move || {
        match check_customer_token(
            &store,
            connector.as_ref(),
            &shop,
            &platform_customer_id,
            &token,
            now,
        ) {
            Err(DomainError::Unauthenticated) => Ok(None),
            other => other.map(Some),
        }
    })
    .await?;
    let found = checked.ok_or_else(customer_token_refused)?;
    state.customer_tokens.put(key, found.clone());
    Ok(found)
}

/// Whether [`check_customer`] would answer from its cache, without asking the connector.
pub fn customer_token_cached(
    state: &AppState,
    shop: &str,
    platform_customer_id: &str,
    token: &str,
) -> bool {
    state
        .customer_tokens
        .get(&customer_token_key(shop, platform_customer_id, token))
        .is_some()
}

/// The `customer_tokens` cache's key of a token: its hash, the shop and the customer.
fn customer_token_key(
    shop: &str,
    platform_customer_id: &str,
    token: &str,
) -> (String, String, String) {
    (
        hash_token(token),
        shop.to_string(),
        platform_customer_id.to_string(),
    )
}

/// A request body meant to be JSON. Extracting it never fails: its problems (415, 413, 400,
/// 422) come out of [`JsonBody::parse`], so a handler checks credentials first.
pub struct JsonBody(Result<web::Bytes, ApiError>);

fn is_json(request: &HttpRequest) -> bool {
    let Some(value) = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn declared_length(request: &HttpRequest) -> Option<usize> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Reads the request's body: at most the app's `max_body_bytes` (413 past it, told by
/// `Content-Length` before anything is read when it says so), within the body deadline of
/// [`super::middleware::body_deadline`] (408), or 400 when the body breaks off.
pub fn read_body(
    request: &HttpRequest,
    payload: &mut Payload,
) -> Pin<Box<dyn Future<Output = Result<web::Bytes, ApiError>>>> {
    use actix_web::error::PayloadError;
    let limit = request
        .app_data::<web::Data<AppState>>()
        .map_or(1 << 20, |state| state.max_body_bytes);
    if declared_length(request).is_some_and(|length| length > limit) {
        return Box::pin(async move { Err(ApiError::payload_too_large(limit)) });
    }
    let bytes = web::Bytes::from_request(request, payload);
    Box::pin(async move {
        bytes
            .await
            .map_err(|error| match error.as_error::<PayloadError>() {
                Some(PayloadError::Overflow) => ApiError::payload_too_large(limit),
                Some(PayloadError::Io(io)) if io.kind() == std::io::ErrorKind::TimedOut => {
                    ApiError::body_timeout()
                }
                _ => ApiError::unreadable_body(&error),
            })
    })
}

impl FromRequest for JsonBody {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(request: &HttpRequest, payload: &mut Payload) -> Self::Future {
        if !is_json(request) {
            return Box::pin(async { Ok(JsonBody(Err(ApiError::unsupported_media_type()))) });
        }
        let body = read_body(request, payload);
        Box::pin(async move { Ok(JsonBody(body.await)) })
    }
}

/// A JSON request body a client may leave out (the bodies of Cancel and Pause, which took none
/// before): no body, or only whitespace, reads as `{}` whatever the content type; any other
/// body is read as a [`JsonBody`] is (415 without a JSON content type, 400, 413, 422).
pub struct OptionalJsonBody(Option<JsonBody>);

impl FromRequest for OptionalJsonBody {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(request: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let json = is_json(request);
        let body = read_body(request, payload);
        Box::pin(async move {
            Ok(OptionalJsonBody(match body.await {
                Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => None,
                Ok(_) if !json => Some(JsonBody(Err(ApiError::unsupported_media_type()))),
                read => Some(JsonBody(read)),
            }))
        })
    }
}

impl OptionalJsonBody {
    /// The body as a JSON value: `{}` when left out; 400 when it is not JSON, and the problems
    /// of [`JsonBody::bytes`].
    pub fn value(self) -> Result<serde_json::Value, ApiError> {
        match self.0 {
            None => Ok(serde_json::Value::Object(serde_json::Map::new())),
            Some(body) => {
                let bytes = body.bytes()?;
                serde_json::from_slice(&bytes).map_err(ApiError::malformed_json)
            }
        }
    }
}

/// A request body of any content type (the OAuth forms), read by [`read_body`]. Extracting it
/// never fails: its problem (413, 408, 400) comes out of [`RawBody::bytes`], for the handler
/// to answer in the form its clients read.
pub struct RawBody(Result<web::Bytes, ApiError>);

impl FromRequest for RawBody {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(request: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = read_body(request, payload);
        Box::pin(async move { Ok(RawBody(body.await)) })
    }
}

impl RawBody {
    pub fn bytes(self) -> Result<web::Bytes, ApiError> {
        self.0
    }
}

impl JsonBody {
    /// The body's bytes, once the content type and size were found right and its text within
    /// the limits every database can store ([`limits::check_json_body`]: 422 naming the
    /// field); for parsers of their own.
    pub fn bytes(self) -> Result<web::Bytes, ApiError> {
        let bytes = self.0?;
        limits::check_json_body(&bytes)
            .map_err(|problem| ApiError::from(DomainError::Invalid(vec![problem])))?;
        Ok(bytes)
    }

    /// The body as `T`: 400 when it is not JSON at all, 422 (with the field's path) when it is
    /// JSON of the wrong shape or holds text no database can store.
    pub fn parse<T: DeserializeOwned>(self) -> Result<T, ApiError> {
        let bytes = self.bytes()?;
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(ApiError::malformed_json)?;
        serde_path_to_error::deserialize(value).map_err(|error| {
            let path = error.path().to_string();
            let field = (path != ".").then_some(path);
            ApiError::invalid_body_shape(field, error.into_inner().to_string())
        })
    }
}

/// A request's path read as `T` (a struct of the route's `{names}`, ids as their types).
/// Extracting it never fails: a path that does not read answers from [`TypedPath::get`] (its
/// id's 404, see [`ApiError::path_not_found`]), so a handler checks credentials first, as
/// with [`JsonBody`].
pub struct TypedPath<T>(Result<T, ApiError>);

impl<T: DeserializeOwned> FromRequest for TypedPath<T> {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        let read = T::deserialize(actix_router::PathDeserializer::new(request.match_info()))
            .map_err(|error| {
                ApiError::path_not_found(&actix_web::error::PathError::Deserialize(error))
            });
        std::future::ready(Ok(TypedPath(read)))
    }
}

impl<T> TypedPath<T> {
    /// The path, or the 404 of the id that did not read.
    pub fn get(self) -> Result<T, ApiError> {
        self.0
    }
}

/// The query's pairs, in order, repeated keys kept (`filter`, `status[]` may come several times).
pub fn query_pairs(request: &HttpRequest) -> Result<Vec<(String, String)>, ApiError> {
    web::Query::<Vec<(String, String)>>::from_query(request.query_string())
        .map(web::Query::into_inner)
        .map_err(|error| ApiError::invalid_query("query", error.to_string()))
}
