//! Traces over OTLP/HTTP (`serve --otlp-endpoint`): the process's `tracing` spans (a request's,
//! its database transactions', a job's, a connector call's, a webhook delivery attempt's) as
//! OpenTelemetry spans, batched and sent as OTLP/JSON to `{URL}/v1/traces`.
//!
//! Spans end in a bounded queue; the SDK's batch processor sends them from a thread of its own,
//! through a blocking ureq client, so a slow or absent collector never holds a request: when the
//! queue is full, spans are dropped (the SDK counts them, says so once in the log, and gives
//! the count at shutdown), and a collector that does not answer is logged once, its lost spans
//! counted ([`Reporting`]). Without the flag none of this is set up: no layer, no hooks, no
//! thread.
//!
//! A job or a webhook message enqueued in a traced span keeps that span's context as a W3C
//! `traceparent` value (the domain's `current_trace_parent`, through the hooks installed here),
//! and the job's run or the delivery attempt continues it, however much later and wherever.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mercer_domain::kernel::jobs::{TraceContextHooks, install_trace_context_hooks};
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider,
};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter,
};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Most finished spans waiting to be sent; past it, new ones are dropped.
const QUEUE_SPANS: usize = 4096;
/// Most spans in one export request.
const BATCH_SPANS: usize = 512;
/// How long finished spans wait before they are sent (unless a batch fills first).
const SEND_EVERY: Duration = Duration::from_secs(1);
/// How long one export request may take, connecting included.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopping process waits for the spans still queued to be sent.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The traces being exported: the tracer provider, whose batch processor owns the export
/// thread. [`TraceExport::shutdown`] sends what is queued and stops it.
pub struct TraceExport {
    provider: SdkTracerProvider,
}

/// Why traces cannot be exported as asked.
#[derive(Debug, thiserror::Error)]
#[error("--otlp-endpoint {endpoint}: {reason}")]
pub struct TraceExportError {
    endpoint: String,
    reason: String,
}

impl TraceExport {
    /// Starts exporting to the collector at `endpoint` (`http://host:4318`, its traces path
    /// added), and installs the domain's hooks that carry trace context into jobs and webhook
    /// messages.
    pub fn start(endpoint: &str) -> Result<Self, TraceExportError> {
        let error = |reason: String| TraceExportError {
            endpoint: endpoint.to_string(),
            reason,
        };
        let url = traces_url(endpoint).map_err(error)?;
        let otlp = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(UreqClient::new())
            .with_protocol(Protocol::HttpJson)
            .with_endpoint(url)
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|build| error(build.to_string()))?;
        let exporter = Reporting {
            otlp,
            failing: AtomicBool::new(false),
        };
        let batches = BatchConfigBuilder::default()
            .with_max_queue_size(QUEUE_SPANS)
            .with_max_export_batch_size(BATCH_SPANS)
            .with_scheduled_delay(SEND_EVERY)
            .build();
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batches)
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(
                Resource::builder_empty()
                    .with_service_name("mercer")
                    .with_attribute(opentelemetry::KeyValue::new(
                        "service.version",
                        env!("CARGO_PKG_VERSION"),
                    ))
                    .build(),
            )
            .build();
        install_trace_context_hooks(TraceContextHooks {
            capture: current_traceparent,
            continue_trace: continue_from_traceparent,
        });
        Ok(TraceExport { provider })
    }

    /// The layer that turns `tracing` spans into this export's spans. The spans' own trace
    /// context is made when first needed (a child, a captured `traceparent`, the span's end),
    /// not on entering, so a job's or a delivery's span can still be given its remote parent
    /// as its first step.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + Send + Sync + use<S>
    where
        S: tracing::Subscriber
            + for<'span> tracing_subscriber::registry::LookupSpan<'span>
            + Send
            + Sync,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("mercer"))
            .with_context_activation(false)
            .with_tracked_inactivity(false)
            .with_threads(false)
            .with_location(false)
    }

    /// Sends the spans still queued (waiting [`SHUTDOWN_TIMEOUT`] at most) and stops the
    /// export thread: the last step of a graceful stop.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            log::warn!(target: "mercer::traces", "the last traces were not all sent: {error}");
        }
    }
}

/// `{endpoint}/v1/traces`, the OTLP/HTTP path of traces, for an http or https base address.
fn traces_url(endpoint: &str) -> Result<String, String> {
    let parsed = url::Url::parse(endpoint).map_err(|error| format!("not an address: {error}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err("not an http:// or https:// address".to_string());
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err("an address without a query or a fragment is expected".to_string());
    }
    Ok(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
}

/// The current span's trace context as a `traceparent` value; None outside a traced span.
fn current_traceparent() -> Option<String> {
    let span = tracing::Span::current();
    if span.is_none() {
        return None;
    }
    let context = span.context();
    let otel_span = context.span();
    let span_context = otel_span.span_context();
    span_context.is_valid().then(|| traceparent(span_context))
}

/// `00-{trace id}-{span id}-{flags}`, the W3C Trace Context header's value.
fn traceparent(context: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        context.trace_id(),
        context.span_id(),
        context.trace_flags().to_u8()
    )
}

/// The span context a `traceparent` value names; None when it does not read as version 00 with
/// non-zero ids.
fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let mut parts = value.split('-');
    let (version, trace_id, span_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || version != "00" {
        return None;
    }
    let hex = |text: &str, length: usize| {
        text.len() == length && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    if !hex(trace_id, 32) || !hex(span_id, 16) || !hex(flags, 2) {
        return None;
    }
    let context = SpanContext::new(
        TraceId::from_hex(trace_id).ok()?,
        SpanId::from_hex(span_id).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
        true,
        TraceState::default(),
    );
    context.is_valid().then_some(context)
}

/// Makes the current span a child of the span `value` names (a job's or a message's stored
/// `traceparent`). A value that does not read, or a span already started, is left as it is.
fn continue_from_traceparent(value: &str) {
    let Some(parent) = parse_traceparent(value) else {
        return;
    };
    let context = opentelemetry::Context::new().with_remote_span_context(parent);
    let _ = tracing::Span::current().set_parent(context);
}

/// The OTLP exporter, its failures reported once: a collector that does not answer is logged
/// when it stops answering and when it answers again, not at every batch, and the spans it did
/// not get are counted (`mercer_trace_spans_unsent_total`).
#[derive(Debug)]
struct Reporting {
    otlp: opentelemetry_otlp::SpanExporter,
    failing: AtomicBool,
}

impl SpanExporter for Reporting {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = u64::try_from(batch.len()).unwrap_or(u64::MAX);
        match self.otlp.export(batch).await {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    log::info!(target: "mercer::traces", "traces are sent to the collector again");
                }
            }
            Err(error) => {
                metrics::counter!("mercer_trace_spans_unsent_total").increment(spans);
                if !self.failing.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        target: "mercer::traces",
                        "traces cannot be sent to the collector ({error}): spans are dropped until \
                         it answers again (mercer_trace_spans_unsent_total counts them)"
                    );
                }
            }
        }
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.otlp.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.otlp.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.otlp.set_resource(resource);
    }
}

/// The exporter's HTTP client: ureq, blocking, on the batch processor's own thread (the SDK
/// runs each export to its end there). The collector is the operator's, as the database is:
/// no outbound guard applies.
#[derive(Debug)]
struct UreqClient {
    agent: ureq::Agent,
}

impl UreqClient {
    fn new() -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(EXPORT_TIMEOUT))
            .build()
            .new_agent();
        UreqClient { agent }
    }

    fn send(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let request = Request::from_parts(parts, body.to_vec());
        let response = self.agent.run(request)?;
        let (parts, mut body) = response.into_parts();
        // The collector's answer is small (a partial-success note at most); bounded anyway.
        let bytes = body.with_config().limit(64 * 1024).read_to_vec()?;
        Ok(Response::from_parts(parts, Bytes::from(bytes)))
    }
}

impl HttpClient for UreqClient {
    // The trait is `async_trait`'s; its desugared form, so that no macro crate is needed for
    // a call that completes before it returns.
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(std::future::ready(self.send(request)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use opentelemetry_sdk::trace::SimpleSpanProcessor;

    use super::*;
    use crate::cli::LogFormat;

    /// An exporter that keeps what it is given.
    #[derive(Debug, Clone, Default)]
    struct Kept(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Kept {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    /// The log's subscriber with traces kept in memory, each span as it ends.
    fn traced_in_memory() -> (tracing::Dispatch, Kept) {
        let kept = Kept::default();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(SimpleSpanProcessor::new(kept.clone()))
            .build();
        let export = TraceExport { provider };
        let subscriber = crate::logging::traced(
            tracing_subscriber::EnvFilter::new("info"),
            LogFormat::Text,
            std::io::sink,
            &export,
        );
        (tracing::Dispatch::new(subscriber), kept)
    }

    fn named<'a>(kept: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
        kept.iter().filter(|span| span.name == name).collect()
    }

    /// A job enqueued in a request's transaction keeps its context, and the job's span, run on
    /// another thread later, continues it; the transaction and connector spans, at debug level,
    /// are made for traces though the log's filter is `info`.
    #[test]
    fn a_job_continues_the_trace_of_the_request_that_enqueued_it() {
        let (dispatch, kept) = traced_in_memory();
        let stored = tracing::dispatcher::with_default(&dispatch, || {
            let request =
                tracing::error_span!(target: "mercer::http", "request", request_id = "r-1");
            let _request = request.enter();
            let transaction = tracing::debug_span!(target: "mercer::store", "transaction");
            let _transaction = transaction.enter();
            current_traceparent()
        });
        let stored = stored.expect("a traceparent inside a traced span");
        let runner = dispatch.clone();
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&runner, || {
                // What a worker does before it runs a job: a check outside any span.
                let _ = tracing::enabled!(target: "mercer::store", tracing::Level::DEBUG);
                let job = tracing::error_span!(target: "mercer::jobs", "job", kind = "k");
                let _job = job.enter();
                continue_from_traceparent(&stored);
                let call = tracing::debug_span!(target: "mercer::connector", "connector_call");
                drop(call.enter());
            });
        })
        .join()
        .unwrap();
        let kept = kept.0.lock().unwrap().clone();
        let request = named(&kept, "request");
        let transaction = named(&kept, "transaction");
        let job = named(&kept, "job");
        let call = named(&kept, "connector_call");
        assert_eq!(
            (request.len(), transaction.len(), job.len(), call.len()),
            (1, 1, 1, 1),
            "{kept:#?}"
        );
        let trace = request[0].span_context.trace_id();
        assert_eq!(
            transaction[0].parent_span_id,
            request[0].span_context.span_id()
        );
        assert_eq!(job[0].span_context.trace_id(), trace);
        assert_eq!(job[0].parent_span_id, transaction[0].span_context.span_id());
        assert_eq!(call[0].parent_span_id, job[0].span_context.span_id());
    }

    #[test]
    fn traceparent_values_round_trip_and_bad_ones_are_refused() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(value).expect("a valid traceparent");
        assert!(context.is_remote());
        assert!(context.is_sampled());
        assert_eq!(traceparent(&context), value);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn the_traces_path_is_added_to_an_http_address() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318").as_deref(),
            Ok("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(
            traces_url("https://collector.example/otlp/").as_deref(),
            Ok("https://collector.example/otlp/v1/traces")
        );
        for bad in [
            "127.0.0.1:4318",
            "ftp://collector",
            "http://c/?x=1",
            "nonsense",
        ] {
            assert!(traces_url(bad).is_err(), "{bad}");
        }
    }
}
