//! Events a connector sends when platform data changes, and the
//! rules that apply them in order even when they arrive out of order.
//!
//! An event is checked, stored (the 202 waits for that), and applied later by one applier, in
//! order of arrival; or, when nothing waits before it, applied in the storing transaction
//! ([`accept_events`]). Per entity Mercer keeps the `platform_updated_at` of the last save it
//! applied and the `platform_deleted_at` of a deletion:
//! - a Saved event older than the last applied save is dropped; one with the same time and the
//!   same content changes nothing;
//! - a Saved event at or before a deletion is dropped; a later one brings the entity back;
//! - a Deleted event older than the last applied save is dropped.
//!
//! Intake refuses (422, nothing stored) an event whose time is more than 10 minutes after
//! Mercer's clock ([`MAX_FUTURE_SECONDS`]): it would win over every true event of its entity
//! until then. It refuses an entity holding more than 250 items in a list
//! ([`MAX_ENTITY_LIST_ITEMS`]) too, so that applying one event never holds the single writer
//! long. A sync skips (and counts) the entities an event could not carry.

use crate::kernel::ids::ShopId;
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::collections::{HashMap, HashSet};
use std::fmt;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::kernel::activity::{Activity, Tally};
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::EventId;
use crate::kernel::time::Clock;
use crate::kernel::time::Timestamp;
use crate::platform::PlatformDatabase;
use crate::platform::PlatformRepositories;
use crate::platform::customer_groups::GroupsSeen;
use crate::platform::destinations::Topic;
use crate::platform::resources::{
    Category, Customer, MAX_ENTITY_LIST_ITEMS, Order, PlatformId, Product,
};

/// The kinds of platform entity an event can be about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum EntityKind {
    /// A customer.
    Customer,
    /// An order.
    Order,
    /// A product, with its variants.
    Product,
    /// A product category.
    Category,
}

impl EntityKind {
    /// Every kind.
    pub const ALL: [EntityKind; 4] = [
        EntityKind::Customer,
        EntityKind::Order,
        EntityKind::Product,
        EntityKind::Category,
    ];

    /// The key of the entity in an event body (`data.customer`), also its stored name.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The kind of a stored name or body key (`customer`…), or `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }

    /// The destination topic whose connector serves this kind.
    pub fn topic(self) -> Topic {
        match self {
            EntityKind::Customer => Topic::Customers,
            EntityKind::Order => Topic::Orders,
            EntityKind::Product | EntityKind::Category => Topic::Products,
        }
    }
}

/// What an event says happened to its entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum EventAction {
    /// The entity was created or changed; the event carries it.
    Saved,
    /// The entity was deleted; the event names it and the deletion's time.
    Deleted,
}

impl EventAction {
    /// The action's stored name (`saved`, `deleted`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The action of a stored name, or `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// Where an event came from: the connector's push, or a sync pulling the connector's lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum EventSource {
    /// Sent by the connector to Mercer's event endpoints.
    Webhook,
    /// Made by a sync from a page of the connector's lists.
    Sync,
}

impl EventSource {
    /// The source's stored name (`webhook`, `sync`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The source of a stored name, or `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// A checked event, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewInboundEvent {
    /// The id of the shop it came for.
    pub shop_id: ShopId,
    /// The kind of entity it is about.
    pub kind: EntityKind,
    /// Whether the entity was saved or deleted.
    pub action: EventAction,
    /// The entity's platform id.
    pub platform_id: String,
    /// `platform_updated_at` of a save, `platform_deleted_at` of a deletion.
    pub occurred_at: Timestamp,
    /// The entity as checked, for saves.
    pub document: Option<EventDocument>,
    /// Where it came from.
    pub source: EventSource,
    /// When Mercer received it.
    pub received_at: Timestamp,
}

/// A stored event; `id` gives the order of arrival.
#[derive(Debug, Clone, PartialEq)]
pub struct InboundEvent {
    /// The event's id (the service's integer), in order of arrival.
    pub id: EventId,
    /// The event as it was checked.
    pub event: NewInboundEvent,
    /// Attempts at applying it that failed so far.
    pub attempts: i64,
}

/// A queued event whose stored row does not read back (written by another version, or edited
/// by hand): it is set aside at once, so it cannot hold up the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct UnreadableEvent {
    /// The stored row's id.
    pub id: EventId,
    /// Why the row does not read.
    pub reason: String,
}

/// An event set aside after its last attempt failed (`mercer events failed`), as stored: its
/// columns as text, so an unreadable one is listed too.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedInboundEvent {
    /// The event's id (the service's integer).
    pub id: EventId,
    /// The id of the shop it came for.
    pub shop_id: ShopId,
    /// The entity kind, as stored (`customer`…).
    pub kind: String,
    /// The action, as stored (`saved` or `deleted`).
    pub action: String,
    /// The entity's platform id.
    pub platform_id: String,
    /// How many times applying it failed.
    pub attempts: i64,
    /// The error of the last attempt.
    pub error: String,
    /// When it was set aside.
    pub failed_at: Timestamp,
}

/// What Mercer holds of one platform entity, as the rules need it.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityRecord {
    /// The stored row's id (the service's integer).
    pub id: i64,
    /// The `platform_updated_at` of the last save applied; `None` when none was.
    pub platform_updated_at: Option<Timestamp>,
    /// The `platform_deleted_at` of its deletion; `None` while it is live.
    pub platform_deleted_at: Option<Timestamp>,
    /// The entity as JSON text; absent for an entity known only from its deletion.
    pub document: Option<String>,
}

/// An entity's document: the typed entity as checked on the way in (fields Mercer does not
/// know dropped), fields merged event after event. Stored as its JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum EntityDocument {
    /// A customer's document.
    Customer(Box<Customer>),
    /// An order's document.
    Order(Box<Order>),
    /// A product's document.
    Product(Box<Product>),
    /// A category's document.
    Category(Box<Category>),
}

impl EntityDocument {
    /// The kind of entity the document is of.
    pub fn kind(&self) -> EntityKind {
        match self {
            EntityDocument::Customer(_) => EntityKind::Customer,
            EntityDocument::Order(_) => EntityKind::Order,
            EntityDocument::Product(_) => EntityKind::Product,
            EntityDocument::Category(_) => EntityKind::Category,
        }
    }

    /// A document of `kind` from its stored JSON.
    pub fn parse(kind: EntityKind, json: &str) -> Result<Self, serde_json::Error> {
        Ok(match kind {
            EntityKind::Customer => EntityDocument::Customer(serde_json::from_str(json)?),
            EntityKind::Order => EntityDocument::Order(serde_json::from_str(json)?),
            EntityKind::Product => EntityDocument::Product(serde_json::from_str(json)?),
            EntityKind::Category => EntityDocument::Category(serde_json::from_str(json)?),
        })
    }

    /// The JSON stored for the document (absent fields left out).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        match self {
            EntityDocument::Customer(entity) => serde_json::to_string(entity),
            EntityDocument::Order(entity) => serde_json::to_string(entity),
            EntityDocument::Product(entity) => serde_json::to_string(entity),
            EntityDocument::Category(entity) => serde_json::to_string(entity),
        }
    }

    /// `incoming` applied to `base`: the fields it has, and `base`'s where it leaves them out;
    /// with whether `base` added any (if not, the result is `incoming` as it came). A document
    /// of another kind (never asked for) is taken whole.
    fn merged(base: &EntityDocument, incoming: &EntityDocument) -> (EntityDocument, bool) {
        let mut merged = incoming.clone();
        let filled = match (&mut merged, base) {
            (EntityDocument::Customer(new), EntityDocument::Customer(base)) => new.fill_from(base),
            (EntityDocument::Order(new), EntityDocument::Order(base)) => new.fill_from(base),
            (EntityDocument::Product(new), EntityDocument::Product(base)) => new.fill_from(base),
            (EntityDocument::Category(new), EntityDocument::Category(base)) => new.fill_from(base),
            _ => false,
        };
        (merged, filled)
    }

    /// What the rules refuse in a document that reads well, each named under `prefix`
    /// (`data.product`): a list holding more than [`MAX_ENTITY_LIST_ITEMS`] items, a customer
    /// group without a platform id, a catalogue price below zero.
    pub fn problems(&self, prefix: &str) -> Vec<FieldError> {
        let oversized = match self {
            EntityDocument::Customer(customer) => customer.oversized_lists(),
            EntityDocument::Order(order) => order.oversized_lists(),
            EntityDocument::Product(product) => product.oversized_lists(),
            EntityDocument::Category(_) => Default::default(),
        };
        let mut problems: Vec<FieldError> = oversized
            .into_paths()
            .into_iter()
            .map(|(path, len)| {
                let field = format!("{prefix}.{path}");
                let message = format!(
                    "{field} holds {len} items; an entity holds at most {MAX_ENTITY_LIST_ITEMS}"
                );
                FieldError::new(field, "too_many", message)
            })
            .collect();
        if let EntityDocument::Customer(customer) = self {
            problems.extend(
                customer
                    .groups_without_id()
                    .into_iter()
                    .map(|path| FieldError::required(format!("{prefix}.{path}"))),
            );
        }
        if let EntityDocument::Product(product) = self {
            problems.extend(product.negative_prices().into_iter().map(|path| {
                let field = format!("{prefix}.{path}");
                let message = format!("{field} must not be below zero");
                FieldError::new(field, "negative", message)
            }));
        }
        problems
    }

    /// Whether applying `incoming` would change nothing.
    fn covers(&self, incoming: &EntityDocument) -> bool {
        match (self, incoming) {
            (EntityDocument::Customer(base), EntityDocument::Customer(new)) => base.covers(new),
            (EntityDocument::Order(base), EntityDocument::Order(new)) => base.covers(new),
            (EntityDocument::Product(base), EntityDocument::Product(new)) => base.covers(new),
            (EntityDocument::Category(base), EntityDocument::Category(new)) => base.covers(new),
            _ => false,
        }
    }
}

/// An event's entity as checked on the way in, with the JSON stored for it: made once, where
/// the event arrives (an HTTP worker), not again by the single writer that applies it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventDocument {
    entity: EntityDocument,
    json: String,
}

impl EventDocument {
    /// The document of `entity`, with its JSON made once here.
    pub fn new(entity: EntityDocument) -> Result<Self, serde_json::Error> {
        let json = entity.to_json()?;
        Ok(EventDocument { entity, json })
    }

    /// An event's document from the JSON stored for it.
    pub fn from_json(kind: EntityKind, json: String) -> Result<Self, serde_json::Error> {
        let entity = EntityDocument::parse(kind, &json)?;
        Ok(EventDocument { entity, json })
    }

    /// The entity as checked.
    pub fn entity(&self) -> &EntityDocument {
        &self.entity
    }

    /// The JSON stored for the entity: [`EntityDocument::to_json`] of it.
    pub fn json(&self) -> &str {
        &self.json
    }
}

/// The whole state of an entity to store after a batch of events was applied to it.
#[derive(Debug, Clone)]
pub struct EntityWrite {
    /// The stored row's id; None for an entity not stored yet.
    pub stored_id: Option<i64>,
    /// The entity's platform id.
    pub platform_id: String,
    /// The `platform_updated_at` of the last save applied, if any.
    pub platform_updated_at: Option<Timestamp>,
    /// The `platform_deleted_at` of its deletion; `None` while it is live.
    pub platform_deleted_at: Option<Timestamp>,
    /// The entity as JSON text; absent for one known only from its deletion.
    pub json: Option<String>,
    /// The same, typed, for the store to pull out the columns it indexes (live entities only).
    pub document: Option<EntityDocument>,
    /// The live document stored before this write, if there was one: what the store already
    /// holds, so it can leave alone what did not change.
    pub previous: Option<EntityDocument>,
}

/// What applying one event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    /// It changed the entity.
    Applied,
    /// It would change nothing (same save again, or a deletion already known).
    Unchanged,
    /// Older than what was already applied (the out-of-sequence rule).
    Stale,
}

impl Outcome {
    /// The outcome's name (`applied`, `unchanged`, `stale`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The platform id and time every event names.
pub(crate) trait Stamped {
    fn platform_id(&self) -> Option<&PlatformId>;
    fn platform_updated_at(&self) -> Option<Timestamp>;
    fn into_document(self) -> EntityDocument;
}

macro_rules! stamped {
    ($($ty:ident),+) => {
        $(impl Stamped for $ty {
            fn platform_id(&self) -> Option<&PlatformId> {
                self.platform_id.as_ref()
            }
            fn platform_updated_at(&self) -> Option<Timestamp> {
                self.platform_updated_at
            }
            fn into_document(self) -> EntityDocument {
                EntityDocument::$ty(Box::new(self))
            }
        })+
    };
}
stamped!(Customer, Order, Product, Category);

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DeletedRef {
    platform_id: Option<PlatformId>,
    platform_deleted_at: Option<Timestamp>,
}

/// A deleted entity as a Deleted event names it (`data.<kind>`): both fields required.
#[derive(utoipa::ToSchema)]
#[schema(as = PlatformDeletedEntity)]
pub struct DeletedEntity {
    /// The entity's platform id (a string; an integer is read as its text).
    #[schema(min_length = 1)]
    pub platform_id: String,
    /// When the platform deleted it; a save the platform made later brings it back.
    pub platform_deleted_at: Timestamp,
}

/// The bodies of the connector's event routes, as the OpenAPI document describes them:
/// `{"data": {"<kind>": …}}`. A saved entity needs its `platform_id` and `platform_updated_at`;
/// the fields Mercer does not know are left out.
macro_rules! event_bodies {
    ($($(#[$doc:meta])* $body:ident, $data:ident { $key:ident: $entity:ty };)+) => {
        $(
            $(#[$doc])*
            #[derive(utoipa::ToSchema)]
            pub struct $body {
                /// The event's entity, under its kind.
                pub data: $data,
            }

            #[doc = concat!("`data` of [`", stringify!($body), "`].")]
            #[derive(utoipa::ToSchema)]
            pub struct $data {
                /// The entity.
                pub $key: $entity,
            }
        )+
    };
}

event_bodies! {
    /// A customer was created or changed: `{"data": {"customer": …}}`.
    CustomerSavedEvent, CustomerSavedData { customer: Customer };
    /// A customer was deleted: `{"data": {"customer": {platform_id, platform_deleted_at}}}`.
    CustomerDeletedEvent, CustomerDeletedData { customer: DeletedEntity };
    /// An order was created or changed: `{"data": {"order": …}}`.
    OrderSavedEvent, OrderSavedData { order: Order };
    /// An order was deleted: `{"data": {"order": {platform_id, platform_deleted_at}}}`.
    OrderDeletedEvent, OrderDeletedData { order: DeletedEntity };
    /// A product was created or changed: `{"data": {"product": …}}`.
    ProductSavedEvent, ProductSavedData { product: Product };
    /// A product was deleted: `{"data": {"product": {platform_id, platform_deleted_at}}}`.
    ProductDeletedEvent, ProductDeletedData { product: DeletedEntity };
    /// A category was created or changed: `{"data": {"category": …}}`.
    CategorySavedEvent, CategorySavedData { category: Category };
    /// A category was deleted: `{"data": {"category": {platform_id, platform_deleted_at}}}`.
    CategoryDeletedEvent, CategoryDeletedData { category: DeletedEntity };
}

/// Why an event body was refused: not JSON at all (400), or JSON that breaks the rules (422).
#[derive(Debug)]
pub enum EventBodyError {
    /// The body is not JSON (400).
    Malformed(serde_json::Error),
    /// The body is JSON but breaks the rules (422); the error names the fields.
    Invalid(DomainError),
}

impl From<DomainError> for EventBodyError {
    fn from(error: DomainError) -> Self {
        EventBodyError::Invalid(error)
    }
}

type RawObject<'a> = std::collections::BTreeMap<String, &'a RawValue>;

/// The object `raw` holds, or None when it holds another kind of value.
fn raw_object(raw: &RawValue) -> Option<RawObject<'_>> {
    serde_json::from_str(raw.get()).ok()
}

fn is_object(raw: &RawValue) -> bool {
    raw.get().trim_start().starts_with('{')
}

/// `data.{kind}` of an event body, as raw JSON, or the 422 that names what is missing. The body
/// is checked for JSON syntax as a whole on the way (400 when it fails).
fn entity_text<'a>(body: &'a [u8], kind: EntityKind) -> Result<&'a RawValue, EventBodyError> {
    let outer: Option<RawObject<'a>> = match serde_json::from_slice::<&RawValue>(body) {
        Ok(raw) => raw_object(raw),
        Err(error) => return Err(EventBodyError::Malformed(error)),
    };
    let data = match outer.as_ref().and_then(|outer| outer.get("data")) {
        Some(data) if is_object(data) => raw_object(data).unwrap_or_default(),
        Some(_) => {
            return Err(
                DomainError::invalid("data", "invalid_type", "data must be an object").into(),
            );
        }
        None => return Err(DomainError::Invalid(vec![FieldError::required("data")]).into()),
    };
    let path = format!("data.{}", kind.as_str());
    match data.get(kind.as_str()) {
        Some(entity) if is_object(entity) => Ok(*entity),
        Some(_) => Err(DomainError::invalid(
            path.clone(),
            "invalid_type",
            format!("{path} must be an object"),
        )
        .into()),
        None => Err(DomainError::Invalid(vec![FieldError::required(path)]).into()),
    }
}

/// `{"data": {"<kind>": …}}` read in one pass, yielding the entity as raw JSON. Any other
/// shape, or anything unusual (a key written with escapes, `data` twice), reads as an error,
/// and the precise path ([`entity_text`], [`typed`]) then says what is wrong.
struct FastEnvelope {
    /// The key under `data`: the entity kind's name.
    field: &'static str,
    /// Reading `data` itself rather than the whole body.
    inner: bool,
}

impl<'de> DeserializeSeed<'de> for FastEnvelope {
    type Value = &'de RawValue;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FastEnvelope {
    type Value = &'de RawValue;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let wanted = if self.inner { self.field } else { "data" };
        let mut found = None;
        while let Some(key) = map.next_key::<&'de str>()? {
            if key != wanted {
                map.next_value::<IgnoredAny>()?;
            } else if found.is_some() {
                return Err(A::Error::custom("repeated key"));
            } else if self.inner {
                found = Some(map.next_value::<&'de RawValue>()?);
            } else {
                found = Some(map.next_value_seed(FastEnvelope {
                    field: self.field,
                    inner: true,
                })?);
            }
        }
        found.ok_or_else(|| A::Error::custom("missing key"))
    }
}

/// The entity of a well-formed event body, without tracking paths; None when anything is off.
fn fast_entity<T: DeserializeOwned>(body: &[u8], kind: EntityKind) -> Option<T> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let raw = FastEnvelope {
        field: kind.as_str(),
        inner: false,
    }
    .deserialize(&mut deserializer)
    .ok()?;
    deserializer.end().ok()?;
    if !is_object(raw) {
        return None;
    }
    serde_json::from_str(raw.get()).ok()
}

/// `data.{kind}` of an event body as `T`: quickly when the body is right, otherwise through
/// the path that names what is wrong (400 for bad JSON, 422 with the field's path).
fn entity_of<T: DeserializeOwned>(body: &[u8], kind: EntityKind) -> Result<T, EventBodyError> {
    if let Some(entity) = fast_entity(body, kind) {
        return Ok(entity);
    }
    let raw = entity_text(body, kind)?;
    Ok(typed(raw, &format!("data.{}", kind.as_str()))?)
}

/// Deserializes `raw` as `T`, naming the offending field by its full path on failure.
fn typed<T: DeserializeOwned>(raw: &RawValue, prefix: &str) -> Result<T, DomainError> {
    let mut deserializer = serde_json::Deserializer::from_str(raw.get());
    serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let field = if path == "." {
            prefix.to_string()
        } else {
            format!("{prefix}.{path}")
        };
        DomainError::invalid(field, "invalid_type", error.into_inner().to_string())
    })
}

fn required_id(id: Option<&PlatformId>, prefix: &str) -> Result<String, FieldError> {
    match id {
        Some(id) if !id.is_blank() => Ok(id.as_str().to_string()),
        _ => Err(FieldError::required(format!("{prefix}.platform_id"))),
    }
}

/// How far past Mercer's clock an event's `platform_updated_at` or `platform_deleted_at` may be,
/// in seconds (10 minutes, room for clocks that disagree). A later time would win over every
/// true event of the entity until then: the out-of-sequence rule drops older ones.
pub const MAX_FUTURE_SECONDS: i64 = 600;

/// The problem with `field`'s time `at` when it is more than [`MAX_FUTURE_SECONDS`] after `now`.
fn future_problem(field: &str, at: Timestamp, now: Timestamp) -> Option<FieldError> {
    (at > now.plus_seconds(MAX_FUTURE_SECONDS)).then(|| {
        FieldError::new(
            field,
            "in_future",
            format!(
                "{field} is more than {} minutes after Mercer's clock ({})",
                MAX_FUTURE_SECONDS / 60,
                now.to_rfc3339()
            ),
        )
    })
}

fn parse_saved<T: DeserializeOwned + Stamped>(
    body: &[u8],
    kind: EntityKind,
    prefix: &str,
    now: Timestamp,
) -> Result<(String, Timestamp, EntityDocument), EventBodyError> {
    let entity: T = entity_of(body, kind)?;
    let mut problems = Vec::new();
    let id = required_id(entity.platform_id(), prefix)
        .map_err(|e| problems.push(e))
        .ok();
    let at = entity.platform_updated_at();
    let at_field = format!("{prefix}.platform_updated_at");
    match at {
        None => problems.push(FieldError::required(at_field)),
        Some(at) => problems.extend(future_problem(&at_field, at, now)),
    }
    let document = entity.into_document();
    problems.extend(document.problems(prefix));
    match (id, at) {
        // Kept as checked: fields Mercer does not know are left out.
        (Some(id), Some(at)) if problems.is_empty() => Ok((id, at, document)),
        _ => Err(DomainError::Invalid(problems).into()),
    }
}

/// Checks an event body (the request's bytes) and turns it into an event to store. Every 422
/// names its field.
pub fn parse_event_body(
    shop_id: ShopId,
    kind: EntityKind,
    action: EventAction,
    body: &[u8],
    source: EventSource,
    now: Timestamp,
) -> Result<NewInboundEvent, EventBodyError> {
    let prefix = format!("data.{}", kind.as_str());
    let (platform_id, occurred_at, document) = match action {
        EventAction::Saved => {
            let (id, at, document) = match kind {
                EntityKind::Customer => parse_saved::<Customer>(body, kind, &prefix, now)?,
                EntityKind::Order => parse_saved::<Order>(body, kind, &prefix, now)?,
                EntityKind::Product => parse_saved::<Product>(body, kind, &prefix, now)?,
                EntityKind::Category => parse_saved::<Category>(body, kind, &prefix, now)?,
            };
            let document = EventDocument::new(document).map_err(|error| {
                EventBodyError::Invalid(DomainError::invalid(
                    prefix.as_str(),
                    "invalid",
                    error.to_string(),
                ))
            })?;
            (id, at, Some(document))
        }
        EventAction::Deleted => {
            let deleted: DeletedRef = entity_of(body, kind)?;
            let mut problems = Vec::new();
            let id = required_id(deleted.platform_id.as_ref(), &prefix)
                .map_err(|e| problems.push(e))
                .ok();
            let at_field = format!("{prefix}.platform_deleted_at");
            match deleted.platform_deleted_at {
                None => problems.push(FieldError::required(at_field)),
                Some(at) => problems.extend(future_problem(&at_field, at, now)),
            }
            match (id, deleted.platform_deleted_at) {
                (Some(id), Some(at)) if problems.is_empty() => (id, at, None),
                _ => return Err(DomainError::Invalid(problems).into()),
            }
        }
    };
    Ok(NewInboundEvent {
        shop_id,
        kind,
        action,
        platform_id,
        occurred_at,
        document,
        source,
        received_at: now,
    })
}

/// [`parse_event_body`] for a body already parsed, as tests and tools have it.
pub fn parse_event(
    shop_id: ShopId,
    kind: EntityKind,
    action: EventAction,
    body: &Value,
    source: EventSource,
    now: Timestamp,
) -> Result<NewInboundEvent, DomainError> {
    match parse_event_body(
        shop_id,
        kind,
        action,
        body.to_string().as_bytes(),
        source,
        now,
    ) {
        Ok(event) => Ok(event),
        Err(EventBodyError::Invalid(error)) => Err(error),
        Err(EventBodyError::Malformed(error)) => {
            Err(DomainError::invalid("data", "invalid", error.to_string()))
        }
    }
}

/// A save event for an entity a sync pulled from the connector.
pub(crate) fn synced_event<T: Clone + Stamped>(
    shop_id: ShopId,
    kind: EntityKind,
    entity: &T,
    now: Timestamp,
) -> Option<NewInboundEvent> {
    let platform_id = entity.platform_id().filter(|id| !id.is_blank())?;
    let occurred_at = entity.platform_updated_at()?;
    // An entity that cannot be written out as JSON (never seen) is skipped like one without an
    // id; so is one dated more than 10 minutes after Mercer's clock, or holding text no database
    // stores, a list over the limit or a negative price, by the rules events are held to. The
    // size of its lists is checked before anything is made of them.
    let prefix = kind.as_str();
    let at_field = format!("{prefix}.platform_updated_at");
    let document = entity.clone().into_document();
    let problem = future_problem(&at_field, occurred_at, now)
        .or_else(|| document.problems(prefix).into_iter().next());
    let (document, problem) = match problem {
        Some(problem) => (None, Some(problem)),
        None => {
            let document = EventDocument::new(document).ok()?;
            let problem = crate::kernel::limits::check_json_body(document.json().as_bytes()).err();
            (Some(document), problem)
        }
    };
    if let Some(problem) = problem {
        log::warn!(
            target: "mercer::sync",
            "skipped synced {} {platform_id} of shop {shop_id}: {}",
            kind.as_str(),
            problem.message
        );
        return None;
    }
    Some(NewInboundEvent {
        shop_id,
        kind,
        action: EventAction::Saved,
        platform_id: platform_id.as_str().to_string(),
        occurred_at,
        document,
        source: EventSource::Sync,
        received_at: now,
    })
}

/// Pulls the synced customers out as events; those without id or time are counted, not kept.
pub(crate) fn synced_customer_events(
    shop_id: ShopId,
    customers: &[Customer],
    now: Timestamp,
) -> (Vec<NewInboundEvent>, usize) {
    synced_events(shop_id, EntityKind::Customer, customers, now)
}

pub(crate) fn synced_order_events(
    shop_id: ShopId,
    orders: &[Order],
    now: Timestamp,
) -> (Vec<NewInboundEvent>, usize) {
    synced_events(shop_id, EntityKind::Order, orders, now)
}

pub(crate) fn synced_product_events(
    shop_id: ShopId,
    products: &[Product],
    now: Timestamp,
) -> (Vec<NewInboundEvent>, usize) {
    synced_events(shop_id, EntityKind::Product, products, now)
}

pub(crate) fn synced_category_events(
    shop_id: ShopId,
    categories: &[Category],
    now: Timestamp,
) -> (Vec<NewInboundEvent>, usize) {
    synced_events(shop_id, EntityKind::Category, categories, now)
}

fn synced_events<T: Clone + Stamped>(
    shop_id: ShopId,
    kind: EntityKind,
    entities: &[T],
    now: Timestamp,
) -> (Vec<NewInboundEvent>, usize) {
    let events: Vec<_> = entities
        .iter()
        .filter_map(|e| synced_event(shop_id, kind, e, now))
        .collect();
    let skipped = entities.len() - events.len();
    (events, skipped)
}

/// An entity as the rules see it while a batch is applied: its document parsed once.
#[derive(Debug, Clone)]
struct Working {
    /// The stored row's id; None for an entity not stored yet.
    stored_id: Option<i64>,
    platform_updated_at: Option<Timestamp>,
    platform_deleted_at: Option<Timestamp>,
    document: Option<EntityDocument>,
    /// The document's JSON when it is an incoming event's document as it came (made then).
    json: Option<String>,
}

impl Working {
    fn from_record(kind: EntityKind, record: EntityRecord) -> Result<Working, DomainError> {
        let document = record
            .document
            .as_deref()
            .map(|json| EntityDocument::parse(kind, json))
            .transpose()
            .map_err(corrupt)?;
        Ok(Working {
            stored_id: Some(record.id),
            platform_updated_at: record.platform_updated_at,
            platform_deleted_at: record.platform_deleted_at,
            document,
            json: None,
        })
    }

    fn is_live(&self) -> bool {
        self.platform_deleted_at.is_none()
    }
}

/// The out-of-sequence rule for a Saved event at `at` on an entity last saved at `applied` and
/// deleted at `deleted`; `same_content` tells whether the event would change nothing.
fn decide_save(
    applied: Option<Timestamp>,
    deleted: Option<Timestamp>,
    at: Timestamp,
    same_content: impl FnOnce() -> bool,
) -> Outcome {
    if deleted.is_some_and(|deleted| at <= deleted) {
        return Outcome::Stale;
    }
    match applied {
        Some(applied) if at < applied => Outcome::Stale,
        Some(applied) if at == applied && deleted.is_none() && same_content() => Outcome::Unchanged,
        _ => Outcome::Applied,
    }
}

/// The out-of-sequence rule for a Deleted event at `at`.
fn decide_delete(applied: Option<Timestamp>, deleted: Option<Timestamp>, at: Timestamp) -> Outcome {
    if applied.is_some_and(|applied| at < applied) {
        return Outcome::Stale;
    }
    match deleted {
        Some(deleted) if deleted >= at => Outcome::Unchanged,
        _ => Outcome::Applied,
    }
}

/// What one event does to an entity.
struct Step {
    outcome: Outcome,
    /// The entity afterwards (None for one still unknown).
    next: Option<Working>,
    /// The live document an applied save replaced, handed back rather than copied: the store
    /// compares it with the new one to write only what changed.
    replaced: Option<EntityDocument>,
}

/// The entity after one event, by the out-of-sequence rule. The entity is handed over and
/// handed back, changed or not, so a batch copies only the incoming documents it applies.
fn next_state(current: Option<Working>, event: &NewInboundEvent) -> Result<Step, DomainError> {
    let unchanged = |outcome, current| {
        Ok(Step {
            outcome,
            next: current,
            replaced: None,
        })
    };
    let (applied, deleted) = current.as_ref().map_or((None, None), |w| {
        (w.platform_updated_at, w.platform_deleted_at)
    });
    match event.action {
        EventAction::Saved => {
            let Some(incoming) = &event.document else {
                return unchanged(Outcome::Unchanged, current);
            };
            let (incoming_json, incoming) = (incoming.json(), incoming.entity());
            let same_content = || {
                current
                    .as_ref()
                    .and_then(|w| w.document.as_ref())
                    .is_some_and(|stored| stored.covers(incoming))
            };
            let outcome = decide_save(applied, deleted, event.occurred_at, same_content);
            if outcome != Outcome::Applied {
                return unchanged(outcome, current);
            }
            let stored_id = current.as_ref().and_then(|w| w.stored_id);
            // A deleted entity comes back whole: the stored fields are not merged into it.
            let replaced = current.filter(Working::is_live).and_then(|w| w.document);
            let (document, filled) = match &replaced {
                Some(base) => EntityDocument::merged(base, incoming),
                None => (incoming.clone(), false),
            };
            let json = (!filled).then(|| incoming_json.to_string());
            Ok(Step {
                outcome: Outcome::Applied,
                next: Some(Working {
                    stored_id,
                    platform_updated_at: Some(event.occurred_at),
                    platform_deleted_at: None,
                    document: Some(document),
                    json,
                }),
                replaced,
            })
        }
        EventAction::Deleted => {
            let outcome = decide_delete(applied, deleted, event.occurred_at);
            if outcome != Outcome::Applied {
                return unchanged(outcome, current);
            }
            let mut gone = current.unwrap_or(Working {
                stored_id: None,
                platform_updated_at: None,
                platform_deleted_at: None,
                document: None,
                json: None,
            });
            gone.platform_deleted_at = Some(event.occurred_at);
            unchanged(Outcome::Applied, Some(gone))
        }
    }
}

fn corrupt(error: serde_json::Error) -> DomainError {
    crate::StorageError::other(format!("a stored entity or event does not parse: {error}")).into()
}

type EntityKey = (ShopId, EntityKind, String);

/// Applies stored events in their order, by the out-of-sequence rule, and stores the final
/// state of every entity they changed: one read and one write per kind of entity, however
/// many events the batch holds (and, when applied customer saves gave `groups`, the groups'
/// few statements a shop: [`GroupsSeen::store`]).
pub fn apply_events(
    tx: &mut dyn PlatformRepositories,
    events: &[&NewInboundEvent],
    now: Timestamp,
) -> Result<Vec<Outcome>, DomainError> {
    // The entities named, grouped by shop and kind, in order of first appearance.
    let mut wanted: Vec<((ShopId, EntityKind), Vec<&str>)> = Vec::new();
    for event in events {
        let group_key = (event.shop_id, event.kind);
        let index = match wanted.iter().position(|(key, _)| *key == group_key) {
            Some(index) => index,
            None => {
                wanted.push((group_key, Vec::new()));
                wanted.len() - 1
            }
        };
        let ids = &mut wanted[index].1;
        if !ids.contains(&event.platform_id.as_str()) {
            ids.push(&event.platform_id);
        }
    }
    let mut states: HashMap<EntityKey, Working> = HashMap::new();
    // Orders fulfilled before the batch: their fulfilment is not news.
    let mut fulfilled_before: HashSet<EntityKey> = HashSet::new();
    for ((shop_id, kind), ids) in &wanted {
        for (platform_id, record) in tx.platform_entities(*shop_id, *kind, ids)? {
            let working = Working::from_record(*kind, record)?;
            let key = (*shop_id, *kind, platform_id);
            if working.is_live() && is_fulfilled(working.document.as_ref()) {
                fulfilled_before.insert(key.clone());
            }
            states.insert(key, working);
        }
    }
    let mut outcomes = Vec::with_capacity(events.len());
    let mut changed: Vec<EntityKey> = Vec::new();
    let mut seen: HashSet<EntityKey> = HashSet::new();
    // The live document a save replaced, when the entity's first applied event in the batch
    // is that save: the store compares with it to write only what changed (a customer's
    // addresses). Otherwise (new, deleted first, or coming back) it compares with its rows.
    let mut before: HashMap<EntityKey, EntityDocument> = HashMap::new();
    // Whether each shop hears of customer changes, asked once a batch at most.
    let mut heard: HashMap<ShopId, bool> = HashMap::new();
    // Live customers held without the platform's document, saved first in the batch: made
    // through the subscription API, and the platform's echo of that not applied yet. Their
    // change is told against what Mercer shows of them (the row's name, email and phone).
    let mut without_document: HashSet<EntityKey> = HashSet::new();
    // The customer groups that applied saves gave, stored after the customers.
    let mut groups_seen = GroupsSeen::default();
    for event in events {
        let key = (event.shop_id, event.kind, event.platform_id.clone());
        let current = states.remove(&key);
        let made_by_mercer = event.kind == EntityKind::Customer
            && event.action == EventAction::Saved
            && current
                .as_ref()
                .is_some_and(|w| w.is_live() && w.document.is_none() && w.stored_id.is_some());
        let step = next_state(current, event)?;
        if step.outcome == Outcome::Applied
            && let Some(EntityDocument::Customer(customer)) =
                event.document.as_ref().map(EventDocument::entity)
            && let Some(groups) = &customer.groups
        {
            groups_seen.record(event.shop_id, &event.platform_id, groups);
        }
        if step.outcome == Outcome::Applied && seen.insert(key.clone()) {
            changed.push(key.clone());
            if let Some(previous) = step.replaced {
                before.insert(key.clone(), previous);
            } else if made_by_mercer {
                without_document.insert(key.clone());
            }
        }
        if let Some(next) = step.next {
            states.insert(key, next);
        }
        outcomes.push(step.outcome);
    }
    for ((shop_id, kind), _) in &wanted {
        let mut writes = Vec::new();
        let shown = match kind {
            EntityKind::Customer => {
                shown_contacts(tx, &mut heard, &without_document, &changed, *shop_id)?
            }
            _ => HashMap::new(),
        };
        for key in changed
            .iter()
            .filter(|(shop, k, _)| shop == shop_id && k == kind)
        {
            let Some(working) = states.remove(key) else {
                continue;
            };
            let live = working.is_live();
            let json = match working.json {
                Some(json) => Some(json),
                None => working
                    .document
                    .as_ref()
                    .map(EntityDocument::to_json)
                    .transpose()
                    .map_err(corrupt)?,
            };
            let document = working.document.filter(|_| live);
            if *kind == EntityKind::Order
                && is_fulfilled(document.as_ref())
                && !fulfilled_before.contains(key)
            {
                let job = OrderFulfilledJob {
                    shop_id: *shop_id,
                    platform_order_id: key.2.clone(),
                };
                crate::kernel::jobs::enqueue(tx, Some(*shop_id), &job, now, now)?;
            }
            let previous = before.remove(key);
            let contact_changed = match shown.get(&key.2) {
                Some(shown) => shown_contact_changed(shown, document.as_ref()),
                None => contact_changed(previous.as_ref(), document.as_ref()),
            };
            if contact_changed && hears_customer_changes(tx, &mut heard, *shop_id)? {
                let job = CustomerChangedJob {
                    shop_id: *shop_id,
                    platform_customer_id: key.2.clone(),
                };
                crate::kernel::jobs::enqueue(tx, Some(*shop_id), &job, now, now)?;
            }
            writes.push(EntityWrite {
                stored_id: working.stored_id,
                previous,
                platform_id: key.2.clone(),
                platform_updated_at: working.platform_updated_at,
                platform_deleted_at: working.platform_deleted_at,
                json,
                document,
            });
        }
        if !writes.is_empty() {
            tx.put_platform_entities(*shop_id, *kind, &writes, now)?;
        }
    }
    groups_seen.store(tx, now)?;
    Ok(outcomes)
}

/// An order of the platform became fulfilled (an Order Saved event with `fulfillment_status`
/// `fulfilled`, when the order was not): whoever cares (the headless checkout's
/// `order/fulfilled`) handles it. Enqueued in the transaction that applies the event.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct OrderFulfilledJob {
    /// The id of the order's shop.
    pub shop_id: ShopId,
    /// The order's platform id.
    pub platform_order_id: String,
}

impl crate::kernel::jobs::JobPayload for OrderFulfilledJob {
    const KIND: &'static str = "platform.order_fulfilled";

    fn unique_key(&self) -> Option<String> {
        Some(format!(
            "{}:{}:{}",
            Self::KIND,
            self.shop_id,
            self.platform_order_id
        ))
    }
}

/// The platform changed a known customer's name, email or phone (a Customer Saved event over
/// a live customer): whoever cares (subscriptions' `customer_updated`) handles it. Enqueued in
/// the transaction that applies the event; changes close together make one job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct CustomerChangedJob {
    /// The id of the customer's shop.
    pub shop_id: ShopId,
    /// The customer's platform id.
    pub platform_customer_id: String,
}

impl crate::kernel::jobs::JobPayload for CustomerChangedJob {
    const KIND: &'static str = "platform.customer_changed";

    fn unique_key(&self) -> Option<String> {
        Some(format!(
            "{}:{}:{}",
            Self::KIND,
            self.shop_id,
            self.platform_customer_id
        ))
    }
}

/// Whether the shop hears of customer changes, from `heard` when asked before in the batch.
fn hears_customer_changes(
    tx: &mut dyn PlatformRepositories,
    heard: &mut HashMap<ShopId, bool>,
    shop_id: ShopId,
) -> Result<bool, DomainError> {
    if let Some(known) = heard.get(&shop_id) {
        return Ok(*known);
    }
    let hears = tx.hears_customer_changes(shop_id)?;
    heard.insert(shop_id, hears);
    Ok(hears)
}

/// What Mercer shows of the shop's customers in `without_document` among `changed` (the name,
/// email and phone of their rows, by platform id), read before the batch writes over them; only
/// when the shop hears of customer changes, as nothing else asks.
fn shown_contacts(
    tx: &mut dyn PlatformRepositories,
    heard: &mut HashMap<ShopId, bool>,
    without_document: &HashSet<EntityKey>,
    changed: &[EntityKey],
    shop_id: ShopId,
) -> Result<HashMap<String, CustomerContact>, DomainError> {
    let ids: Vec<&str> = changed
        .iter()
        .filter(|key| {
            key.0 == shop_id && key.1 == EntityKind::Customer && without_document.contains(*key)
        })
        .map(|key| key.2.as_str())
        .collect();
    if ids.is_empty() || !hears_customer_changes(tx, heard, shop_id)? {
        return Ok(HashMap::new());
    }
    Ok(tx.customer_contacts(shop_id, &ids)?.into_iter().collect())
}

/// A customer's name, email and phone as Mercer shows them: the columns of its row, which the
/// subscription API and the directory read (an empty text is none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomerContact {
    /// The first name.
    pub first_name: Option<String>,
    /// The last name.
    pub last_name: Option<String>,
    /// The email address.
    pub email: Option<String>,
    /// The phone number.
    pub phone: Option<String>,
}

impl CustomerContact {
    /// The contact a customer's document gives its row.
    pub fn of(customer: &Customer) -> CustomerContact {
        let shown = |text: &Option<String>| text.clone().filter(|text| !text.is_empty());
        CustomerContact {
            first_name: shown(&customer.first_name),
            last_name: shown(&customer.last_name),
            email: shown(&customer.email),
            phone: shown(&customer.phone),
        }
    }

    /// The contact of a row's columns (first name, last name, email, phone; empty is none).
    pub fn from_columns(first_name: &str, last_name: &str, email: &str, phone: &str) -> Self {
        let shown = |text: &str| Some(text.to_string()).filter(|text| !text.is_empty());
        CustomerContact {
            first_name: shown(first_name),
            last_name: shown(last_name),
            email: shown(email),
            phone: shown(phone),
        }
    }
}

/// Whether a live customer's new document shows another name, email or phone than `shown`.
fn shown_contact_changed(shown: &CustomerContact, after: Option<&EntityDocument>) -> bool {
    match after {
        Some(EntityDocument::Customer(new)) => CustomerContact::of(new) != *shown,
        _ => false,
    }
}

/// Whether a live customer's name, email or phone differ between two documents.
fn contact_changed(before: Option<&EntityDocument>, after: Option<&EntityDocument>) -> bool {
    match (before, after) {
        (Some(EntityDocument::Customer(old)), Some(EntityDocument::Customer(new))) => {
            (&old.first_name, &old.last_name, &old.email, &old.phone)
                != (&new.first_name, &new.last_name, &new.email, &new.phone)
        }
        _ => false,
    }
}

/// Whether a document is an order the platform says is fulfilled.
fn is_fulfilled(document: Option<&EntityDocument>) -> bool {
    matches!(document, Some(EntityDocument::Order(order))
        if order.fulfillment_status.as_deref().is_some_and(|status| status.eq_ignore_ascii_case("fulfilled")))
}

/// Applies one event: a batch of one.
pub fn apply_event(
    tx: &mut dyn PlatformRepositories,
    event: &NewInboundEvent,
    now: Timestamp,
) -> Result<Outcome, DomainError> {
    let outcomes = apply_events(tx, &[event], now)?;
    Ok(outcomes.first().copied().unwrap_or(Outcome::Unchanged))
}

/// Times an event is tried before it is set aside as failed.
pub(crate) const APPLY_ATTEMPTS: i64 = 3;

/// Seconds before trying a failed event again, after `attempts` failures: 1, 4, 16…
fn retry_delay_seconds(attempts: i64) -> i64 {
    1 << (2 * (attempts - 1).clamp(0, 10))
}

/// The queue is cut into this many partitions by shop. One applier at a time holds a
/// partition, so each shop's events apply in arrival order while the appliers of several
/// processes on one database apply other shops' events beside it.
pub const EVENT_PARTITIONS: i64 = 64;

/// Most partitions one batch takes: a quarter, so that up to four processes find some free.
const PARTITIONS_PER_BATCH: usize = 16;

/// The partition of the queue a shop's events are in. Shop ids are handed out one after
/// another, so the remainder spreads shops evenly.
pub fn event_partition(shop_id: ShopId) -> i64 {
    shop_id.0.rem_euclid(EVENT_PARTITIONS)
}

/// What one call of [`apply_pending`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppliedBatch {
    /// Events dealt with: applied, out of sequence, or set aside as unreadable.
    pub events: usize,
    /// Whether due events were left because another process's applier held their partition:
    /// worth looking again soon, not after an idle pause.
    pub held_elsewhere: bool,
}

/// Locks the partitions of as many of `shops` as it can, in their order, at most
/// [`PARTITIONS_PER_BATCH`]; answers the shops whose partition this transaction now holds, and
/// whether a partition was held by another applier.
fn take_partitions(
    tx: &mut dyn PlatformRepositories,
    shops: &[ShopId],
) -> Result<(Vec<ShopId>, bool), DomainError> {
    let (mut held, mut refused, mut mine) = (Vec::new(), Vec::new(), Vec::new());
    for &shop in shops {
        let partition = event_partition(shop);
        if held.contains(&partition) {
            mine.push(shop);
        } else if refused.contains(&partition) || held.len() == PARTITIONS_PER_BATCH {
            continue;
        } else if tx.lock_event_partition(partition)? {
            held.push(partition);
            mine.push(shop);
        } else {
            refused.push(partition);
        }
    }
    Ok((mine, !refused.is_empty()))
}

/// Applies up to `limit` queued events in arrival order: those of the queue's oldest shops
/// whose partitions no other applier holds.
///
/// A batch is applied in one transaction. Should it fail, the events are taken one at a time,
/// each in its own transaction, up to the one that fails: that one is retried later
/// (`APPLY_ATTEMPTS` times in all, then set aside with its error for `mercer events failed`)
/// and the events behind it, of its shop and others, go on. An entity's later events apply
/// by the out-of-sequence rule as always, so one applied while an earlier one waits makes the
/// earlier one stale when it is tried again.
pub fn apply_pending(
    db: &impl PlatformDatabase,
    clock: &dyn Clock,
    limit: usize,
) -> Result<AppliedBatch, DomainError> {
    let result = db.write_tx(|tx| {
        let now = clock.now();
        let shops = tx.pending_event_shops(limit, now)?;
        let (mine, held_elsewhere) = take_partitions(tx, &shops)?;
        if mine.is_empty() {
            return Ok(AppliedBatch {
                events: 0,
                held_elsewhere,
            });
        }
        let mut events = Vec::new();
        let mut unreadable = 0;
        for pending in tx.pending_inbound_events(Some(&mine), limit, now)? {
            match pending {
                Ok(event) => events.push(event),
                Err(bad) => {
                    set_aside_unreadable(tx, &bad, now)?;
                    unreadable += 1;
                }
            }
        }
        let refs: Vec<&NewInboundEvent> = events.iter().map(|stored| &stored.event).collect();
        let outcomes = apply_events(tx, &refs, now)?;
        let marks: Vec<(EventId, Outcome)> = events
            .iter()
            .zip(outcomes)
            .map(|(stored, outcome)| (stored.id, outcome))
            .collect();
        tx.mark_inbound_events(&marks, now)?;
        count_applied(tx, &refs, now)?;
        Ok(AppliedBatch {
            events: events.len() + unreadable,
            held_elsewhere,
        })
    });
    match result {
        Ok(applied) => Ok(applied),
        Err(error) => {
            log::warn!(target: "mercer::events", "applying a batch of events failed ({error}); applying them one at a time");
            let events = apply_one_at_a_time(db, clock, limit)?;
            Ok(AppliedBatch {
                events,
                held_elsewhere: false,
            })
        }
    }
}

/// Applies the queue's first events one transaction each, up to the first that fails, whose
/// failure is recorded ([`record_apply_failure`]).
fn apply_one_at_a_time(
    db: &impl PlatformDatabase,
    clock: &dyn Clock,
    limit: usize,
) -> Result<usize, DomainError> {
    for done in 0..limit {
        let mut head: Option<InboundEvent> = None;
        let result = db.write_tx(|tx| {
            let now = clock.now();
            let Some(&shop) = tx.pending_event_shops(1, now)?.first() else {
                return Ok(false);
            };
            if !tx.lock_event_partition(event_partition(shop))? {
                return Ok(false);
            }
            let stored = match tx.pending_inbound_events(Some(&[shop]), 1, now)?.pop() {
                None => return Ok(false),
                Some(Err(bad)) => {
                    set_aside_unreadable(tx, &bad, now)?;
                    return Ok(true);
                }
                Some(Ok(stored)) => head.insert(stored),
            };
            let outcomes = apply_events(tx, &[&stored.event], now)?;
            let marks: Vec<(EventId, Outcome)> =
                outcomes.into_iter().map(|o| (stored.id, o)).collect();
            tx.mark_inbound_events(&marks, now)?;
            count_applied(tx, &[&stored.event], now)?;
            Ok(true)
        });
        match (result, head) {
            (Ok(true), _) => {}
            (Ok(false), _) => return Ok(done),
            (Err(error), Some(failed)) => {
                record_apply_failure(db, clock, &failed, &error)?;
                return Ok(done + 1);
            }
            // Failed before an event was read: nothing to blame it on.
            (Err(error), None) => return Err(error),
        }
    }
    Ok(limit)
}

fn set_aside_unreadable(
    tx: &mut dyn PlatformRepositories,
    bad: &UnreadableEvent,
    now: Timestamp,
) -> Result<(), DomainError> {
    log::error!(target: "mercer::events", "event {} is unreadable and set aside: {}", bad.id, bad.reason);
    tx.set_aside_inbound_event(bad.id, 1, &format!("unreadable: {}", bad.reason), now)?;
    Ok(())
}

/// Counts a failed attempt at applying `failed`: due again after a delay, or, after its last
/// attempt, set aside. A failure the database calls temporary (a lost connection, a deadlock,
/// no space left) is not the event's fault and is not counted: the error is handed back, and
/// the applier tries again after its pause.
fn record_apply_failure(
    db: &impl PlatformDatabase,
    clock: &dyn Clock,
    failed: &InboundEvent,
    error: &DomainError,
) -> Result<(), DomainError> {
    if matches!(error, DomainError::Storage(storage) if storage.is_temporary()) {
        return Err(error.clone());
    }
    let attempts = failed.attempts + 1;
    let message = error.to_string();
    let now = clock.now();
    let event = &failed.event;
    let set_aside = attempts >= APPLY_ATTEMPTS;
    let what = if set_aside {
        "failed its last attempt and is set aside".to_string()
    } else {
        format!("failed to apply (attempt {attempts} of {APPLY_ATTEMPTS})")
    };
    let level = if set_aside {
        log::Level::Error
    } else {
        log::Level::Warn
    };
    log::log!(
        target: "mercer::events",
        level,
        "event {} ({} {} {:?} of shop {}) {what}: {message}",
        failed.id, event.kind.as_str(), event.action.as_str(), event.platform_id, event.shop_id
    );
    db.write_tx(|tx| {
        // Under its partition's lock, like applying: another process's applier may be at the
        // same event.
        if !tx.lock_event_partition(event_partition(event.shop_id))? {
            return Ok(());
        }
        if set_aside {
            tx.set_aside_inbound_event(failed.id, attempts, &message, now)?;
            let mut tally = Tally::default();
            tally.add(
                event.shop_id,
                Activity::EventsReceived,
                event.received_at,
                1,
            );
            tally.add(event.shop_id, Activity::EventsSetAside, now, 1);
            tally.record(tx)?;
        } else {
            let retry_at = now.plus_seconds(retry_delay_seconds(attempts));
            tx.postpone_inbound_event(failed.id, attempts, &message, retry_at)?;
        }
        Ok(())
    })
}

/// `mercer events pending`: how many events wait to be applied.
pub fn pending_event_count(tx: &mut dyn PlatformRepositories) -> Result<i64, DomainError> {
    Ok(tx.count_pending_inbound_events()?)
}

/// An event set aside, with the identifier of its shop (none when the shop is gone).
#[derive(Debug, Clone, PartialEq)]
pub struct SetAsideEvent {
    /// The event as stored.
    pub event: FailedInboundEvent,
    /// The identifier of its shop; `None` when the shop is gone.
    pub shop_identifier: Option<String>,
}

/// `mercer events failed`: the events set aside, oldest first, each with its shop.
pub fn set_aside_events(
    tx: &mut dyn PlatformRepositories,
    limit: usize,
) -> Result<Vec<SetAsideEvent>, DomainError> {
    let failed = tx.failed_inbound_events(None, limit)?;
    let shops = tx.list_shops()?;
    Ok(failed
        .into_iter()
        .map(|event| SetAsideEvent {
            shop_identifier: shops
                .iter()
                .find(|shop| shop.id == event.shop_id)
                .map(|shop| shop.identifier.as_str().to_string()),
            event,
        })
        .collect())
}

/// Puts events set aside back into the queue (`mercer events retry`): every one when `ids` is
/// None. Returns the ids put back; an id that names no failed event is `not_found`.
pub fn retry_failed_events(
    db: &impl PlatformDatabase,
    ids: Option<&[EventId]>,
) -> Result<Vec<EventId>, DomainError> {
    db.write_tx(|tx| requeue_set_aside(tx, None, ids))
}

/// Puts events set aside back into the queue, in the caller's transaction: those of `ids` (every
/// one when None), of the shop `shop_id` names (every shop's when None). An id that names no
/// such event is `not_found`, and nothing is put back.
pub fn requeue_set_aside(
    tx: &mut dyn PlatformRepositories,
    shop_id: Option<ShopId>,
    ids: Option<&[EventId]>,
) -> Result<Vec<EventId>, DomainError> {
    let ids = ids.map(|ids| {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        ids
    });
    let ids = ids.as_deref();
    let requeued = tx.requeue_failed_inbound_events(shop_id, ids)?;
    if let Some(ids) = ids
        && requeued.len() < ids.len()
    {
        return Err(DomainError::not_found("failed event"));
    }
    Ok(requeued)
}

/// What [`accept_events`] did with the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Applied at once: nothing was waiting before them.
    Applied,
    /// Queued behind events still waiting to be applied.
    Queued,
}

/// Stores checked events before their 202, in one transaction. When no earlier event waits to
/// be applied (and this process holds their shops' partitions), they are applied at once
/// instead of queued: the
/// entities they change are written in this transaction, which makes them as durable as
/// storing them would, and saves storing, reading back and deleting them. Otherwise they join
/// the queue, so the applier keeps arrival order.
pub fn accept_events(
    tx: &mut dyn PlatformRepositories,
    events: &[NewInboundEvent],
    now: Timestamp,
) -> Result<Accepted, DomainError> {
    if !tx.has_pending_inbound_events()? && lock_partitions_of(tx, events)? {
        let refs: Vec<&NewInboundEvent> = events.iter().collect();
        apply_events(tx, &refs, now)?;
        count_applied(tx, &refs, now)?;
        return Ok(Accepted::Applied);
    }
    tx.insert_inbound_events(events)?;
    Ok(Accepted::Queued)
}

/// Locks the partitions of every shop of `events`; false when another applier holds one.
fn lock_partitions_of(
    tx: &mut dyn PlatformRepositories,
    events: &[NewInboundEvent],
) -> Result<bool, DomainError> {
    let mut partitions: Vec<i64> = events.iter().map(|e| event_partition(e.shop_id)).collect();
    partitions.sort_unstable();
    partitions.dedup();
    for partition in partitions {
        if !tx.lock_event_partition(partition)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Counts events leaving the queue applied in their shops' activity: received when they
/// arrived, applied now. Events are counted as they leave the queue, not as they enter it, so
/// the ingest path (on PostgreSQL a single INSERT) writes nothing more.
fn count_applied(
    tx: &mut dyn PlatformRepositories,
    events: &[&NewInboundEvent],
    now: Timestamp,
) -> Result<(), DomainError> {
    let mut tally = Tally::default();
    for event in events {
        tally.add(
            event.shop_id,
            Activity::EventsReceived,
            event.received_at,
            1,
        );
        tally.add(event.shop_id, Activity::EventsApplied, now, 1);
    }
    Ok(tally.record(tx)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::time::SystemClock;
    use crate::ports::Database;
    use crate::testing::MemoryDatabase;
    use serde_json::json;

    const SHOP: i64 = 1;

    #[test]
    fn synced_entities_holding_text_no_database_stores_are_skipped() {
        let customer = |id: &str, email: &str| -> Customer {
            serde_json::from_value(json!({
                "platform_id": id,
                "email": email,
                "platform_updated_at": at(1).to_rfc3339(),
            }))
            .unwrap()
        };
        let (events, skipped) = synced_customer_events(
            ShopId(SHOP),
            &[
                customer("c1", "a@x.test"),
                customer("c2", "a\u{0}b@x.test"),
                customer(&"9".repeat(256), "b@x.test"),
            ],
            at(2),
        );
        assert_eq!(skipped, 2);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].platform_id, "c1");
    }

    /// `count` copies of `item`.
    fn items(count: usize, item: Value) -> Value {
        Value::Array(vec![item; count])
    }

    /// The problems of a Saved event of `kind` whose entity is `entity`, received at `at(0)`;
    /// None when it is accepted.
    fn saved_problems(kind: EntityKind, mut entity: Value) -> Option<Vec<(String, &'static str)>> {
        entity["platform_id"] = json!("e1");
        entity["platform_updated_at"] = json!(at(0).to_rfc3339());
        let body = json!({"data": {kind.as_str(): entity}});
        let parsed = parse_event(
            ShopId(SHOP),
            kind,
            EventAction::Saved,
            &body,
            EventSource::Webhook,
            at(0),
        );
        parsed.is_err().then(|| problems(parsed))
    }

    #[test]
    fn an_entity_holds_at_most_250_of_each_list_and_the_refusal_names_it() {
        let limit = MAX_ENTITY_LIST_ITEMS;
        assert_eq!(limit, 250);
        let too_many = |field: &str| Some(vec![(field.to_string(), "too_many")]);
        let cases: Vec<(EntityKind, &str, Value, &str)> = vec![
            (
                EntityKind::Customer,
                "addresses",
                json!({}),
                "data.customer.addresses",
            ),
            (
                EntityKind::Product,
                "variants",
                json!({}),
                "data.product.variants",
            ),
            (
                EntityKind::Product,
                "images",
                json!({"src": "x"}),
                "data.product.images",
            ),
            (
                EntityKind::Product,
                "options",
                json!({}),
                "data.product.options",
            ),
            (
                EntityKind::Product,
                "categories",
                json!({}),
                "data.product.categories",
            ),
            (
                EntityKind::Order,
                "line_items",
                json!({}),
                "data.order.line_items",
            ),
            (
                EntityKind::Order,
                "shipping_addresses",
                json!({}),
                "data.order.shipping_addresses",
            ),
            (
                EntityKind::Order,
                "payments",
                json!({}),
                "data.order.payments",
            ),
            (
                EntityKind::Order,
                "shipping_taxes",
                json!({}),
                "data.order.shipping_taxes",
            ),
        ];
        for (kind, list, item, field) in cases {
            let at_limit = saved_problems(kind, json!({ list: items(limit, item.clone()) }));
            assert_eq!(at_limit, None, "{field}: {limit} are accepted");
            let over = saved_problems(kind, json!({ list: items(limit + 1, item) }));
            assert_eq!(over, too_many(field), "{field}: {} are refused", limit + 1);
        }
        // Lists inside the items, named by their paths; maps count their entries.
        let nested: Vec<(EntityKind, Value, &str)> = vec![
            (
                EntityKind::Product,
                json!({"variants": [{}, {"option_values": items(limit + 1, json!({}))}]}),
                "data.product.variants[1].option_values",
            ),
            (
                EntityKind::Product,
                json!({"options": [{"option_values": items(limit + 1, json!({}))}]}),
                "data.product.options[0].option_values",
            ),
            (
                EntityKind::Order,
                json!({"line_items": [{"taxes": items(limit + 1, json!({}))}]}),
                "data.order.line_items[0].taxes",
            ),
            (
                EntityKind::Order,
                json!({"payments": [{"transactions": items(limit + 1, json!({}))}]}),
                "data.order.payments[0].transactions",
            ),
            (
                EntityKind::Order,
                json!({"custom_attributes": (0..=limit)
                    .map(|n| (format!("k{n}"), json!({"value": "v"})))
                    .collect::<serde_json::Map<String, Value>>()}),
                "data.order.custom_attributes",
            ),
        ];
        for (kind, entity, field) in nested {
            assert_eq!(saved_problems(kind, entity), too_many(field), "{field}");
        }
        // The message gives the size and the limit.
        let body = json!({"data": {"customer": {"platform_id": "c1",
            "platform_updated_at": at(0).to_rfc3339(), "addresses": items(80_000, json!({}))}}});
        match parse_event(
            ShopId(SHOP),
            EntityKind::Customer,
            EventAction::Saved,
            &body,
            EventSource::Webhook,
            at(0),
        ) {
            Err(DomainError::Invalid(problems)) => assert_eq!(
                problems[0].message,
                "data.customer.addresses holds 80000 items; an entity holds at most 250"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_time_more_than_ten_minutes_after_mercers_clock_is_refused() {
        let event = |action: EventAction, seconds_ahead: i64| {
            let field = match action {
                EventAction::Saved => "platform_updated_at",
                EventAction::Deleted => "platform_deleted_at",
            };
            let body = json!({"data": {"customer": {"platform_id": "c1",
                field: at(seconds_ahead).to_rfc3339()}}});
            parse_event(
                ShopId(SHOP),
                EntityKind::Customer,
                action,
                &body,
                EventSource::Webhook,
                at(0),
            )
        };
        for (action, field) in [
            (EventAction::Saved, "data.customer.platform_updated_at"),
            (EventAction::Deleted, "data.customer.platform_deleted_at"),
        ] {
            assert_eq!(
                problems(event(action, 11 * 60)),
                [(field.to_string(), "in_future")]
            );
            assert!(event(action, 9 * 60).is_ok(), "{field}: 9 minutes ahead");
            assert!(
                event(action, MAX_FUTURE_SECONDS).is_ok(),
                "{field}: 10 minutes"
            );
            assert!(
                event(action, MAX_FUTURE_SECONDS + 1).is_err(),
                "{field}: past 10"
            );
            assert!(event(action, -86_400).is_ok(), "{field}: in the past");
        }
        let year_9999 = json!({"data": {"product": {"platform_id": "p1",
            "platform_updated_at": "9999-12-31T23:59:59Z"}}});
        let refused = parse_event(
            ShopId(SHOP),
            EntityKind::Product,
            EventAction::Saved,
            &year_9999,
            EventSource::Webhook,
            at(0),
        );
        assert_eq!(
            problems(refused),
            [("data.product.platform_updated_at".to_string(), "in_future")]
        );
    }

    #[test]
    fn synced_entities_dated_ahead_or_over_a_list_limit_are_skipped() {
        let customer = |id: &str, seconds: i64, addresses: usize| -> Customer {
            serde_json::from_value(json!({
                "platform_id": id,
                "platform_updated_at": at(seconds).to_rfc3339(),
                "addresses": items(addresses, json!({})),
            }))
            .unwrap()
        };
        let (events, skipped) = synced_customer_events(
            ShopId(SHOP),
            &[
                customer("ok", 9 * 60, MAX_ENTITY_LIST_ITEMS),
                customer("ahead", 11 * 60, 0),
                customer("crowded", 0, MAX_ENTITY_LIST_ITEMS + 1),
            ],
            at(0),
        );
        assert_eq!(skipped, 2);
        let kept: Vec<&str> = events.iter().map(|e| e.platform_id.as_str()).collect();
        assert_eq!(kept, ["ok"]);
    }

    #[test]
    fn synced_products_priced_below_zero_are_skipped() {
        let product = |price: &str| -> Product {
            serde_json::from_value(json!({
                "platform_id": "p1",
                "platform_updated_at": at(1).to_rfc3339(),
                "variants": [{"platform_id": "v1", "price": price}],
            }))
            .unwrap()
        };
        let synced =
            |price| synced_event(ShopId(SHOP), EntityKind::Product, &product(price), at(2));
        assert!(synced("-5.00").is_none());
        assert!(synced("5.00").is_some());
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_micros(1_700_000_000_000_000).plus_seconds(seconds)
    }

    fn saved(id: &str, seconds: i64, extra: Value) -> NewInboundEvent {
        let mut customer =
            json!({ "platform_id": id, "platform_updated_at": at(seconds).to_rfc3339() });
        if let (Some(target), Some(fields)) = (customer.as_object_mut(), extra.as_object()) {
            target.extend(fields.clone());
        }
        parse_event(
            ShopId(SHOP),
            EntityKind::Customer,
            EventAction::Saved,
            &json!({ "data": { "customer": customer } }),
            EventSource::Webhook,
            at(0),
        )
        .unwrap()
    }

    fn deleted(id: &str, seconds: i64) -> NewInboundEvent {
        let body = json!({ "data": { "customer": { "platform_id": id, "platform_deleted_at": at(seconds).to_rfc3339() } } });
        parse_event(
            ShopId(SHOP),
            EntityKind::Customer,
            EventAction::Deleted,
            &body,
            EventSource::Webhook,
            at(0),
        )
        .unwrap()
    }

    fn apply_all(db: &MemoryDatabase, events: &[NewInboundEvent]) -> Vec<Outcome> {
        events
            .iter()
            .map(|event| db.write(|tx| apply_event(tx, event, at(1000))).unwrap())
            .collect()
    }

    fn stored(db: &MemoryDatabase, id: &str) -> Option<EntityRecord> {
        db.read(|tx| Ok(tx.platform_entity(ShopId(SHOP), EntityKind::Customer, id)?))
            .unwrap()
    }

    fn stored_json(db: &MemoryDatabase, id: &str) -> Value {
        let record = stored(db, id).unwrap();
        serde_json::from_str(record.document.as_deref().unwrap()).unwrap()
    }

    fn problems(result: Result<NewInboundEvent, DomainError>) -> Vec<(String, &'static str)> {
        match result {
            Err(DomainError::Invalid(problems)) => {
                problems.into_iter().map(|p| (p.field, p.code)).collect()
            }
            other => panic!("expected 422, got {other:?}"),
        }
    }

    #[test]
    fn every_missing_or_bad_field_is_named() {
        // Received after the times the bodies give (2024-01-01).
        let now = Timestamp::parse_rfc3339("2024-06-01T00:00:00Z").unwrap();
        let parse = |action, body: Value| {
            parse_event(
                ShopId(SHOP),
                EntityKind::Customer,
                action,
                &body,
                EventSource::Webhook,
                now,
            )
        };
        assert_eq!(
            problems(parse(EventAction::Saved, json!({}))),
            [("data".to_string(), "required")]
        );
        assert_eq!(
            problems(parse(EventAction::Saved, json!({"data": {}}))),
            [("data.customer".to_string(), "required")]
        );
        assert_eq!(
            problems(parse(EventAction::Saved, json!({"data": {"order": {}}}))),
            [("data.customer".to_string(), "required")]
        );
        assert_eq!(
            problems(parse(
                EventAction::Saved,
                json!({"data": {"customer": {"email": "a@b.test"}}})
            )),
            [
                ("data.customer.platform_id".to_string(), "required"),
                ("data.customer.platform_updated_at".to_string(), "required")
            ]
        );
        let bad_time = problems(parse(
            EventAction::Saved,
            json!({"data": {"customer": {"platform_id": "c1", "platform_updated_at": "yesterday"}}}),
        ));
        assert_eq!(bad_time[0].0, "data.customer.platform_updated_at");
        let blank_id = problems(parse(
            EventAction::Saved,
            json!({"data": {"customer": {"platform_id": " ", "platform_updated_at": "2024-01-01T00:00:00Z"}}}),
        ));
        assert_eq!(
            blank_id,
            [("data.customer.platform_id".to_string(), "required")]
        );
        let nested = problems(parse(
            EventAction::Saved,
            json!({"data": {"customer": {"platform_id": "c1", "platform_updated_at": "2024-01-01T00:00:00Z", "addresses": [{"city": 5}]}}}),
        ));
        assert_eq!(nested[0].0, "data.customer.addresses[0].city");
        assert_eq!(
            problems(parse(
                EventAction::Deleted,
                json!({"data": {"customer": {"platform_id": "c1"}}})
            )),
            [("data.customer.platform_deleted_at".to_string(), "required")]
        );
        let products = parse_event(
            ShopId(SHOP),
            EntityKind::Product,
            EventAction::Saved,
            &json!({"data": {"product": {"platform_id": "p1", "platform_updated_at": "2024-01-01T00:00:00Z", "variants": [{"price": 10}]}}}),
            EventSource::Webhook,
            now,
        );
        assert_eq!(problems(products)[0].0, "data.product.variants[0].price");
    }

    #[test]
    fn any_delivery_order_ends_at_the_newest_version() {
        let versions: Vec<NewInboundEvent> = (1..=4)
            .map(|n| {
                saved(
                    "c1",
                    n * 10,
                    json!({ "email": format!("v{n}@example.test") }),
                )
            })
            .collect();
        // Every permutation of four versions.
        let mut orders = vec![vec![0usize, 1, 2, 3]];
        for _ in 0..23 {
            let mut next = orders.last().unwrap().clone();
            let i = (0..3).rev().find(|&i| next[i] < next[i + 1]).unwrap();
            let j = (i + 1..4).rev().find(|&j| next[j] > next[i]).unwrap();
            next.swap(i, j);
            next[i + 1..].reverse();
            orders.push(next);
        }
        for order in orders {
            let db = MemoryDatabase::default();
            let shuffled: Vec<NewInboundEvent> =
                order.iter().map(|&i| versions[i].clone()).collect();
            apply_all(&db, &shuffled);
            assert_eq!(
                stored_json(&db, "c1")["email"],
                "v4@example.test",
                "order {order:?}"
            );
            assert_eq!(stored(&db, "c1").unwrap().platform_updated_at, Some(at(40)));
        }
    }

    #[test]
    fn a_batch_gives_what_one_by_one_gives() {
        let versions: Vec<NewInboundEvent> = vec![
            saved("c1", 30, json!({"email": "v3@example.test"})),
            saved(
                "c1",
                10,
                json!({"email": "v1@example.test", "first_name": "Ada"}),
            ),
            deleted("c2", 5),
            saved("c2", 20, json!({"email": "back@example.test"})),
            saved("c1", 40, json!({"phone": "+1"})),
            saved("c2", 15, json!({"email": "stale@example.test"})),
        ];
        let one_by_one = MemoryDatabase::default();
        let expected = apply_all(&one_by_one, &versions);
        let batched = MemoryDatabase::default();
        let stored: Vec<&NewInboundEvent> = versions.iter().collect();
        let outcomes = batched
            .write(|tx| apply_events(tx, &stored, at(1000)))
            .unwrap();
        assert_eq!(outcomes, expected);
        for id in ["c1", "c2"] {
            assert_eq!(
                stored_json(&batched, id),
                stored_json(&one_by_one, id),
                "{id}"
            );
        }
        assert_eq!(stored_json(&batched, "c1")["email"], "v3@example.test");
        assert_eq!(stored_json(&batched, "c1")["phone"], "+1");
        assert_eq!(
            batched.with_state(|state| state.entities.len()),
            2,
            "one entity each, written once"
        );
    }

    /// serde would read a struct from an array of its fields in order; an entity must be an
    /// object, and the 422 names it.
    #[test]
    fn an_entity_that_is_not_an_object_is_refused_with_its_path() {
        for body in [
            r#"{"data":{"customer":["c1","2026-01-01T00:00:00Z"]}}"#,
            r#"{"data":{"customer":"c1"}}"#,
        ] {
            let error = parse_event_body(
                ShopId(SHOP),
                EntityKind::Customer,
                EventAction::Saved,
                body.as_bytes(),
                EventSource::Webhook,
                at(0),
            )
            .unwrap_err();
            match error {
                EventBodyError::Invalid(DomainError::Invalid(problems)) => {
                    assert_eq!(
                        (problems[0].field.as_str(), problems[0].code),
                        ("data.customer", "invalid_type"),
                        "{body}"
                    );
                }
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn omitted_fields_are_left_alone() {
        let db = MemoryDatabase::default();
        apply_all(
            &db,
            &[
                saved(
                    "c1",
                    10,
                    json!({"email": "a@example.test", "first_name": "Ada"}),
                ),
                saved("c1", 20, json!({"first_name": "Grace"})),
            ],
        );
        let customer = stored_json(&db, "c1");
        assert_eq!(customer["email"], "a@example.test");
        assert_eq!(customer["first_name"], "Grace");
    }

    #[test]
    fn equal_time_and_content_changes_nothing() {
        let db = MemoryDatabase::default();
        let event = saved("c1", 10, json!({"email": "a@example.test"}));
        assert_eq!(
            apply_all(&db, &[event.clone(), event]),
            [Outcome::Applied, Outcome::Unchanged]
        );
        let changed = saved("c1", 10, json!({"email": "b@example.test"}));
        assert_eq!(
            apply_all(&db, &[changed]),
            [Outcome::Applied],
            "same time, new content: applied"
        );
    }

    #[test]
    fn deletion_beats_older_saves_and_yields_to_newer_ones() {
        let db = MemoryDatabase::default();
        let outcomes = apply_all(
            &db,
            &[
                saved("c1", 10, json!({"email": "a@example.test"})),
                deleted("c1", 20),
                saved("c1", 15, json!({})),
                saved("c1", 20, json!({})),
            ],
        );
        assert_eq!(
            outcomes,
            [
                Outcome::Applied,
                Outcome::Applied,
                Outcome::Stale,
                Outcome::Stale
            ]
        );
        assert!(stored(&db, "c1").unwrap().platform_deleted_at.is_some());

        let back = apply_all(&db, &[saved("c1", 30, json!({"first_name": "Back"}))]);
        assert_eq!(back, [Outcome::Applied]);
        let record = stored(&db, "c1").unwrap();
        assert_eq!(record.platform_deleted_at, None);
        let customer = stored_json(&db, "c1");
        assert_eq!(customer["first_name"], "Back");
        assert!(
            customer.get("email").is_none(),
            "a returning entity starts afresh"
        );
    }

    #[test]
    fn a_deletion_older_than_the_last_save_is_dropped() {
        let db = MemoryDatabase::default();
        assert_eq!(
            apply_all(&db, &[saved("c1", 20, json!({})), deleted("c1", 10)]),
            [Outcome::Applied, Outcome::Stale]
        );
        assert_eq!(stored(&db, "c1").unwrap().platform_deleted_at, None);
    }

    #[test]
    fn a_deletion_before_any_save_leaves_a_tombstone_that_drops_older_saves() {
        let db = MemoryDatabase::default();
        assert_eq!(
            apply_all(&db, &[deleted("c1", 20), saved("c1", 10, json!({}))]),
            [Outcome::Applied, Outcome::Stale]
        );
        assert_eq!(apply_all(&db, &[deleted("c1", 15)]), [Outcome::Unchanged]);
    }

    #[test]
    fn pending_events_are_applied_in_arrival_order_and_marked() {
        let db = MemoryDatabase::default();
        let events = vec![
            saved("c1", 20, json!({"email": "new@example.test"})),
            saved("c1", 10, json!({"email": "old@example.test"})),
            saved("c2", 5, json!({})),
        ];
        db.write(|tx| Ok(tx.insert_inbound_events(&events)?))
            .unwrap();
        assert_eq!(apply_pending(&db, &SystemClock, 2).unwrap().events, 2);
        assert_eq!(
            db.read(|tx| Ok(tx.count_pending_inbound_events()?))
                .unwrap(),
            1
        );
        assert_eq!(apply_pending(&db, &SystemClock, 10).unwrap().events, 1);
        assert_eq!(apply_pending(&db, &SystemClock, 10).unwrap().events, 0);
        let outcomes: Vec<Option<Outcome>> =
            db.with_state(|state| state.events.iter().map(|(_, o)| *o).collect());
        assert_eq!(
            outcomes,
            [
                Some(Outcome::Applied),
                Some(Outcome::Stale),
                Some(Outcome::Applied)
            ]
        );
        assert_eq!(stored_json(&db, "c1")["email"], "new@example.test");
    }

    #[test]
    fn a_deletion_at_the_time_of_the_last_save_wins_the_tie() {
        let db = MemoryDatabase::default();
        assert_eq!(
            apply_all(&db, &[saved("c1", 10, json!({})), deleted("c1", 10)]),
            [Outcome::Applied, Outcome::Applied]
        );
        assert_eq!(stored(&db, "c1").unwrap().platform_deleted_at, Some(at(10)));
    }

    #[test]
    fn a_later_deletion_moves_the_tombstone_forward() {
        let db = MemoryDatabase::default();
        assert_eq!(
            apply_all(
                &db,
                &[
                    deleted("c1", 10),
                    deleted("c1", 20),
                    saved("c1", 15, json!({}))
                ]
            ),
            [Outcome::Applied, Outcome::Applied, Outcome::Stale]
        );
        assert_eq!(stored(&db, "c1").unwrap().platform_deleted_at, Some(at(20)));
    }

    #[test]
    fn events_that_change_nothing_write_nothing() {
        let db = MemoryDatabase::default();
        let first = saved("c1", 20, json!({"email": "a@example.test"}));
        db.write(|tx| apply_event(tx, &first, at(1000))).unwrap();
        let batch = [first.clone(), saved("c1", 10, json!({})), deleted("c1", 5)];
        let refs: Vec<&NewInboundEvent> = batch.iter().collect();
        assert_eq!(
            db.write(|tx| apply_events(tx, &refs, at(2000))).unwrap(),
            [Outcome::Unchanged, Outcome::Stale, Outcome::Stale]
        );
        assert_eq!(
            db.with_state(|state| state.entities[0].updated_at),
            at(1000),
            "the entity is not written again"
        );
    }

    #[test]
    fn a_batch_of_several_shops_and_kinds_stores_each_entity_under_its_own() {
        let order = parse_event(
            ShopId(SHOP),
            EntityKind::Order,
            EventAction::Saved,
            &json!({"data": {"order": {"platform_id": "o1", "platform_updated_at": at(10).to_rfc3339()}}}),
            EventSource::Webhook,
            at(0),
        )
        .unwrap();
        let mut other_shop = saved("c1", 10, json!({"email": "other@example.test"}));
        other_shop.shop_id = ShopId(SHOP + 1);
        let batch = [
            saved("c1", 10, json!({"email": "a@example.test"})),
            order,
            other_shop,
            saved("c2", 10, json!({})),
        ];
        let refs: Vec<&NewInboundEvent> = batch.iter().collect();
        let db = MemoryDatabase::default();
        assert_eq!(
            db.write(|tx| apply_events(tx, &refs, at(1000))).unwrap(),
            [Outcome::Applied; 4]
        );
        let find = |shop, kind, id| {
            db.read(|tx| Ok(tx.platform_entity(shop, kind, id)?))
                .unwrap()
        };
        assert!(find(ShopId(SHOP), EntityKind::Order, "o1").is_some());
        assert!(find(ShopId(SHOP), EntityKind::Customer, "o1").is_none());
        assert_eq!(stored_json(&db, "c1")["email"], "a@example.test");
        assert!(stored(&db, "c2").is_some());
        let other = find(ShopId(SHOP + 1), EntityKind::Customer, "c1").unwrap();
        assert!(other.document.unwrap().contains("other@example.test"));
        assert_eq!(db.with_state(|state| state.entities.len()), 4);
    }
}
