//! The process's log: `tracing` events and spans (a request's, a job's, a webhook delivery's),
//! the `log` macros of every crate bridged into them, written to standard error as text or as
//! one JSON object a line.

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::filter::{EnvFilter, FilterFn, LevelFilter};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

use crate::cli::LogFormat;
use crate::tracing_export::TraceExport;

/// Sets up the process's log from `--log-level` directives (`info`, `info,mercer::http=warn`)
/// and `--log-format`. Invalid directives are ignored with a warning, as they always were.
/// With `traces` (`serve --otlp-endpoint`), spans are also exported as traces; without, the
/// subscriber is the log's alone, with no layer or filter for traces.
pub fn init(directives: &str, format: LogFormat, traces: Option<&TraceExport>) {
    let filter = env_filter(directives);
    // The `log` macros stop at the most verbose level the filter lets through.
    let most_verbose = filter.max_level_hint().unwrap_or(LevelFilter::TRACE);
    let installed = match traces {
        None => tracing::subscriber::set_global_default(filtered(filter, format, std::io::stderr)),
        Some(traces) => {
            tracing::subscriber::set_global_default(traced(filter, format, std::io::stderr, traces))
        }
    };
    if installed.is_err() {
        return;
    }
    let max = match most_verbose {
        LevelFilter::OFF => log::LevelFilter::Off,
        LevelFilter::ERROR => log::LevelFilter::Error,
        LevelFilter::WARN => log::LevelFilter::Warn,
        LevelFilter::INFO => log::LevelFilter::Info,
        LevelFilter::DEBUG => log::LevelFilter::Debug,
        LevelFilter::TRACE => log::LevelFilter::Trace,
    };
    // Only fails when a logger is set already; the first one stays.
    let _ = tracing_log::LogTracer::builder().with_max_level(max).init();
}

/// The subscriber [`init`] installs without traces, writing to `writer`.
pub fn subscriber<W>(
    directives: &str,
    format: LogFormat,
    writer: W,
) -> impl Subscriber + Send + Sync
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    filtered(env_filter(directives), format, writer)
}

/// The log's output layer, text or JSON lines.
fn output<W>(format: LogFormat, writer: W) -> Box<dyn Layer<Registry> + Send + Sync>
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(false)
            .with_target(true)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines)
            .with_writer(writer)
            .boxed(),
    }
}

/// The log alone: its filter decides for the whole subscriber, so a span or an event it does
/// not want costs nothing past its callsite.
fn filtered<W>(filter: EnvFilter, format: LogFormat, writer: W) -> impl Subscriber + Send + Sync
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    Registry::default()
        .with(output(format, writer))
        .with(filter)
        .with(FilterFn::new(not_a_wire_dump))
}

/// The log and the traces, each with its own filter: the log's directives for the log, and
/// every span of Mercer's own targets, whatever its level, for the traces (the database
/// transactions' and connector calls' spans are at debug level, so that the log's usual
/// filter never makes them). Events are the log's only.
pub(crate) fn traced<W>(
    filter: EnvFilter,
    format: LogFormat,
    writer: W,
    traces: &TraceExport,
) -> impl Subscriber + Send + Sync
where
    W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
{
    Registry::default()
        .with(output(format, writer).with_filter(filter))
        .with(traces.layer().with_filter(MercerSpans))
        .with(FilterFn::new(not_a_wire_dump))
}

/// The traces' filter: the spans of Mercer's own targets, whatever their level. Their callsites
/// are asked each time rather than once (`sometimes`): with a filter per layer, a callsite
/// settled once for all is not asked again, and a check that made nothing before it (a
/// `tracing::enabled!`, a `log_enabled!`) would leave its answer for the next span, which the
/// traces then missed.
struct MercerSpans;

impl MercerSpans {
    fn wants(metadata: &tracing::Metadata<'_>) -> bool {
        metadata.is_span() && metadata.target().starts_with("mercer")
    }
}

impl<S> tracing_subscriber::layer::Filter<S> for MercerSpans {
    fn enabled(
        &self,
        metadata: &tracing::Metadata<'_>,
        _: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        Self::wants(metadata)
    }

    fn callsite_enabled(&self, metadata: &'static tracing::Metadata<'static>) -> Interest {
        if Self::wants(metadata) {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::DEBUG)
    }
}

/// The filter of `--log-level`'s directives. As with env_logger before: no directive at all
/// means errors only, and an invalid one is ignored with a warning.
fn env_filter(directives: &str) -> EnvFilter {
    EnvFilter::builder()
        .with_default_directive(LevelFilter::ERROR.into())
        .parse_lossy(directives)
}

/// `--log-format json`: one object a line, with `timestamp`, `level`, `target`, `message`, the
/// event's other fields, and `spans` (outermost first, each with its `name` and fields) when it
/// happened in any. tracing-subscriber's own JSON lines would carry the `log.file`, `log.line`
/// … fields of every line that came from a `log` macro.
struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
    N: for<'writer> FormatFields<'writer> + 'static,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let normalized = event.normalized_metadata();
        let metadata = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let mut line = Map::new();
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        line.insert("timestamp".into(), now.into());
        line.insert("level".into(), metadata.level().as_str().into());
        line.insert("target".into(), metadata.target().into());
        event.record(&mut JsonVisitor(&mut line));
        if let Some(scope) = context.event_scope() {
            let spans: Vec<Value> = scope
                .from_root()
                .map(|span| {
                    let mut entry = Map::new();
                    entry.insert("name".into(), span.name().into());
                    let extensions = span.extensions();
                    let recorded = extensions
                        .get::<FormattedFields<N>>()
                        .and_then(|fields| serde_json::from_str::<Map<String, Value>>(fields).ok());
                    entry.extend(recorded.unwrap_or_default());
                    Value::Object(entry)
                })
                .collect();
            line.insert("spans".into(), spans.into());
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// An event's fields into a JSON object, but the `log.*` ones that say where a `log` macro was.
struct JsonVisitor<'line>(&'line mut Map<String, Value>);

impl JsonVisitor<'_> {
    fn insert(&mut self, field: &Field, value: Value) {
        if !field.name().starts_with("log.") {
            self.0.insert(field.name().to_string(), value);
        }
    }
}

impl Visit for JsonVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.insert(field, value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.insert(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.insert(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.insert(field, value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.insert(field, value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.insert(field, format!("{value:?}").into());
    }
}

/// At trace level ureq's protocol layer dumps every byte sent and received: the signing
/// headers of connector calls (X-HMAC, Signature-Input, Signature) and of webhooks with them.
/// Its debug lines redact headers, so it never logs below debug, whatever the filter asks.
fn not_a_wire_dump(metadata: &tracing::Metadata<'_>) -> bool {
    !(*metadata.level() == tracing::Level::TRACE && metadata.target().starts_with("ureq_proto"))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer into memory, to read what was logged.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'writer> MakeWriter<'writer> for Captured {
        type Writer = Captured;
        fn make_writer(&'writer self) -> Self::Writer {
            self.clone()
        }
    }

    fn logged(directives: &str, format: LogFormat, events: impl FnOnce()) -> String {
        let captured = Captured::default();
        let subscriber = subscriber(directives, format, captured.clone());
        tracing::subscriber::with_default(subscriber, events);
        String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn directives_choose_levels_per_target() {
        let log = logged("info,mercer::http=warn", LogFormat::Text, || {
            tracing::info!(target: "mercer::http", "request line");
            tracing::warn!(target: "mercer::http", "http warning");
            tracing::info!(target: "mercer::jobs", "job line");
            tracing::debug!(target: "mercer::jobs", "job detail");
        });
        assert!(!log.contains("request line"), "{log}");
        assert!(log.contains("WARN mercer::http: http warning"), "{log}");
        assert!(log.contains("INFO mercer::jobs: job line"), "{log}");
        assert!(!log.contains("job detail"), "{log}");
    }

    #[test]
    fn ureq_never_dumps_the_wire_even_at_trace() {
        let log = logged("trace", LogFormat::Text, || {
            tracing::trace!(target: "ureq_proto::util", "x-hmac: secret-bytes");
            tracing::debug!(target: "ureq_proto::client", "redacted headers");
            tracing::trace!(target: "mercer::http", "our own trace");
        });
        assert!(!log.contains("secret-bytes"), "{log}");
        assert!(log.contains("redacted headers"), "{log}");
        assert!(log.contains("our own trace"), "{log}");
    }

    #[test]
    fn json_lines_carry_level_target_message_fields_and_spans() {
        let log = logged("info", LogFormat::Json, || {
            let span = tracing::info_span!("request", request_id = "abc-1", shop = "shop_1");
            span.in_scope(|| tracing::warn!(target: "mercer::store", "slow query"));
            tracing::info!(target: "mercer::http", request_id = "abc-1", "GET / 200");
        });
        let lines: Vec<serde_json::Value> = log
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON object a line"))
            .collect();
        assert_eq!(lines.len(), 2, "{log}");
        assert_eq!(lines[0]["level"], "WARN");
        assert_eq!(lines[0]["target"], "mercer::store");
        assert_eq!(lines[0]["message"], "slow query");
        assert_eq!(lines[0]["spans"][0]["name"], "request");
        assert_eq!(lines[0]["spans"][0]["request_id"], "abc-1");
        assert_eq!(lines[0]["spans"][0]["shop"], "shop_1");
        assert_eq!(lines[1]["message"], "GET / 200");
        assert_eq!(lines[1]["request_id"], "abc-1");
    }

    #[test]
    fn json_lines_of_log_macros_carry_their_target_and_no_log_fields() {
        let log = logged("info", LogFormat::Json, || {
            let span = tracing::error_span!(
                "job",
                kind = "orders.place",
                id = 7,
                request_id = Some("req-1")
            );
            span.in_scope(|| {
                tracing_log::format_trace(
                    &log::Record::builder()
                        .target("mercer::jobs")
                        .level(log::Level::Warn)
                        .module_path_static(Some("mercer_jobs::runner"))
                        .file_static(Some("crates/jobs/src/runner.rs"))
                        .line(Some(7))
                        .args(format_args!("job failed"))
                        .build(),
                )
                .unwrap();
            });
        });
        let line: serde_json::Value = serde_json::from_str(log.trim()).expect("one JSON line");
        assert_eq!(line["level"], "WARN");
        assert_eq!(line["target"], "mercer::jobs");
        assert_eq!(line["message"], "job failed");
        assert_eq!(line["spans"][0]["name"], "job");
        assert_eq!(line["spans"][0]["kind"], "orders.place");
        assert_eq!(line["spans"][0]["id"], 7);
        // The request that enqueued the job, as the request's own lines name it.
        assert_eq!(line["spans"][0]["request_id"], "req-1");
        let keys: Vec<&String> = line.as_object().unwrap().keys().collect();
        assert!(keys.iter().all(|key| !key.starts_with("log.")), "{log}");
    }

    /// Without `--otlp-endpoint` the subscriber is the log's alone: no traces layer, no trace
    /// context kept for what is enqueued, and the spans made for traces only (database
    /// transactions, connector calls) are not made at all under the usual filter.
    #[test]
    fn without_an_endpoint_no_traces_layer_or_hooks_are_installed() {
        let cli = crate::config::load(["mercer", "serve"]).expect("serve parses");
        let crate::cli::Command::Serve(args) = &cli.command else {
            panic!("not serve");
        };
        assert_eq!(args.otlp_endpoint, None);
        let dispatch = tracing::Dispatch::new(subscriber(
            &cli.log_level,
            cli.log_format,
            Captured::default(),
        ));
        tracing::dispatcher::with_default(&dispatch, || {
            use tracing_opentelemetry::{OpenTelemetrySpanExt, SetParentError};
            let request = tracing::error_span!(target: "mercer::http", "request");
            assert!(matches!(
                request.set_parent(opentelemetry::Context::new()),
                Err(SetParentError::LayerNotFound)
            ));
            let _entered = request.enter();
            assert_eq!(mercer_domain::kernel::jobs::current_trace_parent(), None);
            let transaction = tracing::debug_span!(target: "mercer::store", "transaction");
            assert!(transaction.is_disabled());
        });
        assert!(!mercer_domain::kernel::jobs::traces_exported());
    }

    #[test]
    fn no_directive_means_errors_only() {
        let log = logged("", LogFormat::Text, || {
            tracing::warn!("a warning");
            tracing::error!("an error");
        });
        assert!(!log.contains("a warning"), "{log}");
        assert!(log.contains("an error"), "{log}");
    }
}
