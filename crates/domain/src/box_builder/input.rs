//! The box builder's request bodies. Each wraps its resource in its singular name
//! (`{"box": {…}}`, `{"box_product": …}`, `{"box_size": …}`, `{"time_slot": …}`); the resource's
//! fields bare are read too. Every problem is a 422 on its path (`box.box_name`,
//! `time_slot.end_date`); ids and numbers may come as decimal text; unknown fields are ignored.
//! A create body and an update body are told apart because a create needs more fields.

use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::box_builder::resources::SelectionItem;
use crate::kernel::body::{
    BodyObject, Check, Field, TextId, Wrapped, at_most, read_resource, wrong_type,
};
use crate::kernel::error::{DomainError, FieldError, Problems};
use crate::kernel::ids::{BoxProductId, BoxSizeId, GroupId, LineItemId, TimeSlotId};
use crate::kernel::time::Timestamp;

/// The longest name (box, size, slot) and attribute key, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 255;
/// The most attributes a box, box product or time slot holds.
pub(crate) const MAX_ATTRIBUTES: usize = 50;
/// The most sizes one bulk update (Update Box Sizes) gives.
pub(crate) const MAX_BULK_BOX_SIZES: usize = 100;
/// The most products one selection chooses.
pub(crate) const MAX_SELECTION_ITEMS: usize = 250;

/// A name of 1..255 characters; required when `creating`.
fn name(
    check: &mut Check<'_>,
    field: &str,
    given: Field<String>,
    creating: bool,
) -> Option<String> {
    let text = check.needed(field, given, creating)?;
    if text.chars().count() > MAX_NAME_CHARS {
        check.problem(field, "length", |path| {
            format!("{path} must be at most {MAX_NAME_CHARS} characters")
        });
        return None;
    }
    Some(text)
}

/// `attributes`: keys unique and 1..255 characters, at most [`MAX_ATTRIBUTES`].
fn attributes(
    check: &mut Check<'_>,
    given: Field<Vec<Field<AttributeFields>>>,
) -> Option<Vec<(String, String)>> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    check.each("attributes", given, MAX_ATTRIBUTES, |check, attribute| {
        let key = name(check, "attribute_key", attribute.attribute_key, true);
        let value = check
            .optional("attribute_value", attribute.attribute_value)
            .unwrap_or_default();
        let key = key?;
        if pairs.iter().any(|(seen, _)| *seen == key) {
            check.problem("attribute_key", "duplicate", |path| {
                format!("{path} repeats the key {key:?}")
            });
        } else {
            pairs.push((key, value));
        }
        Some(())
    })?;
    Some(pairs)
}

/// One attribute as a client writes it: a key/value pair kept with its resource.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct AttributeFields {
    /// The key, unique among the resource's attributes (1 to 255 characters).
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub attribute_key: Field<String>,
    /// The value (empty when absent).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub attribute_value: Field<String>,
}
impl BodyObject for AttributeFields {}

/// Makes `$request` a [`Wrapped`] body holding `$fields` under `$key` (its field `$field`).
macro_rules! wrapped {
    ($request:ty, $fields:ty, $key:literal, $field:ident) => {
        impl BodyObject for $request {}
        impl Wrapped for $request {
            type Fields = $fields;
            const KEY: &'static str = $key;
            fn resource(self) -> Field<$fields> {
                self.$field
            }
        }
    };
}

/// A box's fields; all needed to create one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoxInput {
    /// The id of the subscription group to sell it under.
    pub svc_subscription_group_id: Option<GroupId>,
    /// The box's name (1 to 255 characters).
    pub box_name: Option<String>,
    /// The attributes as (key, value) pairs, keys unique; given, they replace the box's.
    pub attributes: Option<Vec<(String, String)>>,
}

/// A Create Box (`creating`) or Update Box body: `{"box": {svc_subscription_group_id,
/// box_name, attributes}}`; every field is required to create.
pub fn parse_box(body: &Value, creating: bool) -> Result<BoxInput, DomainError> {
    if creating {
        read_resource::<BoxRequest, _>(body, |fields, check| fields.validate(check, true))
    } else {
        read_resource::<BoxUpdateRequest, _>(body, |fields, check| {
            BoxFields::from(fields).validate(check, false)
        })
    }
}

/// The body that creates a box. The box's fields may also come bare, without the `box` key.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxRequest {
    /// The box's fields.
    #[serde(rename = "box", default)]
    #[schema(value_type = BoxFields)]
    pub subscription_box: Field<BoxFields>,
}
wrapped!(BoxRequest, BoxFields, "box", subscription_box);

/// A new box's fields as a client writes them.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxFields {
    /// The id of the shop's subscription group to sell the box under (one box per group).
    #[serde(default)]
    #[schema(value_type = i64, required = true)]
    pub svc_subscription_group_id: Field<i64>,
    /// The box's name (1 to 255 characters).
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub box_name: Field<String>,
    /// The box's attributes (at most 50), keys unique.
    #[serde(default)]
    #[schema(value_type = Option<Vec<AttributeFields>>, max_items = 50)]
    pub attributes: Field<Vec<Field<AttributeFields>>>,
}
impl BodyObject for BoxFields {}

impl BoxFields {
    fn validate(self, check: &mut Check<'_>, creating: bool) -> Option<BoxInput> {
        Some(BoxInput {
            svc_subscription_group_id: check
                .needed(
                    "svc_subscription_group_id",
                    self.svc_subscription_group_id,
                    creating,
                )
                .map(GroupId),
            box_name: name(check, "box_name", self.box_name, creating),
            attributes: attributes(check, self.attributes),
        })
    }
}

/// The body that changes a box. The box's fields may also come bare, without the `box` key.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxUpdateRequest {
    /// The box's fields to change.
    #[serde(rename = "box", default)]
    #[schema(value_type = BoxUpdateFields)]
    pub subscription_box: Field<BoxUpdateFields>,
}
wrapped!(BoxUpdateRequest, BoxUpdateFields, "box", subscription_box);

/// A box's fields to change: only those given are replaced.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxUpdateFields {
    /// The id of the shop's subscription group to sell the box under (one box per group).
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub svc_subscription_group_id: Field<i64>,
    /// The box's name (1 to 255 characters).
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 255)]
    pub box_name: Field<String>,
    /// The box's attributes (at most 50), keys unique; given, they replace the box's.
    #[serde(default)]
    #[schema(value_type = Option<Vec<AttributeFields>>, max_items = 50)]
    pub attributes: Field<Vec<Field<AttributeFields>>>,
}
impl BodyObject for BoxUpdateFields {}

impl From<BoxUpdateFields> for BoxFields {
    fn from(fields: BoxUpdateFields) -> Self {
        BoxFields {
            svc_subscription_group_id: fields.svc_subscription_group_id,
            box_name: fields.box_name,
            attributes: fields.attributes,
        }
    }
}

/// A box product's fields; both platform ids needed to create one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoxProductInput {
    /// The platform id of the catalogue's product.
    pub platform_product_id: Option<String>,
    /// The platform id of the product's variant.
    pub platform_variant_id: Option<String>,
    /// The attributes as (key, value) pairs, keys unique; given, they replace the product's.
    pub attributes: Option<Vec<(String, String)>>,
}

/// A Create Box Product (`creating`) or Update Box Product body: `{"box_product":
/// {platform_product_id, platform_variant_id, attributes}}`; an id given must not be empty.
pub fn parse_box_product(body: &Value, creating: bool) -> Result<BoxProductInput, DomainError> {
    if creating {
        read_resource::<BoxProductRequest, _>(body, |fields, check| fields.validate(check, true))
    } else {
        read_resource::<BoxProductUpdateRequest, _>(body, |fields, check| {
            BoxProductFields::from(fields).validate(check, false)
        })
    }
}

/// The body that creates a box product. Its fields may also come bare, without the
/// `box_product` key.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxProductRequest {
    /// The box product's fields.
    #[serde(default)]
    #[schema(value_type = BoxProductFields)]
    pub box_product: Field<BoxProductFields>,
}
wrapped!(
    BoxProductRequest,
    BoxProductFields,
    "box_product",
    box_product
);

/// A new box product's fields as a client writes them: a live variant of the catalogue's
/// product.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxProductFields {
    /// The platform id of the catalogue's product (an integer is read as its decimal text).
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1)]
    pub platform_product_id: Field<TextId>,
    /// The platform id of the product's variant.
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1)]
    pub platform_variant_id: Field<TextId>,
    /// The box product's attributes (at most 50), keys unique.
    #[serde(default)]
    #[schema(value_type = Option<Vec<AttributeFields>>, max_items = 50)]
    pub attributes: Field<Vec<Field<AttributeFields>>>,
}
impl BodyObject for BoxProductFields {}

impl BoxProductFields {
    fn validate(self, check: &mut Check<'_>, creating: bool) -> Option<BoxProductInput> {
        // A change may leave an id out, but one it gives must not be blank.
        let id = |check: &mut Check<'_>, name: &str, given: Field<TextId>| {
            let needed = creating || given.is_given();
            check.needed(name, given, needed).map(|id| id.0)
        };
        Some(BoxProductInput {
            platform_product_id: id(check, "platform_product_id", self.platform_product_id),
            platform_variant_id: id(check, "platform_variant_id", self.platform_variant_id),
            attributes: attributes(check, self.attributes),
        })
    }
}

/// The body that changes a box product. Its fields may also come bare, without the
/// `box_product` key.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxProductUpdateRequest {
    /// The box product's fields to change.
    #[serde(default)]
    #[schema(value_type = BoxProductUpdateFields)]
    pub box_product: Field<BoxProductUpdateFields>,
}
wrapped!(
    BoxProductUpdateRequest,
    BoxProductUpdateFields,
    "box_product",
    box_product
);

/// A box product's fields to change: only those given are replaced; an id given must not be
/// blank.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxProductUpdateFields {
    /// The platform id of the catalogue's product (an integer is read as its decimal text).
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1)]
    pub platform_product_id: Field<TextId>,
    /// The platform id of the product's variant.
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1)]
    pub platform_variant_id: Field<TextId>,
    /// The box product's attributes (at most 50), keys unique; given, they replace the
    /// product's.
    #[serde(default)]
    #[schema(value_type = Option<Vec<AttributeFields>>, max_items = 50)]
    pub attributes: Field<Vec<Field<AttributeFields>>>,
}
impl BodyObject for BoxProductUpdateFields {}

impl From<BoxProductUpdateFields> for BoxProductFields {
    fn from(fields: BoxProductUpdateFields) -> Self {
        BoxProductFields {
            platform_product_id: fields.platform_product_id,
            platform_variant_id: fields.platform_variant_id,
            attributes: fields.attributes,
        }
    }
}

/// A box size's fields; the name and `max_quantity` needed to create one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoxSizeInput {
    /// The size to change, in a bulk update; none for a new one.
    pub id: Option<BoxSizeId>,
    /// The size's name (1 to 255 characters).
    pub box_size_name: Option<String>,
    /// The fewest products a box of this size holds (0 or more).
    pub min_quantity: Option<i64>,
    /// The most products a box of this size holds.
    pub max_quantity: Option<i64>,
}

/// A Create Box Size (`creating`) or Update Box Size body: `{"box_size": {box_size_name,
/// pricing_mode, min_quantity, max_quantity}}`; `pricing_mode`, if given, must be
/// `flexible_pricing`.
pub fn parse_box_size(body: &Value, creating: bool) -> Result<BoxSizeInput, DomainError> {
    if creating {
        read_resource::<BoxSizeRequest, _>(body, |fields, check| fields.validate(check, true))
    } else {
        read_resource::<BoxSizeUpdateRequest, _>(body, |fields, check| {
            fields.validate(check, false)
        })
    }
}

/// The bulk update's body: an array of at most [`MAX_BULK_BOX_SIZES`] sizes, or
/// `{"box_sizes": […]}`. A size with an `id` is that size changed, one without is new (and so
/// needs every field). A longer array is one `too_many` problem on `box_sizes`, and the sizes
/// past the limit are not read.
pub fn parse_box_sizes(body: &Value) -> Result<Vec<BoxSizeInput>, DomainError> {
    let (sizes, prefix) = match body {
        Value::Array(_) => (body, ""),
        _ => match body.get("box_sizes") {
            Some(sizes @ Value::Array(_)) => (sizes, "box_sizes"),
            _ => (&Value::Null, "box_sizes"),
        },
    };
    // Each size reads on its own (a wrong one is that size's problem), so an array always reads.
    let Ok(sizes) = Vec::<Field<BulkBoxSize>>::deserialize(sizes) else {
        return Err(DomainError::Invalid(vec![
            wrong_type("an array of box sizes").at("box_sizes".to_string()),
        ]));
    };
    let mut problems = Problems::new();
    let sizes = at_most("box_sizes", sizes, MAX_BULK_BOX_SIZES, &mut problems);
    let mut read = Vec::with_capacity(sizes.len());
    let mut root = Check::root(&mut problems);
    for (index, size) in sizes.into_iter().enumerate() {
        let mut check = root.element(prefix, index);
        let size = match size {
            Field::Given(size) => size,
            _ => {
                let path = check.here().to_string();
                check.push(wrong_type("an object").at(path));
                continue;
            }
        };
        // A size may be wrapped too (`{"box_size": {…}}`).
        let (fields, mut check) = match size.box_size {
            Field::Given(inner) => (inner, check.nested("box_size")),
            _ => (size.fields, check),
        };
        let creating = !fields.id.is_given();
        if let Some(size) = fields.validate(&mut check, creating) {
            read.push(size);
        }
    }
    problems.into_result()?;
    Ok(read)
}

/// One size of the bulk update: its fields, bare or wrapped in `box_size`.
#[derive(Debug, Default, Deserialize)]
struct BulkBoxSize {
    #[serde(default)]
    box_size: Field<BoxSizeUpdateFields>,
    #[serde(flatten)]
    fields: BoxSizeUpdateFields,
}
impl BodyObject for BulkBoxSize {}

/// The body that creates a box size. Its fields may also come bare, without the `box_size`
/// key.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxSizeRequest {
    /// The box size's fields.
    #[serde(default)]
    #[schema(value_type = BoxSizeFields)]
    pub box_size: Field<BoxSizeFields>,
}
wrapped!(BoxSizeRequest, BoxSizeFields, "box_size", box_size);

/// A new box size's fields as a client writes them. `min_quantity` (0 when not given) must not
/// exceed `max_quantity`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxSizeFields {
    /// The size's name (1 to 255 characters).
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub box_size_name: Field<String>,
    /// How a box of this size is priced: `flexible_pricing`, the only mode.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^flexible_pricing$")]
    pub pricing_mode: Field<String>,
    /// The fewest products a box of this size holds (0 or more).
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub min_quantity: Field<i64>,
    /// The most products a box of this size holds (at least `min_quantity`).
    #[serde(default)]
    #[schema(value_type = i64, required = true)]
    pub max_quantity: Field<i64>,
}
impl BodyObject for BoxSizeFields {}

impl BoxSizeFields {
    fn validate(self, check: &mut Check<'_>, creating: bool) -> Option<BoxSizeInput> {
        BoxSizeUpdateFields {
            id: Field::Absent,
            box_size_name: self.box_size_name,
            pricing_mode: self.pricing_mode,
            min_quantity: self.min_quantity,
            max_quantity: self.max_quantity,
        }
        .validate(check, creating)
    }
}

/// The body that changes a box size. Its fields may also come bare, without the `box_size`
/// key.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxSizeUpdateRequest {
    /// The box size's fields to change.
    #[serde(default)]
    #[schema(value_type = BoxSizeUpdateFields)]
    pub box_size: Field<BoxSizeUpdateFields>,
}
wrapped!(
    BoxSizeUpdateRequest,
    BoxSizeUpdateFields,
    "box_size",
    box_size
);

/// A box size's fields to change: only those given are replaced. In the bulk update, a size
/// without an `id` is new, and needs the name and `max_quantity`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BoxSizeUpdateFields {
    /// In the bulk update, the id of one of the box's sizes to change; without it the size is
    /// new. The other routes ignore it.
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub id: Field<i64>,
    /// The size's name (1 to 255 characters).
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 255)]
    pub box_size_name: Field<String>,
    /// How a box of this size is priced: `flexible_pricing`, the only mode.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^flexible_pricing$")]
    pub pricing_mode: Field<String>,
    /// The fewest products a box of this size holds (0 or more).
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub min_quantity: Field<i64>,
    /// The most products a box of this size holds (at least `min_quantity`).
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub max_quantity: Field<i64>,
}
impl BodyObject for BoxSizeUpdateFields {}

impl BoxSizeUpdateFields {
    fn validate(self, check: &mut Check<'_>, creating: bool) -> Option<BoxSizeInput> {
        if let Some(mode) = check.optional("pricing_mode", self.pricing_mode)
            && mode != super::resources::FLEXIBLE_PRICING
        {
            check.problem("pricing_mode", "invalid_value", |path| {
                format!("{path} must be {}", super::resources::FLEXIBLE_PRICING)
            });
        }
        let min_quantity = check.optional("min_quantity", self.min_quantity);
        if min_quantity.is_some_and(|min| min < 0) {
            check.problem("min_quantity", "out_of_range", |path| {
                format!("{path} must be at least 0")
            });
        }
        Some(BoxSizeInput {
            id: check.optional("id", self.id).map(BoxSizeId),
            box_size_name: name(check, "box_size_name", self.box_size_name, creating),
            min_quantity,
            max_quantity: check.needed("max_quantity", self.max_quantity, creating),
        })
    }
}

/// A time slot's fields; the name and the four dates needed to create one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimeSlotInput {
    /// The slot's name (1 to 255 characters).
    pub time_slot_name: Option<String>,
    /// When the slot starts.
    pub start_date: Option<Timestamp>,
    /// When the slot ends.
    pub end_date: Option<Timestamp>,
    /// The last time a selection for the slot may be made or changed.
    pub selection_deadline_date: Option<Timestamp>,
    /// When the storefront starts showing the slot.
    pub visibility_date: Option<Timestamp>,
    /// The attributes as (key, value) pairs, keys unique; given, they replace the slot's.
    pub attributes: Option<Vec<(String, String)>>,
    /// Where the fields were in the body, for problems found with the stored slot.
    pub path: String,
}

/// A Create Time Slot (`creating`) or Update Time Slot body: `{"time_slot": {time_slot_name,
/// start_date, end_date, selection_deadline_date, visibility_date, attributes}}` (or wrapped in
/// `time-slot`). The dates' order is checked later, with the stored ones.
pub fn parse_time_slot(body: &Value, creating: bool) -> Result<TimeSlotInput, DomainError> {
    if creating {
        read_resource::<TimeSlotRequest, _>(body, |fields, check| fields.validate(check, true))
    } else {
        read_resource::<TimeSlotUpdateRequest, _>(body, |fields, check| {
            TimeSlotFields::from(fields).validate(check, false)
        })
    }
}

/// The body that creates a time slot. Its fields may also come bare, or wrapped in
/// `time-slot`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct TimeSlotRequest {
    /// The time slot's fields.
    #[serde(default, alias = "time-slot")]
    #[schema(value_type = TimeSlotFields)]
    pub time_slot: Field<TimeSlotFields>,
}
wrapped!(TimeSlotRequest, TimeSlotFields, "time_slot", time_slot);

/// A new time slot's fields as a client writes them. The dates must hold `visibility_date` ≤
/// `selection_deadline_date` ≤ `start_date` ≤ `end_date`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct TimeSlotFields {
    /// The slot's name (1 to 255 characters).
    #[serde(default)]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub time_slot_name: Field<String>,
    /// When the slot starts: the first order time it holds.
    #[serde(default)]
    #[schema(value_type = Timestamp, required = true)]
    pub start_date: Field<Timestamp>,
    /// When the slot ends: the last order time it holds.
    #[serde(default)]
    #[schema(value_type = Timestamp, required = true)]
    pub end_date: Field<Timestamp>,
    /// The last time a selection for the slot may be made or changed.
    #[serde(default)]
    #[schema(value_type = Timestamp, required = true)]
    pub selection_deadline_date: Field<Timestamp>,
    /// When the storefront starts showing the slot.
    #[serde(default)]
    #[schema(value_type = Timestamp, required = true)]
    pub visibility_date: Field<Timestamp>,
    /// The slot's attributes (at most 50), keys unique.
    #[serde(default)]
    #[schema(value_type = Option<Vec<AttributeFields>>, max_items = 50)]
    pub attributes: Field<Vec<Field<AttributeFields>>>,
}
impl BodyObject for TimeSlotFields {}

impl TimeSlotFields {
    fn validate(self, check: &mut Check<'_>, creating: bool) -> Option<TimeSlotInput> {
        Some(TimeSlotInput {
            time_slot_name: name(check, "time_slot_name", self.time_slot_name, creating),
            start_date: check.needed("start_date", self.start_date, creating),
            end_date: check.needed("end_date", self.end_date, creating),
            selection_deadline_date: check.needed(
                "selection_deadline_date",
                self.selection_deadline_date,
                creating,
            ),
            visibility_date: check.needed("visibility_date", self.visibility_date, creating),
            attributes: attributes(check, self.attributes),
            path: check.here().to_string(),
        })
    }
}

/// The body that changes a time slot. Its fields may also come bare, or wrapped in
/// `time-slot`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct TimeSlotUpdateRequest {
    /// The time slot's fields to change.
    #[serde(default, alias = "time-slot")]
    #[schema(value_type = TimeSlotUpdateFields)]
    pub time_slot: Field<TimeSlotUpdateFields>,
}
wrapped!(
    TimeSlotUpdateRequest,
    TimeSlotUpdateFields,
    "time_slot",
    time_slot
);

/// A time slot's fields to change: only those given are replaced, and the dates, with the
/// stored ones, must still hold `visibility_date` ≤ `selection_deadline_date` ≤ `start_date` ≤
/// `end_date`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct TimeSlotUpdateFields {
    /// The slot's name (1 to 255 characters).
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 255)]
    pub time_slot_name: Field<String>,
    /// When the slot starts: the first order time it holds.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub start_date: Field<Timestamp>,
    /// When the slot ends: the last order time it holds.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub end_date: Field<Timestamp>,
    /// The last time a selection for the slot may be made or changed.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub selection_deadline_date: Field<Timestamp>,
    /// When the storefront starts showing the slot.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub visibility_date: Field<Timestamp>,
    /// The slot's attributes (at most 50), keys unique; given, they replace the slot's.
    #[serde(default)]
    #[schema(value_type = Option<Vec<AttributeFields>>, max_items = 50)]
    pub attributes: Field<Vec<Field<AttributeFields>>>,
}
impl BodyObject for TimeSlotUpdateFields {}

impl From<TimeSlotUpdateFields> for TimeSlotFields {
    fn from(fields: TimeSlotUpdateFields) -> Self {
        TimeSlotFields {
            time_slot_name: fields.time_slot_name,
            start_date: fields.start_date,
            end_date: fields.end_date,
            selection_deadline_date: fields.selection_deadline_date,
            visibility_date: fields.visibility_date,
            attributes: fields.attributes,
        }
    }
}

/// Create Time Slot Option: `{"box_product_id"}` (or `{"time_slot_option": {…}}`).
pub fn parse_time_slot_option(body: &Value) -> Result<BoxProductId, DomainError> {
    read_resource::<TimeSlotOptionWrapper, _>(body, |fields, check| {
        check
            .required("box_product_id", fields.box_product_id)
            .map(BoxProductId)
    })
}

/// The body that offers a box product in a time slot. The field may also come wrapped in
/// `time_slot_option`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct TimeSlotOptionRequest {
    /// The id of the shop's box product to offer.
    #[serde(default)]
    #[schema(value_type = i64, required = true)]
    pub box_product_id: Field<i64>,
}
impl BodyObject for TimeSlotOptionRequest {}

/// [`TimeSlotOptionRequest`] wrapped in `time_slot_option`.
#[derive(Debug, Default, Deserialize)]
struct TimeSlotOptionWrapper {
    #[serde(default)]
    time_slot_option: Field<TimeSlotOptionRequest>,
}
wrapped!(
    TimeSlotOptionWrapper,
    TimeSlotOptionRequest,
    "time_slot_option",
    time_slot_option
);

/// A selection's fields; all but the chosen products' order needed to create one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelectionInput {
    /// The id of the box's subscription line item (`svc_platform_subscription_line_item_id`).
    pub line_item_id: Option<LineItemId>,
    /// The id of the box size chosen.
    pub box_size_id: Option<BoxSizeId>,
    /// The id of the time slot chosen.
    pub time_slot_id: Option<TimeSlotId>,
    /// The time of the order the selection is for.
    pub order_datetime: Option<Timestamp>,
    /// The products chosen, each once and at least 1 of it.
    pub line_items: Option<Vec<SelectionItem>>,
    /// Where the fields were in the body.
    pub path: String,
}

/// `{"selection": {svc_platform_subscription_line_item_id, box_size_id, time_slot_id,
/// order_datetime, line_items: [{box_product_id, choice_quantity}]}}`; each `choice_quantity`
/// at least 1, each product once.
pub fn parse_selection(body: &Value, creating: bool) -> Result<SelectionInput, DomainError> {
    if creating {
        read_resource::<SelectionRequest, _>(body, |fields, check| fields.validate(check, true))
    } else {
        read_resource::<SelectionUpdateRequest, _>(body, |fields, check| {
            SelectionFields::from(fields).validate(check, false)
        })
    }
}

/// The body that makes a selection. Its fields may also come bare, without the `selection`
/// key.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SelectionRequest {
    /// The selection's fields.
    #[serde(default)]
    #[schema(value_type = SelectionFields)]
    pub selection: Field<SelectionFields>,
}
wrapped!(SelectionRequest, SelectionFields, "selection", selection);

/// A new selection's fields as a client writes them; checked against the box's rules.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SelectionFields {
    /// The id of the customer's box subscription line item.
    #[serde(default)]
    #[schema(value_type = i64, required = true)]
    pub svc_platform_subscription_line_item_id: Field<i64>,
    /// The id of the box size chosen (one of the box's).
    #[serde(default)]
    #[schema(value_type = i64, required = true)]
    pub box_size_id: Field<i64>,
    /// The id of the time slot chosen (one of the box's).
    #[serde(default)]
    #[schema(value_type = i64, required = true)]
    pub time_slot_id: Field<i64>,
    /// The time of the order the selection is for, within the slot.
    #[serde(default)]
    #[schema(value_type = Timestamp, required = true)]
    pub order_datetime: Field<Timestamp>,
    /// The products chosen (at most 250), each once; their quantities must add up to within
    /// the size's bounds.
    #[serde(default)]
    #[schema(value_type = Vec<SelectionItemFields>, required = true, max_items = 250)]
    pub line_items: Field<Vec<Field<SelectionItemFields>>>,
}
impl BodyObject for SelectionFields {}

impl SelectionFields {
    fn validate(self, check: &mut Check<'_>, creating: bool) -> Option<SelectionInput> {
        let line_item_id = check
            .needed(
                "svc_platform_subscription_line_item_id",
                self.svc_platform_subscription_line_item_id,
                creating,
            )
            .map(LineItemId);
        let box_size_id = check
            .needed("box_size_id", self.box_size_id, creating)
            .map(BoxSizeId);
        let time_slot_id = check
            .needed("time_slot_id", self.time_slot_id, creating)
            .map(TimeSlotId);
        let order_datetime = check.needed("order_datetime", self.order_datetime, creating);
        if creating && !self.line_items.is_given() {
            check.push(FieldError::required(check.field("line_items")));
        }
        let line_items = chosen(check, self.line_items);
        Some(SelectionInput {
            line_item_id,
            box_size_id,
            time_slot_id,
            order_datetime,
            line_items,
            path: check.here().to_string(),
        })
    }
}

/// One product chosen, as a client writes it.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SelectionItemFields {
    /// The id of the box product chosen.
    #[serde(default)]
    #[schema(value_type = i64, required = true)]
    pub box_product_id: Field<i64>,
    /// How many of it go in each box (at least 1).
    #[serde(default)]
    #[schema(value_type = i64, required = true, minimum = 1)]
    pub choice_quantity: Field<i64>,
}
impl BodyObject for SelectionItemFields {}

/// The body that changes a selection. Its fields may also come bare, without the `selection`
/// key.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SelectionUpdateRequest {
    /// The selection's fields to change.
    #[serde(default)]
    #[schema(value_type = SelectionUpdateFields)]
    pub selection: Field<SelectionUpdateFields>,
}
wrapped!(
    SelectionUpdateRequest,
    SelectionUpdateFields,
    "selection",
    selection
);

/// A selection's fields to change: only those given are replaced, and the whole is checked
/// again against the box's rules.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SelectionUpdateFields {
    /// The id of the customer's box subscription line item.
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub svc_platform_subscription_line_item_id: Field<i64>,
    /// The id of the box size chosen (one of the box's).
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub box_size_id: Field<i64>,
    /// The id of the time slot chosen (one of the box's).
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub time_slot_id: Field<i64>,
    /// The time of the order the selection is for, within the slot.
    #[serde(default)]
    #[schema(value_type = Option<Timestamp>)]
    pub order_datetime: Field<Timestamp>,
    /// The products chosen (at most 250), each once; their quantities must add up to within
    /// the size's bounds.
    #[serde(default)]
    #[schema(value_type = Option<Vec<SelectionItemFields>>, max_items = 250)]
    pub line_items: Field<Vec<Field<SelectionItemFields>>>,
}
impl BodyObject for SelectionUpdateFields {}

impl From<SelectionUpdateFields> for SelectionFields {
    fn from(fields: SelectionUpdateFields) -> Self {
        SelectionFields {
            svc_platform_subscription_line_item_id: fields.svc_platform_subscription_line_item_id,
            box_size_id: fields.box_size_id,
            time_slot_id: fields.time_slot_id,
            order_datetime: fields.order_datetime,
            line_items: fields.line_items,
        }
    }
}

/// The products chosen: each at least 1 of it, each once.
fn chosen(
    check: &mut Check<'_>,
    given: Field<Vec<Field<SelectionItemFields>>>,
) -> Option<Vec<SelectionItem>> {
    let mut chosen: Vec<SelectionItem> = Vec::new();
    check.each("line_items", given, MAX_SELECTION_ITEMS, |check, item| {
        let product = check.required("box_product_id", item.box_product_id);
        let quantity = check.required("choice_quantity", item.choice_quantity);
        if quantity.is_some_and(|quantity| quantity < 1) {
            check.problem("choice_quantity", "out_of_range", |path| {
                format!("{path} must be at least 1")
            });
            return None;
        }
        let (box_product_id, choice_quantity) = (product?, quantity?);
        if chosen.iter().any(|c| c.box_product_id.0 == box_product_id) {
            check.problem("box_product_id", "duplicate", |path| {
                format!("{path} names box product {box_product_id} twice")
            });
            return None;
        }
        chosen.push(SelectionItem {
            box_product_id: BoxProductId(box_product_id),
            choice_quantity,
        });
        Some(())
    })?;
    Some(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems<T: std::fmt::Debug>(result: Result<T, DomainError>) -> Vec<(String, &'static str)> {
        match result {
            Err(DomainError::Invalid(problems)) => problems
                .into_iter()
                .map(|problem| (problem.field, problem.code))
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bodies_are_read_wrapped_or_bare_with_text_numbers() {
        let wrapped = parse_box(
            &json!({"box": {"svc_subscription_group_id": "7", "box_name": "Veg box",
                            "attributes": [{"attribute_key": "color", "attribute_value": "green"}]}}),
            true,
        )
        .unwrap();
        let bare = parse_box(
            &json!({"svc_subscription_group_id": 7, "box_name": "Veg box",
                    "attributes": [{"attribute_key": "color", "attribute_value": "green"}]}),
            true,
        )
        .unwrap();
        assert_eq!(wrapped, bare);
        assert_eq!(bare.svc_subscription_group_id, Some(GroupId(7)));
        let sizes = parse_box_sizes(&json!([
            {"id": "3", "max_quantity": 8},
            {"box_size": {"box_size_name": "Large", "min_quantity": 4, "max_quantity": "10"}}
        ]))
        .unwrap();
        assert_eq!(sizes[0].id, Some(BoxSizeId(3)));
        assert_eq!(sizes[1].max_quantity, Some(10));
        assert_eq!(parse_box_sizes(&json!({"box_sizes": []})).unwrap(), []);
        assert_eq!(
            parse_time_slot_option(&json!({"box_product_id": "12"})).unwrap(),
            BoxProductId(12)
        );
    }

    #[test]
    fn every_problem_is_named_on_its_path() {
        assert_eq!(
            problems(parse_box(
                &json!({"box": {"attributes": [{"attribute_value": "x"},
                {"attribute_key": "a"}, {"attribute_key": "a"}]}}),
                true
            )),
            [
                ("box.svc_subscription_group_id".to_string(), "required"),
                ("box.box_name".to_string(), "required"),
                ("box.attributes[0].attribute_key".to_string(), "required"),
                ("box.attributes[2].attribute_key".to_string(), "duplicate"),
            ]
        );
        assert_eq!(
            problems(parse_box_sizes(
                &json!([{"id": 1, "min_quantity": -1, "pricing_mode": "fixed"},
                                              {"min_quantity": 1}])
            )),
            [
                ("[0].pricing_mode".to_string(), "invalid_value"),
                ("[0].min_quantity".to_string(), "out_of_range"),
                ("[1].box_size_name".to_string(), "required"),
                ("[1].max_quantity".to_string(), "required"),
            ]
        );
        // An element that is not an object is told in its place among the others' problems.
        assert_eq!(
            problems(parse_box(
                &json!({"box_name": "Veg", "attributes": [{"attribute_value": "x"}, "color",
                {"attribute_key": 7}]}),
                false
            )),
            [
                ("attributes[0].attribute_key".to_string(), "required"),
                ("attributes[1]".to_string(), "invalid_type"),
                ("attributes[2].attribute_key".to_string(), "invalid_type"),
            ]
        );
        // Too many sizes: one problem, and the sizes past the limit are not read.
        let many = Value::Array(vec![json!({}); 100_000]);
        let found = problems(parse_box_sizes(&many));
        assert_eq!(found.len(), 100, "at most 100 problems listed");
        assert_eq!(found[0], ("box_sizes".to_string(), "too_many"));
        assert_eq!(found[1], ("[0].box_size_name".to_string(), "required"));
        let wrapped =
            json!({"box_sizes": vec![json!({"max_quantity": 1}); MAX_BULK_BOX_SIZES + 1]});
        let found = problems(parse_box_sizes(&wrapped));
        assert_eq!(found[0], ("box_sizes".to_string(), "too_many"));
        assert_eq!(
            found.len(),
            100,
            "a too_many and the first 99 sizes' problems"
        );
        let ok = json!({"box_sizes": vec![json!({"id": 1}); MAX_BULK_BOX_SIZES]});
        assert_eq!(parse_box_sizes(&ok).unwrap().len(), MAX_BULK_BOX_SIZES);
        assert_eq!(
            problems(parse_time_slot(
                &json!({"time_slot": {"time_slot_name": "Week 1",
                "start_date": "soon"}}),
                true
            )),
            [
                ("time_slot.start_date".to_string(), "invalid_date"),
                ("time_slot.end_date".to_string(), "required"),
                ("time_slot.selection_deadline_date".to_string(), "required"),
                ("time_slot.visibility_date".to_string(), "required"),
            ]
        );
    }
}
