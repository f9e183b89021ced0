//! What a visitor may do to their own subscription from its page. Each action checks that the
//! subscription is the visitor's (`NotFound` otherwise, as for none), then runs the very use
//! case the API runs (`take_subscription_action` with the actor `customer`, or the box
//! builder's `create_selection`), so the same rules, status log and webhooks follow.
//!
//! The forms arrive as text, as a browser posts them: an empty optional field counts as absent,
//! and every problem is reported on the form's own field name (`quantity`, `street1`,
//! `box_size_id`…), so the page can show it beside that field.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::box_builder::input::{MAX_SELECTION_ITEMS, SelectionInput};
use crate::box_builder::resources::SelectionItem;
use crate::box_builder::selections::create_selection;
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::{
    BillingRuleId, BoxProductId, BoxSizeId, LineItemId, SubscriptionId, TimeSlotId,
};
use crate::kernel::limits::check_json_body;
use crate::kernel::time::Timestamp;
use crate::portal::pages::{intervals, owned};
use crate::portal::repository::PortalRepositories;
use crate::portal::sessions::Visitor;
use crate::subscriptions::cancellation::parse_cancel;
use crate::subscriptions::input::{parse_quantity, parse_shipping_address_change};
use crate::subscriptions::operations::{ActionRequest, take_subscription_action};
use crate::subscriptions::pausing::parse_pause;
use crate::subscriptions::recurrence::{OrderSchedule, ShopZone};
use crate::subscriptions::resources::{Actor, ActorType, Subscription};

/// The fields of the address form, as posted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct AddressForm {
    /// The recipient's first name.
    pub first_name: String,
    /// The recipient's last name.
    pub last_name: String,
    /// The company name.
    pub company: String,
    /// A phone number at the address.
    pub phone: String,
    /// The first line of the street address (required).
    pub street1: String,
    /// The second line of the street address.
    pub street2: String,
    /// The city.
    pub city: String,
    /// The province or state.
    pub province: String,
    /// The province's code.
    pub province_code: String,
    /// The country's two-letter code.
    pub country_code: String,
    /// The postal code.
    pub zip: String,
}

/// The box form, as posted: one upcoming order's size, slot and the quantity of each product
/// offered (`box_product_id[]` and `choice_quantity[]` side by side; a quantity of 0 or empty
/// leaves the product out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoxForm {
    /// The box's line item; the subscription's first box line item when empty.
    pub line_item_id: String,
    /// The order's date (RFC 3339).
    pub order_datetime: String,
    /// The size chosen.
    pub box_size_id: String,
    /// The time slot of the order.
    pub time_slot_id: String,
    /// Each product offered and how many of it: (`box_product_id`, `choice_quantity`).
    pub choices: Vec<(String, String)>,
}

/// An action a visitor takes on their subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortalAction {
    /// Skip the next order.
    Skip,
    /// Pause, until `resume_on` (a date in the shop's zone) when one is given.
    Pause {
        /// `YYYY-MM-DD`, or empty.
        resume_on: String,
    },
    /// Resume a paused subscription.
    Resume,
    /// Cancel, saying why.
    Cancel {
        /// The reason, or empty.
        reason: String,
        /// A comment, or empty.
        comment: String,
    },
    /// Change a line item's quantity.
    Quantity {
        /// The line item's id.
        line_item_id: String,
        /// The new quantity.
        quantity: String,
    },
    /// Follow another billing rule of the subscription's group.
    Frequency {
        /// The billing rule's id.
        interval_id: String,
    },
    /// Ship to a new address.
    Address(AddressForm),
    /// Choose the contents of one upcoming box.
    Box(BoxForm),
}

impl PortalAction {
    /// The action's name: the last segment of its form's path.
    pub fn name(&self) -> &'static str {
        match self {
            PortalAction::Skip => "skip",
            PortalAction::Pause { .. } => "pause",
            PortalAction::Resume => "resume",
            PortalAction::Cancel { .. } => "cancel",
            PortalAction::Quantity { .. } => "quantity",
            PortalAction::Frequency { .. } => "frequency",
            PortalAction::Address(_) => "address",
            PortalAction::Box(_) => "box",
        }
    }
}

fn problem(field: &str, code: &'static str, message: impl Into<String>) -> DomainError {
    DomainError::Invalid(vec![FieldError::new(field, code, message)])
}

/// An id of the form's field `field`: a whole number, else 422 on the field.
fn id_field(field: &str, text: &str) -> Result<i64, DomainError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DomainError::Invalid(vec![FieldError::required(field)]));
    }
    text.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| {
            problem(
                field,
                "invalid_value",
                format!("{field} must be a whole number"),
            )
        })
}

/// A body made of a form's fields, held to the limits the API holds every JSON body to (no
/// text over 64 KiB, no U+0000), so the portal takes no text the API's route would refuse.
fn within_limits(body: Value) -> Result<Value, DomainError> {
    check_json_body(body.to_string().as_bytes())
        .map_err(|problem| DomainError::Invalid(vec![problem]))?;
    Ok(body)
}

/// Renames the fields of a refusal's problems to the form's, by `rename`.
fn on_form_fields(error: DomainError, rename: impl Fn(&str) -> String) -> DomainError {
    match error {
        DomainError::Invalid(problems) => DomainError::Invalid(
            problems
                .into_iter()
                .map(|mut problem| {
                    problem.field = rename(&problem.field);
                    problem
                })
                .collect(),
        ),
        other => other,
    }
}

/// The visitor as the status log names them: kind `customer`, their customer id, and their
/// platform id (no personal data).
fn actor(customer_id: i64, platform_id: &str) -> Actor {
    Actor {
        kind: ActorType::Customer,
        id: customer_id,
        name: platform_id.to_string(),
    }
}

/// Takes `action` on the visitor's subscription `id`: `NotFound` unless it is theirs; a
/// refusal changes nothing (the caller's unit of work rolls back) and names the form's fields.
/// Answers the subscription as the action left it.
pub fn act(
    tx: &mut dyn PortalRepositories,
    visitor: &Visitor,
    id: SubscriptionId,
    action: PortalAction,
    now: Timestamp,
) -> Result<Subscription, DomainError> {
    let (customer, subscription) = owned(tx, visitor, id)?;
    let shop = &visitor.shop;
    let actor = actor(customer.id.map_or(0, |id| id.0), &customer.platform_id);
    let request = match action {
        PortalAction::Box(form) => {
            choose_box(tx, visitor, &subscription, form, now)?;
            return crate::subscriptions::operations::get_subscription(tx, shop, id, false);
        }
        PortalAction::Skip => {
            let order_datetime = subscription.next_order_datetime.ok_or_else(|| {
                problem(
                    "skip",
                    "no_upcoming_order",
                    "there is no upcoming order to skip",
                )
            })?;
            ActionRequest::Skip { order_datetime }
        }
        PortalAction::Pause { resume_on } => pause_request(&resume_on)?,
        PortalAction::Resume => ActionRequest::Resume,
        PortalAction::Cancel { reason, comment } => cancel_request(&reason, &comment)?,
        PortalAction::Quantity {
            line_item_id,
            quantity,
        } => quantity_request(&subscription, &line_item_id, &quantity)?,
        PortalAction::Frequency { interval_id } => {
            frequency_request(tx, visitor, &subscription, &interval_id, now)?
        }
        PortalAction::Address(form) => address_request(&form)?,
    };
    take_subscription_action(tx, shop, id, request, actor, now).map_err(|error| {
        on_form_fields(error, |field| match field {
            "order_rrule" => "interval_id".to_string(),
            "order_datetime" => "skip".to_string(),
            other => other
                .strip_prefix("shipping_address.")
                .unwrap_or(other)
                .to_string(),
        })
    })
}

/// Pause: `resume_on`, when given, is read as the API reads it (`YYYY-MM-DD`); the use case
/// checks it is after today in the shop's zone.
fn pause_request(resume_on: &str) -> Result<ActionRequest, DomainError> {
    let resume_on = resume_on.trim();
    let body = if resume_on.is_empty() {
        json!({})
    } else {
        json!({ "resume_on": resume_on })
    };
    Ok(ActionRequest::Pause(parse_pause(&within_limits(body)?)?))
}

/// Cancel: a reason (one of the shop's codes, checked by the use case) and a comment, read as
/// the API reads them; empty ones count as absent.
fn cancel_request(reason: &str, comment: &str) -> Result<ActionRequest, DomainError> {
    let mut body = Map::new();
    for (field, text) in [("reason", reason.trim()), ("comment", comment.trim())] {
        if !text.is_empty() {
            body.insert(field.to_string(), Value::String(text.to_string()));
        }
    }
    let body = within_limits(Value::Object(body))?;
    Ok(ActionRequest::Cancel(parse_cancel(&body)?))
}

/// Change quantity: a line item of this subscription, and a quantity checked as the API checks
/// it (1 to 10,000).
fn quantity_request(
    subscription: &Subscription,
    line_item_id: &str,
    quantity: &str,
) -> Result<ActionRequest, DomainError> {
    let line_item_id = LineItemId(id_field("line_item_id", line_item_id)?);
    if !subscription
        .line_items
        .iter()
        .any(|item| item.id == line_item_id)
    {
        return Err(problem(
            "line_item_id",
            "invalid_value",
            "line_item_id must be a line item of this subscription",
        ));
    }
    let given = quantity.trim();
    let number = given.parse::<i64>().map_err(|_| {
        problem(
            "quantity",
            "invalid_value",
            "quantity must be a whole number",
        )
    })?;
    let quantity = parse_quantity(&json!({ "quantity": number }))?;
    Ok(ActionRequest::ChangeQuantity {
        line_item_id,
        quantity,
    })
}

/// Change frequency to a billing rule of the subscription's groups: the subscription's new rule
/// is that rule from its next order date (now when it has none), as Create Subscription makes
/// a rule of a line item's `interval_id`.
fn frequency_request(
    tx: &mut dyn PortalRepositories,
    visitor: &Visitor,
    subscription: &Subscription,
    interval_id: &str,
    now: Timestamp,
) -> Result<ActionRequest, DomainError> {
    let wanted = BillingRuleId(id_field("interval_id", interval_id)?);
    let rule = intervals(tx, &visitor.shop, subscription)?
        .into_iter()
        .find(|choice| choice.rule.id == wanted)
        .ok_or_else(|| {
            problem(
                "interval_id",
                "unknown_billing_rule",
                "interval_id must be a billing rule of the subscription's group",
            )
        })?;
    let start = subscription.next_order_datetime.unwrap_or(now);
    let ical = start.to_rfc3339_seconds().replace(['-', ':'], "");
    let text = format!("DTSTART:{ical}\nRRULE:{}", rule.rule.billing_rule);
    let schedule = OrderSchedule::parse(
        &text,
        ShopZone::of_shop(&visitor.shop.timezone),
        "interval_id",
    )
    .map_err(|problem| DomainError::Invalid(vec![problem]))?;
    Ok(ActionRequest::ChangeFrequency(Box::new(schedule)))
}

/// Change the shipping address to a new one, checked as the API checks it.
fn address_request(form: &AddressForm) -> Result<ActionRequest, DomainError> {
    let mut fields = Map::new();
    for (name, value) in [
        ("first_name", &form.first_name),
        ("last_name", &form.last_name),
        ("company", &form.company),
        ("phone", &form.phone),
        ("street1", &form.street1),
        ("street2", &form.street2),
        ("city", &form.city),
        ("province", &form.province),
        ("province_code", &form.province_code),
        ("country_code", &form.country_code),
        ("zip", &form.zip),
    ] {
        let value = value.trim();
        if !value.is_empty() {
            fields.insert(name.to_string(), Value::String(value.to_string()));
        }
    }
    let change = within_limits(json!({ "shipping_address": fields }))
        .and_then(|body| parse_shipping_address_change(&body))
        .map_err(|error| {
            on_form_fields(error, |field| {
                field
                    .strip_prefix("shipping_address.")
                    .unwrap_or(match field {
                        "shipping_address" => "street1",
                        other => other,
                    })
                    .to_string()
            })
        })?;
    Ok(ActionRequest::ChangeShippingAddress(change))
}

/// The box line item a box form names: the one given, of this subscription, else the
/// subscription's first box line item.
fn box_line_item(
    tx: &mut dyn PortalRepositories,
    visitor: &Visitor,
    subscription: &Subscription,
    given: &str,
) -> Result<LineItemId, DomainError> {
    if given.trim().is_empty() {
        for item in &subscription.line_items {
            if tx.box_line_item(visitor.shop.id, item.id)?.is_some() {
                return Ok(item.id);
            }
        }
        return Err(problem("box", "not_a_box", "this subscription has no box"));
    }
    let id = LineItemId(id_field("line_item_id", given)?);
    if !subscription.line_items.iter().any(|item| item.id == id) {
        return Err(problem(
            "line_item_id",
            "invalid_value",
            "line_item_id must be a line item of this subscription",
        ));
    }
    Ok(id)
}

/// The products a box form chose: each quantity a whole number, 0 (or empty) leaving the
/// product out, a product named twice counted once with both quantities; at most as many
/// products as the API's Create Selection takes.
fn box_choices(choices: &[(String, String)]) -> Result<Vec<SelectionItem>, DomainError> {
    let mut items: Vec<SelectionItem> = Vec::new();
    for (product, quantity) in choices {
        let quantity = quantity.trim();
        let quantity = if quantity.is_empty() {
            0
        } else {
            quantity
                .parse::<i64>()
                .ok()
                .filter(|q| *q >= 0)
                .ok_or_else(|| {
                    problem(
                        "choice_quantity",
                        "invalid_value",
                        "each quantity must be a whole number, 0 or more",
                    )
                })?
        };
        if quantity == 0 {
            continue;
        }
        let box_product_id = BoxProductId(id_field("box_product_id", product)?);
        if let Some(item) = items
            .iter_mut()
            .find(|item| item.box_product_id == box_product_id)
        {
            item.choice_quantity = item.choice_quantity.saturating_add(quantity);
            continue;
        }
        if items.len() >= MAX_SELECTION_ITEMS {
            return Err(problem(
                "choice_quantity",
                "too_many",
                format!("at most {MAX_SELECTION_ITEMS} products may be chosen"),
            ));
        }
        items.push(SelectionItem {
            box_product_id,
            choice_quantity: quantity,
        });
    }
    Ok(items)
}

/// Chooses the contents of one upcoming box: the box builder's Create Selection for the
/// subscription's box line item (a selection made before for that order is replaced).
fn choose_box(
    tx: &mut dyn PortalRepositories,
    visitor: &Visitor,
    subscription: &Subscription,
    form: BoxForm,
    now: Timestamp,
) -> Result<(), DomainError> {
    let line_item_id = box_line_item(tx, visitor, subscription, &form.line_item_id)?;
    let order_datetime = Timestamp::parse_rfc3339(form.order_datetime.trim()).ok_or_else(|| {
        problem(
            "order_datetime",
            "invalid_value",
            "order_datetime must be a date and time (RFC 3339)",
        )
    })?;
    let input = SelectionInput {
        line_item_id: Some(line_item_id),
        box_size_id: Some(BoxSizeId(id_field("box_size_id", &form.box_size_id)?)),
        time_slot_id: Some(TimeSlotId(id_field("time_slot_id", &form.time_slot_id)?)),
        order_datetime: Some(order_datetime),
        line_items: Some(box_choices(&form.choices)?),
        path: String::new(),
    };
    create_selection(tx, &visitor.shop, &visitor.platform_customer_id, input, now)
        .map(|_| ())
        .map_err(|error| {
            on_form_fields(error, |field| {
                if field == "line_items" {
                    "choice_quantity".to_string()
                } else if field.starts_with("line_items[") {
                    "box_product_id".to_string()
                } else if field == "svc_platform_subscription_line_item_id" {
                    "line_item_id".to_string()
                } else {
                    field.to_string()
                }
            })
        })
}
