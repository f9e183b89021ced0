//! What the subscriptions feature needs from storage: its customers (the shop's one customer
//! record, shared with the directory and the platform), their addresses, the subscriptions with
//! their line items and status log.

use crate::directory::DirectoryRepository;
use crate::kernel::error::StoreResult;
use crate::kernel::ids::ShopId;
use crate::kernel::ids::{
    AddressId, BillingRuleId, CustomerId, GroupId, SubscriptionId, SubscriptionOrderId,
};
use crate::kernel::time::Timestamp;
use crate::platform::PlatformRepositories;
use crate::platform::resources::CustomerAddress;
use crate::subscriptions::analytics::AnalyticsRepository;
use crate::subscriptions::cancellation::CancellationReasonRepository;
use crate::subscriptions::dunning::DunningPolicyRepository;
use crate::subscriptions::groups::StoredGroup;
use crate::subscriptions::imports::ImportRepository;
use crate::subscriptions::pausing::AutoResume;
use crate::subscriptions::query::ListQuery;
use crate::subscriptions::resources::{
    CurrencyCode, FailureDetails, PaymentExpiry, ShippingLine, StatusLog, Subscription,
    SubscriptionAddress, SubscriptionCustomer, SubscriptionLineItem, SubscriptionStatus,
};
use crate::subscriptions::states::NewStatusLog;
use crate::webhooks::WebhookRepositories;

crate::feature_database!(
    /// The database as the subscriptions feature sees it.
    SubscriptionDatabase,
    SubscriptionRepositories
);

/// Every repository the subscriptions' use cases may touch in one unit of work: their own, the
/// directory's reads of customers and addresses, the platform's outbox (changes sent to the
/// connector) and the webhooks' messages.
pub trait SubscriptionRepositories:
    PlatformRepositories
    + DirectoryRepository
    + WebhookRepositories
    + SubscriptionCustomerRepository
    + SubscriptionRepository
    + SubscriptionOrderRepository
    + SubscriptionGroupRepository
    + CancellationReasonRepository
    + DunningPolicyRepository
    + ImportRepository
    + AnalyticsRepository
{
}

impl<T> SubscriptionRepositories for T where
    T: PlatformRepositories
        + DirectoryRepository
        + WebhookRepositories
        + SubscriptionCustomerRepository
        + SubscriptionRepository
        + SubscriptionOrderRepository
        + SubscriptionGroupRepository
        + CancellationReasonRepository
        + DunningPolicyRepository
        + ImportRepository
        + AnalyticsRepository
        + ?Sized
{
}

/// Subscription groups and their billing rules.
pub trait SubscriptionGroupRepository {
    /// A page of the shop's groups by id, and how many it has.
    fn subscription_groups(
        &mut self,
        shop_id: ShopId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<StoredGroup>, i64)>;
    /// The shop's group of this id; `None` for an unknown id or another shop's.
    fn subscription_group(
        &mut self,
        shop_id: ShopId,
        id: GroupId,
    ) -> StoreResult<Option<StoredGroup>>;
    /// Stores the group as it is: a group of id 0 is inserted; its rules of id 0 are
    /// inserted, the others updated, and the group's rules not listed deleted. Answers the
    /// group as stored, with its ids.
    fn save_subscription_group(
        &mut self,
        shop_id: ShopId,
        group: &StoredGroup,
    ) -> StoreResult<StoredGroup>;
    /// Deletes the shop's group of this id with its billing rules; false when there is none.
    fn delete_subscription_group(&mut self, shop_id: ShopId, id: GroupId) -> StoreResult<bool>;
    /// Holds the group until the transaction ends (PostgreSQL; SQLite's writes are serial).
    fn lock_subscription_group(&mut self, shop_id: ShopId, id: GroupId) -> StoreResult<()>;
    /// How many subscriptions not `inactive` have a line item of the group.
    fn live_subscriptions_of_group(
        &mut self,
        shop_id: ShopId,
        group_id: GroupId,
    ) -> StoreResult<i64>;
    /// How many boxes are sold under the group (the box builder's boxes, by their group).
    fn boxes_of_group(&mut self, shop_id: ShopId, group_id: GroupId) -> StoreResult<i64>;
    /// Which of `rule_ids` a line item of a subscription not `inactive` follows.
    fn billing_rules_in_use(
        &mut self,
        shop_id: ShopId,
        rule_ids: &[BillingRuleId],
    ) -> StoreResult<Vec<BillingRuleId>>;
}

/// A customer's own fields as the subscription API writes them. Absent is no value (the
/// store keeps NOT NULL text columns as empty text, read back as absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomerFields {
    /// The customer's email address.
    pub email: Option<String>,
    /// The customer's first name.
    pub first_name: Option<String>,
    /// The customer's last name.
    pub last_name: Option<String>,
    /// The customer's phone number.
    pub phone: Option<String>,
    /// Notes on the customer (the subscription API's own; the platform sends none).
    pub notes: Option<String>,
}

impl CustomerFields {
    /// The platform's document of the customer (`document`, JSON text) with these contact
    /// fields: kept with the columns, so that the platform's echo of a change made here (its
    /// Customer Saved) is no change again.
    pub fn written_into(&self, document: &str) -> Option<String> {
        let mut value: serde_json::Value = serde_json::from_str(document).ok()?;
        let object = value.as_object_mut()?;
        for (name, field) in [
            ("email", &self.email),
            ("first_name", &self.first_name),
            ("last_name", &self.last_name),
            ("phone", &self.phone),
        ] {
            match field {
                Some(text) => {
                    object.insert(name.to_string(), serde_json::Value::String(text.clone()))
                }
                None => object.remove(name),
            };
        }
        serde_json::to_string(&value).ok()
    }
}

/// Which customers List Customers shows (docs/subscriptions.md): every customer
/// with a subscription (`all`), those with one that is not `inactive` (`active`), and those
/// whose subscriptions are all `inactive` (`inactive`). Several statuses are their union.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CustomerStatus {
    /// Every live customer with at least one subscription.
    All,
    /// Customers with a subscription that is not `inactive`.
    Active,
    /// Customers with subscriptions, all of them `inactive`.
    Inactive,
}

/// List Customers' query, as `customers::parse_customer_list_query` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomerListQuery {
    /// Never empty; `[All]` when the client named none.
    pub statuses: Vec<CustomerStatus>,
    /// Case-insensitive substring of the first name, last name, full name, email or phone.
    pub search: Option<String>,
    /// The most customers a page holds.
    pub limit: i64,
    /// 1-based.
    pub page: i64,
}

/// A page of customer ids, by id ascending, and how many match in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdPage {
    /// The customers' ids on the page (the service's integers).
    pub ids: Vec<CustomerId>,
    /// How many customers match, over every page.
    pub total: i64,
}

/// `subscription_summary` figures of one customer, from its subscriptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SummaryFigures {
    /// The customer's id (the service's integer).
    pub customer_id: CustomerId,
    /// Subscriptions not `inactive`.
    pub active_subscription_count: i64,
    /// Subscriptions that are `inactive`.
    pub inactive_subscription_count: i64,
    /// The earliest `next_order_datetime` of its subscriptions that are not `inactive`.
    pub next_order_date: Option<Timestamp>,
    /// The latest `last_order_datetime` of its subscriptions.
    pub last_order_date: Option<Timestamp>,
    /// The sum of its subscriptions' `orders_processed`.
    pub subscription_order_count: i64,
}

/// A stored address row, whatever its source: the platform's, or one made here.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAddress {
    /// The address's id (the service's integer).
    pub id: AddressId,
    /// The id of its shop (the service's integer).
    pub shop_id: ShopId,
    /// The id of its customer (the service's integer).
    pub customer_id: CustomerId,
    /// The platform's id of the address, once it has one.
    pub platform_id: Option<String>,
    /// The platform id of its customer, once it has one.
    pub customer_platform_id: Option<String>,
    /// Whether this is the customer's default address.
    pub is_default: bool,
    /// The address's fields, in the platform's form.
    pub address: CustomerAddress,
    /// When the service stored the address.
    pub created_at: Timestamp,
    /// When the service last changed the address.
    pub updated_at: Timestamp,
    /// When the address was deleted; `None` while it is live.
    pub deleted_at: Option<Timestamp>,
}

/// The subscription feature's writes of customers and addresses. They go to the same rows as
/// the platform's events and the directory's reads: one customer record per shop.
pub trait SubscriptionCustomerRepository {
    /// The live customer of the shop with this email, compared without case; the oldest when
    /// several have it.
    fn customer_id_by_email(
        &mut self,
        shop_id: ShopId,
        email: &str,
    ) -> StoreResult<Option<CustomerId>>;
    /// A customer made here: no platform id until the connector gives one.
    fn insert_customer(
        &mut self,
        shop_id: ShopId,
        fields: &CustomerFields,
        now: Timestamp,
    ) -> StoreResult<CustomerId>;
    /// Writes every field of `fields` (absent clears it); false when the shop has no live
    /// customer of that id.
    fn update_customer(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        fields: &CustomerFields,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// `notes` of these customers (a column only this feature writes), by customer id.
    fn customer_notes(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<(CustomerId, String)>>;
    /// List Customers: the ids of a page and the total.
    fn list_subscription_customers(
        &mut self,
        shop_id: ShopId,
        query: &CustomerListQuery,
    ) -> StoreResult<IdPage>;
    /// The `subscription_summary` figures of these customers, from their subscriptions; a
    /// customer without any may be left out (its figures are all zero).
    fn subscription_summaries(
        &mut self,
        shop_id: ShopId,
        customer_ids: &[CustomerId],
    ) -> StoreResult<Vec<SummaryFigures>>;

    /// Addresses by id, deleted ones included (a subscription keeps showing its address).
    fn addresses_by_ids(
        &mut self,
        shop_id: ShopId,
        ids: &[AddressId],
    ) -> StoreResult<Vec<StoredAddress>>;
    /// A new address of a customer made here; when `is_default`, the customer's other
    /// addresses stop being the default.
    fn insert_address(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        address: &CustomerAddress,
        is_default: bool,
        now: Timestamp,
    ) -> StoreResult<AddressId>;
    /// Rewrites a live address; when `is_default`, the customer's other addresses stop being
    /// the default. False when the customer has no live address of that id.
    fn update_address(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        address_id: AddressId,
        address: &CustomerAddress,
        is_default: bool,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// Marks a live address deleted (not the default flag of the others: the use case names
    /// the next default). False when there is none.
    fn delete_address(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        address_id: AddressId,
        now: Timestamp,
    ) -> StoreResult<bool>;
}

/// The scalar state of a subscription: every field of the resource but its id, shop, creation
/// time and the nested resources, plus what only Mercer sees.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionState {
    /// The id of its customer (the service's integer).
    pub customer_id: CustomerId,
    /// The id of the customer's address it bills to.
    pub billing_address_id: AddressId,
    /// The id of the customer's address its orders ship to.
    pub shipping_address_id: AddressId,
    /// How many of its orders Mercer has placed.
    pub orders_processed: i64,
    /// How many times its current order has failed (0 once one is placed).
    pub current_retries: i64,
    /// The client's own reference for the subscription.
    pub external_id: Option<String>,
    /// The key Create Subscription was given, unique in the shop.
    pub idempotency_key: Option<String>,
    /// `body_fingerprint` of the Create Subscription body, with `idempotency_key`.
    pub idempotency_fingerprint: Option<String>,
    /// When its next order is due; `None` when none is.
    pub next_order_datetime: Option<Timestamp>,
    /// When its next payment falls.
    pub next_payment_datetime: Option<Timestamp>,
    /// The end of the retry wait after a failed order; `None` when no wait runs.
    pub next_processing_datetime: Option<Timestamp>,
    /// When Mercer last charged for one of its orders.
    pub last_payment_datetime: Option<Timestamp>,
    /// The order date of its last order placed.
    pub last_order_datetime: Option<Timestamp>,
    /// When Mercer last placed one of its orders.
    pub last_processed_datetime: Option<Timestamp>,
    /// When its status last changed.
    pub status_changed_at: Option<Timestamp>,
    /// When the subscription was placed, as the client gave it.
    pub placed_at: Option<Timestamp>,
    /// When the subscription last changed.
    pub updated_at: Timestamp,
    /// Its status.
    pub subscription_status: SubscriptionStatus,
    /// The token of its payment method (shown as `payment_method_token` only).
    pub payment_method_token: Option<String>,
    /// The payment gateway that takes the token.
    pub payment_gateway_public_id: Option<String>,
    /// Never shown (docs/subscriptions.md, payment details).
    pub payment_gateway_customer_id: Option<String>,
    /// When the payment method expires; `None` when unknown.
    pub payment_method_expires_at: Option<PaymentExpiry>,
    /// The payment rule (RFC 5545 text).
    pub payment_rrule: String,
    /// `payment_rrule` in plain English.
    pub payment_rrule_text: String,
    /// The order rule (RFC 5545 text), as given.
    pub order_rrule: String,
    /// `order_rrule` in plain English.
    pub order_rrule_text: String,
    /// The currency its orders are charged in.
    pub charged_currency: CurrencyCode,
    /// The currency of its prices.
    pub base_currency: CurrencyCode,
    /// What one unit of the base currency is in the charged currency.
    pub base_to_charged_exchange_rate: f64,
    /// The percent (0 to 100) its orders take off their items.
    pub percent_discount: f64,
    /// A discount code sent with each of its orders.
    pub discount_code: Option<String>,
    /// Its shipping lines (their `subscription_id` is filled in when shown).
    pub shipping_lines: Vec<ShippingLine>,
    /// The code of its last failed order attempt.
    pub last_failure_code: Option<String>,
    /// That failure as a sentence.
    pub last_failure_reason: Option<String>,
    /// That failure's details.
    pub last_failure_details: Option<FailureDetails>,
    /// Order dates skipped with the skip action, kept beside the rule.
    pub skipped_dates: Vec<Timestamp>,
    /// A note on the subscription, kept and shown.
    pub note: Option<String>,
    /// A note sent as the `notes` of each of its orders.
    pub order_note: Option<String>,
    /// When a paused subscription comes back by itself (`resume_on`); `None` when it does not.
    pub resume_on: Option<AutoResume>,
}

/// A subscription as stored: its state, its line items by id, its latest status log entry.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSubscription {
    /// The subscription's id (the service's integer).
    pub id: SubscriptionId,
    /// The id of its shop (the service's integer).
    pub shop_id: ShopId,
    /// When the service stored the subscription.
    pub created_at: Timestamp,
    /// Its scalar fields and what only Mercer sees (see [`SubscriptionState`]).
    pub state: SubscriptionState,
    /// Its line items, by id.
    pub line_items: Vec<SubscriptionLineItem>,
    /// Its latest status log entry; `None` when it has none.
    pub latest_status_log: Option<StatusLog>,
}

/// A page of List Subscriptions: at most `limit` subscriptions by id ascending, and whether more
/// follow the last.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionPage {
    /// The page's subscriptions, by id ascending.
    pub subscriptions: Vec<StoredSubscription>,
    /// Whether subscriptions the query matches follow the last of the page.
    pub has_more: bool,
}

/// The subscriptions of a shop with their line items and status log: the reads and writes of
/// the subscription API's use cases.
pub trait SubscriptionRepository {
    /// The id and body fingerprint of the shop's subscription created with this key.
    fn subscription_by_idempotency_key(
        &mut self,
        shop_id: ShopId,
        key: &str,
    ) -> StoreResult<Option<(SubscriptionId, Option<String>)>>;
    /// Inserts a subscription and its line items (their `id` and `subscription_id` are given by
    /// the store), created at `now`; returns its id. A second subscription with one shop's
    /// idempotency key is a `StoreError::Conflict`.
    fn insert_subscription(
        &mut self,
        shop_id: ShopId,
        state: &SubscriptionState,
        line_items: &[SubscriptionLineItem],
        now: Timestamp,
    ) -> StoreResult<SubscriptionId>;
    /// Writes the whole state of a subscription of the shop; false when there is none.
    fn save_subscription(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
        state: &SubscriptionState,
    ) -> StoreResult<bool>;
    /// Rewrites a line item of the subscription (its quantity, prices, the rest of its fields),
    /// updated at `now`; false when the subscription has no line item of `item.id`.
    fn update_line_item(
        &mut self,
        shop_id: ShopId,
        subscription_id: SubscriptionId,
        item: &SubscriptionLineItem,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// Locks the subscription's row until the unit of work ends, so that changes made by
    /// read, change, save (a client's action, the scheduler's) run one after the other.
    /// PostgreSQL: `SELECT … FOR UPDATE`; SQLite and the memory database write one at a time.
    fn lock_subscription(&mut self, shop_id: ShopId, id: SubscriptionId) -> StoreResult<()>;
    /// Holds a lock named `key` until the unit of work ends, so units of work that look for a
    /// thing and create it when missing (a customer by email, a subscription by idempotency
    /// key) run one after the other. PostgreSQL: an advisory transaction lock; SQLite and the
    /// memory database run one write at a time already.
    fn lock_for_create(&mut self, key: &str) -> StoreResult<()>;
    /// Appends a status log entry; it becomes the subscription's `latest_status_log`.
    fn insert_status_log(
        &mut self,
        shop_id: ShopId,
        entry: &NewStatusLog,
    ) -> StoreResult<StatusLog>;
    /// Writes the whole state of a subscription of the shop and appends `entry` to its status
    /// log, as [`Self::save_subscription`] then [`Self::insert_status_log`] do (a store may do
    /// both in one statement). The entry as stored.
    fn save_with_status_log(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
        state: &SubscriptionState,
        entry: &NewStatusLog,
    ) -> StoreResult<StatusLog> {
        self.save_subscription(shop_id, id, state)?;
        self.insert_status_log(shop_id, entry)
    }
    /// The subscription's status log, newest first, at most `limit` entries.
    fn status_logs_of_subscription(
        &mut self,
        shop_id: ShopId,
        subscription_id: SubscriptionId,
        limit: usize,
    ) -> StoreResult<Vec<StatusLog>>;
    /// The shop's subscription of this id; `None` for an unknown id or another shop's.
    fn subscription(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
    ) -> StoreResult<Option<StoredSubscription>>;
    /// List Subscriptions: the subscriptions `query` matches with an id above its cursor's, by
    /// id ascending, at most `query.limit`.
    fn list_subscriptions(
        &mut self,
        shop_id: ShopId,
        query: &ListQuery,
    ) -> StoreResult<SubscriptionPage>;
    /// How many subscriptions `query` matches in all (its cursor and limit aside).
    fn count_subscriptions(&mut self, shop_id: ShopId, query: &ListQuery) -> StoreResult<i64>;
    /// A page of a customer's subscriptions, by id ascending (1-based `page`), and the total.
    fn customer_subscriptions(
        &mut self,
        shop_id: ShopId,
        customer_id: CustomerId,
        limit: i64,
        page: i64,
    ) -> StoreResult<(Vec<StoredSubscription>, i64)>;
}

/// Where an attempt to place a subscription's order stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum OrderAttemptStatus {
    /// Being placed: its job calls the connector.
    Placing,
    /// The order (and its payment) went through.
    Placed,
    /// The connector failed, timed out or the payment was declined.
    Failed,
}

impl OrderAttemptStatus {
    /// The status's name as stored and shown: `placing`, `placed` or `failed`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The status of that name, as [`Self::as_str`] writes it; `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// One attempt to place a subscription's order through the connector (docs/scheduler.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionOrder {
    /// The attempt's id (the service's integer).
    pub id: SubscriptionOrderId,
    /// The id of the subscription's shop (the service's integer).
    pub shop_id: ShopId,
    /// The id of the subscription whose order it places (the service's integer).
    pub subscription_id: SubscriptionId,
    /// The order date placed: `next_order_datetime` when the attempt began.
    pub scheduled_at: Timestamp,
    /// 1 for the first attempt of the date, 2 for its first retry…
    pub attempt: i64,
    /// Create Order's `Idempotency-Key`: the same for every attempt of one date.
    pub idempotency_key: String,
    /// Where the attempt stands.
    pub status: OrderAttemptStatus,
    /// When the order came due: its date, or the end of the retry wait.
    pub due_at: Timestamp,
    /// The platform's id of the order, once Create Order answered one.
    pub platform_order_id: Option<String>,
    /// The platform's id of the payment, once the attempt is placed; `None` when nothing was
    /// charged (see [`OrderAttemptEnd::Placed`]).
    pub platform_payment_id: Option<String>,
    /// Why the attempt failed, as a code (the subscription's `last_failure_code`).
    pub failure_code: Option<String>,
    /// Why the attempt failed, as a sentence.
    pub failure_reason: Option<String>,
    /// When the attempt ended; `None` while it is placing.
    pub finished_at: Option<Timestamp>,
    /// When the attempt began.
    pub created_at: Timestamp,
    /// When the attempt last changed.
    pub updated_at: Timestamp,
}

/// An attempt about to begin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSubscriptionOrder {
    /// The id of the subscription's shop (the service's integer).
    pub shop_id: ShopId,
    /// The id of the subscription whose order it places (the service's integer).
    pub subscription_id: SubscriptionId,
    /// The order date to place: the subscription's `next_order_datetime`.
    pub scheduled_at: Timestamp,
    /// The attempt's number among the attempts of that date, from 1.
    pub attempt: i64,
    /// Create Order's `Idempotency-Key`: the same for every attempt of one date.
    pub idempotency_key: String,
    /// When the order came due: its date, or the end of the retry wait.
    pub due_at: Timestamp,
    /// When the attempt begins.
    pub created_at: Timestamp,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderAttemptEnd {
    /// The order was placed (and paid, when it had something to pay).
    Placed {
        /// The platform's id of the order.
        platform_order_id: String,
        /// None when nothing was charged (a prepaid order, a total of zero).
        platform_payment_id: Option<String>,
    },
    /// The attempt failed: the connector failed or timed out, or the payment was declined.
    Failed {
        /// The failure as a code, such as `payment_declined` or `connector_timeout`.
        code: String,
        /// The failure as a sentence.
        reason: String,
    },
}

/// Which of a shop's order attempts a list shows: newest order date first, then newest attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrderFilter {
    /// Only attempts in this status.
    pub status: Option<OrderAttemptStatus>,
    /// Only attempts whose order date is at or after this instant.
    pub from: Option<Timestamp>,
    /// Only attempts whose order date is before this instant.
    pub until: Option<Timestamp>,
    /// Only attempts after this one in the list's order (order date, then id): a page's cursor.
    pub before: Option<(Timestamp, SubscriptionOrderId)>,
}

impl OrderFilter {
    /// Whether `order` belongs in the list.
    pub fn matches(&self, order: &SubscriptionOrder) -> bool {
        self.status.is_none_or(|status| order.status == status)
            && self.from.is_none_or(|from| order.scheduled_at >= from)
            && self.until.is_none_or(|until| order.scheduled_at < until)
            && self.before.is_none_or(|(at, id)| {
                order.scheduled_at < at || (order.scheduled_at == at && order.id < id)
            })
    }
}

/// The scheduler's figures at one moment, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedulerBacklog {
    /// Active subscriptions whose order is due and not begun (retry waits over).
    pub due: i64,
    /// Subscriptions whose order is being placed.
    pub processing: i64,
    /// Active subscriptions waiting for a retry of a failed order.
    pub waiting_retry: i64,
}

/// The scheduler's storage: due subscriptions found through the `(subscription_status,
/// next_order_datetime)` index, and the attempts to place their orders.
pub trait SubscriptionOrderRepository {
    /// Up to `limit` subscriptions (shop id, id) of every shop in `status` whose
    /// `next_order_datetime` is at or before `now` and whose retry wait
    /// (`next_processing_datetime`) is over, earliest first, locked until the unit of work ends.
    /// PostgreSQL skips the rows another unit of work holds (`FOR UPDATE SKIP LOCKED`).
    fn lock_due_subscriptions(
        &mut self,
        status: SubscriptionStatus,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<(ShopId, SubscriptionId)>>;
    /// Whole subscriptions of a shop by id, in the order of `ids`.
    fn subscriptions_by_ids(
        &mut self,
        shop_id: ShopId,
        ids: &[SubscriptionId],
    ) -> StoreResult<Vec<StoredSubscription>>;
    /// Stores a new attempt, `placing`; returns its id.
    fn insert_subscription_order(
        &mut self,
        order: &NewSubscriptionOrder,
    ) -> StoreResult<SubscriptionOrderId>;
    /// [`Self::insert_subscription_order`] for each of `orders`; their ids in the same order.
    /// A store may insert them in one statement.
    fn insert_subscription_orders(
        &mut self,
        orders: &[NewSubscriptionOrder],
    ) -> StoreResult<Vec<SubscriptionOrderId>> {
        orders
            .iter()
            .map(|order| self.insert_subscription_order(order))
            .collect()
    }
    /// The attempt of this id, of any shop; `None` when there is none.
    fn subscription_order(
        &mut self,
        id: SubscriptionOrderId,
    ) -> StoreResult<Option<SubscriptionOrder>>;
    /// Every attempt of the subscription's order date, first attempt first.
    fn attempts_of_date(
        &mut self,
        subscription_id: SubscriptionId,
        scheduled_at: Timestamp,
    ) -> StoreResult<Vec<SubscriptionOrder>>;
    /// Every attempt of each `(subscription, order date)`, by subscription, first attempt
    /// first: [`Self::attempts_of_date`] for many at once.
    fn attempts_of_dates(
        &mut self,
        dates: &[(SubscriptionId, Timestamp)],
    ) -> StoreResult<Vec<SubscriptionOrder>> {
        let mut attempts = Vec::new();
        for (subscription_id, scheduled_at) in dates {
            attempts.extend(self.attempts_of_date(*subscription_id, *scheduled_at)?);
        }
        Ok(attempts)
    }
    /// Keeps the platform order id Create Order answered for a placing attempt.
    fn set_order_platform_id(
        &mut self,
        id: SubscriptionOrderId,
        platform_order_id: &str,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// Ends a placing attempt and answers it as ended; None (and nothing written) when it is not
    /// placing any more.
    fn finish_subscription_order(
        &mut self,
        id: SubscriptionOrderId,
        end: &OrderAttemptEnd,
        now: Timestamp,
    ) -> StoreResult<Option<SubscriptionOrder>>;
    /// How many attempts are placing now, of every shop.
    fn count_placing_orders(&mut self) -> StoreResult<i64>;
    /// Attempts still placing that began before `before`, oldest first.
    fn stalled_subscription_orders(
        &mut self,
        before: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionOrder>>;
    /// The attempts of these subscriptions, newest first, at most `per_subscription` each.
    fn orders_of_subscriptions(
        &mut self,
        subscription_ids: &[SubscriptionId],
        per_subscription: usize,
    ) -> StoreResult<Vec<SubscriptionOrder>>;
    /// The shop's attempts `filter` keeps, newest order date first (then newest attempt), at
    /// most `limit`: one read of the `(shop_id, scheduled_at, id)` index, or of
    /// `(shop_id, status, scheduled_at, id)` for one status.
    fn shop_subscription_orders(
        &mut self,
        shop_id: ShopId,
        filter: &OrderFilter,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionOrder>>;
    /// Ids of the shop's subscriptions that are active, scheduled or processing with a
    /// `next_order_datetime` at or before `until`, earliest first.
    fn upcoming_subscription_ids(
        &mut self,
        shop_id: ShopId,
        until: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionId>>;
    /// Ids of the shop's active, paused or scheduled subscriptions whose payment method
    /// expires at or before `by` and was not announced yet, soonest first.
    fn expiring_payment_subscriptions(
        &mut self,
        shop_id: ShopId,
        by: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<SubscriptionId>>;
    /// Records that `subscription_expiring_payment` was emitted for the subscription's payment
    /// method (`Some`), or that its new one was not announced yet (`None`).
    fn set_expiring_payment_notified(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
        at: Option<Timestamp>,
    ) -> StoreResult<()>;
    /// The scheduler's figures at `now`, over every shop.
    fn scheduler_backlog(&mut self, now: Timestamp) -> StoreResult<SchedulerBacklog>;
    /// Up to `limit` paused subscriptions (shop id, id) of `shop_id`, or of every shop, whose
    /// automatic resume (`resume_on`'s start) is at or before `now`, earliest first.
    fn due_resumptions(
        &mut self,
        shop_id: Option<ShopId>,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<(ShopId, SubscriptionId)>>;
    /// Locks the subscription until the unit of work ends when it is paused and its automatic
    /// resume is at or before `now`; false (nothing locked) otherwise. PostgreSQL skips a row
    /// another unit of work holds (`FOR UPDATE SKIP LOCKED`): false.
    fn lock_due_resumption(
        &mut self,
        shop_id: ShopId,
        id: SubscriptionId,
        now: Timestamp,
    ) -> StoreResult<bool>;
}

impl StoredSubscription {
    /// The subscription as answers show it, with its addresses and (when expanded) customer.
    pub fn into_resource(
        self,
        billing_address: SubscriptionAddress,
        shipping_address: SubscriptionAddress,
        customer: Option<Box<SubscriptionCustomer>>,
    ) -> Subscription {
        let s = self.state;
        Subscription {
            id: self.id,
            shop_id: self.shop_id,
            customer_id: s.customer_id,
            billing_address_id: s.billing_address_id,
            shipping_address_id: s.shipping_address_id,
            orders_processed: s.orders_processed,
            current_retries: s.current_retries,
            external_id: s.external_id,
            idempotency_key: s.idempotency_key,
            customer,
            next_order_datetime: s.next_order_datetime,
            next_payment_datetime: s.next_payment_datetime,
            next_processing_datetime: s.next_processing_datetime,
            last_payment_datetime: s.last_payment_datetime,
            last_order_datetime: s.last_order_datetime,
            last_processed_datetime: s.last_processed_datetime,
            status_changed_at: s.status_changed_at,
            placed_at: s.placed_at,
            created_at: self.created_at,
            updated_at: s.updated_at,
            subscription_status: s.subscription_status,
            payment_method_token: s.payment_method_token,
            payment_gateway_public_id: s.payment_gateway_public_id,
            payment_method_expires_at: s.payment_method_expires_at,
            payment_rrule: s.payment_rrule,
            payment_rrule_text: s.payment_rrule_text,
            order_rrule: s.order_rrule,
            order_rrule_text: s.order_rrule_text,
            charged_currency: s.charged_currency,
            base_currency: s.base_currency,
            base_to_charged_exchange_rate: s.base_to_charged_exchange_rate,
            percent_discount: s.percent_discount,
            discount_code: s.discount_code,
            line_items: self.line_items,
            shipping_lines: s
                .shipping_lines
                .into_iter()
                .map(|line| ShippingLine {
                    subscription_id: self.id,
                    ..line
                })
                .collect(),
            billing_address,
            shipping_address,
            last_failure_code: s.last_failure_code,
            last_failure_reason: s.last_failure_reason,
            last_failure_details: s.last_failure_details,
            latest_status_log: self.latest_status_log,
            note: s.note,
            order_note: s.order_note,
            resume_on: s.resume_on.map(|resume| resume.on),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The stored form of a resource (tests build resources with their fixtures).
    pub(crate) fn stored(s: &Subscription) -> StoredSubscription {
        StoredSubscription {
            id: s.id,
            shop_id: s.shop_id,
            created_at: s.created_at,
            state: SubscriptionState {
                customer_id: s.customer_id,
                billing_address_id: s.billing_address_id,
                shipping_address_id: s.shipping_address_id,
                orders_processed: s.orders_processed,
                current_retries: s.current_retries,
                external_id: s.external_id.clone(),
                idempotency_key: s.idempotency_key.clone(),
                idempotency_fingerprint: None,
                next_order_datetime: s.next_order_datetime,
                next_payment_datetime: s.next_payment_datetime,
                next_processing_datetime: s.next_processing_datetime,
                last_payment_datetime: s.last_payment_datetime,
                last_order_datetime: s.last_order_datetime,
                last_processed_datetime: s.last_processed_datetime,
                status_changed_at: s.status_changed_at,
                placed_at: s.placed_at,
                updated_at: s.updated_at,
                subscription_status: s.subscription_status,
                payment_method_token: s.payment_method_token.clone(),
                payment_gateway_public_id: s.payment_gateway_public_id.clone(),
                payment_gateway_customer_id: None,
                payment_method_expires_at: s.payment_method_expires_at,
                payment_rrule: s.payment_rrule.clone(),
                payment_rrule_text: s.payment_rrule_text.clone(),
                order_rrule: s.order_rrule.clone(),
                order_rrule_text: s.order_rrule_text.clone(),
                charged_currency: s.charged_currency.clone(),
                base_currency: s.base_currency.clone(),
                base_to_charged_exchange_rate: s.base_to_charged_exchange_rate,
                percent_discount: s.percent_discount,
                discount_code: s.discount_code.clone(),
                shipping_lines: s.shipping_lines.clone(),
                last_failure_code: s.last_failure_code.clone(),
                last_failure_reason: s.last_failure_reason.clone(),
                last_failure_details: s.last_failure_details.clone(),
                skipped_dates: Vec::new(),
                note: s.note.clone(),
                order_note: s.order_note.clone(),
                resume_on: s.resume_on.map(|on| AutoResume {
                    on,
                    at: crate::subscriptions::recurrence::ShopZone::UTC
                        .start_of_day(on)
                        .unwrap_or(s.updated_at),
                }),
            },
            line_items: s.line_items.clone(),
            latest_status_log: s.latest_status_log.clone(),
        }
    }

    #[test]
    fn a_stored_subscription_answers_as_the_resource_it_came_from() {
        let resource = crate::subscriptions::resources::tests::subscription();
        let back = stored(&resource).into_resource(
            resource.billing_address.clone(),
            resource.shipping_address.clone(),
            None,
        );
        assert_eq!(back, resource);
    }
}
