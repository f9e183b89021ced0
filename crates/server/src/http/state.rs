//! What every handler shares: the store and the clock, and the bridge that runs blocking
//! storage work off the async threads.

use actix_web::web;
use mercer_domain::DomainError;
use mercer_domain::Timestamp;
use mercer_domain::kernel::jobs;
use mercer_domain::kernel::time::{Clock, OffsetClock};
use mercer_domain::overrides::OverrideCaller;
use mercer_domain::platform::connector::PlatformConnectorHandle;
use mercer_domain::ports::{Database, Repositories};
use mercer_store::Store;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::short_cache::{AccessCache, CustomerTokenCache, KnownWebhooks, TokenUses};
use super::sign_in_limiter::SignInLimiter;
use crate::runtime::{Ingest, Wake};
use mercer_outbound::PrivateAddressGuard;
use metrics_exporter_prometheus::PrometheusHandle;

pub struct AppState {
    pub store: Store,
    /// Mercer's clock: the system's, or started elsewhere with `--clock-start`.
    pub clock: OffsetClock,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// How long a request's body may take to arrive (`--body-timeout-s`).
    pub body_timeout: std::time::Duration,
    pub connector: PlatformConnectorHandle,
    /// Stores inbound events before their 202.
    pub ingest: Ingest,
    /// Wakes the event applier.
    pub applier: Wake,
    /// Wakes the job runner after a job is enqueued (a sync started).
    pub jobs: Wake,
    /// Recent successful authorizations.
    pub access_cache: AccessCache,
    /// Tokens whose last use was written lately (at most once a minute per token).
    pub token_uses: TokenUses,
    /// Customer tokens the connector found active lately (the box builder's customer routes).
    pub customer_tokens: CustomerTokenCache,
    /// Wakes the webhook dispatchers after a message is enqueued.
    pub webhooks: Wake,
    /// Stores the test deliveries' messages, several requests' in one statement.
    pub webhook_enqueue: crate::runtime::enqueue::WebhookEnqueue,
    /// Checkout webhooks a test delivery found, so the next one need not read them first.
    pub known_webhooks: KnownWebhooks,
    /// Where outgoing calls (connectors, webhook callbacks, overrides) may lead.
    pub address_guard: PrivateAddressGuard,
    /// Calls the checkout's API overrides (signed, within their time limit, guarded).
    pub overrides: std::sync::Arc<dyn OverrideCaller>,
    /// Renders the metrics in Prometheus's text format.
    pub metrics: PrometheusHandle,
    /// The bearer token `GET /metrics` requires (`--metrics-token`); None leaves it open.
    pub metrics_token: Option<MetricsToken>,
    /// Sign-in failures per client address (the OAuth authorize page).
    pub sign_ins: SignInLimiter,
    /// Connector checks of customer tokens per customer (the subscriber portal's entry).
    pub customer_checks: super::customer_checks::CustomerChecks,
    /// Where clients reach Mercer (`--public-url`): links answered start with it; without it
    /// they are relative.
    pub public_url: Option<super::links::PublicUrl>,
    /// Proxies whose forwarded headers name the client (`--trusted-proxies`); empty, the
    /// connection's peer is the client.
    pub trusted_proxies: super::client_address::TrustedProxies,
    /// Days a finished webhook message keeps its payload and attempts
    /// (`--webhook-retention-days`), as the console's message page says it.
    pub webhook_retention_days: f64,
    /// Request budgets (rate limits): the defaults and this process's buckets.
    pub budgets: super::budgets::Budgets,
}

/// The token a metrics scraper must present, kept as its SHA-256 only.
pub struct MetricsToken([u8; 32]);

impl MetricsToken {
    pub fn new(token: &str) -> Self {
        MetricsToken(Sha256::digest(token.as_bytes()).into())
    }

    /// Whether `given` is the token. The digests are compared in time independent of where
    /// they differ, and of the given token's length.
    pub fn matches(&self, given: &str) -> bool {
        let given: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        let difference = self
            .0
            .iter()
            .zip(given.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(difference) == 0
    }
}

impl AppState {
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The address `request` comes from, through the trusted proxies
    /// ([`super::client_address`]).
    pub fn client_address(&self, request: &actix_web::HttpRequest) -> std::net::IpAddr {
        super::client_address::client_address(request, &self.trusted_proxies)
    }

    /// Runs read-only storage work on the blocking pool.
    pub async fn read<T, F>(&self, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn Repositories) -> Result<T, DomainError> + Send + 'static,
    {
        let store = self.store.clone();
        run_blocking(move || store.read(work)).await
    }

    /// Runs storage work in one transaction on the blocking pool.
    pub async fn write<T, F>(&self, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn Repositories) -> Result<T, DomainError> + Send + 'static,
    {
        let store = self.store.clone();
        run_blocking(move || store.write(work)).await
    }
}

/// diesel blocks: never call it on an actix worker thread, always through here. The work runs
/// in the caller's span (the request's), so what it logs names the request, and within the
/// caller's request id ([`jobs::within_request`]), so the jobs it enqueues keep it.
pub async fn run_blocking<T, F>(work: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, DomainError> + Send + 'static,
{
    let span = tracing::Span::current();
    let request = jobs::current_request_id();
    match web::block(move || jobs::within_request(request, || span.in_scope(work))).await {
        Ok(result) => result.map_err(ApiError::from),
        Err(error) => {
            Err(ApiError::internal().with_cause(format!("blocking task failed: {error}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use tracing::Instrument;

    use super::*;

    #[test]
    fn a_metrics_token_matches_itself_only() {
        let token = MetricsToken::new("scrape-me-please");
        assert!(token.matches("scrape-me-please"));
        for other in ["", "scrape-me-pleasf", "scrape-me-please ", "x"] {
            assert!(!token.matches(other), "{other:?}");
        }
    }

    #[actix_web::test]
    async fn blocking_work_runs_in_the_callers_span() {
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry());
        let _default = tracing::dispatcher::set_default(&dispatch);
        let span = tracing::error_span!("request", request_id = "r-1");
        let expected = span.id();
        // The blocking pool's thread has no subscriber of its own: ask the registry which span
        // that thread is in.
        let on_the_pool = dispatch.clone();
        let seen = run_blocking(move || Ok(on_the_pool.current_span().id().cloned()))
            .instrument(span)
            .await
            .ok()
            .flatten();
        assert!(expected.is_some());
        assert_eq!(seen, expected);
    }

    /// Blocking work runs within the request whose handling called it, so the jobs it enqueues
    /// keep the request's id; work of no request runs within none.
    #[actix_web::test]
    async fn blocking_work_runs_within_the_callers_request() {
        let read = || run_blocking(|| Ok(jobs::current_request_id().map(|id| id.to_string())));
        let within = super::super::middleware::within_request("r-2".into(), read()).await;
        assert_eq!(within.ok().flatten().as_deref(), Some("r-2"));
        assert_eq!(read().await.ok().flatten(), None);
        assert_eq!(jobs::current_request_id(), None);
    }
}
