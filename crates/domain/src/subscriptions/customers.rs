//! Subscription customers and their addresses.
//!
//! A subscription customer *is* the directory's customer: one record per shop, whether the
//! platform sent it or Create Subscription made it. Changes made here reach the platform
//! through the connector outbox when the shop has a live `customers`
//! destination; a customer made here is created there, and the platform ids the connector
//! answers are stored.

use serde::Serialize;

use crate::access::shop::Shop;
use crate::directory::DirectoryAddress;
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::ids::{AddressId, CustomerId};
use crate::kernel::limits::{MAX_SEARCH_CHARS, check_parameter};
use crate::kernel::time::Timestamp;
use crate::platform::events::CustomerChangedJob;
use crate::platform::outbox::{ConnectorCall, request_connector_change};
use crate::platform::resources::{Customer, CustomerAddress, PlatformId};
use crate::subscriptions::input::{AddressInput, CustomerInput, CustomerUpdate};
use crate::subscriptions::query::{DEFAULT_LIMIT, MAX_LIMIT};
use crate::subscriptions::repository::{
    CustomerFields, CustomerListQuery, CustomerStatus, StoredAddress, SubscriptionRepositories,
};
use crate::subscriptions::resources::{
    CustomerLabel, SubscriptionAddress, SubscriptionCustomer, SubscriptionSummary,
};
use crate::subscriptions::topics::Topic;
use crate::subscriptions::webhooks::emit_customer;

/// The page-numbered pagination of customer lists ("customer subscriptions").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PagePagination {
    /// How many items this page holds.
    pub count: i64,
    /// The page's number, from 1.
    pub current_page: i64,
    /// The most items a page holds (the list's `limit`).
    pub per_page: i64,
    /// How many items the whole list holds.
    pub total: i64,
    /// How many pages the whole list fills.
    pub total_pages: i64,
}

impl PagePagination {
    /// The pagination of page `page` holding `count` items, of a list of `total` items in pages
    /// of `per_page` (which must not be 0).
    pub fn new(count: usize, page: i64, per_page: i64, total: i64) -> Self {
        PagePagination {
            count: i64::try_from(count).unwrap_or(i64::MAX),
            current_page: page,
            per_page,
            total,
            total_pages: (total + per_page - 1) / per_page,
        }
    }
}

/// `limit` (1..250, default 50) and `page` (from 1, default 1) of a page-numbered list; 400
/// naming the parameter otherwise.
pub fn parse_page(pairs: &[(String, String)]) -> Result<(i64, i64), DomainError> {
    let (mut limit, mut page) = (DEFAULT_LIMIT, 1);
    let mut problems = Vec::new();
    for (key, value) in pairs {
        match key.as_str() {
            "limit" => match value.trim().parse::<i64>() {
                Ok(n) if (1..=MAX_LIMIT).contains(&n) => limit = n,
                _ => problems.push(FieldError::new(
                    "limit",
                    "invalid_value",
                    format!("limit must be an integer between 1 and {MAX_LIMIT}"),
                )),
            },
            "page" => match value.trim().parse::<i64>() {
                // Far pages are empty, not an overflow of the offset.
                Ok(n) if (1..=1_000_000).contains(&n) => page = n,
                _ => problems.push(FieldError::new(
                    "page",
                    "invalid_value",
                    "page must be an integer from 1",
                )),
            },
            _ => {}
        }
    }
    if problems.is_empty() {
        Ok((limit, page))
    } else {
        Err(DomainError::BadRequest(problems))
    }
}

/// List Customers' query: `status` (`all|active|inactive`, repeated, as `status[]` or joined
/// by commas), `search`, `limit`, `page`.
pub fn parse_customer_list_query(
    pairs: &[(String, String)],
) -> Result<CustomerListQuery, DomainError> {
    let (limit, page) = parse_page(pairs)?;
    let mut statuses = Vec::new();
    let mut search = None;
    let mut problems = Vec::new();
    for (key, value) in pairs {
        match key.strip_suffix("[]").unwrap_or(key) {
            "status" => {
                for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    let status = match name {
                        "all" => CustomerStatus::All,
                        "active" => CustomerStatus::Active,
                        "inactive" => CustomerStatus::Inactive,
                        _ => {
                            problems.push(FieldError::new(
                                "status",
                                "invalid_value",
                                format!("status must be all, active or inactive, not {name:?}"),
                            ));
                            continue;
                        }
                    };
                    if !statuses.contains(&status) {
                        statuses.push(status);
                    }
                }
            }
            "search" => {
                if let Err(problem) = check_parameter("search", value, MAX_SEARCH_CHARS) {
                    problems.push(problem);
                } else if !value.trim().is_empty() {
                    search = Some(value.trim().to_string());
                }
            }
            _ => {}
        }
    }
    if !problems.is_empty() {
        return Err(DomainError::BadRequest(problems));
    }
    if statuses.is_empty() || statuses.contains(&CustomerStatus::All) {
        statuses = vec![CustomerStatus::All];
    }
    Ok(CustomerListQuery {
        statuses,
        search,
        limit,
        page,
    })
}

/// A platform id as the API's integer: the number when it is one, else null (the customer's
/// `platform_id` text carries it).
fn integer_id(id: Option<&str>) -> Option<i64> {
    id.and_then(|id| id.parse().ok())
}

/// A stored address as the subscription API shows it.
pub(crate) fn stored_address_resource(shop: &Shop, stored: &StoredAddress) -> SubscriptionAddress {
    let address = &stored.address;
    SubscriptionAddress {
        id: stored.id,
        shop_identifier: shop.identifier.as_str().to_string(),
        platform_id: integer_id(stored.platform_id.as_deref()),
        customer_id: stored.customer_id,
        platform_type: shop.platform_type.clone(),
        platform_customer_id: integer_id(stored.customer_platform_id.as_deref()),
        first_name: address.first_name.clone(),
        last_name: address.last_name.clone(),
        company: address.company.clone(),
        phone: address.phone.clone(),
        street1: address.street_1.clone(),
        street2: address.street_2.clone(),
        city: address.city.clone(),
        province: address.province.clone(),
        province_code: address.province_code.clone(),
        country: address.country.clone(),
        country_code: address.country_code.clone(),
        zip: address.postal_code.clone(),
        is_default: stored.is_default,
        address_use: address.address_use.clone(),
        address_source: None,
        created_at: stored.created_at,
        updated_at: stored.updated_at,
    }
}

fn directory_address_resource(shop: &Shop, address: &DirectoryAddress) -> SubscriptionAddress {
    let document = CustomerAddress {
        first_name: address.first_name.clone(),
        last_name: address.last_name.clone(),
        company: address.company.clone(),
        phone: address.phone.clone(),
        street_1: address.street_1.clone(),
        street_2: address.street_2.clone(),
        city: address.city.clone(),
        province: address.province.clone(),
        province_code: address.province_code.clone(),
        country: address.country.clone(),
        country_code: address.country_code.clone(),
        postal_code: address.zip.clone(),
        address_use: address.address_use.clone(),
        address_type: address.address_type.clone(),
        ..CustomerAddress::default()
    };
    stored_address_resource(
        shop,
        &StoredAddress {
            id: address.id,
            shop_id: shop.id,
            customer_id: address.customer_id,
            platform_id: address.platform_id.clone(),
            customer_platform_id: address.platform_customer_id.clone(),
            is_default: address.is_default,
            address: document,
            created_at: address.created_at,
            updated_at: address.updated_at,
            deleted_at: address.deleted_at,
        },
    )
}

/// The platform's form of an address given to the subscription API.
pub(crate) fn platform_address(input: &AddressInput, is_default: bool) -> CustomerAddress {
    CustomerAddress {
        first_name: input.first_name.clone(),
        last_name: input.last_name.clone(),
        company: input.company.clone(),
        phone: input.phone.clone(),
        street_1: Some(input.street1.clone()),
        street_2: input.street2.clone(),
        city: Some(input.city.clone()),
        province: input.province.clone(),
        province_code: input.province_code.clone(),
        country: input.country.clone(),
        country_code: Some(input.country_code.clone()),
        postal_code: input.zip.clone(),
        is_default: Some(is_default),
        ..CustomerAddress::default()
    }
}

/// The live customers of `ids` as the subscription API shows them, in the order of `ids`
/// (unknown and deleted ones left out).
pub(crate) fn customer_resources(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    ids: &[CustomerId],
) -> Result<Vec<SubscriptionCustomer>, DomainError> {
    // One query for the page, then in the order of `ids`.
    let mut found = tx.directory_customers_by_ids(shop.id, ids)?;
    found.retain(|customer| customer.deleted_at.is_none());
    let customers: Vec<_> = ids
        .iter()
        .filter_map(|id| found.iter().find(|customer| customer.id == *id).cloned())
        .collect();
    let live: Vec<CustomerId> = customers.iter().map(|c| c.id).collect();
    let addresses = tx.addresses_of_customers(shop.id, &live)?;
    let labels = tx.labels_of_customers(shop.id, &live)?;
    let notes = tx.customer_notes(shop.id, &live)?;
    let summaries = tx.subscription_summaries(shop.id, &live)?;
    Ok(customers
        .into_iter()
        .map(|customer| {
            let addresses: Vec<SubscriptionAddress> = addresses
                .iter()
                .filter(|a| a.customer_id == customer.id)
                .map(|a| directory_address_resource(shop, a))
                .collect();
            let default_address = addresses.iter().find(|a| a.is_default).cloned();
            let figures = summaries
                .iter()
                .find(|s| s.customer_id == customer.id)
                .cloned()
                .unwrap_or_default();
            SubscriptionCustomer {
                id: customer.id,
                platform_id: customer.platform_id,
                cashier_public_id: None,
                first_name: customer.first_name,
                last_name: customer.last_name,
                phone: customer.phone,
                email: customer.email,
                notes: notes
                    .iter()
                    .find(|(id, _)| *id == customer.id)
                    .map(|(_, text)| text.clone()),
                default_address,
                addresses,
                subscription_summary: SubscriptionSummary {
                    svc_platform_customer_id: Some(customer.id),
                    next_order_date: figures.next_order_date,
                    last_order_date: figures.last_order_date,
                    active_subscription_count: figures.active_subscription_count,
                    inactive_subscription_count: figures.inactive_subscription_count,
                    subscription_order_count: figures.subscription_order_count,
                },
                labels: labels
                    .iter()
                    .filter(|label| label.customer_id == customer.id)
                    .map(|label| CustomerLabel {
                        id: label.id,
                        customer_id: label.customer_id,
                        name: label.name.clone(),
                        created_at: label.created_at,
                        updated_at: label.updated_at,
                        deleted_at: label.deleted_at,
                    })
                    .collect(),
            }
        })
        .collect())
}

/// Get Customer: a live customer of the shop, or 404.
pub fn get_customer(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: CustomerId,
) -> Result<SubscriptionCustomer, DomainError> {
    customer_resources(tx, shop, &[id])?
        .into_iter()
        .next()
        .ok_or(DomainError::not_found("customer"))
}

/// List Customers.
pub fn list_customers(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    query: &CustomerListQuery,
) -> Result<(Vec<SubscriptionCustomer>, PagePagination), DomainError> {
    let page = tx.list_subscription_customers(shop.id, query)?;
    let customers = customer_resources(tx, shop, &page.ids)?;
    let pagination = PagePagination::new(customers.len(), query.page, query.limit, page.total);
    Ok((customers, pagination))
}

fn platform_customer(fields: &CustomerFields) -> Customer {
    Customer {
        email: fields.email.clone(),
        first_name: fields.first_name.clone(),
        last_name: fields.last_name.clone(),
        phone: fields.phone.clone(),
        ..Customer::default()
    }
}

fn current_fields(customer: &SubscriptionCustomer) -> CustomerFields {
    CustomerFields {
        email: customer.email.clone(),
        first_name: customer.first_name.clone(),
        last_name: customer.last_name.clone(),
        phone: customer.phone.clone(),
        notes: customer.notes.clone(),
    }
}

/// The customer of Create Subscription: the shop's live customer with that email, or a new one
/// (then created on the platform too). Returns its id and whether it was created.
pub(crate) fn find_or_create_customer(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    input: &CustomerInput,
    now: Timestamp,
) -> Result<(CustomerId, bool), DomainError> {
    if let Some(id) = tx.customer_id_by_email(shop.id, &input.email)? {
        return Ok((id, false));
    }
    let fields = CustomerFields {
        email: Some(input.email.clone()),
        first_name: input.first_name.clone(),
        last_name: input.last_name.clone(),
        phone: input.phone.clone(),
        notes: input.notes.clone(),
    };
    let id = tx.insert_customer(shop.id, &fields, now)?;
    let call = ConnectorCall::CreateServiceCustomer {
        customer_id: id,
        customer: platform_customer(&fields),
    };
    request_connector_change(tx, shop.id, &call, now)?;
    Ok((id, true))
}

/// Update Customer: writes the fields given; emits `customer_updated` when the name, email or
/// phone changed, and sends the change to the platform.
pub fn update_customer(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: CustomerId,
    update: &CustomerUpdate,
    now: Timestamp,
) -> Result<SubscriptionCustomer, DomainError> {
    let before = get_customer(tx, shop, id)?;
    let old = current_fields(&before);
    let new = CustomerFields {
        email: update.email.clone().or(old.email.clone()),
        first_name: update.first_name.clone().unwrap_or(old.first_name.clone()),
        last_name: update.last_name.clone().unwrap_or(old.last_name.clone()),
        phone: update.phone.clone().unwrap_or(old.phone.clone()),
        notes: update.notes.clone().unwrap_or(old.notes.clone()),
    };
    if new == old {
        return Ok(before);
    }
    tx.update_customer(shop.id, id, &new, now)?;
    let customer = get_customer(tx, shop, id)?;
    let shown_changed = (&new.email, &new.first_name, &new.last_name, &new.phone)
        != (&old.email, &old.first_name, &old.last_name, &old.phone);
    if shown_changed {
        let call = ConnectorCall::UpdateServiceCustomer {
            customer_id: id,
            customer: platform_customer(&new),
        };
        request_connector_change(tx, shop.id, &call, now)?;
        emit_customer(tx, shop, Topic::CustomerUpdated, &customer, now)?;
    }
    Ok(customer)
}

/// The platform changed a customer's name, email or phone (a Customer Saved event): emits
/// `customer_updated` when the customer has subscriptions, as Update Customer does for a change
/// made here. Returns whether it did.
pub fn announce_platform_customer_change(
    tx: &mut dyn SubscriptionRepositories,
    job: &CustomerChangedJob,
    now: Timestamp,
) -> Result<bool, DomainError> {
    let Some(shop) = tx.shop_by_id(job.shop_id)? else {
        return Ok(false);
    };
    let customer = tx.directory_customer_by_platform_id(shop.id, &job.platform_customer_id)?;
    let Some(customer) = customer.filter(|customer| customer.deleted_at.is_none()) else {
        return Ok(false);
    };
    let (_, subscriptions) = tx.customer_subscriptions(shop.id, customer.id, 1, 1)?;
    if subscriptions == 0 {
        return Ok(false);
    }
    let shown = get_customer(tx, &shop, customer.id)?;
    emit_customer(tx, &shop, Topic::CustomerUpdated, &shown, now)?;
    Ok(true)
}

fn live_customer(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    customer_id: CustomerId,
) -> Result<(), DomainError> {
    match tx.directory_customer(shop.id, customer_id)? {
        Some(customer) if customer.deleted_at.is_none() => Ok(()),
        _ => Err(DomainError::not_found("customer")),
    }
}

/// List Customer Addresses: the customer's live addresses.
pub fn list_addresses(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    customer_id: CustomerId,
) -> Result<Vec<SubscriptionAddress>, DomainError> {
    live_customer(tx, shop, customer_id)?;
    Ok(tx
        .addresses_of_customers(shop.id, &[customer_id])?
        .iter()
        .map(|a| directory_address_resource(shop, a))
        .collect())
}

fn address_of(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    customer_id: CustomerId,
    address_id: AddressId,
) -> Result<StoredAddress, DomainError> {
    tx.addresses_by_ids(shop.id, &[address_id])?
        .into_iter()
        .find(|a| a.customer_id == customer_id && a.deleted_at.is_none())
        .ok_or(DomainError::not_found("customer_address"))
}

/// Adds an address to a customer (and to the platform). A customer's first address is its
/// default whatever `is_default` says: a customer with addresses has exactly one default.
pub(crate) fn add_address(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    customer_id: CustomerId,
    input: &AddressInput,
    is_default: Option<bool>,
    now: Timestamp,
) -> Result<AddressId, DomainError> {
    let has_addresses = !tx
        .addresses_of_customers(shop.id, &[customer_id])?
        .is_empty();
    let is_default = !has_addresses || is_default.unwrap_or(false);
    let address = platform_address(input, is_default);
    let id = tx.insert_address(shop.id, customer_id, &address, is_default, now)?;
    let call = ConnectorCall::CreateServiceAddress {
        customer_id,
        address_id: id,
        address,
    };
    request_connector_change(tx, shop.id, &call, now)?;
    Ok(id)
}

/// Create Customer Address.
pub fn create_address(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    customer_id: CustomerId,
    input: &AddressInput,
    is_default: Option<bool>,
    now: Timestamp,
) -> Result<SubscriptionAddress, DomainError> {
    live_customer(tx, shop, customer_id)?;
    let id = add_address(tx, shop, customer_id, input, is_default, now)?;
    Ok(stored_address_resource(
        shop,
        &address_of(tx, shop, customer_id, id)?,
    ))
}

/// Update Customer Address: rewrites it; `is_default: true` makes it the default. The default
/// cannot be unset by `false` (exactly one default): make another the default instead.
pub fn update_address(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    customer_id: CustomerId,
    address_id: AddressId,
    input: &AddressInput,
    is_default: Option<bool>,
    now: Timestamp,
) -> Result<SubscriptionAddress, DomainError> {
    live_customer(tx, shop, customer_id)?;
    let current = address_of(tx, shop, customer_id, address_id)?;
    if current.is_default && is_default == Some(false) {
        return Err(DomainError::invalid(
            "customer_address.is_default",
            "invalid_value",
            "a customer has exactly one default address: make another address the default",
        ));
    }
    let is_default = current.is_default || is_default.unwrap_or(false);
    let mut address = platform_address(input, is_default);
    address.platform_id = current.platform_id.clone().map(PlatformId::new);
    tx.update_address(shop.id, customer_id, address_id, &address, is_default, now)?;
    let call = ConnectorCall::UpdateServiceAddress {
        customer_id,
        address_id,
        address,
    };
    request_connector_change(tx, shop.id, &call, now)?;
    Ok(stored_address_resource(
        shop,
        &address_of(tx, shop, customer_id, address_id)?,
    ))
}

/// Delete Customer Address. Deleting the default makes the oldest other address the default.
/// An address a live subscription uses stays (409).
pub fn delete_address(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    customer_id: CustomerId,
    address_id: AddressId,
    now: Timestamp,
) -> Result<(), DomainError> {
    live_customer(tx, shop, customer_id)?;
    let current = address_of(tx, shop, customer_id, address_id)?;
    // Every subscription of the customer, page by page: a customer may have more than a page.
    let mut page = 1;
    loop {
        let (subscriptions, total) =
            tx.customer_subscriptions(shop.id, customer_id, MAX_LIMIT, page)?;
        if subscriptions.iter().any(|s| {
            s.state.billing_address_id == address_id || s.state.shipping_address_id == address_id
        }) {
            return Err(DomainError::Conflict {
                code: "customer_address.in_use",
                message: "a subscription of the customer uses this address; give the \
                          subscription another address first"
                    .to_string(),
            });
        }
        if subscriptions.is_empty() || page * MAX_LIMIT >= total {
            break;
        }
        page += 1;
    }
    tx.delete_address(shop.id, customer_id, address_id, now)?;
    if current.is_default
        && let Some(next) = tx
            .addresses_of_customers(shop.id, &[customer_id])?
            .into_iter()
            .next()
    {
        let next_id = next.id;
        let stored = address_of(tx, shop, customer_id, next_id)?;
        let mut address = stored.address.clone();
        address.is_default = Some(true);
        tx.update_address(shop.id, customer_id, next_id, &address, true, now)?;
    }
    let call = ConnectorCall::DeleteServiceAddress {
        customer_id,
        address_id,
    };
    request_connector_change(tx, shop.id, &call, now)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::access::shop::{ShopInput, create_shop};
    use crate::kernel::jobs::JobPayload;
    use crate::platform::events::{
        EntityKind, EventAction, EventSource, apply_event, parse_event_body,
    };
    use crate::ports::Database;
    use crate::subscriptions::operations::create_subscription_from_body;
    use crate::subscriptions::resources::{Actor, ActorType};
    use crate::testing::MemoryDatabase;
    use crate::webhooks::{NewWebhookEndpoint, WebhookKind};

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    const NOW: &str = "2030-01-02T00:00:00Z";

    fn saved(db: &MemoryDatabase, shop: &Shop, customer: serde_json::Value) {
        let body = json!({"data": {"customer": customer}}).to_string();
        let event = parse_event_body(
            shop.id,
            EntityKind::Customer,
            EventAction::Saved,
            body.as_bytes(),
            EventSource::Webhook,
            at(NOW),
        )
        .unwrap();
        db.write(|tx| apply_event(tx, &event, at(NOW))).unwrap();
    }

    /// The jobs announcing a platform change, taken off the queue.
    fn changed_jobs(db: &MemoryDatabase) -> Vec<CustomerChangedJob> {
        db.with_state(|state| {
            let jobs: Vec<CustomerChangedJob> = state
                .jobs
                .iter()
                .filter(|job| job.job.kind == CustomerChangedJob::KIND)
                .map(|job| job.job.payload().unwrap())
                .collect();
            state
                .jobs
                .retain(|job| job.job.kind != CustomerChangedJob::KIND);
            jobs
        })
    }

    fn updates_sent(db: &MemoryDatabase) -> usize {
        db.with_state(|state| {
            state
                .webhook_messages
                .iter()
                .filter(|message| message.topic == "customer_updated")
                .count()
        })
    }

    /// A shop with a live `customer_updated` subscription endpoint, on a new memory database.
    fn shop_listening_for_customer_updated(domain: &str) -> (MemoryDatabase, Shop) {
        let db = MemoryDatabase::default();
        let shop = db
            .write(|tx| {
                let input = ShopInput {
                    shop_domain: domain.into(),
                    ..ShopInput::default()
                };
                create_shop(tx, input, at(NOW))
            })
            .unwrap();
        db.write(|tx| {
            Ok(tx.insert_webhook_endpoint(&NewWebhookEndpoint {
                shop_id: shop.id,
                kind: WebhookKind::Subscription,
                topic: "customer_updated".into(),
                callback_url: "http://127.0.0.1:9/hook".into(),
                secret: None,
                created_at: at(NOW),
            })?)
        })
        .unwrap();
        (db, shop)
    }

    #[test]
    fn a_platform_change_of_a_subscribers_contact_sends_customer_updated_once() {
        let (db, shop) = shop_listening_for_customer_updated("cu.shop.test");
        let ada = json!({"platform_id": "cus-ada", "email": "ada@example.test",
            "first_name": "Ada", "platform_updated_at": "2029-01-01T00:00:00Z"});
        saved(&db, &shop, ada.clone());
        saved(
            &db,
            &shop,
            json!({"platform_id": "cus-bob", "email": "bob@example.test",
            "first_name": "Bob", "platform_updated_at": "2029-01-01T00:00:00Z"}),
        );
        let body = json!({"customer": {"email": "ada@example.test"},
            "subscription": {"order_rrule": "DTSTART:20300107T090000Z\nRRULE:FREQ=WEEKLY",
                "line_items": [{"platform_product_id": "p", "platform_variant_id": "v",
                                "quantity": 1, "price": 100}],
                "shipping_address": {"street1": "1 Main St", "city": "Ottawa", "country_code": "CA"}}});
        let actor = Actor {
            kind: ActorType::Api,
            id: 1,
            name: "test".into(),
        };
        db.write(|tx| create_subscription_from_body(tx, &shop, &body, actor, at(NOW)))
            .unwrap();
        assert!(changed_jobs(&db).is_empty(), "nothing changed yet");

        // The platform renames both: only Ada has a subscription.
        for (id, name) in [("cus-ada", "Augusta"), ("cus-bob", "Robert")] {
            saved(
                &db,
                &shop,
                json!({"platform_id": id, "first_name": name,
                "platform_updated_at": "2029-02-01T00:00:00Z"}),
            );
        }
        let jobs = changed_jobs(&db);
        assert_eq!(jobs.len(), 2);
        let sent: Vec<bool> = jobs
            .iter()
            .map(|job| {
                db.write(|tx| announce_platform_customer_change(tx, job, at(NOW)))
                    .unwrap()
            })
            .collect();
        assert_eq!(sent, [true, false]);
        assert_eq!(updates_sent(&db), 1);

        // A change made here, then the platform's echo of it: one customer_updated, no job.
        let ada_id = db
            .write(|tx| Ok(tx.customer_id_by_email(shop.id, "ada@example.test")?))
            .unwrap()
            .unwrap();
        let update = CustomerUpdate {
            first_name: Some(Some("Grace".into())),
            ..CustomerUpdate::default()
        };
        db.write(|tx| update_customer(tx, &shop, ada_id, &update, at(NOW)))
            .unwrap();
        assert_eq!(updates_sent(&db), 2);
        saved(
            &db,
            &shop,
            json!({"platform_id": "cus-ada", "email": "ada@example.test",
            "first_name": "Grace", "platform_updated_at": "2029-03-01T00:00:00Z"}),
        );
        assert!(changed_jobs(&db).is_empty(), "the echo is no change");
    }

    #[test]
    fn a_platform_rename_of_a_subscriber_made_here_before_its_echo_sends_customer_updated() {
        let (db, shop) = shop_listening_for_customer_updated("made.shop.test");
        let actor = || Actor {
            kind: ActorType::Api,
            id: 1,
            name: "test".into(),
        };
        // Two subscribers made through the subscription API, each created on the platform by
        // the outbox, whose answer gave it its platform id.
        for (email, platform_id) in [
            ("ada@example.test", "cus-ada"),
            ("bob@example.test", "cus-bob"),
        ] {
            let body = json!({"customer": {"email": email, "first_name": "Ada",
                    "last_name": "Lovelace", "phone": "+33 1 23 45 67 89"},
                "subscription": {"order_rrule": "DTSTART:20300107T090000Z\nRRULE:FREQ=WEEKLY",
                    "line_items": [{"platform_product_id": "p", "platform_variant_id": "v",
                                    "quantity": 1, "price": 100}],
                    "shipping_address": {"street1": "1 Main St", "city": "Ottawa", "country_code": "CA"}}});
            db.write(|tx| create_subscription_from_body(tx, &shop, &body, actor(), at(NOW)))
                .unwrap();
            let id = db
                .write(|tx| Ok(tx.customer_id_by_email(shop.id, email)?))
                .unwrap()
                .unwrap();
            assert!(
                db.write(|tx| Ok(tx.set_customer_platform_id(
                    shop.id,
                    id,
                    platform_id,
                    at(NOW)
                )?))
                .unwrap()
            );
        }
        let sent = updates_sent(&db);

        // Before the platform echoes Ada's creation, it renames her: a change of what the
        // subscription API shows, announced once.
        saved(
            &db,
            &shop,
            json!({"platform_id": "cus-ada", "email": "ada@example.test",
                "first_name": "Augusta", "last_name": "Lovelace", "phone": "+33 1 23 45 67 89",
                "platform_updated_at": "2029-02-01T00:00:00Z"}),
        );
        let jobs = changed_jobs(&db);
        assert_eq!(
            jobs,
            [CustomerChangedJob {
                shop_id: shop.id,
                platform_customer_id: "cus-ada".into()
            }]
        );
        assert!(
            db.write(|tx| announce_platform_customer_change(tx, &jobs[0], at(NOW)))
                .unwrap()
        );
        assert_eq!(updates_sent(&db), sent + 1);

        // Bob's echo shows what Mercer shows already: no change, no job.
        saved(
            &db,
            &shop,
            json!({"platform_id": "cus-bob", "email": "bob@example.test",
                "first_name": "Ada", "last_name": "Lovelace", "phone": "+33 1 23 45 67 89",
                "platform_updated_at": "2029-02-01T00:00:00Z"}),
        );
        assert!(changed_jobs(&db).is_empty(), "the echo is no change");
        // From then on the platform's document is compared, as for any customer.
        saved(
            &db,
            &shop,
            json!({"platform_id": "cus-bob", "phone": "+1 613 555 0100",
                "platform_updated_at": "2029-03-01T00:00:00Z"}),
        );
        assert_eq!(changed_jobs(&db).len(), 1);
    }

    #[test]
    fn a_platform_change_enqueues_no_job_while_no_endpoint_hears_customer_updated() {
        let db = MemoryDatabase::default();
        let shop = db
            .write(|tx| {
                let input = ShopInput {
                    shop_domain: "quiet.shop.test".into(),
                    ..ShopInput::default()
                };
                create_shop(tx, input, at(NOW))
            })
            .unwrap();
        let version = |name: &str, at: &str| {
            json!({"platform_id": "cus-ada", "email": "ada@example.test",
                "first_name": name, "platform_updated_at": at})
        };
        saved(&db, &shop, version("Ada", "2029-01-01T00:00:00Z"));
        // Another topic's endpoint, and a disabled customer_updated one, hear nothing.
        let endpoint = |topic: &str| NewWebhookEndpoint {
            shop_id: shop.id,
            kind: WebhookKind::Subscription,
            topic: topic.into(),
            callback_url: "http://127.0.0.1:9/hook".into(),
            secret: None,
            created_at: at(NOW),
        };
        db.write(|tx| Ok(tx.insert_webhook_endpoint(&endpoint("subscription_created"))?))
            .unwrap();
        let disabled = db
            .write(|tx| Ok(tx.insert_webhook_endpoint(&endpoint("customer_updated"))?))
            .unwrap();
        db.write(|tx| {
            let disabled_at = Some((at(NOW), "failing"));
            Ok(tx.set_webhook_endpoint_health(disabled.id, None, disabled_at, at(NOW))?)
        })
        .unwrap();
        saved(&db, &shop, version("Augusta", "2029-02-01T00:00:00Z"));
        assert!(changed_jobs(&db).is_empty());

        // Once an endpoint hears it, the next change is announced.
        db.write(|tx| Ok(tx.insert_webhook_endpoint(&endpoint("customer_updated"))?))
            .unwrap();
        saved(&db, &shop, version("Grace", "2029-03-01T00:00:00Z"));
        assert_eq!(changed_jobs(&db).len(), 1);
    }
}
