//! The wire's answer shapes, held by a recording: a fixed set of requests is replayed in order
//! against the real `mercer` binary on one fresh database, and every answer's status and shape
//! are compared with `answer_shapes.json`, so that a change in how request bodies are read
//! cannot change what clients are answered unnoticed.
//!
//! The requests: for every operation of `docs/openapi.json` that takes a JSON body, a valid body
//! with every field, `{}`, and for each field (the first element of each array) another JSON
//! kind, decimal text for a number, blank text, null, an unknown field beside it, an array past
//! its `maxItems`; for the box builder all of that in the wrapped (`{"box": {…}}`) and the bare
//! form; and a call of every other operation. An operation of the document without a request
//! fails the test.
//!
//! A shape is what a client's parser depends on, without the values that change from run to
//! run (ids, times, tokens): an error body is its entries' field, type, sub_type, severity and
//! message (runs of digits as `#`); another JSON body is its keys and the kinds of their values
//! (an array by its first element, or `[]` when empty); a redirect is its query's names; any
//! other body is its content type.
//!
//! The recording holds one line per request, in the order sent, and a table of the JSON shapes,
//! each once (one a few paths away from another is told as that one with those paths changed).
//! `MERCER_RECORD_ANSWER_SHAPES=1` writes it (on SQLite) instead of comparing; PostgreSQL is
//! compared with the same recording.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mercer_domain::Timestamp;
use mercer_domain::ports::Database;
use mercer_platform_sim::{MercerLink, RunningSimulator};
use mercer_store::Store;
use mercer_tests::receiver::Receiver;
use mercer_tests::{Answer, Backend, MercerServer, TestDatabase, backend_tests, wait_until};
use serde_json::{Map, Value, json};

use crate::box_builder::{self, Admin};
use crate::box_shoppers::{platform, sim_admin};
use crate::checkout;
use crate::oauth::{PASSWORD, REDIRECT, location_params, oauth_world, param};
use crate::subscriptions::{ALLOW_PRIVATE, address, monday, rfc, running_rule};

/// Set (to anything) to write the recording rather than compare with it.
const RECORD: &str = "MERCER_RECORD_ANSWER_SHAPES";

fn recording_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e/answer_shapes.json")
}

fn openapi_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json")
}

// ---------------------------------------------------------------------------------------------
// Shapes

/// The recorded form of one answer.
fn answer_shape(answer: &Answer, shallow: bool) -> Value {
    if let Some(location) = answer.header("location") {
        // A redirect answers with its target: its query's names are what the client reads.
        let query = location.split_once('?').map(|(_, q)| q).unwrap_or_default();
        let names: Vec<Value> = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| json!(pair.split('=').next().unwrap_or_default()))
            .collect();
        return json!({ "redirect_query": names });
    }
    if answer.text.is_empty() {
        return json!("empty body");
    }
    let content_type = answer.header("content-type").unwrap_or_default();
    let parsed = if content_type.contains("json") {
        serde_json::from_str::<Value>(&answer.text).ok()
    } else {
        None
    };
    let Some(mut body) = parsed else {
        return json!({ "content_type": content_type });
    };
    opaque_topic_schemas(&mut body);
    if let Some(entries) = body.get("errors").and_then(Value::as_array) {
        return json!({ "errors": error_lines(entries) });
    }
    if let (Some(error), true) = (
        body.get("error").and_then(Value::as_str),
        answer.status >= 400,
    ) {
        // RFC 6749's error body (the token endpoint).
        let description = body["error_description"].as_str().unwrap_or_default();
        return json!({ "oauth_error": format!("{error} | {}", digits_masked(description)) });
    }
    if shallow {
        return match body {
            Value::Object(fields) => {
                Value::Object(fields.keys().map(|key| (key.clone(), json!("…"))).collect())
            }
            other => shape(&other),
        };
    }
    shape(&body)
}

/// The `schema` of each webhook topic listed (`webhook_topics[]`, `data[]`) as `"…"`: its
/// content is the topic catalogue's, which the webhook tests compare whole.
fn opaque_topic_schemas(body: &mut Value) {
    for list in ["webhook_topics", "data"] {
        let Some(entries) = body.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for entry in entries {
            let is_topic = entry.get("name").is_some() || entry.get("webhook_topic_name").is_some();
            if let Some(schema) = entry.get_mut("schema").filter(|_| is_topic) {
                *schema = json!("…");
            }
        }
    }
}

/// An error body's entries, one line each; a run of entries alike but for their numbers (one
/// per item of a long array) is its first line and a count of the rest.
fn error_lines(entries: &[Value]) -> Vec<Value> {
    // (a line, its pattern, how many alike follow it)
    let mut runs: Vec<(String, String, usize)> = Vec::new();
    for entry in entries {
        let line = error_line(entry);
        let alike = digits_masked(&line);
        match runs.last_mut() {
            Some((_, pattern, more)) if *pattern == alike => *more += 1,
            _ => runs.push((line, alike, 0)),
        }
    }
    let mut lines = Vec::new();
    for (line, _, more) in runs {
        lines.push(json!(line));
        if more > 0 {
            lines.push(json!(format!("… and {more} more like it")));
        }
    }
    lines
}

/// One entry of an error body on one line: `field | type sub_type severity | message`.
fn error_line(entry: &Value) -> String {
    let text = |key: &str| match &entry[key] {
        Value::String(text) => text.clone(),
        Value::Null => "(none)".to_string(),
        other => format!("({other})"),
    };
    format!(
        "{} | {} {} {} | {}",
        text("field"),
        text("type"),
        text("sub_type"),
        text("severity"),
        digits_masked(&text("message"))
    )
}

/// `text` with every run of ASCII digits as `#`.
fn digits_masked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_digits = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// Objects as their keys with the shapes of their values, arrays as the shape of their first
/// element (`[]` when empty), scalars as their kind.
fn shape(value: &Value) -> Value {
    match value {
        Value::Null => json!("null"),
        Value::Bool(_) => json!("boolean"),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
        Value::Array(items) => match items.first() {
            None => json!([]),
            Some(first) => json!([shape(first)]),
        },
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| (key.clone(), shape(value)))
                .collect(),
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Body variants

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

/// Where a value sits in a body, as `a.b[0].c` (`body` for the body itself).
fn place_name(place: &[Step]) -> String {
    let mut name = String::new();
    for step in place {
        match step {
            Step::Key(key) if name.is_empty() => name.push_str(key),
            Step::Key(key) => {
                name.push('.');
                name.push_str(key);
            }
            Step::Index(index) => {
                let _ = write!(name, "[{index}]");
            }
        }
    }
    if name.is_empty() {
        "body".to_string()
    } else {
        name
    }
}

/// What a variant changes in the valid body.
enum Change {
    Whole(Value),
    Set(Vec<Step>, Value),
    AddField(Vec<Step>),
}

struct Variant {
    label: String,
    change: Change,
}

/// The unknown field added beside the known ones.
const UNKNOWN_FIELD: &str = "unknown_extra_field";

fn value_at_mut<'v>(value: &'v mut Value, place: &[Step]) -> Option<&'v mut Value> {
    let mut current = value;
    for step in place {
        current = match (step, current) {
            (Step::Key(key), Value::Object(fields)) => fields.get_mut(key)?,
            (Step::Index(index), Value::Array(items)) => items.get_mut(*index)?,
            _ => return None,
        };
    }
    Some(current)
}

fn apply(mut body: Value, change: &Change) -> Value {
    match change {
        Change::Whole(whole) => return whole.clone(),
        Change::Set(place, value) => {
            if let Some(slot) = value_at_mut(&mut body, place) {
                *slot = value.clone();
            }
        }
        Change::AddField(place) => {
            if let Some(Value::Object(fields)) = value_at_mut(&mut body, place) {
                fields.insert(UNKNOWN_FIELD.to_string(), json!("surplus"));
            }
        }
    }
    body
}

/// The variants of `valid`: the empty body, and for every value in it (the first element of
/// each array) its wrong kinds, decimal text, blank text, null, an unknown field beside it, and
/// arrays past their `maxItems`.
fn variants(valid: &Value, max_items: &dyn Fn(&[Step]) -> Option<usize>) -> Vec<Variant> {
    let mut out = Vec::new();
    match valid {
        Value::Array(_) => {
            out.push(Variant {
                label: "empty array".to_string(),
                change: Change::Whole(json!([])),
            });
            out.push(Variant {
                label: "object for the array".to_string(),
                change: Change::Whole(json!({})),
            });
        }
        _ => {
            out.push(Variant {
                label: "empty object".to_string(),
                change: Change::Whole(json!({})),
            });
            out.push(Variant {
                label: "array for the object".to_string(),
                change: Change::Whole(json!([])),
            });
        }
    }
    walk(valid, &mut Vec::new(), max_items, &mut out);
    out
}

fn walk(
    value: &Value,
    place: &mut Vec<Step>,
    max_items: &dyn Fn(&[Step]) -> Option<usize>,
    out: &mut Vec<Variant>,
) {
    let name = place_name(place);
    let mut set = |what: &str, to: Value| {
        out.push(Variant {
            label: format!("{name}: {what}"),
            change: Change::Set(place.clone(), to),
        })
    };
    if !place.is_empty() {
        match value {
            Value::String(text) => {
                set("object for text", json!({ "text": text }));
                set("number for text", json!(12));
                set("blank text", json!("  "));
                set("null", Value::Null);
            }
            Value::Number(number) => {
                set("text for number", json!("twelve"));
                set("decimal text", json!(number.to_string()));
                set("null", Value::Null);
            }
            Value::Bool(flag) => {
                set("text for boolean", json!("yes"));
                set("boolean as text", json!(flag.to_string()));
                set("number for boolean", json!(1));
                set("null", Value::Null);
            }
            Value::Array(items) => {
                set("object for array", json!({}));
                set("empty array", json!([]));
                set("null", Value::Null);
                if let (Some(max), Some(first)) = (max_items(place), items.first()) {
                    set(
                        &format!("over maxItems ({} items)", max + 1),
                        Value::Array(vec![first.clone(); max + 1]),
                    );
                }
            }
            Value::Object(_) => {
                set("text for object", json!("text"));
                set("null", Value::Null);
            }
            Value::Null => {}
        }
    }
    match value {
        Value::Object(fields) => {
            out.push(Variant {
                label: format!("{name}: unknown field"),
                change: Change::AddField(place.clone()),
            });
            for (key, item) in fields {
                place.push(Step::Key(key.clone()));
                walk(item, place, max_items, out);
                place.pop();
            }
        }
        Value::Array(items) => {
            if let Some(first) = items.first() {
                place.push(Step::Index(0));
                walk(first, place, max_items, out);
                place.pop();
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// The OpenAPI document: operation ids, which take JSON, and arrays' maxItems

struct Spec {
    document: Value,
    /// Every operationId, with the JSON schema of its request body when it takes one.
    operations: BTreeMap<String, Option<Value>>,
}

impl Spec {
    fn load() -> Spec {
        let text = std::fs::read_to_string(openapi_path()).expect("docs/openapi.json is readable");
        let document: Value = serde_json::from_str(&text).expect("docs/openapi.json is JSON");
        let mut operations = BTreeMap::new();
        for item in document["paths"].as_object().expect("paths").values() {
            for operation in item.as_object().expect("a path item").values() {
                let Some(id) = operation["operationId"].as_str() else {
                    continue;
                };
                let schema =
                    operation["requestBody"]["content"]["application/json"]["schema"].clone();
                operations.insert(id.to_string(), (!schema.is_null()).then_some(schema));
            }
        }
        Spec {
            document,
            operations,
        }
    }

    fn resolve<'s>(&'s self, mut schema: &'s Value) -> &'s Value {
        while let Some(reference) = schema["$ref"].as_str() {
            let name = reference.rsplit('/').next().unwrap_or_default();
            schema = &self.document["components"]["schemas"][name];
        }
        // `oneOf: [T, null]` and the like: the part that is not null.
        for key in ["oneOf", "anyOf", "allOf"] {
            let parts = schema[key].as_array().into_iter().flatten();
            if let Some(part) = parts
                .map(|part| self.resolve(part))
                .find(|part| part["type"] != "null")
            {
                return part;
            }
        }
        schema
    }

    /// The `maxItems` of the array at `place` in `operation`'s request body.
    fn max_items(&self, operation: &str, place: &[Step]) -> Option<usize> {
        let mut schema = self.resolve(self.operations.get(operation)?.as_ref()?);
        for step in place {
            schema = match step {
                Step::Key(key) => {
                    let property = &schema["properties"][key.as_str()];
                    if property.is_null() {
                        &schema["additionalProperties"]
                    } else {
                        property
                    }
                }
                Step::Index(_) => &schema["items"],
            };
            schema = self.resolve(schema);
        }
        schema["maxItems"]
            .as_u64()
            .and_then(|max| usize::try_from(max).ok())
    }
}

// ---------------------------------------------------------------------------------------------
// The replay

/// One request and what it was answered.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    operation: String,
    label: String,
    status: u16,
    answer: Value,
}

impl Entry {
    fn from_json(value: &Value) -> Entry {
        Entry {
            operation: value["operationId"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            label: value["label"].as_str().unwrap_or_default().to_string(),
            status: value["status"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or_default(),
            answer: value["answer"].clone(),
        }
    }
}

enum Body<'b> {
    None,
    Json(&'b Value),
    Form(&'b [(&'b str, &'b str)]),
    Csv(&'b str),
}

/// Undoes what an accepted variant made, so that the next one meets the same state.
type Undo<'u> = Option<&'u dyn Fn(&Answer)>;

/// Makes a body to send (a fresh one each time: some hold a one-time code or key).
type BodyMaker<'f> = Box<dyn Fn() -> Value + 'f>;

fn undo_if_made(undo: Undo<'_>, answer: &Answer) {
    if let (Some(undo), true) = (undo, (200..300).contains(&answer.status)) {
        undo(answer);
    }
}

struct Replay<'a> {
    server: &'a MercerServer,
    spec: &'a Spec,
    entries: Vec<Entry>,
    timings: BTreeMap<String, Duration>,
}

impl Replay<'_> {
    /// Sends one request and records its answer under `operation` and `label`.
    fn call(
        &mut self,
        operation: &str,
        label: &str,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        body: Body<'_>,
    ) -> Answer {
        self.send(operation, label, method, path, bearer, body, false)
    }

    #[allow(clippy::too_many_arguments)] // one request, spelled out
    fn send(
        &mut self,
        operation: &str,
        label: &str,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        body: Body<'_>,
        shallow: bool,
    ) -> Answer {
        assert!(
            self.spec.operations.contains_key(operation),
            "{operation} is not an operationId of docs/openapi.json"
        );
        let mut call = self.server.request(method, path);
        if let Some(token) = bearer {
            call = call.bearer(token);
        }
        let sent = Instant::now();
        let answer = match body {
            Body::None => call.call(),
            Body::Json(body) => call.json(body),
            Body::Form(fields) => call.form(fields),
            Body::Csv(text) => call
                .header("Content-Type", "text/csv")
                .send_bytes(Some(text.as_bytes().to_vec())),
        };
        *self.timings.entry(operation.to_string()).or_default() += sent.elapsed();
        self.entries.push(Entry {
            operation: operation.to_string(),
            label: label.to_string(),
            status: answer.status,
            answer: answer_shape(&answer, shallow),
        });
        answer
    }

    /// A GET (or the call without a body) of `operation`, labelled `label`.
    fn get(&mut self, operation: &str, label: &str, path: &str, bearer: Option<&str>) -> Answer {
        self.call(operation, label, "GET", path, bearer, Body::None)
    }

    /// Every variant of `valid()`'s body, then the valid body itself (its answer given back):
    /// each variant meets the state the valid body would, as far as `undo` takes back what an
    /// accepted variant made.
    fn bodies(
        &mut self,
        operation: &str,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        valid: &dyn Fn() -> Value,
        undo: Undo<'_>,
    ) -> Answer {
        self.forms(operation, method, path, bearer, valid, undo, None, "")
    }

    /// [`Self::bodies`] of another form an operation's body may take (one field instead of
    /// another), its labels starting with `form`.
    #[allow(clippy::too_many_arguments)] // one request set, spelled out
    fn bodies_of_form(
        &mut self,
        form: &str,
        operation: &str,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        valid: &dyn Fn() -> Value,
        undo: Undo<'_>,
    ) -> Answer {
        self.forms(operation, method, path, bearer, valid, undo, None, form)
    }

    /// [`Self::bodies`] for the box builder, whose bodies may be wrapped (`{"box": {…}}`) or
    /// bare: the variants of both, the bare valid body (undone), then the wrapped one.
    #[allow(clippy::too_many_arguments)] // one request set, spelled out
    fn box_bodies(
        &mut self,
        operation: &str,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        wrapper: &str,
        valid: &dyn Fn() -> Value,
        undo: Undo<'_>,
    ) -> Answer {
        self.forms(
            operation,
            method,
            path,
            bearer,
            valid,
            undo,
            Some(wrapper),
            "",
        )
    }

    #[allow(clippy::too_many_arguments)] // one request set, spelled out
    fn forms(
        &mut self,
        operation: &str,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        valid: &dyn Fn() -> Value,
        undo: Undo<'_>,
        wrapper: Option<&str>,
        form: &str,
    ) -> Answer {
        let form = if form.is_empty() {
            String::new()
        } else {
            format!("{form}: ")
        };
        let sample = valid();
        let spec = self.spec;
        let wrapped_max = |place: &[Step]| spec.max_items(operation, place);
        let mut sets: Vec<(String, BodyMaker<'_>, Vec<Variant>)> = vec![(
            form.clone(),
            Box::new(valid),
            variants(&sample, &wrapped_max),
        )];
        if let Some(wrapper) = wrapper {
            let bare = move || valid()[wrapper].clone();
            let bare_max = move |place: &[Step]| {
                let mut wrapped = vec![Step::Key(wrapper.to_string())];
                wrapped.extend_from_slice(place);
                spec.max_items(operation, &wrapped)
            };
            let bare_variants = variants(&bare(), &bare_max);
            sets.push(("bare ".to_string(), Box::new(bare), bare_variants));
        }
        for (prefix, body, list) in &sets {
            for variant in list {
                let sent = apply(body(), &variant.change);
                let label = format!("{prefix}{}", variant.label);
                let answer = self.call(operation, &label, method, path, bearer, Body::Json(&sent));
                undo_if_made(undo, &answer);
            }
        }
        if let Some((_, bare, _)) = sets.get(1) {
            let answer = self.call(
                operation,
                "bare valid body",
                method,
                path,
                bearer,
                Body::Json(&bare()),
            );
            undo_if_made(undo, &answer);
        }
        let answer = self.call(
            operation,
            &format!("{form}valid body"),
            method,
            path,
            bearer,
            Body::Json(&valid()),
        );
        if !(200..300).contains(&answer.status) {
            // Recorded as it is; said here, since a refused valid body is seldom meant.
            eprintln!(
                "answer shapes: the valid body of {operation} answered {}: {}",
                answer.status, answer.text
            );
        }
        answer
    }
}

// ---------------------------------------------------------------------------------------------
// The request set

/// What the requests share: the demo shop, its token, the platform simulator (its connector),
/// and local receivers for webhooks and overrides.
struct World<'a> {
    server: &'a MercerServer,
    store: Store,
    shop: String,
    token: String,
    sim: RunningSimulator,
    hooks: Receiver,
    overrides: Receiver,
    /// The subscription group the box builder's boxes are sold under.
    box_group: i64,
}

impl World<'_> {
    fn token(&self) -> Option<&str> {
        Some(self.token.as_str())
    }

    /// A request outside the recording (set-up and undoing), which must answer 2xx.
    fn quietly(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let call = self.server.request(method, path).bearer(&self.token);
        let answer = match body {
            Some(body) => call.json(body),
            None => call.call(),
        };
        assert!(
            (200..300).contains(&answer.status),
            "{method} {path}: {} {}",
            answer.status,
            answer.text
        );
        serde_json::from_str(&answer.text).unwrap_or(Value::Null)
    }

    /// Waits until no platform event waits to be applied and no webhook message to be sent:
    /// what is read next does not depend on how far the background work got.
    fn settle(&self) {
        let quiet = wait_until(Duration::from_secs(30), || {
            self.store
                .read(|tx| {
                    let events = tx.count_pending_inbound_events()?;
                    let (due, later) = tx.webhook_queue_depth(Timestamp::now())?;
                    Ok(events == 0 && due == 0 && later == 0)
                })
                .unwrap_or(false)
        });
        assert!(
            quiet,
            "the background work did not settle in 30 s\n{}",
            self.server.log()
        );
    }
}

/// `pointer` in an answer's JSON, which must be there.
fn field(answer: &Answer, pointer: &str) -> Value {
    let body: Value = serde_json::from_str(&answer.text).unwrap_or(Value::Null);
    match body.pointer(pointer) {
        Some(value) if !value.is_null() => value.clone(),
        _ => panic!(
            "no {pointer} in the answer ({}): {}",
            answer.status, answer.text
        ),
    }
}

/// An id as it goes in a path.
fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Runs the whole request set on a fresh server of `backend`, in order.
fn replay(backend: Backend, spec: &Spec) -> Vec<Entry> {
    // Where the time goes, said on standard error (shown with --nocapture or on a failure).
    let mut clock = Instant::now();
    let mut lap = |what: &str, count: usize| {
        eprintln!(
            "answer shapes: {what} done ({count} requests so far) in {:.1?}",
            clock.elapsed()
        );
        clock = Instant::now();
    };
    let server = MercerServer::start_with(TestDatabase::create_migrated(backend), ALLOW_PRIVATE);
    let (admin, box_group) = box_builder::set_up(&server);
    let sim = platform(&admin, &["customers"]);
    let hooks = Receiver::start();
    let overrides = checkout::override_server();
    checkout::set_up(&server, &sim, &hooks, &overrides);
    let world = World {
        server: &server,
        store: server.database().open_store(),
        shop: admin.shop.clone(),
        token: admin.token.clone(),
        sim,
        hooks,
        overrides,
        box_group,
    };
    world.settle();
    let mut replay = Replay {
        server: &server,
        spec,
        entries: Vec::new(),
        timings: BTreeMap::new(),
    };
    lap("set-up", 0);
    public(&mut replay);
    connector(&mut replay, &world);
    lap("public and connector", replay.entries.len());
    events(&mut replay, &world);
    lap("events", replay.entries.len());
    directory(&mut replay, &world);
    subscriptions(&mut replay, &world);
    lap("subscriptions", replay.entries.len());
    boxes(&mut replay, &world, &admin);
    lap("boxes", replay.entries.len());
    checkout_admin_and_storefront(&mut replay, &world);
    lap("checkout", replay.entries.len());
    oauth(&mut replay, &world);
    lap("oauth", replay.entries.len());
    imports_and_exports(&mut replay, &world);
    privacy(&mut replay, &world);
    let mut slowest: Vec<_> = replay.timings.iter().collect();
    slowest.sort_by_key(|(_, spent)| std::cmp::Reverse(**spent));
    for (operation, spent) in slowest.iter().take(5) {
        eprintln!("answer shapes: {operation}: {spent:.1?} waiting for answers");
    }
    replay.entries
}

fn public(r: &mut Replay<'_>) {
    r.get("get_liveness", "get", "/healthz", None);
    r.get("get_readiness", "get", "/readyz", None);
    r.get("get_metrics", "get", "/metrics", None);
    // The document's own content is the OpenAPI tests' to hold: its top level is enough here.
    r.send(
        "get_openapi_document",
        "get (top level)",
        "GET",
        "/openapi.json",
        None,
        Body::None,
        true,
    );
    r.get("get_api_reference_page", "get", "/docs", None);
}

fn connector(r: &mut Replay<'_>, w: &World<'_>) {
    let base = format!(
        "/integrations/v1/shops/{}/platform_connector_destinations",
        w.shop
    );
    r.get("list_destinations", "get", &base, w.token());
    // A client may repeat the destination's id (a create has none yet: any is sent).
    let destination = |id: &Value, timeout: i64| {
        json!({"data": {"destination": {"id": id, "shop_identifier": w.shop, "topic": "products",
            "destination": w.sim.base_url, "version": "v1", "timeout_ms": timeout}}})
    };
    let undo = |made: &Answer| {
        let id = text(&field(made, "/data/destination/id"));
        w.quietly("DELETE", &format!("{base}/{id}"), None);
    };
    let made = r.bodies(
        "create_destination",
        "POST",
        &base,
        w.token(),
        &|| destination(&json!(12345), 500),
        Some(&undo),
    );
    let id = field(&made, "/data/destination/id");
    let one = format!("{base}/{}", text(&id));
    r.get("get_destination", "get", &one, w.token());
    r.bodies(
        "update_destination",
        "PUT",
        &one,
        w.token(),
        &|| destination(&id, 600),
        None,
    );
    r.bodies(
        "update_destination_patch",
        "PATCH",
        &one,
        w.token(),
        &|| destination(&id, 700),
        None,
    );

    // A new connector secret: the platform is told it, as a merchant would.
    let rotated = r.call(
        "rotate_connector_secret",
        "post",
        "POST",
        &format!("/integrations/v1/shops/{}/shared_secret/rotate", w.shop),
        w.token(),
        Body::None,
    );
    let secret = text(&field(&rotated, "/data/shared_secret"));
    w.sim.simulator.add_shop(
        &w.shop,
        &secret,
        Some(MercerLink {
            base_url: w.server.base_url.clone(),
            token: w.token.clone(),
        }),
    );

    // Syncs from the platform, each read once it has ended.
    for (service, start, get) in [
        ("products", "start_product_sync", "get_product_sync"),
        ("customers", "start_customer_sync", "get_customer_sync"),
        ("orders", "start_order_sync", "get_order_sync"),
    ] {
        let sync = format!("/{service}/v2/shops/{}/sync", w.shop);
        let started = r.call(start, "post", "POST", &sync, w.token(), Body::None);
        let run = format!("{sync}/{}", text(&field(&started, "/data/sync/id")));
        let ended = wait_until(Duration::from_secs(30), || {
            let now = w.server.get(&run).bearer(&w.token).call();
            serde_json::from_str::<Value>(&now.text)
                .is_ok_and(|body| body["data"]["sync"]["status"] != "running")
        });
        assert!(ended, "the {service} sync did not end");
        w.settle();
        r.get(get, "get once ended", &run, w.token());
    }
    r.call(
        "delete_destination",
        "delete",
        "DELETE",
        &one,
        w.token(),
        Body::None,
    );
}

/// The platform's events, each a body of every field; their platform ids are their own, so
/// that what the rest reads does not depend on them.
fn events(r: &mut Replay<'_>, w: &World<'_>) {
    let time = "2026-11-01T00:00:00Z";
    let later = "2026-11-02T00:00:00Z";
    let custom = json!({"size": {"description": "Size", "value": "M"}});
    let customer_address = json!({"platform_id": "shape-address",
        "platform_customer_id": "shape-customer",
        "address_type": "shipping", "address_use": "home", "company": "Engines", "city": "Berlin",
        "country": "Germany", "country_code": "DE", "first_name": "Ada", "last_name": "Lovelace",
        "phone": "+49 30 1234", "email": "ada@example.test", "postal_code": "10115",
        "province": "Berlin", "province_code": "BE", "street_1": "Unter den Linden 1",
        "street_2": "Hof", "is_default": true});
    let customer = json!({"data": {"customer": {"platform_id": "shape-customer",
        "platform_created_at": time, "platform_updated_at": time, "email": "ada@example.test",
        "first_name": "Ada", "last_name": "Lovelace", "phone": "+49 30 1234",
        "addresses": [customer_address]}}});
    let order_address = json!({"platform_id": "shape-order-address", "address_type": "shipping",
        "first_name": "Ada", "last_name": "Lovelace", "street_1": "Unter den Linden 1",
        "street_2": "Hof", "city": "Berlin", "province": "Berlin", "country": "Germany",
        "country_code": "DE", "phone": "+49 30 1234", "postal_code": "10115",
        "email": "ada@example.test", "province_code": "BE", "company": "Engines"});
    let tax = json!({"amount": "1.20", "name": "VAT", "rate": "0.19", "tag": "vat"});
    let order = json!({"data": {"order": {"platform_id": "shape-order", "platform_updated_at": time,
        "placed_at": time, "order_number": "1001", "platform_customer_id": "shape-customer",
        "shipping_addresses": [order_address], "billing_address": order_address,
        "line_items": [{"platform_id": "shape-line", "platform_product_id": "shape-product",
            "platform_variant_id": "shape-variant", "cart_line_item_platform_id": "shape-cart-line",
            "title": "Coffee", "sku": "COF-1", "url": "https://shop.example/coffee",
            "image": "https://shop.example/coffee.png", "custom_attributes": custom,
            "quantity": 2, "grams": 1000.5, "weight": 1.5, "weight_unit": "kg", "taxable": true,
            "requires_shipping": true, "taxes": [tax], "price_per_item": "12.50",
            "discount_per_item": "0.50", "total": "24.00", "subtotal": "25.00",
            "total_tax": "1.20", "discounted_subtotal": "24.00"}],
        "payments": [{"platform_id": "shape-payment", "platform_created_at": time,
            "platform_updated_at": time,
            "transactions": [{"platform_id": "shape-transaction",
                "provider_transaction_id": "tx_1", "amount": "25.20", "currency": "EUR",
                "status": "success", "type": "charge"}],
            "description": "Card", "provider": "stripe", "payment_method": "card",
            "currency": "EUR", "amount_planned": "25.20", "status": "paid",
            "custom_attributes": custom}],
        "shipping_method": "Ground", "browser_ip": "192.0.2.1", "source": "web",
        "created_via": "checkout", "locale": "de", "test": false, "notes": "ring twice",
        "public_notes": "thanks", "custom_attributes": custom, "shipping_subtotal": "5.00",
        "shipping_tax": "0.95", "discount": "1.00", "subtotal": "25.00", "subtotal_tax": "1.20",
        "total_tax": "2.15", "total": "31.15", "refunded_amount": "0.00",
        "shipping_taxes": [tax], "currency": "EUR", "order_status": "open",
        "fulfillment_status": "unfulfilled", "financial_status": "paid"}}});
    let category = json!({"platform_id": "shape-category", "platform_updated_at": time,
        "image_url": "https://shop.example/c.png", "name": "Drinks"});
    let variant = json!({"platform_id": "shape-variant", "name": "Coffee 1kg", "sku": "COF-1",
        "barcode": "0012345678905", "image_url": "https://shop.example/v.png",
        "inventory_tracking_entity": "variant", "inventory_tracking_service": "platform",
        "tax_code": "T1", "weight_unit": "kg", "compare_at_price": "14.00", "cost": "6.00",
        "price": "12.50", "weight": "1.0", "grams": 1000.0, "inventory_quantity": 10,
        "allow_backorder": false, "require_shipping": true, "tax_exempt": false,
        "localized_names": {"de": "Kaffee 1kg"},
        "option_values": [{"platform_id": "shape-value",
            "platform_product_option_id": "shape-option",
            "label": "1kg", "name": "Size"}]});
    let option = json!({"platform_id": "shape-option", "name": "Size", "position": 1,
        "option_values": [{"platform_id": "shape-value", "is_default": true, "label": "1kg",
            "position": 1}]});
    let product = json!({"data": {"product": {"platform_id": "shape-product",
        "platform_updated_at": time, "name": "Coffee", "description": "Beans",
        "handle": "coffee", "url": "https://shop.example/coffee", "vendor": "Roaster",
        "type": "food", "tax_code": "T1", "tags": "beans,dark", "published": true,
        "inventory_quantity": 10, "inventory_tracking_entity": "variant",
        "inventory_tracking_service": "platform", "localized_names": {"de": "Kaffee"},
        "localized_descriptions": {"de": "Bohnen"}, "categories": [category],
        "variants": [variant], "options": [option],
        "images": [{"platform_id": "shape-image", "name": "Front",
            "src": "https://shop.example/i.png", "position": 1}]}}});
    for (service, collection, key, saved, save_op, delete_op) in [
        (
            "customers",
            "customers",
            "customer",
            customer,
            "send_customer_saved_event",
            "send_customer_deleted_event",
        ),
        (
            "orders",
            "orders",
            "order",
            order,
            "send_order_saved_event",
            "send_order_deleted_event",
        ),
        (
            "products",
            "products",
            "product",
            product,
            "send_product_saved_event",
            "send_product_deleted_event",
        ),
        (
            "products",
            "categories",
            "category",
            json!({"data": {"category": category}}),
            "send_category_saved_event",
            "send_category_deleted_event",
        ),
    ] {
        let base = format!(
            "/{service}/v1/shops/{}/platforms/custom/webhooks/{collection}",
            w.shop
        );
        r.bodies(
            save_op,
            "POST",
            &format!("{base}/saved"),
            w.token(),
            &|| saved.clone(),
            None,
        );
        let gone = json!({"data": {key: {"platform_id": format!("shape-gone-{key}"),
            "platform_deleted_at": later}}});
        r.bodies(
            delete_op,
            "POST",
            &format!("{base}/deleted"),
            w.token(),
            &|| gone.clone(),
            None,
        );
    }
    w.settle();
}

fn directory(r: &mut Replay<'_>, w: &World<'_>) {
    let base = format!("/customers/v2/shops/{}/customers", w.shop);
    r.get("list_directory_customers", "get", &base, w.token());
    let found = r.get(
        "get_directory_customer_by_platform_id",
        "get",
        &format!("{base}/pid/shape-customer"),
        w.token(),
    );
    let one = format!("{base}/{}", text(&field(&found, "/customer/id")));
    r.get("get_directory_customer", "get", &one, w.token());
    let addresses = r.get(
        "list_directory_customer_addresses",
        "get",
        &format!("{one}/addresses"),
        w.token(),
    );
    r.get(
        "get_directory_customer_address",
        "get",
        &format!(
            "{one}/addresses/{}",
            text(&field(&addresses, "/addresses/0/id"))
        ),
        w.token(),
    );
    let labels = format!("{one}/labels");
    let label = r.bodies(
        "add_directory_customer_label",
        "POST",
        &labels,
        w.token(),
        &|| json!({"name": "vip"}),
        None,
    );
    r.call(
        "delete_directory_customer_label",
        "delete",
        "DELETE",
        &format!("{labels}/{}", text(&field(&label, "/label/id"))),
        w.token(),
        Body::None,
    );
}

fn subscriptions(r: &mut Replay<'_>, w: &World<'_>) {
    let base = format!("/subscriptions/v1/shops/{}", w.shop);
    let token = w.token();
    r.get(
        "get_shop_information",
        "get",
        &format!("{base}/shop"),
        token,
    );

    // A webhook subscription of subscription_created, before any subscription is made.
    let hooks = format!("{base}/webhooks/subscriptions");
    r.get(
        "list_subscription_webhook_topics",
        "get",
        &format!("{base}/webhooks/topics"),
        token,
    );
    let webhook = |secret: &str| {
        json!({"webhook_subscription": {"callback_url": format!("{}/subscriptions", w.hooks.url),
            "webhook_topic_id": 4, "shared_secret": secret}})
    };
    let undo_webhook = |made: &Answer| {
        let id = text(&field(made, "/webhook_subscription/id"));
        w.quietly("DELETE", &format!("{hooks}/{id}"), None);
    };
    let made = r.bodies(
        "create_webhook_subscription",
        "POST",
        &hooks,
        token,
        &|| webhook("subscription-webhook-secret"),
        Some(&undo_webhook),
    );
    let hook = format!(
        "{hooks}/{}",
        text(&field(&made, "/webhook_subscription/id"))
    );
    r.get("list_webhook_subscriptions", "get", &hooks, token);
    r.get("get_webhook_subscription", "get", &hook, token);
    r.bodies(
        "update_webhook_subscription",
        "PATCH",
        &hook,
        token,
        &|| webhook("subscription-webhook-secret-2"),
        None,
    );

    // Groups.
    let groups = format!("{base}/subscription_groups");
    let group = |rule_id: Value| {
        let mut rule = json!({"interval_number": 2, "interval_type": "week",
            "interval_name": "Fortnightly", "billing_rule": "FREQ=WEEKLY;INTERVAL=2"});
        if !rule_id.is_null() {
            rule["id"] = rule_id;
        }
        json!({"subscription_group": {"name": "Coffee club", "percent_discount": 10.5,
            "products": [{"platform_product_id": "veg", "platform_variant_id": "carrot"}],
            "billing_rules": [rule]}})
    };
    let made = r.bodies(
        "create_subscription_group",
        "POST",
        &groups,
        token,
        &|| group(Value::Null),
        None,
    );
    let group_id = field(&made, "/subscription_group/id");
    let one_group = format!("{groups}/{}", text(&group_id));
    // An accepted variant may replace the rule: each body names the one the group has then.
    let current_rule = || {
        w.quietly("GET", &one_group, None)["subscription_group"]["billing_rules"][0]["id"].clone()
    };
    r.get("list_subscription_groups", "get", &groups, token);
    r.get("get_subscription_group", "get", &one_group, token);
    r.bodies(
        "update_subscription_group",
        "PUT",
        &one_group,
        token,
        &|| group(current_rule()),
        None,
    );
    r.bodies(
        "update_subscription_group_patch",
        "PATCH",
        &one_group,
        token,
        &|| group(current_rule()),
        None,
    );
    let rule_id = current_rule();
    let spare = w.quietly(
        "POST",
        &groups,
        Some(&json!({"subscription_group": {"name": "Spare",
            "billing_rules": [{"interval_number": 1, "interval_type": "month"}]}})),
    );
    r.call(
        "delete_subscription_group",
        "delete",
        "DELETE",
        &format!("{groups}/{}", text(&spare["subscription_group"]["id"])),
        token,
        Body::None,
    );

    // Subscriptions: every field of the create body. Each call has its own idempotency key and
    // external id, so that an accepted variant is not answered again for the next.
    let calls = std::cell::Cell::new(0);
    let rule = running_rule();
    let subscription = || {
        calls.set(calls.get() + 1);
        json!({
            "customer": {"email": "subscriber@example.test", "first_name": "Ada",
                "last_name": "Lovelace", "phone": "+1 514 555 0100", "notes": "mornings"},
            "subscription": {
                "idempotency_key": format!("shape-{}", calls.get()),
                "external_id": format!("ext-{}", calls.get()),
                "next_order_datetime": rfc(monday(0)),
                "last_order_datetime": rfc(monday(-2)),
                "placed_at": rfc(monday(-4)),
                "subscription_status": "active",
                "order_rrule": rule,
                "base_currency": "USD",
                "charged_currency": "CAD",
                "base_to_charged_exchange_rate": 1.25,
                "percent_discount": 5.5,
                "line_items": [{
                    "platform_product_id": "veg", "platform_variant_id": "carrot",
                    "quantity": 2, "price": 1299, "subscription_group_id": group_id,
                    "interval_id": rule_id,
                    "prepaid_metadata": {"prepaid_duration": 3, "current_recurrence_count": 1,
                        "prepaid_continue": "renew"},
                    "line_item_attributes": [{"name": "gift_note", "value": "For Ada"}],
                    "title": "Carrots", "product_name": "Veg", "variant_name": "Carrot",
                    "sku": "VEG-C", "image": "https://shop.example/c.png", "grams": 500,
                    "weight": 0.5, "weight_unit": "kg", "requires_shipping": true,
                    "taxable": true,
                    "discounts": [{"discount_type": "percentage", "percentage_value": 10.0,
                        "fixed_value": 100, "description": "Welcome"}]}],
                "billing_address": address("2 Rue Sainte-Catherine", "Montréal"),
                "shipping_address": address("1 Rue Sainte-Catherine", "Montréal"),
                "payment_details": {"gateway_name": "stripe",
                    "gateway_customer_id": "cus_shape", "gateway_payment_id": "pm_shape",
                    "expires_at": "2030-12"},
                "discount_code": "WELCOME10",
                "note": "fragile",
                "order_note": "leave at the door",
                "shipping_lines": [{"name": "Ground", "code": "ground", "tag": "std",
                    "price": 500}]
            }
        })
    };
    let subs = format!("{base}/subscriptions");
    let made = r.bodies(
        "create_subscription",
        "POST",
        &subs,
        token,
        &subscription,
        None,
    );
    let sub = field(&made, "/subscription");
    let one = format!("{subs}/{}", text(&sub["id"]));
    let customer = format!("{base}/customers/{}", text(&sub["customer_id"]));
    r.get("list_subscriptions", "get", &subs, token);
    r.get("get_subscription", "get", &one, token);
    let update = || {
        json!({"subscription": {
            "customer": {"first_name": "Ada", "last_name": "Lovelace",
                "phone": "+1 514 555 0100", "email": "subscriber@example.test",
                "notes": "evenings"},
            "external_id": "ext-updated",
            "idempotency_key": "shape-update",
            "next_order_datetime": rfc(monday(0)),
            "next_payment_datetime": rfc(monday(0)),
            "next_processing_datetime": rfc(monday(0)),
            "last_payment_datetime": rfc(monday(-2)),
            "last_order_datetime": rfc(monday(-2)),
            "last_processed_datetime": rfc(monday(-2)),
            "placed_at": rfc(monday(-4)),
            "subscription_status": "active",
            "payment_method_token": "pm_shape_2",
            "payment_gateway_public_id": "stripe",
            "payment_method_expires_at": "2031-01",
            "order_rrule": rule,
            "payment_rrule": rule,
            "current_retries": 0,
            "orders_processed": 3,
            "charged_currency": "CAD",
            "base_currency": "USD",
            "base_to_charged_exchange_rate": 1.3,
            "billing_address": address("3 Rue Sainte-Catherine", "Montréal"),
            "shipping_address": address("4 Rue Sainte-Catherine", "Montréal"),
            "billing_address_id": sub["billing_address_id"],
            "shipping_address_id": sub["shipping_address_id"],
            "discount_code": "WELCOME10",
            "last_failure_code": "card_declined",
            "last_failure_reason": "declined",
            "last_failure_details": {"message": "The card was declined"},
            "note": "fragile",
            "order_note": "ring twice",
            "shipping_lines": [{"name": "Ground", "code": "ground", "tag": "std", "price": 500}]
        }})
    };
    r.bodies("update_subscription", "PUT", &one, token, &update, None);
    r.bodies(
        "change_subscription_frequency",
        "PUT",
        &format!("{one}/frequency"),
        token,
        &|| json!({"order_rrule": rule}),
        None,
    );
    r.bodies(
        "change_subscription_quantity",
        "PUT",
        &format!(
            "{one}/line_items/{}/quantity",
            text(&sub["line_items"][0]["id"])
        ),
        token,
        &|| json!({"quantity": 3}),
        None,
    );
    r.bodies(
        "change_subscription_payment_method",
        "PUT",
        &format!("{one}/payment_method"),
        token,
        &|| {
            json!({"payment_method_token": "pm_shape_3", "payment_gateway_public_id": "stripe",
                "expires_at": "2031-02"})
        },
        None,
    );
    r.bodies(
        "change_subscription_shipping_address",
        "PUT",
        &format!("{one}/shipping_address"),
        token,
        &|| json!({"shipping_address": address("5 Avenue du Parc", "Montréal")}),
        None,
    );
    r.bodies_of_form(
        "by address_id",
        "change_subscription_shipping_address",
        "PUT",
        &format!("{one}/shipping_address"),
        token,
        &|| json!({"address_id": sub["billing_address_id"]}),
        None,
    );
    let skips = std::cell::Cell::new(0);
    r.bodies(
        "skip_subscription_order",
        "POST",
        &format!("{one}/skip"),
        token,
        &|| {
            // A date once skipped is no order date any more: each body skips one of its own.
            skips.set(skips.get() + 2);
            json!({"order_datetime": rfc(monday(skips.get()))})
        },
        None,
    );
    // The shop's cancellation reasons, which Cancel's reason names.
    let reasons = format!("{base}/settings/cancellation_reasons");
    r.bodies(
        "set_cancellation_reasons",
        "PUT",
        &reasons,
        token,
        &|| json!({"cancellation_reasons": [{"code": "moving", "label": "I am moving"}]}),
        None,
    );
    r.get("get_cancellation_reasons", "get", &reasons, token);
    // The shop's dunning policy: its default (the retry settings), then one of its own.
    let dunning = format!("{base}/settings/dunning");
    r.get("get_dunning_policy", "get", &dunning, token);
    r.bodies(
        "set_dunning_policy",
        "PUT",
        &dunning,
        token,
        &|| json!({"dunning": {"retry_intervals_s": [86400, 259200, 604800], "at_max_retries": "pause"}}),
        None,
    );
    // Pause and Cancel without a body, as before they took one; then each body, an accepted
    // one undone by Resume or Reactivate.
    for (operation, action, label) in [
        ("pause_subscription", "pause", "no body"),
        ("resume_subscription", "resume", "post"),
        ("cancel_subscription", "cancel", "no body"),
        ("reactivate_subscription", "reactivate", "post"),
    ] {
        r.call(
            operation,
            label,
            "POST",
            &format!("{one}/{action}"),
            token,
            Body::None,
        );
    }
    let resume = |_: &Answer| {
        w.quietly("POST", &format!("{one}/resume"), None);
    };
    r.bodies(
        "pause_subscription",
        "POST",
        &format!("{one}/pause"),
        token,
        &|| json!({"resume_on": "2099-12-31"}),
        Some(&resume),
    );
    let reactivate = |_: &Answer| {
        w.quietly("POST", &format!("{one}/reactivate"), None);
    };
    r.bodies(
        "cancel_subscription",
        "POST",
        &format!("{one}/cancel"),
        token,
        &|| json!({"reason": "moving", "comment": "Off to Lisbon"}),
        Some(&reactivate),
    );
    w.quietly("POST", &format!("{one}/reactivate"), None);

    // The subscription's customer.
    r.get(
        "list_subscription_customers",
        "get",
        &format!("{base}/customers"),
        token,
    );
    r.get("get_subscription_customer", "get", &customer, token);
    r.bodies(
        "update_subscription_customer",
        "PUT",
        &customer,
        token,
        &|| {
            json!({"customer": {"first_name": "Ada", "last_name": "Byron",
                "phone": "+1 514 555 0101", "email": "subscriber@example.test",
                "notes": "evenings"}})
        },
        None,
    );
    let addresses = format!("{customer}/addresses");
    r.get(
        "list_subscription_customer_addresses",
        "get",
        &addresses,
        token,
    );
    let customer_address = |street: &str| {
        let mut body = address(street, "Laval");
        body["is_default"] = json!(false);
        json!({ "customer_address": body })
    };
    let made = r.bodies(
        "create_subscription_customer_address",
        "POST",
        &addresses,
        token,
        &|| customer_address("6 Rue Principale"),
        None,
    );
    let one_address = format!(
        "{addresses}/{}",
        text(&field(&made, "/customer_address/id"))
    );
    r.bodies(
        "update_subscription_customer_address",
        "PUT",
        &one_address,
        token,
        &|| customer_address("7 Rue Principale"),
        None,
    );
    r.call(
        "delete_subscription_customer_address",
        "delete",
        "DELETE",
        &one_address,
        token,
        Body::None,
    );
    r.get(
        "list_customer_subscriptions",
        "get",
        &format!("{customer}/subscriptions"),
        token,
    );
    r.get(
        "export_subscription_customer",
        "get",
        &format!("{customer}/export"),
        token,
    );

    // The webhook subscription's deliveries: every subscription_created message sent by now.
    w.settle();
    let deliveries = format!("{hook}/deliveries");
    let log = r.get(
        "list_webhook_subscription_deliveries",
        "get",
        &deliveries,
        token,
    );
    let message = text(&field(&log, "/deliveries/0/message_id"));
    r.get(
        "get_webhook_subscription_delivery",
        "get",
        &format!("{deliveries}/{message}"),
        token,
    );
    r.call(
        "resend_webhook_subscription_delivery",
        "post",
        "POST",
        &format!("{deliveries}/{message}/resend"),
        token,
        Body::None,
    );
    w.settle();
    r.bodies(
        "recover_webhook_subscription_deliveries",
        "POST",
        &format!("{hook}/recover"),
        token,
        &|| json!({"since": "2020-01-01T00:00:00Z"}),
        None,
    );
    w.settle();
    r.call(
        "enable_webhook_subscription",
        "post",
        "POST",
        &format!("{hook}/enable"),
        token,
        Body::None,
    );
    r.call(
        "delete_webhook_subscription",
        "delete",
        "DELETE",
        &hook,
        token,
        Body::None,
    );
}

fn boxes(r: &mut Replay<'_>, w: &World<'_>, admin: &Admin<'_>) {
    let base = format!("/box_builder/v1/shops/{}", w.shop);
    let token = w.token();
    let attributes = json!([{"attribute_key": "diet", "attribute_value": "vegan"}]);

    r.get("list_boxes", "get", &format!("{base}/boxes"), token);
    let undo_box = |made: &Answer| {
        let id = text(&field(made, "/data/box/id"));
        w.quietly("DELETE", &format!("{base}/boxes/{id}"), None);
    };
    let a_box = |name: &str| {
        json!({"box": {"svc_subscription_group_id": w.box_group, "box_name": name,
            "attributes": attributes}})
    };
    let made = r.box_bodies(
        "create_box",
        "POST",
        &format!("{base}/boxes"),
        token,
        "box",
        &|| a_box("Veg box"),
        Some(&undo_box),
    );
    let box_id = text(&field(&made, "/data/box/id"));
    let one_box = format!("{base}/boxes/{box_id}");
    r.get("get_box", "get", &one_box, token);
    r.box_bodies(
        "update_box",
        "PATCH",
        &one_box,
        token,
        "box",
        &|| a_box("Big veg box"),
        None,
    );

    // Box products: variants of the catalogue (the product event of the set-up).
    let undo_product = |made: &Answer| {
        let id = text(&field(made, "/data/box_product/id"));
        w.quietly("DELETE", &format!("{base}/box_products/{id}"), None);
    };
    let product = |variant: &str| {
        json!({"box_product": {"platform_product_id": "veg", "platform_variant_id": variant,
            "attributes": attributes}})
    };
    let made = r.box_bodies(
        "create_box_product",
        "POST",
        &format!("{base}/box_products"),
        token,
        "box_product",
        &|| product("carrot"),
        Some(&undo_product),
    );
    let carrot = field(&made, "/data/box_product/id");
    let one_product = format!("{base}/box_products/{}", text(&carrot));
    r.get(
        "list_box_products",
        "get",
        &format!("{base}/box_products"),
        token,
    );
    r.get("get_box_product", "get", &one_product, token);
    r.box_bodies(
        "update_box_product",
        "PATCH",
        &one_product,
        token,
        "box_product",
        &|| product("carrot"),
        None,
    );

    // Sizes.
    let sizes = format!("{one_box}/box_sizes");
    let size = |id: Value, max: i64| {
        let mut size = json!({"box_size_name": "Small", "pricing_mode": "flexible_pricing",
            "min_quantity": 1, "max_quantity": max});
        if !id.is_null() {
            size["id"] = id;
        }
        size
    };
    let made = r.box_bodies(
        "create_box_size",
        "POST",
        &sizes,
        token,
        "box_size",
        &|| json!({ "box_size": size(Value::Null, 4) }),
        None,
    );
    let size_id = field(&made, "/data/id");
    let one_size = format!("{base}/box_sizes/{}", text(&size_id));
    r.get("list_box_sizes", "get", &sizes, token);
    r.get("get_box_size", "get", &one_size, token);
    r.box_bodies(
        "update_box_size",
        "PATCH",
        &one_size,
        token,
        "box_size",
        &|| json!({ "box_size": size(size_id.clone(), 5) }),
        None,
    );
    // The bulk update's documented body is the bare array; the wrapped form is read too.
    r.bodies(
        "update_box_sizes",
        "PUT",
        &sizes,
        token,
        &|| json!([size(size_id.clone(), 4)]),
        None,
    );
    for (label, body) in [
        ("wrapped empty object", json!({ "box_sizes": {} })),
        (
            "wrapped valid body",
            json!({ "box_sizes": [size(size_id.clone(), 4)] }),
        ),
    ] {
        r.call(
            "update_box_sizes",
            label,
            "PUT",
            &sizes,
            token,
            Body::Json(&body),
        );
    }

    // Time slots and their options.
    let slots = format!("{one_box}/time_slots");
    let undo_slot = |made: &Answer| {
        let id = text(&field(made, "/data/time-slot/id"));
        w.quietly("DELETE", &format!("{base}/time_slots/{id}"), None);
    };
    let slot = |name: &str| {
        json!({"time_slot": {"time_slot_name": name, "start_date": "2030-01-07T00:00:00Z",
            "end_date": "2030-01-13T23:59:59Z", "selection_deadline_date": "2030-01-04T00:00:00Z",
            "visibility_date": "2020-01-01T00:00:00Z", "attributes": attributes}})
    };
    r.get("list_time_slots", "get", &slots, token);
    let made = r.box_bodies(
        "create_time_slot",
        "POST",
        &slots,
        token,
        "time_slot",
        &|| slot("Week 1"),
        Some(&undo_slot),
    );
    let slot_id = field(&made, "/data/time-slot/id");
    let one_slot = format!("{base}/time_slots/{}", text(&slot_id));
    r.get("get_time_slot", "get", &one_slot, token);
    r.box_bodies(
        "update_time_slot",
        "PATCH",
        &one_slot,
        token,
        "time_slot",
        &|| slot("Week one"),
        None,
    );
    r.bodies(
        "create_time_slot_option",
        "POST",
        &format!("{one_slot}/options"),
        token,
        &|| json!({ "box_product_id": carrot }),
        None,
    );
    r.get(
        "list_time_slot_options",
        "get",
        &format!("{one_slot}/options"),
        token,
    );

    // A customer of the platform with a subscription of the box's group: their selections, by
    // the merchant's app and by the customer (with the token the platform issued them).
    let (status, made) = sim_admin(
        "POST",
        &format!("{}/admin/shops/{}/customers", w.sim.base_url, w.shop),
        Some(json!({"email": "boxer@example.test", "first_name": "Boxer"})),
    );
    assert_eq!(status, 200, "{made}");
    let customer = text(&made["data"]["platform_id"]);
    let (box_item, _) = box_builder::subscribe(admin, &customer, "boxer@example.test", w.box_group);
    let selection = |at: &str, quantity: i64| {
        json!({"selection": {"svc_platform_subscription_line_item_id": box_item,
            "box_size_id": size_id, "time_slot_id": slot_id, "order_datetime": at,
            "line_items": [{"box_product_id": carrot, "choice_quantity": quantity}]}})
    };
    let selections = format!("{base}/customers/{customer}/selections");
    let made = r.box_bodies(
        "create_selection",
        "POST",
        &selections,
        token,
        "selection",
        &|| selection("2030-01-10T09:00:00Z", 2),
        None,
    );
    let one_selection = format!("{selections}/{}", text(&field(&made, "/data/selection/id")));
    r.get("list_selections", "get", &selections, token);
    r.get("get_selection", "get", &one_selection, token);
    r.box_bodies(
        "update_selection",
        "PATCH",
        &one_selection,
        token,
        "selection",
        &|| selection("2030-01-10T09:00:00Z", 3),
        None,
    );
    r.get(
        "list_box_line_items",
        "get",
        &format!("{base}/subscription_line_items"),
        token,
    );
    r.get(
        "get_box_line_item",
        "get",
        &format!("{base}/subscription_line_items/{box_item}"),
        token,
    );

    let (status, issued) = sim_admin(
        "POST",
        &format!(
            "{}/admin/shops/{}/customers/{customer}/token",
            w.sim.base_url, w.shop
        ),
        None,
    );
    assert_eq!(status, 200, "{issued}");
    let query = format!("?token={}", text(&issued["token"]));
    let mine = format!(
        "/box_builder/v1/customer/shops/{}/customers/{customer}/selections",
        w.shop
    );
    r.get(
        "list_customer_selections",
        "get",
        &format!("{mine}{query}"),
        None,
    );
    let made = r.box_bodies(
        "create_customer_selection",
        "POST",
        &format!("{mine}{query}"),
        None,
        "selection",
        &|| selection("2030-01-11T09:00:00Z", 2),
        None,
    );
    let own = text(&field(&made, "/data/selection/id"));
    r.get(
        "get_customer_selection",
        "get",
        &format!("{mine}/{own}{query}"),
        None,
    );
    r.box_bodies(
        "update_customer_selection",
        "PATCH",
        &format!("{mine}/{own}{query}"),
        None,
        "selection",
        &|| selection("2030-01-11T09:00:00Z", 3),
        None,
    );

    // The storefront: no credentials.
    let storefront = format!("/box_builder/v1/storefront/shops/{}/boxes", w.shop);
    r.get("list_storefront_boxes", "get", &storefront, None);
    r.get(
        "get_storefront_box",
        "get",
        &format!("{storefront}/{box_id}"),
        None,
    );
    r.get(
        "list_storefront_box_sizes",
        "get",
        &format!("{storefront}/{box_id}/box_sizes"),
        None,
    );
    r.get(
        "list_storefront_time_slots",
        "get",
        &format!("{storefront}/{box_id}/time_slots"),
        None,
    );

    // Deletes, each once nothing holds what it deletes.
    for (label, path) in [
        ("delete (the merchant's)", one_selection.clone()),
        ("delete (the customer's)", format!("{selections}/{own}")),
    ] {
        r.call(
            "delete_selection",
            label,
            "DELETE",
            &path,
            token,
            Body::None,
        );
    }
    r.call(
        "delete_time_slot_option",
        "delete",
        "DELETE",
        &format!("{one_slot}/options/{}", text(&carrot)),
        token,
        Body::None,
    );
    for (operation, path) in [
        ("delete_time_slot", &one_slot),
        ("delete_box_product", &one_product),
        ("delete_box", &one_box),
    ] {
        r.call(operation, "delete", "DELETE", path, token, Body::None);
    }
}

/// The checkout's address, every field given.
fn checkout_address(street: &str) -> Value {
    json!({"first_name": "Ada", "last_name": "Lovelace", "address_line_1": street,
           "address_line_2": "Suite 2", "city": "Ottawa", "postal_code": "K1A 0A1",
           "province": "Ontario", "province_code": "ON", "country": "Canada",
           "country_code": "CA", "business_name": "Engines", "phone_number": "+1 613 555 0100"})
}

fn checkout_admin_and_storefront(r: &mut Replay<'_>, w: &World<'_>) {
    let base = format!("/checkout/shop/{}", w.shop);
    let token = w.token();
    let secret = "override-shared-secret";

    r.get(
        "get_checkout_settings",
        "get",
        &format!("{base}/settings"),
        token,
    );
    r.bodies(
        "update_checkout_settings",
        "PATCH",
        &format!("{base}/settings"),
        token,
        &|| {
            json!({"abandoned_cart_emails": false, "gift_cards_enabled": true,
                "gift_card_skus": ["GC-25"], "flat_shipping_rate": 500})
        },
        None,
    );
    r.bodies(
        "configure_checkout_integration",
        "POST",
        &format!("{base}/integration/config"),
        token,
        &|| json!({"shared_secret": "checkout-integration-secret"}),
        None,
    );

    // Overrides: one type at a time, so the address check's is made again here.
    let overrides = format!("{base}/overrides");
    let listed = r.get("list_api_overrides", "get", &overrides, token);
    let listed: Value = serde_json::from_str(&listed.text).unwrap_or(Value::Null);
    let address_check = listed["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["override_type"] == "address_validate")
        .map(|o| text(&o["id"]))
        .expect("the set-up made an address_validate override");
    w.quietly("DELETE", &format!("{overrides}/{address_check}"), None);
    let an_override = || {
        json!({"override_type": "address_validate",
            "url": format!("{}/address_validate", w.overrides.url), "shared_secret": secret})
    };
    let undo_override = |made: &Answer| {
        let id = text(&field(made, "/data/id"));
        w.quietly("DELETE", &format!("{overrides}/{id}"), None);
    };
    let made = r.bodies(
        "create_api_override",
        "POST",
        &overrides,
        token,
        &an_override,
        Some(&undo_override),
    );
    let one_override = format!("{overrides}/{}", text(&field(&made, "/data/id")));
    r.bodies(
        "update_api_override",
        "PATCH",
        &one_override,
        token,
        &an_override,
        None,
    );

    // Webhooks: one more, its test message, its log.
    let webhooks = format!("{base}/webhooks");
    r.get(
        "list_checkout_webhook_topics",
        "get",
        &format!("{webhooks}/topics"),
        token,
    );
    r.get("list_checkout_webhooks", "get", &webhooks, token);
    let webhook = |path: &str| {
        let url = format!("{}/{path}", w.hooks.url);
        json!({"webhook_topic_id": 1, "callback_url": url})
    };
    let undo_webhook = |made: &Answer| {
        let id = text(&field(made, "/data/id"));
        w.quietly("DELETE", &format!("{webhooks}/{id}"), None);
    };
    let made = r.bodies(
        "create_checkout_webhook",
        "POST",
        &webhooks,
        token,
        &|| webhook("checkout-shape"),
        Some(&undo_webhook),
    );
    let hook = format!("{webhooks}/{}", text(&field(&made, "/data/id")));
    r.bodies(
        "update_checkout_webhook",
        "PATCH",
        &hook,
        token,
        &|| json!({"callback_url": format!("{}/checkout-shape-2", w.hooks.url)}),
        None,
    );
    let tested = r.call(
        "test_checkout_webhook",
        "post",
        "POST",
        &format!("{hook}/test"),
        token,
        Body::None,
    );
    let message = text(&field(&tested, "/data/message_id"));
    w.settle();
    let deliveries = format!("{hook}/deliveries");
    r.get(
        "list_checkout_webhook_deliveries",
        "get",
        &deliveries,
        token,
    );
    r.get(
        "get_checkout_webhook_delivery",
        "get",
        &format!("{deliveries}/{message}"),
        token,
    );
    r.call(
        "resend_checkout_webhook_delivery",
        "post",
        "POST",
        &format!("{deliveries}/{message}/resend"),
        token,
        Body::None,
    );
    w.settle();
    r.bodies(
        "recover_checkout_webhook_deliveries",
        "POST",
        &format!("{hook}/recover"),
        token,
        &|| json!({"since": "2020-01-01T00:00:00Z"}),
        None,
    );
    w.settle();
    r.call(
        "enable_checkout_webhook",
        "post",
        "POST",
        &format!("{hook}/enable"),
        token,
        Body::None,
    );

    storefront(r, w);
    w.settle();

    r.call(
        "delete_checkout_webhook",
        "delete",
        "DELETE",
        &hook,
        token,
        Body::None,
    );
    r.call(
        "delete_api_override",
        "delete",
        "DELETE",
        &one_override,
        token,
        Body::None,
    );
}

/// One checkout from Init Order to Process Order, every storefront route on the way.
fn storefront(r: &mut Replay<'_>, w: &World<'_>) {
    let init = || {
        json!({
            "cart_items": [{"platform_id": "var-coffee", "quantity": 1, "line_item_key": "coffee",
                "line_item_properties": {"grind": "fine"}}],
            "customer": {"first_name": "Ada", "last_name": "Lovelace",
                "email_address": "ada@example.test", "accepts_marketing": true},
            "order_meta_data": {"cart_parameters": {"source": "app"},
                "note_attributes": {"gift": "yes"}, "notes": "gift", "tags": ["vip"]},
            "overrides": [{"override_type": "tax", "url": format!("{}/tax", w.overrides.url),
                "shared_secret": "override-shared-secret"}]
        })
    };
    let made = r.bodies(
        "init_checkout_order",
        "POST",
        &format!("/checkout/orders/{}/init", w.shop),
        w.token(),
        &init,
        None,
    );
    let base = format!(
        "/checkout/storefront/{}/{}",
        w.shop,
        text(&field(&made, "/data/public_order_id"))
    );
    let jwt = text(&field(&made, "/data/jwt_token"));
    let bearer = Some(jwt.as_str());
    // Set-up and undoing on the storefront, outside the recording.
    let quietly = |method: &str, rest: &str, body: Option<&Value>| {
        let call = w
            .server
            .request(method, &format!("{base}{rest}"))
            .bearer(&jwt);
        let answer = match body {
            Some(body) => call.json(body),
            None => call.call(),
        };
        assert_eq!(answer.status, 200, "{method} {rest}: {}", answer.text);
    };
    r.get(
        "refresh_checkout_order",
        "get",
        &format!("{base}/refresh"),
        bearer,
    );

    // The customer: taken off, added as a guest (each accepted variant taken off again), then
    // replaced.
    let customer = |email: &str| {
        json!({"first_name": "Ada", "last_name": "Lovelace", "email_address": email,
            "accepts_marketing": false})
    };
    r.call(
        "delete_checkout_customer",
        "delete",
        "DELETE",
        &format!("{base}/customer"),
        bearer,
        Body::None,
    );
    let undo_customer = |_: &Answer| quietly("DELETE", "/customer", None);
    r.bodies(
        "add_checkout_guest_customer",
        "POST",
        &format!("{base}/customer/guest"),
        bearer,
        &|| customer("ada@example.test"),
        Some(&undo_customer),
    );
    r.bodies(
        "update_checkout_customer",
        "PUT",
        &format!("{base}/customer"),
        bearer,
        &|| customer("ada.lovelace@example.test"),
        None,
    );

    // Addresses: set (each accepted variant taken off again), deleted, set again with PUT.
    for (kind, set, delete, update) in [
        (
            "shipping",
            "set_checkout_shipping_address",
            "delete_checkout_shipping_address",
            "update_checkout_shipping_address",
        ),
        (
            "billing",
            "set_checkout_billing_address",
            "delete_checkout_billing_address",
            "update_checkout_billing_address",
        ),
    ] {
        let path = format!("{base}/addresses/{kind}");
        let rest = format!("/addresses/{kind}");
        let undo = |_: &Answer| quietly("DELETE", &rest, None);
        r.bodies(
            set,
            "POST",
            &path,
            bearer,
            &|| checkout_address("1 Main St"),
            Some(&undo),
        );
        r.call(delete, "delete", "DELETE", &path, bearer, Body::None);
        r.bodies(
            update,
            "PUT",
            &path,
            bearer,
            &|| checkout_address("2 Main St"),
            None,
        );
    }
    let query: Vec<String> = checkout_address("2 Main St")
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| {
            format!(
                "{key}={}",
                mercer_tests::form_encode(value.as_str().unwrap_or_default())
            )
        })
        .collect();
    r.get(
        "validate_checkout_address",
        "get",
        &format!("{base}/validate_address?{}", query.join("&")),
        bearer,
    );
    r.get(
        "validate_checkout_email_address",
        "get",
        &format!("{base}/validate_email_address?email_address=ada%40example.test"),
        bearer,
    );
    r.get(
        "validate_checkout_discount_code",
        "get",
        &format!("{base}/validate_discount_code?discount_code=TEN"),
        bearer,
    );

    // Line items: one more added (each accepted variant taken off again), changed, deleted
    // (each accepted variant's deletion undone).
    let extra = || {
        json!({"platform_id": "var-coffee", "sku": "COF-1KG", "quantity": 1,
            "line_item_key": "extra", "line_item_properties": {"grind": "coarse"}})
    };
    let key = json!({"line_item_key": "extra"});
    // What an accepted variant added may have another key (or one made for it): every line
    // but Init Order's goes.
    let take_off = |_: &Answer| {
        let state = w
            .server
            .get(&format!("{base}/refresh"))
            .bearer(&jwt)
            .call()
            .json();
        let lines = state["data"]["application_state"]["line_items"].clone();
        for line in lines.as_array().into_iter().flatten() {
            let key = match &line["line_item_key"] {
                Value::Null => line["product_data"]["line_item_key"].clone(),
                key => key.clone(),
            };
            if key != "coffee" {
                quietly("DELETE", "/items", Some(&json!({ "line_item_key": key })));
            }
        }
    };
    let put_back = |_: &Answer| quietly("POST", "/items", Some(&extra()));
    let items = format!("{base}/items");
    r.bodies(
        "add_checkout_line_item",
        "POST",
        &items,
        bearer,
        &extra,
        Some(&take_off),
    );
    r.bodies(
        "update_checkout_line_item_quantity",
        "PUT",
        &items,
        bearer,
        &|| json!({"line_item_key": "extra", "quantity": 2}),
        None,
    );
    r.bodies(
        "delete_checkout_line_item",
        "DELETE",
        &items,
        bearer,
        &|| key.clone(),
        Some(&put_back),
    );
    r.get(
        "check_checkout_inventory",
        "get",
        &format!("{base}/check_inventory"),
        bearer,
    );

    // Shipping, taxes, discounts, the order's meta data, a log line.
    r.get(
        "list_checkout_shipping_lines",
        "get",
        &format!("{base}/shipping_lines"),
        bearer,
    );
    r.bodies(
        "select_checkout_shipping_line",
        "POST",
        &format!("{base}/shipping_lines"),
        bearer,
        &|| json!({"index": 0}),
        None,
    );
    r.call(
        "set_checkout_taxes",
        "post",
        "POST",
        &format!("{base}/taxes"),
        bearer,
        Body::None,
    );
    let code = json!({"code": "TEN"});
    let remove_code = |_: &Answer| quietly("DELETE", "/discounts", Some(&code));
    let add_code = |_: &Answer| quietly("POST", "/discounts", Some(&code));
    let discounts = format!("{base}/discounts");
    r.bodies(
        "add_checkout_discount",
        "POST",
        &discounts,
        bearer,
        &|| code.clone(),
        Some(&remove_code),
    );
    r.bodies(
        "delete_checkout_discount",
        "DELETE",
        &discounts,
        bearer,
        &|| code.clone(),
        Some(&add_code),
    );
    r.bodies(
        "patch_checkout_meta_data",
        "PATCH",
        &format!("{base}/meta_data"),
        bearer,
        &|| {
            json!({"cart_parameters": {"source": "app"}, "note_attributes": {"gift": "no"},
                "notes": "no gift", "tags": ["vip", "repeat"]})
        },
        None,
    );
    r.bodies(
        "log_checkout_message",
        "POST",
        &format!("{base}/log"),
        bearer,
        &|| json!({"message": "shopper opened the payment step"}),
        None,
    );

    // Payments: one added (each accepted variant taken off again), changed, deleted (each
    // accepted variant's deletion undone); a gift card payment that is not there; then the
    // balance paid and the order processed.
    let payment = |id: Value, amount: i64| {
        json!({"id": id, "gateway_public_id": "test", "token": "tok_success",
            "amount": amount, "type": "credit_card", "display_string": "Visa 4242",
            "retain": false, "extra_payment_data": {"expires_at": "2030-12"}})
    };
    // The ids Mercer gave the order's payments.
    let paid = || -> Vec<Value> {
        let state = w
            .server
            .get(&format!("{base}/refresh"))
            .bearer(&jwt)
            .call()
            .json();
        state["data"]["application_state"]["payments"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|payment| payment["id"].clone())
            .collect()
    };
    let first_paid = || paid().first().cloned().unwrap_or(Value::Null);
    let payments = format!("{base}/payments");
    let remove_payments = |_: &Answer| {
        for id in paid() {
            quietly("DELETE", "/payments", Some(&payment(id, 100)));
        }
    };
    let pay = || quietly("POST", "/payments", Some(&payment(Value::Null, 100)));
    let add_payment = |_: &Answer| pay();
    r.bodies(
        "add_checkout_payment",
        "POST",
        &payments,
        bearer,
        &|| payment(json!("chosen-by-the-client"), 100),
        Some(&remove_payments),
    );
    r.get("list_checkout_payments", "get", &payments, bearer);
    r.bodies(
        "update_checkout_payment",
        "PUT",
        &payments,
        bearer,
        &|| payment(first_paid(), 200),
        None,
    );
    r.bodies(
        "delete_checkout_payment",
        "DELETE",
        &payments,
        bearer,
        &|| payment(first_paid(), 200),
        Some(&add_payment),
    );
    // Deleting a gift card's payment names any payment by its id.
    pay();
    r.bodies(
        "delete_checkout_gift_card_payment",
        "DELETE",
        &format!("{payments}/gift_card"),
        bearer,
        &|| json!({ "id": first_paid() }),
        Some(&add_payment),
    );
    r.call(
        "add_checkout_payment",
        "pay the balance",
        "POST",
        &payments,
        bearer,
        Body::Json(&json!({"gateway_public_id": "test", "token": "tok_success"})),
    );
    r.call(
        "process_checkout_order",
        "post",
        "POST",
        &format!("{base}/process_order"),
        bearer,
        Body::None,
    );
}

/// An import of one row that is refused (its failure's shape), its record listed and read,
/// the export, then the analytics of a period.
fn imports_and_exports(r: &mut Replay<'_>, w: &World<'_>) {
    let base = format!("/subscriptions/v1/shops/{}", w.shop);
    let csv = "external_id,email,first_name,last_name,phone,shipping_street1,shipping_city,\
        shipping_province_code,shipping_country_code,shipping_zip,subscription_group_id,\
        interval_id,order_rrule,line_items,next_order_datetime,subscription_status,\
        base_currency,charged_currency\n\
        shape-1,shape@example.com,Ada,,,1 Main St,Portland,,US,,,,,not-a-line,,active,USD,USD\n";
    r.call(
        "import_subscriptions",
        "post",
        "POST",
        &format!("{base}/imports"),
        w.token(),
        Body::Csv(csv),
    );
    // The import's record: the replay's only import, so its id is 1.
    r.get("list_imports", "get", &format!("{base}/imports"), w.token());
    r.get("get_import", "get", &format!("{base}/imports/1"), w.token());
    r.get(
        "export_subscriptions",
        "get",
        &format!("{base}/exports/subscriptions"),
        w.token(),
    );
    // A period long past (all counts 0 whenever the replay runs), and a refused one.
    r.get(
        "get_subscription_analytics",
        "get",
        &format!("{base}/analytics?from=2020-01-01&to=2020-01-31"),
        w.token(),
    );
    r.get(
        "get_subscription_analytics",
        "bad period",
        &format!("{base}/analytics?from=2020-02-01&to=2020-01-01"),
        w.token(),
    );
}

/// A privacy request, last: it erases the first subscription customer's personal data.
fn privacy(r: &mut Replay<'_>, w: &World<'_>) {
    let base = format!("/subscriptions/v1/shops/{}", w.shop);
    let token = w.token();
    let listed = (w.server.get(&format!("{base}/customers")))
        .bearer(&w.token)
        .call();
    let first = text(&field(&listed, "/customers/0/id"));
    r.call(
        "redact_subscription_customer",
        "post",
        "POST",
        &format!("{base}/customers/{first}/redact"),
        token,
        Body::None,
    );
}

fn oauth(r: &mut Replay<'_>, w: &World<'_>) {
    let world = oauth_world(w.server, REDIRECT);
    let verifier = "shape-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
    let challenge = {
        use base64::Engine as _;
        use sha2::Digest as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(verifier.as_bytes()))
    };
    let query = [
        ("client_id", world.client_id.as_str()),
        ("redirect_uri", REDIRECT),
        ("scope", "read_shop_settings read_orders"),
        ("state", "state-123"),
        ("response_type", "code"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("shop", world.shop.as_str()),
    ];
    let query_string: Vec<String> = query
        .iter()
        .map(|(k, v)| format!("{k}={}", mercer_tests::form_encode(v)))
        .collect();
    r.get(
        "show_oauth_authorize_page",
        "get",
        &format!("/accounts/dashboard/authorize?{}", query_string.join("&")),
        None,
    );
    let mut form = query.to_vec();
    form.extend_from_slice(&[
        ("email", world.email.as_str()),
        ("password", PASSWORD),
        ("decision", "approve"),
    ]);
    r.call(
        "submit_oauth_authorize_form",
        "approve",
        "POST",
        "/accounts/dashboard/authorize",
        None,
        Body::Form(&form),
    );
    // A code is good once: every request of the set gets a fresh one.
    let exchange = || {
        let approved = w.server.post("/accounts/dashboard/authorize").form(&form);
        let code = param(&location_params(&approved), "code").expect("a code");
        json!({"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
            "client_id": world.client_id, "client_secret": world.client_secret,
            "code_verifier": verifier})
    };
    r.bodies(
        "exchange_oauth_code",
        "POST",
        "/auth/oauth2/token",
        None,
        &exchange,
        None,
    );
}

// ---------------------------------------------------------------------------------------------
// Coverage, recording and comparison

/// Every operation of the document has a recorded request, and every one taking JSON has the
/// whole set of bodies.
fn assert_covered(spec: &Spec, entries: &[Entry]) {
    let mut labels: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for entry in entries {
        labels
            .entry(entry.operation.as_str())
            .or_default()
            .insert(entry.label.as_str());
    }
    let mut missing = Vec::new();
    for (operation, body) in &spec.operations {
        let Some(found) = labels.get(operation.as_str()) else {
            missing.push(format!("{operation}: no request"));
            continue;
        };
        if body.is_some() {
            let empty = found.contains("empty object") || found.contains("empty array");
            if !found.contains("valid body") || !empty || found.len() < 4 {
                missing.push(format!(
                    "{operation}: takes a JSON body, but its variants are not all there"
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "operations of docs/openapi.json without their recorded requests:\n  {}\n\
         Add requests for them to tests/e2e/answer_shapes.rs (a JSON body goes through \
         `Replay::bodies`, which makes its variants), then record with \
         `MERCER_RECORD_ANSWER_SHAPES=1 cargo test -p mercer-tests --test e2e answer_shapes` \
         against the binary of the last commit and review the new entries of \
         tests/e2e/answer_shapes.json.",
        missing.join("\n  ")
    );
    let mut seen = BTreeSet::new();
    for entry in entries {
        assert!(
            seen.insert((&entry.operation, &entry.label)),
            "two requests of {} are labelled {:?}",
            entry.operation,
            entry.label
        );
    }
}

/// The key of a reference to the shapes table.
const SHAPE_REFERENCE: &str = "$shape";
/// A shape in the table told as another's with a few paths changed.
const LIKE: &str = "$like";
const EXCEPT: &str = "$except";
/// A path of the other shape that this one does not have.
const ABSENT: &str = "(absent)";
/// The key of a shape told path by path, as compared.
const PATHS: &str = "$paths";
/// At most this many changed paths (and at most a fifth of its own) make a shape "like" another
/// rather than a table entry of its own.
const NEAR: usize = 8;

/// Whether an answer is a JSON body's shape (kept in the shapes table); error entries, content
/// types and redirects stay on their request's line.
fn tabled(answer: &Value) -> bool {
    match answer {
        Value::Object(fields) => {
            !(fields.len() == 1
                && ["errors", "oauth_error", "content_type", "redirect_query"]
                    .iter()
                    .any(|key| fields.contains_key(*key)))
        }
        Value::Array(_) => true,
        _ => false,
    }
}

/// A shape path by path: `data.box.id` → `"number"`, `data.items[]` → the first element's
/// paths, an empty array or object as `[]` or `{}`.
fn flatten(shape: &Value, path: &str, out: &mut BTreeMap<String, Value>) {
    match shape {
        Value::Object(fields) if !fields.is_empty() => {
            for (key, value) in fields {
                let inner = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                flatten(value, &inner, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                flatten(item, &format!("{path}[]"), out);
            }
        }
        leaf => {
            out.insert(path.to_string(), leaf.clone());
        }
    }
}

fn paths_of(shape: &Value) -> BTreeMap<String, Value> {
    let mut paths = BTreeMap::new();
    flatten(shape, "", &mut paths);
    paths
}

/// What turns `base` into `other`, path by path.
fn changes(base: &BTreeMap<String, Value>, other: &BTreeMap<String, Value>) -> Map<String, Value> {
    let mut changed = Map::new();
    for (path, kind) in other {
        if base.get(path) != Some(kind) {
            changed.insert(path.clone(), kind.clone());
        }
    }
    for path in base.keys() {
        if !other.contains_key(path) {
            changed.insert(path.clone(), json!(ABSENT));
        }
    }
    changed
}

/// An answer as compared: a JSON shape by its paths, anything else as recorded.
fn canonical(answer: &Value) -> Value {
    if tabled(answer) {
        json!({ PATHS: paths_of(answer) })
    } else {
        answer.clone()
    }
}

/// The recording: one line per request, in the order sent, and every distinct JSON shape once,
/// named by the first request that got it (`create_box 201`, then `create_box 201 #2`, …); a
/// shape a few paths away from one before it is told as that one with those paths changed.
fn write_recording(entries: &[Entry]) {
    // (name, its paths, what the table holds)
    let mut shapes: Vec<(String, BTreeMap<String, Value>, Value)> = Vec::new();
    let mut lines = Vec::new();
    for entry in entries {
        let answer = if tabled(&entry.answer) {
            let paths = paths_of(&entry.answer);
            let name = match shapes.iter().find(|(_, known, _)| *known == paths) {
                Some((name, _, _)) => name.clone(),
                None => {
                    let base = format!("{} {}", entry.operation, entry.status);
                    let taken = shapes
                        .iter()
                        .filter(|(name, _, _)| {
                            *name == base || name.starts_with(&format!("{base} #"))
                        })
                        .count();
                    let name = if taken == 0 {
                        base
                    } else {
                        format!("{base} #{}", taken + 1)
                    };
                    let nearest = shapes
                        .iter()
                        .filter(|(_, _, held)| held.get(LIKE).is_none())
                        .map(|(name, known, _)| (name, changes(known, &paths)))
                        .min_by_key(|(_, changed)| changed.len());
                    let held = match nearest {
                        Some((like, changed))
                            if changed.len() <= NEAR && changed.len() * 5 <= paths.len() =>
                        {
                            json!({ LIKE: like, EXCEPT: changed })
                        }
                        _ => entry.answer.clone(),
                    };
                    shapes.push((name.clone(), paths, held));
                    name
                }
            };
            json!({ SHAPE_REFERENCE: name })
        } else {
            entry.answer.clone()
        };
        let line = json!({"operationId": entry.operation, "label": entry.label,
                          "status": entry.status, "answer": answer});
        lines.push(format!("    {line}"));
    }
    let mut text = String::from("{\n  \"requests\": [\n");
    text.push_str(&lines.join(",\n"));
    text.push_str("\n  ],\n  \"shapes\": {\n");
    let tables: Vec<String> = shapes
        .iter()
        .map(|(name, _, held)| {
            let pretty = serde_json::to_string_pretty(held)
                .expect("JSON")
                .replace('\n', "\n    ");
            format!("    {}: {pretty}", Value::String(name.clone()))
        })
        .collect();
    text.push_str(&tables.join(",\n"));
    text.push_str("\n  }\n}\n");
    std::fs::write(recording_path(), text).expect("the recording is written");
}

/// The recorded requests, their answers as compared ([`canonical`]).
fn read_recording() -> Vec<Entry> {
    let path = recording_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "{} cannot be read ({error}): record it with {RECORD}=1",
            path.display()
        )
    });
    let recording: Value = serde_json::from_str(&text).expect("the recording is JSON");
    let shapes = &recording["shapes"];
    let resolve = |name: &str| -> BTreeMap<String, Value> {
        let held = shapes
            .get(name)
            .unwrap_or_else(|| panic!("the recording has no shape {name:?}"));
        let Some(like) = held[LIKE].as_str() else {
            return paths_of(held);
        };
        let mut paths = paths_of(
            shapes
                .get(like)
                .unwrap_or_else(|| panic!("the recording has no shape {like:?}")),
        );
        for (path, kind) in held[EXCEPT].as_object().into_iter().flatten() {
            if kind == ABSENT {
                paths.remove(path);
            } else {
                paths.insert(path.clone(), kind.clone());
            }
        }
        paths
    };
    recording["requests"]
        .as_array()
        .expect("the recording has its requests")
        .iter()
        .map(|line| {
            let mut entry = Entry::from_json(line);
            entry.answer = match entry.answer[SHAPE_REFERENCE].as_str() {
                Some(name) => json!({ PATHS: resolve(name) }),
                None => canonical(&entry.answer),
            };
            entry
        })
        .collect()
}

/// `recorded` against `found` (both [`canonical`]): each path whose shape differs, or both
/// answers whole.
fn differences(recorded: &Value, found: &Value) -> Vec<String> {
    match (recorded[PATHS].as_object(), found[PATHS].as_object()) {
        (Some(want), Some(got)) => {
            let mut lines = Vec::new();
            for (path, kind) in want {
                match got.get(path) {
                    None => lines.push(format!("    {path}: expected {kind}, found no such path")),
                    Some(other) if other != kind => {
                        lines.push(format!("    {path}: expected {kind}, found {other}"))
                    }
                    Some(_) => {}
                }
            }
            for (path, kind) in got {
                if !want.contains_key(path) {
                    lines.push(format!("    {path}: not expected, found {kind}"));
                }
            }
            lines
        }
        _ => vec![
            format!("    expected {}", truncated(recorded)),
            format!("    found    {}", truncated(found)),
        ],
    }
}

fn compare(recorded: &[Entry], found: &[Entry]) {
    let key = |entry: &Entry| (entry.operation.clone(), entry.label.clone());
    let found_by_key: BTreeMap<_, _> = found.iter().map(|e| (key(e), e)).collect();
    let recorded_keys: BTreeSet<_> = recorded.iter().map(key).collect();
    let mut report = Vec::new();
    for want in recorded {
        match found_by_key.get(&key(want)) {
            None => report.push(format!(
                "{} / {}: recorded, but not sent any more",
                want.operation, want.label
            )),
            Some(got) => {
                let answer = canonical(&got.answer);
                if got.status == want.status && answer == want.answer {
                    continue;
                }
                let mut lines = vec![format!("{} / {}:", want.operation, want.label)];
                if got.status != want.status {
                    lines.push(format!(
                        "    status: expected {}, found {}",
                        want.status, got.status
                    ));
                }
                if answer != want.answer {
                    lines.extend(differences(&want.answer, &answer));
                }
                report.push(lines.join("\n"));
            }
        }
    }
    for got in found {
        if !recorded_keys.contains(&key(got)) {
            report.push(format!(
                "{} / {}: sent, but not in the recording (found {} {})",
                got.operation,
                got.label,
                got.status,
                truncated(&got.answer)
            ));
        }
    }
    assert!(
        report.is_empty(),
        "{} of {} requests differ from tests/e2e/answer_shapes.json:\n\n{}\n\n\
         If a change is meant, record again with {RECORD}=1 (on the binary that makes it) \
         and review the diff of the recording.",
        report.len(),
        recorded.len().max(found.len()),
        report.join("\n\n")
    );
}

fn truncated(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 600 {
        format!("{}…", text.chars().take(600).collect::<String>())
    } else {
        text
    }
}

fn answer_shapes_match_the_recording(backend: Backend) {
    let recording = std::env::var_os(RECORD).is_some();
    if recording && backend == Backend::Postgres {
        eprintln!(
            "{RECORD} is set: the recording is made on SQLite; PostgreSQL is compared with it"
        );
        return;
    }
    let spec = Spec::load();
    let started = Instant::now();
    let found = replay(backend, &spec);
    eprintln!(
        "answer shapes: {} requests of {} operations in {:.1?} on {backend:?}",
        found.len(),
        found
            .iter()
            .map(|e| e.operation.as_str())
            .collect::<BTreeSet<_>>()
            .len(),
        started.elapsed()
    );
    assert_covered(&spec, &found);
    if recording {
        write_recording(&found);
        eprintln!("wrote {}", recording_path().display());
    } else {
        compare(&read_recording(), &found);
    }
}

backend_tests!(answer_shapes_match_the_recording);
