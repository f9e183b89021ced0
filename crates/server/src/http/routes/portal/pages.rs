//! The portal's pages: the visitor's subscriptions, and one subscription with its forms. What
//! they show comes from the domain's page use cases; here it is only put in words, money and
//! dates for people.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mercer_domain::access::shop::Shop;
use mercer_domain::kernel::ids::SubscriptionId;
use mercer_domain::kernel::money::Cents;
use mercer_domain::portal::pages::{
    Allowed, OrderAmounts, Overview, SubscriptionView, UpcomingBox, overview as overview_of,
    subscription_page,
};
use mercer_domain::portal::sessions::Visitor;
use mercer_domain::subscriptions::recurrence::ShopZone;
use mercer_domain::subscriptions::repository::SubscriptionOrder;
use mercer_domain::subscriptions::resources::{
    Subscription, SubscriptionAddress, SubscriptionStatus,
};
use serde::Deserialize;

use super::shared::{Chrome, PortalError, Session, day, home, moment, money, render};
use crate::http::extract::TypedPath;
use crate::http::state::AppState;

/// `/portal/shops/{shop}/subscriptions/{id}`; an id that is not a number is the page's 404.
#[derive(Deserialize)]
pub struct SubscriptionPath {
    pub id: SubscriptionId,
}

/// How a status reads.
fn status_label(status: SubscriptionStatus) -> &'static str {
    match status {
        SubscriptionStatus::Active => "Active",
        SubscriptionStatus::Paused => "Paused",
        SubscriptionStatus::Inactive => "Cancelled",
        SubscriptionStatus::Scheduled => "Starts soon",
        SubscriptionStatus::Processing => "Order being placed",
    }
}

/// What the subscription holds, in a few words: its line items' titles.
fn title_of(subscription: &Subscription) -> String {
    let titles: Vec<String> = subscription
        .line_items
        .iter()
        .map(|item| {
            item.title
                .clone()
                .or_else(|| item.product_name.clone())
                .unwrap_or_else(|| item.platform_variant_id.clone())
        })
        .collect();
    if titles.is_empty() {
        format!("Subscription {}", subscription.id)
    } else {
        titles.join(", ")
    }
}

/// A subscription in the list.
pub struct Card {
    pub id: i64,
    pub link: String,
    pub title: String,
    pub status: &'static str,
    pub status_label: &'static str,
    pub next_order: String,
    pub frequency: String,
    pub total: String,
}

#[derive(Template)]
#[template(path = "portal/overview.html")]
struct OverviewPage {
    chrome: Chrome,
    cards: Vec<Card>,
}

fn next_order(view_shop: &Shop, subscription: &Subscription) -> String {
    match (
        subscription.subscription_status,
        subscription.next_order_datetime,
    ) {
        (SubscriptionStatus::Inactive, _) => "None: cancelled".to_string(),
        (SubscriptionStatus::Paused, _) => "None while paused".to_string(),
        (_, Some(at)) => day(view_shop, at),
        (_, None) => "None planned".to_string(),
    }
}

fn overview_page(view: Overview, visitor: &Visitor) -> OverviewPage {
    let shop = &view.shop.shop;
    let base = home(shop.identifier.as_str());
    let cards = view
        .subscriptions
        .iter()
        .map(|card| {
            let s = &card.subscription;
            Card {
                id: s.id.0,
                link: format!("{base}/subscriptions/{}", s.id),
                title: title_of(s),
                status: s.subscription_status.as_str(),
                status_label: status_label(s.subscription_status),
                next_order: next_order(shop, s),
                frequency: s.order_rrule_text.clone(),
                total: card
                    .total
                    .map_or_else(String::new, |total| money(shop, total, &s.charged_currency)),
            }
        })
        .collect();
    OverviewPage {
        chrome: Chrome::of(&view.shop, view.customer.first_name.clone(), visitor),
        cards,
    }
}

/// `GET /portal/shops/{shop}`: the visitor's subscriptions.
pub async fn overview(
    state: web::Data<AppState>,
    request: HttpRequest,
    session: Session,
) -> Result<HttpResponse, PortalError> {
    let visitor = session.visitor.clone();
    let view = state.read(move |tx| overview_of(tx, &visitor)).await?;
    let page = overview_page(view, &session.visitor);
    let answer = render(StatusCode::OK, &page.chrome, &session.visitor.shop, &page)?;
    Ok(session.finish(&request, answer))
}

/// A line item as its page shows it.
pub struct LineView {
    /// Its quantity form's id (`quantity-{id}`), also the refusal's target.
    pub form: String,
    pub id: i64,
    pub title: String,
    pub quantity: i64,
    pub quantity_text: String,
    pub unit: String,
    /// The price before discounts, when they take something off.
    pub was: Option<String>,
    pub total: String,
}

/// An order attempt as its page shows it.
pub struct OrderView {
    pub date: String,
    pub status: &'static str,
    pub reference: Option<String>,
}

/// A box size in the box form.
pub struct SizeView {
    pub id: i64,
    pub label: String,
    pub selected: bool,
}

/// A product offered in the box form.
pub struct OptionView {
    pub id: i64,
    pub name: String,
    pub price: Option<String>,
    pub chosen: i64,
}

/// What names a box form in a refusal: its line item and order date, as the form posts them.
pub fn box_key(line_item_id: &str, order_datetime: &str) -> String {
    format!("box:{line_item_id}:{order_datetime}")
}

/// An upcoming box order as its page shows it.
pub struct BoxView {
    /// The form's id (`box-{line item}-{n}`, the n-th upcoming order from 0).
    pub form: String,
    /// What names the form in a refusal ([`box_key`]).
    pub key: String,
    pub line_item_id: i64,
    pub box_name: String,
    pub date: String,
    pub order_datetime: String,
    pub slot_id: Option<i64>,
    pub slot_name: Option<String>,
    pub deadline: Option<String>,
    pub open: bool,
    pub chosen_by_customer: bool,
    pub contents: Vec<(String, i64)>,
    pub sizes: Vec<SizeView>,
    pub options: Vec<OptionView>,
    /// The fewest and most products of the sizes, for the quantity inputs.
    pub max: i64,
}

/// The address form's values: its fields, with their labels and autocomplete names.
pub struct AddressField {
    pub name: &'static str,
    pub label: &'static str,
    pub autocomplete: &'static str,
    pub value: String,
    pub required: bool,
}

/// What a refused action left to say: which form, its problems on its fields, the others, and
/// what was posted (so the form shows it again).
#[derive(Default)]
pub struct Refusal {
    pub form: String,
    pub fields: Vec<(String, String)>,
    pub general: Vec<String>,
    pub posted: Vec<(String, String)>,
}

#[derive(Template)]
#[template(path = "portal/subscription.html")]
pub struct SubscriptionPage {
    pub chrome: Chrome,
    pub base: String,
    pub title: String,
    pub status: &'static str,
    pub status_label: &'static str,
    pub next_order: String,
    pub frequency: String,
    pub resume_on: Option<String>,
    pub lines: Vec<LineView>,
    pub subtotal: Option<String>,
    pub discount: Option<String>,
    pub shipping: Option<String>,
    pub total: Option<String>,
    pub address: Vec<String>,
    pub address_fields: Vec<AddressField>,
    pub orders: Vec<OrderView>,
    pub intervals: Vec<(i64, String, bool)>,
    pub boxes: Vec<BoxView>,
    pub reasons: Vec<(String, String)>,
    pub allowed: Allowed,
    pub tomorrow: String,
    pub refusal: Option<Refusal>,
}

impl SubscriptionPage {
    /// The refusal's problem on `field` of the form `form`, if any.
    pub fn error(&self, form: &str, field: &str) -> Option<&str> {
        self.refusal
            .as_ref()
            .filter(|refusal| refusal.form == form)?
            .fields
            .iter()
            .find(|(name, _)| name == field)
            .map(|(_, message)| message.as_str())
    }

    /// The refusal's problems of the form `form` that no field of it shows.
    pub fn form_errors(&self, form: &str) -> Vec<&str> {
        self.refusal
            .as_ref()
            .filter(|refusal| refusal.form == form)
            .map(|refusal| refusal.general.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// What the refused form `form` posted as `field`, else `current`.
    pub fn value<'a>(&'a self, form: &str, field: &str, current: &'a str) -> &'a str {
        self.refusal
            .as_ref()
            .filter(|refusal| refusal.form == form)
            .and_then(|refusal| refusal.posted.iter().find(|(name, _)| name == field))
            .map_or(current, |(_, value)| value.as_str())
    }

    /// The quantity of the box product `product` the refused box form `form` posted, else
    /// `current`.
    pub fn box_value(&self, form: &str, product: &i64, current: &i64) -> String {
        let posted = self.refusal.as_ref().filter(|refusal| refusal.form == form);
        let Some(refusal) = posted else {
            return current.to_string();
        };
        let products = refusal
            .posted
            .iter()
            .filter(|(name, _)| name == "box_product_id[]" || name == "box_product_id");
        let quantities = refusal
            .posted
            .iter()
            .filter(|(name, _)| name == "choice_quantity[]" || name == "choice_quantity");
        products
            .zip(quantities)
            .find(|((_, id), _)| id.trim() == product.to_string())
            .map_or_else(
                || current.to_string(),
                |(_, (_, quantity))| quantity.clone(),
            )
    }

    /// Whether the refused form `form` posted the size `size`, else whether it is `current`.
    pub fn size_selected(&self, form: &str, size: &i64, current: &bool) -> bool {
        match self.refusal.as_ref().filter(|refusal| refusal.form == form) {
            Some(refusal) => refusal
                .posted
                .iter()
                .any(|(name, value)| name == "box_size_id" && value.trim() == size.to_string()),
            None => *current,
        }
    }
}

fn address_lines(address: &SubscriptionAddress) -> Vec<String> {
    let name = [address.first_name.as_deref(), address.last_name.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    let place = [
        address.zip.as_deref(),
        address.city.as_deref(),
        address
            .province_code
            .as_deref()
            .or(address.province.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" ");
    [
        Some(name),
        address.company.clone(),
        address.street1.clone(),
        address.street2.clone(),
        Some(place),
        address
            .country
            .clone()
            .or_else(|| address.country_code.clone()),
    ]
    .into_iter()
    .flatten()
    .filter(|line| !line.trim().is_empty())
    .collect()
}

/// The address form's fields: (name, label, autocomplete token, required).
const ADDRESS_FIELDS: [(&str, &str, &str, bool); 11] = [
    ("first_name", "First name", "given-name", false),
    ("last_name", "Last name", "family-name", false),
    ("company", "Company (optional)", "organization", false),
    ("street1", "Street address", "address-line1", true),
    (
        "street2",
        "Apartment, suite (optional)",
        "address-line2",
        false,
    ),
    ("city", "City", "address-level2", false),
    ("province", "Province or state", "address-level1", false),
    ("province_code", "Province or state code", "off", false),
    ("zip", "Postal code", "postal-code", false),
    (
        "country_code",
        "Country code (two letters)",
        "country",
        false,
    ),
    ("phone", "Phone (optional)", "tel", false),
];

fn address_fields(address: &SubscriptionAddress) -> Vec<AddressField> {
    ADDRESS_FIELDS
        .iter()
        .map(|&(name, label, autocomplete, required)| {
            let value = match name {
                "first_name" => &address.first_name,
                "last_name" => &address.last_name,
                "company" => &address.company,
                "street1" => &address.street1,
                "street2" => &address.street2,
                "city" => &address.city,
                "province" => &address.province,
                "province_code" => &address.province_code,
                "zip" => &address.zip,
                "country_code" => &address.country_code,
                _ => &address.phone,
            };
            AddressField {
                name,
                label,
                autocomplete,
                value: value.clone().unwrap_or_default(),
                required,
            }
        })
        .collect()
}

fn box_view(
    shop: &Shop,
    currency: &mercer_domain::kernel::money::CurrencyCode,
    index: usize,
    upcoming: &UpcomingBox,
) -> BoxView {
    let selected_size = upcoming
        .selection
        .as_ref()
        .map(|selection| selection.box_size_id)
        .or_else(|| upcoming.sizes.first().map(|size| size.id));
    BoxView {
        form: format!("box-{}-{index}", upcoming.line_item_id),
        key: box_key(
            &upcoming.line_item_id.to_string(),
            &upcoming.order_datetime.to_rfc3339(),
        ),
        line_item_id: upcoming.line_item_id.0,
        box_name: upcoming.the_box.box_name.clone(),
        date: day(shop, upcoming.order_datetime),
        order_datetime: upcoming.order_datetime.to_rfc3339(),
        slot_id: upcoming.slot.as_ref().map(|slot| slot.id.0),
        slot_name: upcoming
            .slot
            .as_ref()
            .map(|slot| slot.time_slot_name.clone()),
        deadline: upcoming
            .slot
            .as_ref()
            .map(|slot| moment(shop, slot.selection_deadline_date)),
        open: upcoming.open,
        chosen_by_customer: upcoming.selection.is_some(),
        contents: upcoming
            .contents
            .iter()
            .map(|content| (content.title.clone(), content.quantity))
            .collect(),
        sizes: upcoming
            .sizes
            .iter()
            .map(|size| SizeView {
                id: size.id.0,
                label: format!(
                    "{}: {} to {} products",
                    size.box_size_name, size.min_quantity, size.max_quantity
                ),
                selected: Some(size.id) == selected_size,
            })
            .collect(),
        options: upcoming
            .options
            .iter()
            .map(|option| OptionView {
                id: option.box_product_id.0,
                name: option.name.clone(),
                price: option.price.map(|price| money(shop, price, currency)),
                chosen: option.chosen,
            })
            .collect(),
        max: upcoming
            .sizes
            .iter()
            .map(|size| size.max_quantity)
            .max()
            .unwrap_or(0),
    }
}

/// The refusal shown on the form it came from, when the page shows that form; else above the
/// page (`page`), every problem in words.
fn placed(mut refusal: Refusal, view: &SubscriptionView, boxes: &[BoxView]) -> Refusal {
    let allowed = view.allowed;
    if let Some(found) = boxes.iter().find(|b| b.key == refusal.form) {
        refusal.form = found.form.clone();
    }
    let shown = match refusal.form.as_str() {
        "skip" => allowed.skip,
        "pause" => allowed.pause,
        "resume" => allowed.resume,
        "cancel" => allowed.cancel,
        "frequency" => allowed.change && !view.intervals.is_empty(),
        "address" => allowed.change,
        form => {
            allowed.change
                && (view
                    .subscription
                    .line_items
                    .iter()
                    .any(|item| form == format!("quantity-{}", item.id))
                    || boxes
                        .iter()
                        .any(|b| b.form == form && b.open && b.slot_id.is_some()))
        }
    };
    if !shown {
        refusal.form = "page".to_string();
        let fields = std::mem::take(&mut refusal.fields);
        refusal
            .general
            .extend(fields.into_iter().map(|(_, message)| message));
    }
    refusal
}

/// The line items at what the next order charges for them.
fn line_views(amount: &dyn Fn(Cents) -> String, amounts: &OrderAmounts) -> Vec<LineView> {
    amounts
        .lines
        .iter()
        .map(|line| LineView {
            form: format!("quantity-{}", line.item.id),
            id: line.item.id.0,
            title: line
                .item
                .title
                .clone()
                .or_else(|| line.item.product_name.clone())
                .unwrap_or_else(|| line.item.platform_variant_id.clone()),
            quantity: line.item.quantity,
            quantity_text: line.item.quantity.to_string(),
            unit: amount(line.unit),
            was: (line.list_unit > line.unit).then(|| amount(line.list_unit)),
            total: amount(line.total),
        })
        .collect()
}

fn order_view(shop: &Shop, order: &SubscriptionOrder) -> OrderView {
    OrderView {
        date: day(shop, order.scheduled_at),
        status: match order.status.as_str() {
            "placed" => "Placed",
            "failed" => "Not placed",
            _ => "Being placed",
        },
        reference: order.platform_order_id.clone(),
    }
}

/// The subscription page of `view`, with a refused action's problems when there are.
pub fn page_of(
    view: SubscriptionView,
    visitor: &Visitor,
    refusal: Option<Refusal>,
    today: mercer_domain::Timestamp,
) -> SubscriptionPage {
    let shop = &view.shop.shop;
    let s = &view.subscription;
    let currency = &s.charged_currency;
    let amount = |cents| money(shop, cents, currency);
    let amounts = view.amounts.as_ref();
    let lines = amounts.map_or_else(Vec::new, |amounts| line_views(&amount, amounts));
    let mut boxes = Vec::new();
    for (index, upcoming) in view.boxes.iter().enumerate() {
        boxes.push(box_view(shop, currency, index, upcoming));
    }
    let refusal = refusal.map(|refusal| placed(refusal, &view, &boxes));
    SubscriptionPage {
        chrome: Chrome::of(&view.shop, view.customer.first_name.clone(), visitor),
        base: format!("{}/subscriptions/{}", home(shop.identifier.as_str()), s.id),
        title: title_of(s),
        status: s.subscription_status.as_str(),
        status_label: status_label(s.subscription_status),
        next_order: next_order(shop, s),
        frequency: s.order_rrule_text.clone(),
        resume_on: s.resume_on.map(|on| on.format("%a %-d %b %Y").to_string()),
        lines,
        subtotal: amounts.map(|a| amount(a.subtotal)),
        discount: amounts
            .filter(|a| a.discount.0 > 0)
            .map(|a| amount(a.discount)),
        shipping: amounts
            .filter(|a| a.shipping.0 > 0)
            .map(|a| amount(a.shipping)),
        total: amounts.map(|a| amount(a.total)),
        address: address_lines(&s.shipping_address),
        address_fields: address_fields(&s.shipping_address),
        orders: view
            .orders
            .iter()
            .map(|order| order_view(shop, order))
            .collect(),
        intervals: view
            .intervals
            .iter()
            .map(|choice| {
                (
                    choice.rule.id.0,
                    choice.rule.interval_name.clone(),
                    choice.current,
                )
            })
            .collect(),
        boxes,
        reasons: view
            .reasons
            .iter()
            .map(|reason| (reason.code.clone(), reason.label.clone()))
            .collect(),
        allowed: view.allowed,
        tomorrow: ShopZone::of_shop(&shop.timezone)
            .local_date(today)
            .succ_opt()
            .map(|day| day.to_string())
            .unwrap_or_default(),
        refusal,
    }
}

/// Reads the subscription page of `id` for the visitor.
pub async fn read_page(
    state: &AppState,
    visitor: &Visitor,
    id: SubscriptionId,
) -> Result<SubscriptionView, PortalError> {
    let (visitor, now) = (visitor.clone(), state.now());
    Ok(state
        .read(move |tx| subscription_page(tx, &visitor, id, now))
        .await?)
}

/// `GET /portal/shops/{shop}/subscriptions/{id}`: one of the visitor's subscriptions, 404 for
/// anyone else's.
pub async fn subscription(
    state: web::Data<AppState>,
    request: HttpRequest,
    session: Session,
    path: TypedPath<SubscriptionPath>,
) -> Result<HttpResponse, PortalError> {
    let framing = Some(&session.visitor.shop);
    let id = path
        .get()
        .map_err(|error| PortalError::from(error).framed_by(framing))?
        .id;
    let view = read_page(&state, &session.visitor, id)
        .await
        .map_err(|error| error.framed_by(framing))?;
    let page = page_of(view, &session.visitor, None, state.now());
    let answer = render(StatusCode::OK, &page.chrome, &session.visitor.shop, &page)?;
    Ok(session.finish(&request, answer))
}
