//! Request budgets (rate limits) at the HTTP edge: the buckets of this process, the 429, and the
//! `X-RateLimit-*` headers. The arithmetic is the domain's (`access::budgets`).
//!
//! - A token's budget is checked by the [`Authorized`](super::extract::Authorized) extractor,
//!   once the token is known (its shop's settings come with it, from the access cache).
//! - A shop's connector events and storefront budgets are checked by [`connector_events`] and
//!   [`storefront`], middleware wrapped around those routes where they are registered; the
//!   shop's settings come from a cache of [`SHOP_TTL`].
//! - The answer's headers are written by the API version middleware from the request's
//!   [`BudgetAnswer`], for every route, so a refusal and a success carry the same ones.
//!
//! On SQLite (one process) each bucket is in memory. On PostgreSQL, processes share each bucket
//! through a row: a process takes a slice of it ([`lease_size`], a tenth of a second's worth)
//! and spends it locally, asking again when it is spent (or older than [`LEASE_LIFETIME`]);
//! while the shared bucket is empty it refuses locally until a slice has refilled, without
//! asking. A failed lease lets the request through (a database hiccup is not the client's
//! fault) and the process asks again a second later.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, web};
use mercer_domain::access::budgets::{
    BudgetKind, Decision, LEASE_LIFETIME, RequestBudgets, SharedBudgets, TokenBucket, lease_size,
};
use mercer_domain::access::shop::ShopIdentifier;

use super::error::ApiError;
use super::short_cache::ShortCache;
use super::state::{AppState, run_blocking};

/// How long a shop's budgets are kept before they are read again: a change by `mercer shop
/// update` applies within this (as a token's, through the access cache).
pub const SHOP_TTL: Duration = Duration::from_secs(2);
/// Buckets idle this long are dropped (a bucket left alone that long is full anyway).
const IDLE_BUCKET: Duration = Duration::from_secs(600);
/// The most buckets kept.
const MAX_BUCKETS: u64 = 100_000;
/// Shared: buckets no lease touched this long are dropped from the database (those of deleted
/// shops and revoked tokens among them; any bucket idle this long is full anyway).
const IDLE_SHARED_BUCKET: Duration = Duration::from_secs(3600);
/// Shared: how often a process drops the idle buckets.
const FORGET_IDLE_EVERY: Duration = Duration::from_secs(600);

/// A shop's id and budgets, by its identifier (None: no such shop).
type ShopBudgets = Option<(i64, RequestBudgets)>;

/// The budgets of this process: the defaults for every shop, and the buckets.
pub struct Budgets {
    defaults: RequestBudgets,
    shared: Option<Arc<dyn SharedBudgets>>,
    buckets: moka::sync::Cache<(BudgetKind, i64), Arc<Bucket>>,
    shops: ShortCache<String, ShopBudgets>,
    epoch: Instant,
    /// Shared: when this process last dropped the idle buckets.
    forgot_idle: Mutex<Option<Duration>>,
}

/// One budget's bucket in this process.
struct Bucket {
    state: Mutex<BucketState>,
    /// Held while a lease is asked for, so that requests waiting for it do not each ask.
    leasing: tokio::sync::Mutex<()>,
}

struct BucketState {
    /// In memory: the bucket itself. Shared: the shared bucket as the last lease left it.
    bucket: TokenBucket,
    /// Shared: the tokens of the slice not spent yet.
    leased: u32,
    /// Shared: when the slice may no longer be spent.
    lease_expires: Duration,
    /// Shared: no lease is asked for before this (the shared bucket was empty).
    next_lease: Duration,
}

/// What a budget answered this request: the headers of its answer. When several budgets apply,
/// the one with the fewest tokens left (or the one that refused) is kept.
#[derive(Debug, Clone, Copy)]
pub struct BudgetAnswer(pub Decision);

impl Budgets {
    /// Budgets with `defaults` for every shop; `shared` when processes share a database.
    pub fn new(defaults: RequestBudgets, shared: Option<Arc<dyn SharedBudgets>>) -> Budgets {
        Budgets {
            defaults,
            shared,
            buckets: moka::sync::Cache::builder()
                .max_capacity(MAX_BUCKETS)
                .time_to_idle(IDLE_BUCKET)
                .build(),
            shops: ShortCache::new(SHOP_TTL),
            epoch: Instant::now(),
            forgot_idle: Mutex::new(None),
        }
    }

    /// The budget of `kind` for a shop that sets `shop`'s: the shop's, else the default.
    pub fn effective(&self, shop: &RequestBudgets, kind: BudgetKind) -> Option<u32> {
        shop.of(kind).or(self.defaults.of(kind))
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Counts one request against the budget `(kind, id)` of `per_s` (id: the token's or the
    /// shop's).
    pub async fn admit(&self, kind: BudgetKind, id: i64, per_s: u32) -> Decision {
        let bucket = self.buckets.get_with((kind, id), || {
            Arc::new(Bucket {
                state: Mutex::new(BucketState {
                    bucket: TokenBucket::full(per_s, self.now()),
                    leased: 0,
                    lease_expires: Duration::ZERO,
                    next_lease: Duration::ZERO,
                }),
                leasing: tokio::sync::Mutex::new(()),
            })
        });
        let Some(shared) = &self.shared else {
            let mut state = lock(&bucket.state);
            let now = self.now();
            if state.bucket.per_s() != per_s {
                state.bucket.set_rate(per_s, now);
            }
            return state.bucket.take(now);
        };
        if let Some(decision) = self.spend(&bucket, per_s) {
            return decision;
        }
        let _leasing = bucket.leasing.lock().await;
        // Another request may have leased while this one waited.
        if let Some(decision) = self.spend(&bucket, per_s) {
            return decision;
        }
        let (shared, key) = (shared.clone(), format!("{}:{id}", kind.name()));
        let wanted = lease_size(per_s);
        let lease = run_blocking(move || Ok(shared.lease(&key, per_s, wanted)?)).await;
        let now = self.now();
        let mut state = lock(&bucket.state);
        match lease {
            Ok(lease) => {
                state.bucket = TokenBucket::with_tokens(per_s, lease.left, now);
                if lease.granted == 0 {
                    // Ask again once a slice has refilled.
                    let wait = (f64::from(wanted) - lease.left).max(0.0) / f64::from(per_s);
                    state.next_lease = now + Duration::from_secs_f64(wait);
                    return state.bucket.refusal_after(state.next_lease - now);
                }
                state.leased = lease.granted - 1;
                state.lease_expires = now + LEASE_LIFETIME;
                self.forget_idle_now_and_then();
            }
            Err(error) => {
                tracing::warn!(target: "mercer::http", "request budget not leased, request let through: {error}");
                state.leased = wanted;
                state.lease_expires = now + LEASE_LIFETIME;
            }
        }
        with_leased(&state, now, true)
    }

    /// Shared: drops the idle buckets from the database, at most every [`FORGET_IDLE_EVERY`],
    /// on the blocking pool and without waiting for it.
    fn forget_idle_now_and_then(&self) {
        let Some(shared) = self.shared.clone() else {
            return;
        };
        let now = self.now();
        {
            let mut last = lock(&self.forgot_idle);
            if last.is_some_and(|last| now < last + FORGET_IDLE_EVERY) {
                return;
            }
            *last = Some(now);
        }
        actix_web::rt::spawn(async move {
            match run_blocking(move || Ok(shared.forget_idle(IDLE_SHARED_BUCKET)?)).await {
                Ok(dropped) => {
                    tracing::debug!(target: "mercer::http", dropped, "idle request budgets dropped")
                }
                Err(error) => {
                    tracing::warn!(target: "mercer::http", "idle request budgets not dropped: {error}")
                }
            }
        });
    }

    /// Shared: spends a token of the slice held, or refuses while the shared bucket is known
    /// to be empty; None when a lease must be asked for.
    fn spend(&self, bucket: &Bucket, per_s: u32) -> Option<Decision> {
        let now = self.now();
        let mut state = lock(&bucket.state);
        if state.bucket.per_s() != per_s {
            // A new rate: the slice was taken under the old one.
            state.bucket.set_rate(per_s, now);
            state.leased = 0;
            state.next_lease = Duration::ZERO;
        }
        if state.leased > 0 && now < state.lease_expires {
            state.leased -= 1;
            return Some(with_leased(&state, now, true));
        }
        if now < state.next_lease {
            let wait = state.next_lease - now;
            return Some(state.bucket.refusal_after(wait));
        }
        None
    }

    /// The budgets of the shop `identifier` names (None when it names none), from the cache
    /// or the database.
    pub async fn shop(&self, state: &AppState, identifier: &str) -> Result<ShopBudgets, ApiError> {
        if let Some(found) = self.shops.get(&identifier.to_string()) {
            return Ok(found);
        }
        let Some(parsed) = ShopIdentifier::parse(identifier) else {
            return Ok(None);
        };
        let found = state
            .read(move |tx| Ok(tx.shop_by_identifier(&parsed)?))
            .await?
            .filter(|shop| shop.deleted_at.is_none())
            .map(|shop| (shop.id.0, shop.budgets));
        self.shops.put(identifier.to_string(), found);
        Ok(found)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A shared budget's answer: the slice held and the shared bucket's tokens (as last seen,
/// refilled since) are left.
fn with_leased(state: &BucketState, now: Duration, allowed: bool) -> Decision {
    let decision = state.bucket.decision(allowed);
    let shared = state.bucket.tokens_at(now);
    let limit = decision.limit;
    let remaining = (f64::from(state.leased) + shared)
        .floor()
        .min(f64::from(limit)) as u32;
    let full_in = (f64::from(limit) - shared - f64::from(state.leased)).max(0.0)
        / f64::from(state.bucket.per_s());
    Decision {
        remaining,
        reset_s: full_in.ceil() as u64,
        ..decision
    }
}

/// Keeps `decision` as the request's answer unless one it already has leaves less.
pub fn record(extensions: &mut actix_web::dev::Extensions, decision: Decision) {
    let keep = match extensions.get::<BudgetAnswer>() {
        Some(BudgetAnswer(kept)) => {
            (!decision.allowed && kept.allowed)
                || (decision.allowed == kept.allowed && decision.remaining < kept.remaining)
        }
        None => true,
    };
    if keep {
        extensions.insert(BudgetAnswer(decision));
    }
}

/// The 429 of a refusal by the budget `kind` of the shop `shop`, counted in
/// `mercer_rate_limited_total`.
pub fn refusal(kind: BudgetKind, shop: &str, decision: &Decision) -> ApiError {
    metrics::counter!(
        "mercer_rate_limited_total",
        "shop" => shop.to_string(),
        "budget" => kind.name()
    )
    .increment(1);
    let retry_after = decision.retry_after_s.unwrap_or(1).max(1);
    let what = match kind {
        BudgetKind::Token => "this API token",
        BudgetKind::ConnectorEvents => "this shop's connector events",
        BudgetKind::Storefront => "this shop's storefront and checkout routes",
    };
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        kind.name(),
        format!(
            "too many requests for {what}: at most {} at once, refilled at {} per second; \
             retry after {retry_after} s",
            decision.limit,
            decision.limit / 2
        ),
    )
    .with_retry_after(u32::try_from(retry_after).unwrap_or(u32::MAX))
}

const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Writes the `X-RateLimit-*` headers (and `Retry-After` on a refusal) of the request's
/// [`BudgetAnswer`], if a budget applied.
pub fn write_headers(extensions: &actix_web::dev::Extensions, headers: &mut HeaderMap) {
    let Some(BudgetAnswer(decision)) = extensions.get::<BudgetAnswer>() else {
        return;
    };
    headers.insert(LIMIT, HeaderValue::from(decision.limit));
    headers.insert(REMAINING, HeaderValue::from(decision.remaining));
    headers.insert(RESET, HeaderValue::from(decision.reset_s));
    if let Some(seconds) = decision.retry_after_s {
        headers.insert(RETRY_AFTER, HeaderValue::from(seconds.max(1)));
    }
}

/// The connector events' budget of the shop in the path (`{shop}`), as middleware.
pub async fn connector_events(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    shop_budget(BudgetKind::ConnectorEvents, request, next).await
}

/// The storefront and checkout routes' budget of the shop in the path (`{shop}`), as
/// middleware.
pub async fn storefront(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    shop_budget(BudgetKind::Storefront, request, next).await
}

async fn shop_budget(
    kind: BudgetKind,
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let state = request.app_data::<web::Data<AppState>>().cloned();
    let identifier = request.match_info().get("shop").map(str::to_string);
    let (Some(state), Some(identifier)) = (state, identifier) else {
        return Ok(next.call(request).await?.map_into_left_body());
    };
    let shop = match state.budgets.shop(&state, &identifier).await {
        Ok(shop) => shop,
        Err(error) => return Ok(request.error_response(error).map_into_right_body()),
    };
    let budget =
        shop.and_then(|(id, budgets)| Some((id, state.budgets.effective(&budgets, kind)?)));
    let Some((shop_id, per_s)) = budget else {
        return Ok(next.call(request).await?.map_into_left_body());
    };
    let decision = state.budgets.admit(kind, shop_id, per_s).await;
    record(&mut request.extensions_mut(), decision);
    if !decision.allowed {
        let error = refusal(kind, &identifier, &decision);
        return Ok(request.error_response(error).map_into_right_body());
    }
    Ok(next.call(request).await?.map_into_left_body())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_web::test]
    async fn an_in_memory_budget_allows_its_burst_then_refuses() {
        let budgets = Budgets::new(RequestBudgets::default(), None);
        for _ in 0..6 {
            assert!(budgets.admit(BudgetKind::Token, 7, 3).await.allowed);
        }
        let refused = budgets.admit(BudgetKind::Token, 7, 3).await;
        assert!(!refused.allowed);
        assert_eq!(refused.retry_after_s, Some(1));
        // Another token, and another kind of budget of the same id, have buckets of their own.
        assert!(budgets.admit(BudgetKind::Token, 8, 3).await.allowed);
        assert!(budgets.admit(BudgetKind::Storefront, 7, 3).await.allowed);
    }

    #[test]
    fn the_answer_kept_is_the_refusal_or_the_one_with_the_fewest_left() {
        let decision = |allowed, remaining| Decision {
            allowed,
            limit: 10,
            remaining,
            reset_s: 1,
            retry_after_s: (!allowed).then_some(1),
        };
        let mut extensions = actix_web::dev::Extensions::new();
        record(&mut extensions, decision(true, 5));
        record(&mut extensions, decision(true, 8));
        assert_eq!(
            extensions.get::<BudgetAnswer>().map(|a| a.0.remaining),
            Some(5)
        );
        record(&mut extensions, decision(false, 0));
        record(&mut extensions, decision(true, 0));
        assert_eq!(
            extensions.get::<BudgetAnswer>().map(|a| a.0.allowed),
            Some(false)
        );
        let mut headers = HeaderMap::new();
        write_headers(&extensions, &mut headers);
        assert_eq!(
            headers
                .get("x-ratelimit-limit")
                .and_then(|v| v.to_str().ok()),
            Some("10")
        );
        assert_eq!(
            headers
                .get("x-ratelimit-remaining")
                .and_then(|v| v.to_str().ok()),
            Some("0")
        );
        assert_eq!(
            headers.get("retry-after").and_then(|v| v.to_str().ok()),
            Some("1")
        );
    }

    #[test]
    fn a_refusal_is_429_with_retry_after() {
        let refused =
            TokenBucket::full(2, Duration::ZERO).refusal_after(Duration::from_millis(1500));
        let error = refusal(
            BudgetKind::ConnectorEvents,
            "0".repeat(32).as_str(),
            &refused,
        );
        let response = actix_web::ResponseError::error_response(&error);
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok()),
            Some("2")
        );
    }
}
