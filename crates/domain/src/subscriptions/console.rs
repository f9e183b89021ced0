//! What the operator console shows of a shop's subscriptions: the due report (as `mercer
//! subscriptions due` prints it), a subscription's history, its status log and order attempts,
//! with the shop's dunning policy they follow; the subscriptions found by status, customer and
//! next order date; the subscription customers; the order attempts the scheduler made; and the
//! console's actions and settings, each through the API's own use case.

use crate::access::console::{ConsoleStaff, record_action};
use crate::access::shop::Shop;
use crate::directory::DirectoryCustomer;
use crate::kernel::error::DomainError;
use crate::kernel::filter::{FilterOp, FilterValue};
use crate::kernel::ids::{CustomerId, SubscriptionId};
use crate::kernel::time::Timestamp;
use crate::subscriptions::cancellation::{
    CancellationReason, cancellation_reasons, parse_cancel, parse_cancellation_reasons,
    set_cancellation_reasons,
};
use crate::subscriptions::customers::{customer_resources, get_customer, list_customers};
use crate::subscriptions::dunning::{ShopDunning, parse_dunning, set_dunning_policy, shop_dunning};
use crate::subscriptions::operations::{
    ActionRequest, customer_subscriptions, take_subscription_action,
};
use crate::subscriptions::pausing::PauseRequest;
use crate::subscriptions::query::{Cursor, Filter, FilterField, ListQuery};
use crate::subscriptions::repository::{
    CustomerListQuery, CustomerStatus, OrderFilter, StoredSubscription, SubscriptionDatabase,
    SubscriptionOrder, SubscriptionRepositories,
};
use crate::subscriptions::resources::{
    Actor, ActorType, StatusLog, Subscription, SubscriptionCustomer, SubscriptionStatus,
};

/// A subscription with what happened to it, newest first.
#[derive(Debug, Clone)]
pub struct SubscriptionHistory {
    /// The subscription as stored.
    pub subscription: StoredSubscription,
    /// Its status log, newest first.
    pub status_logs: Vec<StatusLog>,
    /// Its order attempts, newest first.
    pub orders: Vec<SubscriptionOrder>,
    /// The shop's dunning policy: how many retries a failed order gets, and what follows.
    pub dunning: ShopDunning,
}

/// The shop's subscription `id` with its latest `limit` status log entries and order attempts;
/// another shop's is `not_found`.
pub fn history(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: SubscriptionId,
    limit: usize,
) -> Result<SubscriptionHistory, DomainError> {
    let stored = tx
        .subscription(shop.id, id)?
        .ok_or_else(|| DomainError::not_found("subscription"))?;
    Ok(SubscriptionHistory {
        status_logs: tx.status_logs_of_subscription(shop.id, id, limit)?,
        orders: tx.orders_of_subscriptions(&[id], limit)?,
        dunning: shop_dunning(tx, shop)?,
        subscription: stored,
    })
}

// ---------------------------------------------------------------------------------------
// Browsing and searching subscriptions

/// The most customers a name search gathers subscriptions for (a list's bound on ids).
pub const MATCHED_CUSTOMERS: usize = crate::kernel::filter::MAX_LISTED_IDS;

/// What the console's subscription list looks for: every part is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscriptionSearch {
    /// Only subscriptions in this status.
    pub status: Option<SubscriptionStatus>,
    /// Only subscriptions of customers whose name, email or phone holds this text (without
    /// case): List Customers' search.
    pub customer: Option<String>,
    /// Only subscriptions of the customer with exactly this email (without case).
    pub email: Option<String>,
    /// Only subscriptions whose next order is at or after this instant.
    pub from: Option<Timestamp>,
    /// Only subscriptions whose next order is before this instant.
    pub until: Option<Timestamp>,
    /// The page starts after this subscription (by id ascending).
    pub after: Option<SubscriptionId>,
}

/// A subscription as the console lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionLine {
    /// The subscription's id.
    pub id: SubscriptionId,
    /// Its status.
    pub status: SubscriptionStatus,
    /// Its customer's id.
    pub customer_id: CustomerId,
    /// Its customer's name, as given (may be empty).
    pub customer_name: String,
    /// Its customer's email, once given.
    pub email: Option<String>,
    /// When its next order is due.
    pub next_order: Option<Timestamp>,
    /// How many of its orders were placed.
    pub orders_processed: i64,
}

/// A page of the console's subscription list.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionBrowse {
    /// The page, by id ascending.
    pub lines: Vec<SubscriptionLine>,
    /// Whether more subscriptions follow the last.
    pub has_more: bool,
    /// Whether the customer search matched more customers than [`MATCHED_CUSTOMERS`] (only
    /// the first are looked at).
    pub customers_capped: bool,
}

/// The customers `search` narrows the list to: `None` for every customer, `Some(empty)` when
/// no customer matches (the list is then empty).
fn searched_customers(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    search: &SubscriptionSearch,
) -> Result<(Option<Vec<CustomerId>>, bool), DomainError> {
    let mut ids: Option<Vec<CustomerId>> = None;
    let mut capped = false;
    if let Some(email) = &search.email {
        ids = Some(
            tx.customer_id_by_email(shop.id, email)?
                .into_iter()
                .collect(),
        );
    }
    if let Some(text) = &search.customer {
        let page = tx.list_subscription_customers(
            shop.id,
            &CustomerListQuery {
                statuses: vec![CustomerStatus::All],
                search: Some(text.to_lowercase()),
                limit: MATCHED_CUSTOMERS as i64,
                page: 1,
            },
        )?;
        capped = page.total > MATCHED_CUSTOMERS as i64;
        ids = Some(match ids {
            Some(by_email) => by_email
                .into_iter()
                .filter(|id| page.ids.contains(id))
                .collect(),
            None => page.ids,
        });
    }
    Ok((ids, capped))
}

/// The shop's subscriptions `search` finds, by id ascending, at most `limit` (List
/// Subscriptions' keyset query on the `(shop_id, …, id)` indexes; no total is counted).
pub fn browse(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    search: &SubscriptionSearch,
    limit: usize,
) -> Result<SubscriptionBrowse, DomainError> {
    let (customers, customers_capped) = searched_customers(tx, shop, search)?;
    if customers.as_ref().is_some_and(Vec::is_empty) {
        return Ok(SubscriptionBrowse {
            lines: Vec::new(),
            has_more: false,
            customers_capped,
        });
    }
    let time = |op, at| Filter {
        field: FilterField::NextOrderDatetime,
        op,
        value: FilterValue::Time(at),
    };
    let mut filters = Vec::new();
    filters.extend(search.from.map(|at| time(FilterOp::Gte, at)));
    filters.extend(search.until.map(|at| time(FilterOp::Lt, at)));
    let query = ListQuery {
        statuses: search.status.into_iter().collect(),
        customer_ids: customers.unwrap_or_default(),
        expand_customer: false,
        limit: i64::try_from(limit).unwrap_or(i64::MAX),
        cursor: search.after.map(Cursor::after),
        filters,
    };
    let page = tx.list_subscriptions(shop.id, &query)?;
    let customer_ids: Vec<CustomerId> = page
        .subscriptions
        .iter()
        .map(|s| s.state.customer_id)
        .collect();
    let people = tx.directory_customers_by_ids(shop.id, &customer_ids)?;
    let lines = page
        .subscriptions
        .iter()
        .map(|s| {
            let person = people.iter().find(|c| c.id == s.state.customer_id);
            SubscriptionLine {
                id: s.id,
                status: s.state.subscription_status,
                customer_id: s.state.customer_id,
                customer_name: person.map(full_name).unwrap_or_default(),
                email: person.and_then(|c| c.email.clone()),
                next_order: s.state.next_order_datetime,
                orders_processed: s.state.orders_processed,
            }
        })
        .collect();
    Ok(SubscriptionBrowse {
        lines,
        has_more: page.has_more,
        customers_capped,
    })
}

fn full_name(customer: &DirectoryCustomer) -> String {
    [&customer.first_name, &customer.last_name]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------
// Customers

/// A page of the shop's subscription customers.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomerPage {
    /// The customers, by id ascending.
    pub customers: Vec<SubscriptionCustomer>,
    /// Whether another page follows.
    pub has_more: bool,
}

/// The shop's subscription customers, page `page` (from 1) of `limit`: with `search` holding
/// an `@`, the customer of exactly that email (without case, through its index); otherwise List
/// Customers with its search of names, email and phone.
pub fn customers(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    search: Option<&str>,
    page: i64,
    limit: i64,
) -> Result<CustomerPage, DomainError> {
    if let Some(email) = search.filter(|text| text.contains('@')) {
        let ids: Vec<CustomerId> = tx
            .customer_id_by_email(shop.id, email)?
            .into_iter()
            .collect();
        let found = customer_resources(tx, shop, &ids)?;
        // Only customers with a subscription are subscription customers.
        let customers = found
            .into_iter()
            .filter(|c| {
                c.subscription_summary.active_subscription_count
                    + c.subscription_summary.inactive_subscription_count
                    > 0
            })
            .collect();
        return Ok(CustomerPage {
            customers,
            has_more: false,
        });
    }
    let query = CustomerListQuery {
        statuses: vec![CustomerStatus::All],
        search: search.map(str::to_lowercase),
        limit,
        page: page.max(1),
    };
    let (customers, pagination) = list_customers(tx, shop, &query)?;
    Ok(CustomerPage {
        customers,
        has_more: pagination.current_page < pagination.total_pages,
    })
}

/// A customer with a page of their subscriptions and their addresses.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomerDetail {
    /// The customer, with their addresses.
    pub customer: SubscriptionCustomer,
    /// A page of their subscriptions, by id ascending.
    pub subscriptions: Vec<Subscription>,
    /// How many subscriptions they have.
    pub total: i64,
}

/// The shop's customer `id` (404 for another shop's or a deleted one) with page `page` of
/// their subscriptions.
pub fn customer(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: CustomerId,
    page: i64,
    limit: i64,
) -> Result<CustomerDetail, DomainError> {
    let customer = get_customer(tx, shop, id)?;
    let (subscriptions, pagination) = customer_subscriptions(tx, shop, id, limit, page.max(1))?;
    Ok(CustomerDetail {
        customer,
        subscriptions,
        total: pagination.total,
    })
}

// ---------------------------------------------------------------------------------------
// Orders the scheduler placed

/// The shop's order attempts `filter` keeps, newest order date first, at most `limit`.
pub fn orders(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    filter: &OrderFilter,
    limit: usize,
) -> Result<Vec<SubscriptionOrder>, DomainError> {
    Ok(tx.shop_subscription_orders(shop.id, filter, limit)?)
}

// ---------------------------------------------------------------------------------------
// Actions and settings: each the API's own use case, with its line in the audit log

/// A staff member as a subscription's status log names them.
fn staff_actor(staff: &ConsoleStaff) -> Actor {
    Actor {
        kind: ActorType::Staff,
        id: staff.staff_id.0,
        name: staff.email.clone(),
    }
}

/// What the console can do to a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsoleAction {
    /// Cancel it, with one of the shop's reasons (or none) and a comment (or none).
    Cancel {
        /// A code of the shop's cancellation reasons; empty for none.
        reason: String,
        /// The staff member's comment; blank for none.
        comment: String,
    },
    /// Pause it until someone resumes it.
    Pause,
    /// Make a paused subscription active again.
    Resume,
    /// Skip its next order.
    SkipNext,
}

impl ConsoleAction {
    /// The audit log's name of the action.
    pub fn audit_name(&self) -> &'static str {
        match self {
            ConsoleAction::Cancel { .. } => "subscription.cancel",
            ConsoleAction::Pause => "subscription.pause",
            ConsoleAction::Resume => "subscription.resume",
            ConsoleAction::SkipNext => "subscription.skip",
        }
    }
}

/// The API's request of `action`, read as the API reads its body (a cancellation's reason
/// must be one of the shop's, its comment at most 1,000 characters).
fn request_of(
    action: &ConsoleAction,
    current: &StoredSubscription,
) -> Result<ActionRequest, DomainError> {
    Ok(match action {
        ConsoleAction::Cancel { reason, comment } => {
            let mut body = serde_json::Map::new();
            if !reason.trim().is_empty() {
                body.insert("reason".into(), reason.trim().into());
            }
            if !comment.trim().is_empty() {
                body.insert("comment".into(), comment.trim().into());
            }
            ActionRequest::Cancel(parse_cancel(&serde_json::Value::Object(body))?)
        }
        ConsoleAction::Pause => ActionRequest::Pause(PauseRequest { resume_on: None }),
        ConsoleAction::Resume => ActionRequest::Resume,
        ConsoleAction::SkipNext => ActionRequest::Skip {
            order_datetime: current.state.next_order_datetime.ok_or_else(|| {
                DomainError::Unprocessable {
                    code: "subscription.no_next_order",
                    message: "the subscription has no next order to skip".to_string(),
                }
            })?,
        },
    })
}

/// Takes `action` on the shop's subscription `id` as the API does (the same state machine,
/// webhooks and status log, by the staff member), and records it in the audit log in the same
/// transaction.
pub fn act(
    db: &impl SubscriptionDatabase,
    staff: &ConsoleStaff,
    id: SubscriptionId,
    action: &ConsoleAction,
    now: Timestamp,
) -> Result<(), DomainError> {
    db.write_tx(|tx| {
        let current = tx
            .subscription(staff.shop.id, id)?
            .ok_or_else(|| DomainError::not_found("subscription"))?;
        let request = request_of(action, &current)?;
        take_subscription_action(tx, &staff.shop, id, request, staff_actor(staff), now)?;
        record_action(tx, staff, action.audit_name(), &id.to_string(), now)
    })
}

/// What the cancel form of the shop's subscription `id` offers: the shop's cancellation
/// reasons; another shop's subscription is `not_found`.
pub fn cancel_form(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: SubscriptionId,
) -> Result<Vec<CancellationReason>, DomainError> {
    tx.subscription(shop.id, id)?
        .ok_or_else(|| DomainError::not_found("subscription"))?;
    reasons(tx, shop)
}

/// What the settings page shows: the shop's dunning policy (and whether the shop set it) and
/// its cancellation reasons.
pub fn settings(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
) -> Result<(ShopDunning, Vec<CancellationReason>), DomainError> {
    Ok((shop_dunning(tx, shop)?, reasons(tx, shop)?))
}

/// The shop's cancellation reasons, for the cancel form and the settings page.
pub fn reasons(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
) -> Result<Vec<CancellationReason>, DomainError> {
    Ok(cancellation_reasons(tx, shop)?.cancellation_reasons)
}

/// Replaces the shop's dunning policy with `body` (Set Dunning Policy's body, checked as the
/// API checks it), and records it.
pub fn save_dunning(
    db: &impl SubscriptionDatabase,
    staff: &ConsoleStaff,
    body: &serde_json::Value,
    now: Timestamp,
) -> Result<(), DomainError> {
    let policy = parse_dunning(body)?;
    db.write_tx(|tx| {
        set_dunning_policy(tx, &staff.shop, policy, now)?;
        record_action(tx, staff, "dunning.set", "dunning", now)
    })
}

/// Replaces the shop's cancellation reasons with `body` (Set Cancellation Reasons' body,
/// checked as the API checks it), and records it.
pub fn save_reasons(
    db: &impl SubscriptionDatabase,
    staff: &ConsoleStaff,
    body: &serde_json::Value,
    now: Timestamp,
) -> Result<(), DomainError> {
    let reasons = parse_cancellation_reasons(body)?;
    db.write_tx(|tx| {
        set_cancellation_reasons(tx, &staff.shop, reasons, now)?;
        record_action(
            tx,
            staff,
            "cancellation_reasons.set",
            "cancellation_reasons",
            now,
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::access::shop::{ShopInput, create_shop};
    use crate::ports::Database;
    use crate::subscriptions::input::NewSubscription;
    use crate::subscriptions::operations::create_subscription;
    use crate::testing::MemoryDatabase;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    fn shop(db: &MemoryDatabase, domain: &str) -> Shop {
        db.write(|tx| {
            create_shop(
                tx,
                ShopInput {
                    shop_domain: domain.into(),
                    ..ShopInput::default()
                },
                at("2026-01-01T00:00:00Z"),
            )
        })
        .unwrap()
    }

    /// A subscription of `email` (customer `name`) whose next order is `next`.
    fn subscribe(
        db: &MemoryDatabase,
        shop: &Shop,
        email: &str,
        name: &str,
        next: &str,
    ) -> Subscription {
        let body: Value = json!({
            "customer": {"email": email, "first_name": name},
            "subscription": {
                "subscription_status": "active",
                "next_order_datetime": next,
                "order_rrule": "DTSTART:20260302T090000Z\nRRULE:FREQ=WEEKLY",
                "line_items": [{"platform_product_id": "p-1", "platform_variant_id": "v-1",
                                "quantity": 1, "price": 100}],
                "shipping_address": {"street1": "1 Main St", "city": "Paris", "country_code": "FR"},
                "payment_details": {"gateway_name": "test", "gateway_payment_id": "tok"}
            }
        });
        let now = at("2026-01-01T00:00:00Z");
        let new = NewSubscription::parse(&body, shop, now).unwrap();
        db.write(|tx| create_subscription(tx, shop, new, Actor::system(), now))
            .unwrap()
            .0
    }

    fn found(db: &MemoryDatabase, shop: &Shop, search: SubscriptionSearch) -> Vec<SubscriptionId> {
        db.read(|tx| browse(tx, shop, &search, 10))
            .unwrap()
            .lines
            .iter()
            .map(|line| line.id)
            .collect()
    }

    #[test]
    fn subscriptions_are_found_by_email_customer_status_and_next_order() {
        let db = MemoryDatabase::default();
        let ours = shop(&db, "a.shop.test");
        let theirs = shop(&db, "b.shop.test");
        let ada = subscribe(
            &db,
            &ours,
            "ada@example.test",
            "Ada",
            "2026-03-02T14:00:00Z",
        );
        let bob = subscribe(
            &db,
            &ours,
            "bob@example.test",
            "Bob",
            "2026-04-06T14:00:00Z",
        );
        subscribe(
            &db,
            &theirs,
            "ada@example.test",
            "Ada",
            "2026-03-02T14:00:00Z",
        );
        let all = SubscriptionSearch::default();
        assert_eq!(found(&db, &ours, all.clone()), [ada.id, bob.id]);
        let email = SubscriptionSearch {
            email: Some("ADA@example.test".into()),
            ..all.clone()
        };
        assert_eq!(found(&db, &ours, email), [ada.id], "exact, without case");
        let name = SubscriptionSearch {
            customer: Some("BO".into()),
            ..all.clone()
        };
        assert_eq!(found(&db, &ours, name), [bob.id]);
        let both = SubscriptionSearch {
            customer: Some("bob".into()),
            email: Some("ada@example.test".into()),
            ..all.clone()
        };
        assert!(found(&db, &ours, both).is_empty(), "both must hold");
        let march = SubscriptionSearch {
            from: Some(at("2026-03-01T00:00:00Z")),
            until: Some(at("2026-03-03T00:00:00Z")),
            ..all.clone()
        };
        assert_eq!(found(&db, &ours, march), [ada.id]);
        let paused = SubscriptionSearch {
            status: Some(SubscriptionStatus::Paused),
            ..all.clone()
        };
        assert!(found(&db, &ours, paused).is_empty());
        let after = SubscriptionSearch {
            after: Some(ada.id),
            ..all
        };
        assert_eq!(
            found(&db, &ours, after),
            [bob.id],
            "the page after the cursor"
        );
        let page = db
            .read(|tx| browse(tx, &ours, &SubscriptionSearch::default(), 1))
            .unwrap();
        assert!(page.has_more);
        assert_eq!(page.lines[0].customer_name, "Ada");
        assert_eq!(page.lines[0].email.as_deref(), Some("ada@example.test"));
    }

    #[test]
    fn customers_are_found_by_exact_email_or_by_name() {
        let db = MemoryDatabase::default();
        let ours = shop(&db, "a.shop.test");
        let ada = subscribe(
            &db,
            &ours,
            "ada@example.test",
            "Ada",
            "2026-03-02T14:00:00Z",
        );
        subscribe(
            &db,
            &ours,
            "bob@example.test",
            "Bob",
            "2026-04-06T14:00:00Z",
        );
        let ids = |search: Option<&str>| {
            db.read(|tx| customers(tx, &ours, search, 1, 10))
                .unwrap()
                .customers
                .iter()
                .map(|c| c.id)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(Some("Ada@Example.test")), [ada.customer_id]);
        assert_eq!(ids(Some("ada")), [ada.customer_id]);
        assert_eq!(ids(None).len(), 2);
        assert!(ids(Some("nobody@example.test")).is_empty());
        let detail = db
            .read(|tx| customer(tx, &ours, ada.customer_id, 1, 10))
            .unwrap();
        assert_eq!(detail.total, 1);
        assert_eq!(detail.subscriptions[0].id, ada.id);
        assert!(!detail.customer.addresses.is_empty());
    }
}
