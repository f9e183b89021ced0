//! The box builder's request bodies. Each wraps its resource in its singular name
//! (`{"box": {…}}`, `{"box_product": …}`, `{"box_size": …}`, `{"time_slot": …}`); the resource's
//! fields bare are read too. Every problem is a 422 on its path (`box.box_name`,
//! `time_slot.end_date`); ids and numbers may come as decimal text; unknown fields are ignored.

use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::box_builder::resources::SelectionItem;
use crate::kernel::error::{DomainError, FieldError, Problems};
use crate::kernel::fields::{Fields, at_most, type_error};
use crate::kernel::time::Timestamp;

/// The longest name (box, size, slot) and attribute key, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 255;
/// The most attributes a box, box product or time slot holds.
pub(crate) const MAX_ATTRIBUTES: usize = 50;
/// The most sizes one bulk update (Update Box Sizes) gives.
pub(crate) const MAX_BULK_BOX_SIZES: usize = 100;
/// The most products one selection chooses.
pub(crate) const MAX_SELECTION_ITEMS: usize = 250;

/// Reads the resource `key` of `body` (or `body` itself when it has no such key) with `read`;
/// every problem is reported at once.
fn read_resource<T>(
    body: &Value,
    key: &str,
    read: impl FnOnce(&mut Fields<'_, '_>) -> Option<T>,
) -> Result<T, DomainError> {
    let mut problems = Problems::new();
    let empty = Map::new();
    let (map, prefix) = match body.get(key) {
        Some(Value::Object(map)) => (map, key),
        Some(_) => {
            return Err(DomainError::Invalid(vec![type_error(
                key.to_string(),
                "an object",
            )]));
        }
        None => (body.as_object().unwrap_or(&empty), ""),
    };
    let mut fields = Fields {
        path: prefix.to_string(),
        map,
        problems: &mut problems,
    };
    let value = read(&mut fields);
    problems.into_result()?;
    value.ok_or_else(|| DomainError::invalid(key, "invalid_value", "the body could not be read"))
}

/// A name of 1..255 characters; required when `creating`.
fn name(fields: &mut Fields<'_, '_>, field: &str, creating: bool) -> Option<String> {
    let text = if creating {
        fields.required_text(field)?
    } else {
        fields.text(field)?
    };
    if text.chars().count() > MAX_NAME_CHARS {
        let path = fields.field(field);
        let message = format!("{path} must be at most {MAX_NAME_CHARS} characters");
        fields
            .problems
            .push(FieldError::new(path, "length", message));
        return None;
    }
    Some(text)
}

/// An integer field that must be there when `creating`.
fn integer(fields: &mut Fields<'_, '_>, field: &str, creating: bool) -> Option<i64> {
    if creating && fields.get(field).is_none() {
        fields
            .problems
            .push(FieldError::required(fields.field(field)));
        return None;
    }
    fields.integer(field)
}

/// A date-time field that must be there when `creating`.
fn time(fields: &mut Fields<'_, '_>, field: &str, creating: bool) -> Option<Timestamp> {
    if creating && fields.get(field).is_none() {
        fields
            .problems
            .push(FieldError::required(fields.field(field)));
        return None;
    }
    fields.time(field)
}

/// `attributes`: `[{"attribute_key", "attribute_value"}]`, keys unique and 1..255 characters,
/// at most [`MAX_ATTRIBUTES`].
fn attributes(fields: &mut Fields<'_, '_>) -> Option<Vec<(String, String)>> {
    let items = fields.array("attributes", MAX_ATTRIBUTES)?;
    let mut pairs: Vec<(String, String)> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let Some(mut attribute) = fields.element("attributes", index, item) else {
            continue;
        };
        let key = name(&mut attribute, "attribute_key", true);
        let value = attribute.text("attribute_value").unwrap_or_default();
        if let Some(key) = key {
            if pairs.iter().any(|(seen, _)| *seen == key) {
                let field = attribute.field("attribute_key");
                let message = format!("{field} repeats the key {key:?}");
                attribute
                    .problems
                    .push(FieldError::new(field, "duplicate", message));
            } else {
                pairs.push((key, value));
            }
        }
    }
    Some(pairs)
}

/// One attribute as a client writes it: a key/value pair kept with its resource.
#[derive(ToSchema)]
pub struct AttributeFields {
    /// The key, unique among the resource's attributes (1 to 255 characters).
    #[schema(min_length = 1, max_length = 255)]
    pub attribute_key: String,
    /// The value (empty when absent).
    pub attribute_value: Option<String>,
}

/// A box's fields; all needed to create one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoxInput {
    /// The id of the subscription group to sell it under.
    pub svc_subscription_group_id: Option<i64>,
    /// The box's name (1 to 255 characters).
    pub box_name: Option<String>,
    /// The attributes as (key, value) pairs, keys unique; given, they replace the box's.
    pub attributes: Option<Vec<(String, String)>>,
}

/// A Create Box (`creating`) or Update Box body: `{"box": {svc_subscription_group_id,
/// box_name, attributes}}`; every field is required to create.
pub fn parse_box(body: &Value, creating: bool) -> Result<BoxInput, DomainError> {
    read_resource(body, "box", |fields| {
        Some(BoxInput {
            svc_subscription_group_id: integer(fields, "svc_subscription_group_id", creating),
            box_name: name(fields, "box_name", creating),
            attributes: attributes(fields),
        })
    })
}

/// The body that creates or changes a box. The box's fields may also come bare, without the
/// `box` key.
#[derive(ToSchema)]
pub struct BoxRequest {
    /// The box's fields.
    #[serde(rename = "box")]
    pub subscription_box: BoxFields,
}

/// A box's fields as a client writes them: all three needed to create a box; a change replaces
/// only the fields it gives.
#[derive(ToSchema)]
pub struct BoxFields {
    /// The id of the shop's subscription group to sell the box under (one box per group).
    pub svc_subscription_group_id: Option<i64>,
    /// The box's name (1 to 255 characters).
    #[schema(min_length = 1, max_length = 255)]
    pub box_name: Option<String>,
    /// The box's attributes (at most 50), keys unique; given, they replace the box's.
    #[schema(max_items = 50)]
    pub attributes: Option<Vec<AttributeFields>>,
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
    read_resource(body, "box_product", |fields| {
        let id = |fields: &mut Fields<'_, '_>, name: &str| {
            if creating || fields.get(name).is_some() {
                fields.required_id(name)
            } else {
                None
            }
        };
        Some(BoxProductInput {
            platform_product_id: id(fields, "platform_product_id"),
            platform_variant_id: id(fields, "platform_variant_id"),
            attributes: attributes(fields),
        })
    })
}

/// The body that creates or changes a box product. Its fields may also come bare, without the
/// `box_product` key.
#[derive(ToSchema)]
pub struct BoxProductRequest {
    /// The box product's fields.
    pub box_product: BoxProductFields,
}

/// A box product's fields as a client writes them: both platform ids needed to create one (a
/// live variant of the catalogue's product); a change replaces only the fields it gives.
#[derive(ToSchema)]
pub struct BoxProductFields {
    /// The platform id of the catalogue's product (an integer is read as its decimal text).
    #[schema(min_length = 1)]
    pub platform_product_id: Option<String>,
    /// The platform id of the product's variant.
    #[schema(min_length = 1)]
    pub platform_variant_id: Option<String>,
    /// The box product's attributes (at most 50), keys unique; given, they replace the
    /// product's.
    #[schema(max_items = 50)]
    pub attributes: Option<Vec<AttributeFields>>,
}

/// A box size's fields; the name and `max_quantity` needed to create one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoxSizeInput {
    /// The size to change, in a bulk update; none for a new one.
    pub id: Option<i64>,
    /// The size's name (1 to 255 characters).
    pub box_size_name: Option<String>,
    /// The fewest products a box of this size holds (0 or more).
    pub min_quantity: Option<i64>,
    /// The most products a box of this size holds.
    pub max_quantity: Option<i64>,
}

fn box_size(fields: &mut Fields<'_, '_>, creating: bool) -> Option<BoxSizeInput> {
    if let Some(mode) = fields.text("pricing_mode")
        && mode != super::resources::FLEXIBLE_PRICING
    {
        let field = fields.field("pricing_mode");
        let message = format!("{field} must be {}", super::resources::FLEXIBLE_PRICING);
        fields
            .problems
            .push(FieldError::new(field, "invalid_value", message));
    }
    let min_quantity = fields.integer("min_quantity");
    if let Some(min) = min_quantity
        && min < 0
    {
        let field = fields.field("min_quantity");
        let message = format!("{field} must be at least 0");
        fields
            .problems
            .push(FieldError::new(field, "out_of_range", message));
    }
    Some(BoxSizeInput {
        id: fields.integer("id"),
        box_size_name: name(fields, "box_size_name", creating),
        min_quantity,
        max_quantity: integer(fields, "max_quantity", creating),
    })
}

/// A Create Box Size (`creating`) or Update Box Size body: `{"box_size": {box_size_name,
/// pricing_mode, min_quantity, max_quantity}}`; `pricing_mode`, if given, must be
/// `flexible_pricing`.
pub fn parse_box_size(body: &Value, creating: bool) -> Result<BoxSizeInput, DomainError> {
    read_resource(body, "box_size", |fields| box_size(fields, creating))
}

/// The bulk update's body: an array of at most [`MAX_BULK_BOX_SIZES`] sizes, or
/// `{"box_sizes": […]}`. A size with an `id` is that size changed, one without is new (and so
/// needs every field). A longer array is one `too_many` problem on `box_sizes`, and the sizes
/// past the limit are not read.
pub fn parse_box_sizes(body: &Value) -> Result<Vec<BoxSizeInput>, DomainError> {
    let (items, prefix) = match body {
        Value::Array(items) => (items, String::new()),
        _ => match body.get("box_sizes") {
            Some(Value::Array(items)) => (items, "box_sizes".to_string()),
            _ => {
                return Err(DomainError::Invalid(vec![type_error(
                    "box_sizes".to_string(),
                    "an array of box sizes",
                )]));
            }
        },
    };
    let mut problems = Problems::new();
    let items = at_most("box_sizes", items, MAX_BULK_BOX_SIZES, &mut problems);
    let mut sizes = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let path = format!("{prefix}[{index}]");
        let Value::Object(map) = item else {
            problems.push(type_error(path, "an object"));
            continue;
        };
        // A size may be wrapped too (`{"box_size": {…}}`).
        let (map, path) = match map.get("box_size") {
            Some(Value::Object(inner)) => (inner, format!("{path}.box_size")),
            _ => (map, path),
        };
        let creating = map.get("id").is_none_or(Value::is_null);
        let mut fields = Fields {
            path,
            map,
            problems: &mut problems,
        };
        if let Some(size) = box_size(&mut fields, creating) {
            sizes.push(size);
        }
    }
    problems.into_result()?;
    Ok(sizes)
}

/// The body that creates or changes one box size. Its fields may also come bare, without the
/// `box_size` key.
#[derive(ToSchema)]
pub struct BoxSizeRequest {
    /// The box size's fields.
    pub box_size: BoxSizeFields,
}

/// A box size's fields as a client writes them: the name and `max_quantity` needed to create
/// one; a change replaces only the fields it gives. `min_quantity` (0 when never given) must
/// not exceed `max_quantity`.
#[derive(ToSchema)]
pub struct BoxSizeFields {
    /// In the bulk update, the id of one of the box's sizes to change; without it the size is
    /// new (and needs the name and `max_quantity`). The other routes ignore it.
    pub id: Option<i64>,
    /// The size's name (1 to 255 characters).
    #[schema(min_length = 1, max_length = 255)]
    pub box_size_name: Option<String>,
    /// How a box of this size is priced: `flexible_pricing`, the only mode.
    #[schema(pattern = "^flexible_pricing$")]
    pub pricing_mode: Option<String>,
    /// The fewest products a box of this size holds (0 or more).
    #[schema(minimum = 0)]
    pub min_quantity: Option<i64>,
    /// The most products a box of this size holds (at least `min_quantity`).
    pub max_quantity: Option<i64>,
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
    // The seed names the created slot `time-slot`; a body wrapped so is read too.
    let key = if body.get("time-slot").is_some() {
        "time-slot"
    } else {
        "time_slot"
    };
    read_resource(body, key, |fields| {
        Some(TimeSlotInput {
            time_slot_name: name(fields, "time_slot_name", creating),
            start_date: time(fields, "start_date", creating),
            end_date: time(fields, "end_date", creating),
            selection_deadline_date: time(fields, "selection_deadline_date", creating),
            visibility_date: time(fields, "visibility_date", creating),
            attributes: attributes(fields),
            path: fields.path.clone(),
        })
    })
}

/// Create Time Slot Option: `{"box_product_id"}` (or `{"time_slot_option": {…}}`).
pub fn parse_time_slot_option(body: &Value) -> Result<i64, DomainError> {
    read_resource(body, "time_slot_option", |fields| {
        integer(fields, "box_product_id", true)
    })
}

/// The body that creates or changes a time slot. Its fields may also come bare, or wrapped in
/// `time-slot`.
#[derive(ToSchema)]
pub struct TimeSlotRequest {
    /// The time slot's fields.
    pub time_slot: TimeSlotFields,
}

/// A time slot's fields as a client writes them: the name and the four dates needed to create
/// one; a change replaces only the fields it gives. The dates must hold `visibility_date` ≤
/// `selection_deadline_date` ≤ `start_date` ≤ `end_date`.
#[derive(ToSchema)]
pub struct TimeSlotFields {
    /// The slot's name (1 to 255 characters).
    #[schema(min_length = 1, max_length = 255)]
    pub time_slot_name: Option<String>,
    /// When the slot starts: the first order time it holds.
    pub start_date: Option<Timestamp>,
    /// When the slot ends: the last order time it holds.
    pub end_date: Option<Timestamp>,
    /// The last time a selection for the slot may be made or changed.
    pub selection_deadline_date: Option<Timestamp>,
    /// When the storefront starts showing the slot.
    pub visibility_date: Option<Timestamp>,
    /// The slot's attributes (at most 50), keys unique; given, they replace the slot's.
    #[schema(max_items = 50)]
    pub attributes: Option<Vec<AttributeFields>>,
}

/// The body that offers a box product in a time slot. The field may also come wrapped in
/// `time_slot_option`.
#[derive(ToSchema)]
pub struct TimeSlotOptionRequest {
    /// The id of the shop's box product to offer.
    pub box_product_id: i64,
}

/// A selection's fields; all but the chosen products' order needed to create one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelectionInput {
    /// The id of the box's subscription line item (`svc_platform_subscription_line_item_id`).
    pub line_item_id: Option<i64>,
    /// The id of the box size chosen.
    pub box_size_id: Option<i64>,
    /// The id of the time slot chosen.
    pub time_slot_id: Option<i64>,
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
    read_resource(body, "selection", |fields| {
        let line_item_id = integer(fields, "svc_platform_subscription_line_item_id", creating);
        let box_size_id = integer(fields, "box_size_id", creating);
        let time_slot_id = integer(fields, "time_slot_id", creating);
        let order_datetime = time(fields, "order_datetime", creating);
        let line_items = match fields.array("line_items", MAX_SELECTION_ITEMS) {
            Some(items) => Some(chosen(fields, items)),
            None if creating && fields.get("line_items").is_none() => {
                fields
                    .problems
                    .push(FieldError::required(fields.field("line_items")));
                None
            }
            None => None,
        };
        Some(SelectionInput {
            line_item_id,
            box_size_id,
            time_slot_id,
            order_datetime,
            line_items,
            path: fields.path.clone(),
        })
    })
}

/// The body that makes or changes a selection. Its fields may also come bare, without the
/// `selection` key.
#[derive(ToSchema)]
pub struct SelectionRequest {
    /// The selection's fields.
    pub selection: SelectionFields,
}

/// A selection's fields as a client writes them: all needed to make one; a change replaces
/// only the fields it gives, and the whole is checked again against the box's rules.
#[derive(ToSchema)]
pub struct SelectionFields {
    /// The id of the customer's box subscription line item.
    pub svc_platform_subscription_line_item_id: Option<i64>,
    /// The id of the box size chosen (one of the box's).
    pub box_size_id: Option<i64>,
    /// The id of the time slot chosen (one of the box's).
    pub time_slot_id: Option<i64>,
    /// The time of the order the selection is for, within the slot.
    pub order_datetime: Option<Timestamp>,
    /// The products chosen (at most 250), each once; their quantities must add up to within
    /// the size's bounds.
    #[schema(max_items = 250)]
    pub line_items: Option<Vec<SelectionItem>>,
}

fn chosen<'a>(fields: &mut Fields<'a, '_>, items: &'a [Value]) -> Vec<SelectionItem> {
    let mut chosen: Vec<SelectionItem> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let Some(mut item) = fields.element("line_items", index, item) else {
            continue;
        };
        let product = integer(&mut item, "box_product_id", true);
        let quantity = integer(&mut item, "choice_quantity", true);
        if let Some(quantity) = quantity
            && quantity < 1
        {
            let field = item.field("choice_quantity");
            let message = format!("{field} must be at least 1");
            item.problems
                .push(FieldError::new(field, "out_of_range", message));
            continue;
        }
        let (Some(box_product_id), Some(choice_quantity)) = (product, quantity) else {
            continue;
        };
        if chosen.iter().any(|c| c.box_product_id == box_product_id) {
            let field = item.field("box_product_id");
            let message = format!("{field} names box product {box_product_id} twice");
            item.problems
                .push(FieldError::new(field, "duplicate", message));
            continue;
        }
        chosen.push(SelectionItem {
            box_product_id,
            choice_quantity,
        });
    }
    chosen
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
        assert_eq!(bare.svc_subscription_group_id, Some(7));
        let sizes = parse_box_sizes(&json!([
            {"id": "3", "max_quantity": 8},
            {"box_size": {"box_size_name": "Large", "min_quantity": 4, "max_quantity": "10"}}
        ]))
        .unwrap();
        assert_eq!(sizes[0].id, Some(3));
        assert_eq!(sizes[1].max_quantity, Some(10));
        assert_eq!(parse_box_sizes(&json!({"box_sizes": []})).unwrap(), []);
        assert_eq!(
            parse_time_slot_option(&json!({"box_product_id": "12"})).unwrap(),
            12
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
