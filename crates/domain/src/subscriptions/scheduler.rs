//! The subscription scheduler (docs/scheduler.md): two kinds of job on the
//! job runner.
//!
//! - [`SchedulerJob`], recurring under one key: starts scheduled subscriptions whose first order
//!   has come, begins the order of every active subscription whose `next_order_datetime` has
//!   come (status `processing`, an attempt row, `subscription_upcoming_order`, and an
//!   [`OrderJob`], in one transaction), gives a job again to attempts whose job is gone, and
//!   announces payment methods about to expire.
//! - [`OrderJob`], one per attempt: Create Order with `Idempotency-Key` = subscription id + order
//!   date, then Create Payment, then the outcome in one transaction: on success the next order
//!   date, counts and `subscription_order_created`; on failure `current_retries`, the next wait
//!   of the shop's dunning policy or, with none left, its `at_max_retries` (cancel, pause, or
//!   skip the order), and their topics.
//!
//! Exactly once: the attempt is begun in the transaction that claims the subscription (a row
//! lock, `SKIP LOCKED` on PostgreSQL, and the status check); the attempt's job holds a lease; a
//! job claimed again after a crash reads what the attempt stored (the platform order id) and
//! looks for its own payment before paying; the platform answers a repeated `Idempotency-Key`
//! with the order it made first; and the outcome is written only while the attempt is still
//! `placing`.

use crate::kernel::ids::ShopId;
use crate::subscriptions::analytics::{count_order, count_saved};
use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::access::shop::Shop;
use crate::kernel::activity::{Activity, record_one};
use crate::kernel::error::{DomainError, StorageError};
use crate::kernel::ids::{SubscriptionId, SubscriptionOrderId};
use crate::kernel::jobs::{Enqueued, JobControl, JobFailure, JobPayload, enqueue, enqueue_each};
use crate::kernel::time::{Clock, Timestamp};
use crate::platform::connector::{ConnectorTarget, PlatformConnector};
use crate::platform::destinations::{Topic as DestinationTopic, live_target};
use crate::platform::placement::{self, PlacementError};
use crate::subscriptions::dunning::{AfterFailure, AtMaxRetries, shop_dunning};
use crate::subscriptions::operations::{resources, schedule_of};
use crate::subscriptions::orders::{
    OrderCharge, OrderCustomer, advance_prepaid, idempotency_key, payment_key,
    payment_keys_of_date, platform_order, platform_payment, try_charge,
};
use crate::subscriptions::repository::{
    NewSubscriptionOrder, OrderAttemptEnd, OrderAttemptStatus, StoredSubscription,
    SubscriptionDatabase, SubscriptionOrder, SubscriptionRepositories, SubscriptionState,
};
use crate::subscriptions::resources::{
    Actor, Cents, FailureDetails, StatusLog, Subscription, SubscriptionLineItem, SubscriptionStatus,
};
use crate::subscriptions::states::{Action, ActionOutcome, NewStatusLog, take_action};
use crate::subscriptions::topics::Topic;
use crate::subscriptions::webhooks::{
    OrderAttemptShown, emit, emit_about_attempt, emit_each_with_attempt,
};

/// Subscriptions claimed in one transaction.
pub(crate) const DUE_BATCH: usize = 100;
/// Most attempts placing at once, across processes. A run begins no more than this allows and
/// comes back soon while orders are still due: a burst of due orders is placed in waves, each
/// subscription `processing` (refusing changes) only while its order is near, and claims do
/// not hold the rows every placement needs for long.
pub(crate) const MAX_PLACING: i64 = 200;
/// An attempt still `placing` this long after it began, without a job, gets one again.
pub(crate) const STALLED_AFTER_SECONDS: i64 = 300;
/// Subscriptions announced as expiring in one transaction.
const EXPIRY_BATCH: usize = 200;

/// The recurring job of the scheduler: one, under a fixed key, enqueued at every start of
/// `mercer serve`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedulerJob {}

impl JobPayload for SchedulerJob {
    const KIND: &'static str = "subscriptions.scheduler";

    fn unique_key(&self) -> Option<String> {
        Some(Self::KIND.to_string())
    }
}

/// Places the order of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderJob {
    /// The id of the order attempt to place.
    pub order_id: SubscriptionOrderId,
    /// A job given again to an attempt whose job was gone: earlier jobs of the attempt may have
    /// got past Create Order, so even its first run looks for their payment.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
}

impl JobPayload for OrderJob {
    const KIND: &'static str = "subscriptions.order";
    /// A placement mostly waits (the connector's two calls, the outcome's commit): a worker
    /// places a few side by side, and claims them in one transaction.
    const BATCH: usize = 4;

    fn unique_key(&self) -> Option<String> {
        Some(format!("{}:{}", Self::KIND, self.order_id))
    }
}

/// What one run of the scheduler did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedulerRun {
    /// Scheduled subscriptions made active.
    pub started: usize,
    /// Paused subscriptions resumed on their `resume_on` day.
    pub auto_resumed: usize,
    /// Orders begun (attempts made, jobs enqueued).
    pub begun: usize,
    /// Attempts given a job again.
    pub resumed: usize,
    /// `subscription_expiring_payment` messages emitted.
    pub expiring: usize,
    /// It stopped beginning orders at `MAX_PLACING`: more may be due, run again soon.
    pub more_due: bool,
    /// It stopped early: its process is stopping.
    pub interrupted: bool,
}

/// Runs the scheduler once at `clock`'s now.
pub fn run_scheduler(
    db: &impl SubscriptionDatabase,
    clock: &dyn Clock,
    control: &dyn JobControl,
) -> Result<SchedulerRun, DomainError> {
    let mut run = SchedulerRun::default();
    loop {
        if control.should_stop() {
            run.interrupted = true;
            return Ok(run);
        }
        let started = start_scheduled(db, clock, DUE_BATCH)?;
        run.started += started;
        if started < DUE_BATCH {
            break;
        }
    }
    // Before the due orders: a subscription resumed today whose order date has come is placed
    // in this run.
    run.auto_resumed = crate::subscriptions::pausing::resume_due_pauses(db, clock, control)?;
    if control.should_stop() {
        run.interrupted = true;
        return Ok(run);
    }
    loop {
        if control.should_stop() {
            run.interrupted = true;
            return Ok(run);
        }
        let begun = begin_due_orders(db, clock, DUE_BATCH)?;
        run.begun += begun.begun;
        if begun.at_capacity {
            run.more_due = true;
            break;
        }
        if begun.begun < DUE_BATCH {
            break;
        }
    }
    run.resumed = resume_stalled_orders(db, clock)?;
    run.expiring = announce_expiring_payments(db, clock, control)?;
    Ok(run)
}

/// `(shop id, id)` pairs grouped by shop, each shop's ids in their order.
fn by_shop(pairs: Vec<(ShopId, SubscriptionId)>) -> BTreeMap<ShopId, Vec<SubscriptionId>> {
    let mut shops: BTreeMap<ShopId, Vec<SubscriptionId>> = BTreeMap::new();
    for (shop_id, id) in pairs {
        shops.entry(shop_id).or_default().push(id);
    }
    shops
}

fn missing_subscription(id: SubscriptionId) -> DomainError {
    DomainError::Storage(StorageError::other(format!("subscription {id} is missing")))
}

/// Makes active the scheduled subscriptions whose first order date has come
/// (`scheduled` → `active` at its start); their orders are begun next. Returns how many.
pub(crate) fn start_scheduled(
    db: &impl SubscriptionDatabase,
    clock: &dyn Clock,
    limit: usize,
) -> Result<usize, DomainError> {
    db.write_tx(|tx| {
        let now = clock.now();
        let due = tx.lock_due_subscriptions(SubscriptionStatus::Scheduled, now, limit)?;
        let count = due.len();
        for (shop_id, ids) in by_shop(due) {
            let Some(shop) = tx.shop_by_id(shop_id)? else {
                continue;
            };
            for stored in tx.subscriptions_by_ids(shop.id, &ids)? {
                let mut state = stored.state.clone();
                let outcome = take_action(
                    stored.id,
                    state.subscription_status,
                    Action::Start,
                    Actor::system(),
                    now,
                    false,
                )?;
                state.subscription_status = outcome.status;
                state.status_changed_at = Some(now);
                state.updated_at = now;
                tx.save_subscription(shop.id, stored.id, &state)?;
                count_saved(
                    tx,
                    &shop,
                    (&stored.state, &stored.line_items),
                    (&state, &stored.line_items),
                    None,
                    now,
                )?;
                tx.insert_status_log(shop.id, &outcome.log)?;
                let subscription = one_resource(tx, &shop, stored.id)?;
                for topic in outcome.topics {
                    emit(tx, &shop, topic, &subscription, now)?;
                }
            }
        }
        Ok(count)
    })
}

fn one_resource(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    id: SubscriptionId,
) -> Result<Subscription, DomainError> {
    let stored = tx
        .subscription(shop.id, id)?
        .ok_or_else(|| missing_subscription(id))?;
    resources(tx, shop, vec![stored], false)?
        .pop()
        .ok_or_else(|| missing_subscription(id))
}

fn order_data(
    order: &SubscriptionOrder,
    charge: &OrderCharge,
    currency: &str,
) -> OrderAttemptShown {
    OrderAttemptShown {
        id: order.id,
        order_datetime: order.scheduled_at,
        attempt: order.attempt,
        idempotency_key: order.idempotency_key.clone(),
        status: order.status.as_str(),
        due_at: order.due_at,
        platform_order_id: order.platform_order_id.clone(),
        platform_payment_id: order.platform_payment_id.clone(),
        failure_code: order.failure_code.clone(),
        failure_reason: order.failure_reason.clone(),
        subtotal: charge.subtotal,
        discount: charge.discount,
        shipping: charge.shipping,
        total: charge.total,
        currency: currency.to_string(),
    }
}

/// What one claim did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Begun {
    /// Due subscriptions taken: orders begun, and dates found ordered already and passed.
    pub begun: usize,
    /// [`MAX_PLACING`] attempts are placing: it began what room was left.
    pub at_capacity: bool,
}

/// Begins the order of up to `limit` due active subscriptions, in one transaction, no more
/// than [`MAX_PLACING`] allows: each goes `processing` (its status log names Mercer), gets an
/// attempt and its job, and, on the first attempt of its order date,
/// `subscription_upcoming_order`.
pub(crate) fn begin_due_orders(
    db: &impl SubscriptionDatabase,
    clock: &dyn Clock,
    limit: usize,
) -> Result<Begun, DomainError> {
    db.write_tx(|tx| {
        let now = clock.now();
        let room = usize::try_from(MAX_PLACING - tx.count_placing_orders()?).unwrap_or(0);
        let due = tx.lock_due_subscriptions(SubscriptionStatus::Active, now, limit.min(room))?;
        // The room, not the due orders, ran out.
        let at_capacity = room <= limit && due.len() == room;
        // Subscriptions no longer due: a row left as it was would be found again and again.
        let mut handled = 0;
        for (shop_id, ids) in by_shop(due) {
            let Some(shop) = tx.shop_by_id(shop_id)? else {
                continue;
            };
            let (mut attempts, mut saved) = (Vec::new(), Vec::new());
            let subscriptions = tx.subscriptions_by_ids(shop.id, &ids)?;
            let mut earlier = earlier_attempts(tx, &subscriptions)?;
            for stored in subscriptions {
                handled += 1;
                let earlier = earlier.remove(&stored.id).unwrap_or_default();
                if let Some((attempt, now_stored)) = begin_order(tx, &shop, stored, earlier, now)? {
                    attempts.push(attempt);
                    saved.push(now_stored);
                }
            }
            let (first_attempts, saved): (Vec<_>, Vec<_>) =
                store_attempts(tx, &shop, &attempts, now)?
                    .into_iter()
                    .zip(saved)
                    .filter(|(order, _)| order.attempt == 1)
                    .unzip();
            if first_attempts.is_empty() {
                continue;
            }
            let subscriptions = resources(tx, &shop, saved, false)?;
            let mut shown = Vec::with_capacity(subscriptions.len());
            for (subscription, order) in subscriptions.iter().zip(&first_attempts) {
                // Amounts too large to charge: the placement will fail with `amount_overflow`
                // (and say so); no notice announces amounts that will not be charged.
                let Some(amounts) = try_charge(subscription) else {
                    log::warn!(
                        "subscription {}: no upcoming-order notice, the order's amounts are too \
                         large to charge",
                        subscription.id
                    );
                    continue;
                };
                let order = order_data(order, &amounts, subscription.charged_currency.as_str());
                shown.push((subscription, order));
            }
            let notices: Vec<_> = shown
                .iter()
                .map(|(subscription, order)| (*subscription, order))
                .collect();
            emit_each_with_attempt(tx, &shop, Topic::SubscriptionUpcomingOrder, &notices, now)?;
        }
        Ok(Begun {
            begun: handled,
            at_capacity,
        })
    })
}

/// The subscription as it is once `state`, its changed line items and the status log entry
/// `latest` are written: what a read would give, without the read.
fn as_saved(
    stored: StoredSubscription,
    state: SubscriptionState,
    changed_items: &[SubscriptionLineItem],
    latest: StatusLog,
) -> StoredSubscription {
    let mut line_items = stored.line_items;
    for item in changed_items {
        if let Some(slot) = line_items.iter_mut().find(|slot| slot.id == item.id) {
            *slot = item.clone();
        }
    }
    StoredSubscription {
        state,
        line_items,
        latest_status_log: Some(latest),
        ..stored
    }
}

/// The attempts already made for each subscription's next order date, by subscription, first
/// attempt first: one read for a claimed batch.
fn earlier_attempts(
    tx: &mut dyn SubscriptionRepositories,
    subscriptions: &[StoredSubscription],
) -> Result<HashMap<SubscriptionId, Vec<SubscriptionOrder>>, DomainError> {
    let dates: Vec<(SubscriptionId, Timestamp)> = subscriptions
        .iter()
        .filter_map(|stored| Some((stored.id, stored.state.next_order_datetime?)))
        .collect();
    let mut earlier: HashMap<SubscriptionId, Vec<SubscriptionOrder>> = HashMap::new();
    for attempt in tx.attempts_of_dates(&dates)? {
        earlier
            .entry(attempt.subscription_id)
            .or_default()
            .push(attempt);
    }
    Ok(earlier)
}

/// Begins the subscription's order: the subscription is `processing`, and the attempt to store
/// ([`store_attempts`]) is answered with the subscription as it now is. `earlier` are the
/// attempts already made for its order date. None when that date was placed already (a client
/// gave it back as `next_order_datetime`): the subscription moves on to its next date instead,
/// and no order is placed twice.
fn begin_order(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    stored: StoredSubscription,
    earlier: Vec<SubscriptionOrder>,
    now: Timestamp,
) -> Result<Option<(NewSubscriptionOrder, StoredSubscription)>, DomainError> {
    let mut state = stored.state.clone();
    let Some(scheduled_at) = state.next_order_datetime else {
        return Ok(None);
    };
    if earlier
        .iter()
        .any(|attempt| attempt.status == OrderAttemptStatus::Placed)
    {
        pass_placed_date(tx, shop, stored, scheduled_at, now)?;
        return Ok(None);
    }
    // Numbered after the date's earlier attempts, whatever `current_retries` says (a client
    // may have set it).
    let attempt = earlier
        .last()
        .map_or(1, |last| last.attempt.saturating_add(1));
    let outcome = take_action(
        stored.id,
        state.subscription_status,
        Action::PlaceOrder,
        Actor::system(),
        now,
        false,
    )?;
    let due_at = state
        .next_processing_datetime
        .map_or(scheduled_at, |retry_at| retry_at.max(scheduled_at));
    state.subscription_status = outcome.status;
    state.status_changed_at = Some(now);
    state.updated_at = now;
    let latest = tx.save_with_status_log(shop.id, stored.id, &state, &outcome.log)?;
    count_saved(
        tx,
        shop,
        (&stored.state, &stored.line_items),
        (&state, &stored.line_items),
        None,
        now,
    )?;
    let new = NewSubscriptionOrder {
        shop_id: shop.id,
        subscription_id: stored.id,
        scheduled_at,
        attempt,
        idempotency_key: idempotency_key(stored.id, scheduled_at),
        due_at,
        created_at: now,
    };
    Ok(Some((new, as_saved(stored, state, &[], latest))))
}

/// Stores the begun attempts of one shop, `placing`, and a job to place each: one insert of
/// the attempts and one of the jobs. Answers the attempts as stored, in the order given.
fn store_attempts(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    attempts: &[NewSubscriptionOrder],
    now: Timestamp,
) -> Result<Vec<SubscriptionOrder>, DomainError> {
    if attempts.is_empty() {
        return Ok(Vec::new());
    }
    let ids = tx.insert_subscription_orders(attempts)?;
    let jobs: Vec<OrderJob> = ids
        .iter()
        .map(|&order_id| OrderJob {
            order_id,
            resumed: false,
        })
        .collect();
    enqueue_each(tx, Some(shop.id), &jobs, now, now)?;
    Ok(attempts
        .iter()
        .zip(ids)
        .map(|(new, id)| SubscriptionOrder {
            id,
            shop_id: new.shop_id,
            subscription_id: new.subscription_id,
            scheduled_at: new.scheduled_at,
            attempt: new.attempt,
            idempotency_key: new.idempotency_key.clone(),
            status: OrderAttemptStatus::Placing,
            due_at: new.due_at,
            platform_order_id: None,
            platform_payment_id: None,
            failure_code: None,
            failure_reason: None,
            finished_at: None,
            created_at: new.created_at,
            updated_at: new.created_at,
        })
        .collect())
}

/// The subscription's order date was placed already: it moves to its next date (or ends when
/// its rule has none left) without an order, and says so with `subscription_updated`.
fn pass_placed_date(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    stored: StoredSubscription,
    scheduled_at: Timestamp,
    now: Timestamp,
) -> Result<(), DomainError> {
    log::warn!(
        target: "mercer::scheduler",
        "subscription {}'s order of {} was placed already; it moves to its next date",
        stored.id,
        scheduled_at
    );
    let mut state = stored.state.clone();
    state.current_retries = 0;
    state.next_processing_datetime = None;
    state.updated_at = now;
    let mut topics = vec![Topic::SubscriptionUpdated];
    let ended = move_to_next_date(shop, stored.id, &mut state, scheduled_at.max(now), now)?;
    tx.save_subscription(shop.id, stored.id, &state)?;
    count_saved(
        tx,
        shop,
        (&stored.state, &stored.line_items),
        (&state, &stored.line_items),
        None,
        now,
    )?;
    let mut saved = stored;
    if let Some(completed) = ended {
        saved.latest_status_log = Some(tx.insert_status_log(shop.id, &completed.log)?);
        topics.extend(completed.topics);
    }
    saved.state = state;
    let id = saved.id;
    let subscription = resources(tx, shop, vec![saved], false)?
        .pop()
        .ok_or_else(|| missing_subscription(id))?;
    for topic in ordered(topics) {
        emit(tx, shop, topic, &subscription, now)?;
    }
    Ok(())
}

/// Moves `state` to its rule's first date after `after` that no `EXDATE` excludes and was not
/// skipped, computed in the rule's zone. With no date left, the subscription ends: the
/// outcome of that end, its status already in `state`.
fn move_to_next_date(
    shop: &Shop,
    id: SubscriptionId,
    state: &mut SubscriptionState,
    after: Timestamp,
    now: Timestamp,
) -> Result<Option<ActionOutcome>, DomainError> {
    state.skipped_dates.retain(|at| *at > now);
    let next = match schedule_of(shop, state) {
        Ok(schedule) => schedule.next_after(after, &state.skipped_dates),
        Err(error) => {
            log::warn!(target: "mercer::scheduler", "subscription {id}'s order_rrule does not read ({error}); it has no next order");
            None
        }
    };
    state.next_order_datetime = next;
    state.next_payment_datetime = next;
    if next.is_some() {
        return Ok(None);
    }
    let completed = take_action(
        id,
        state.subscription_status,
        Action::Complete,
        Actor::system(),
        now,
        false,
    )?;
    state.subscription_status = completed.status;
    state.status_changed_at = Some(now);
    Ok(Some(completed))
}

/// Gives a job again to attempts still `placing` [`STALLED_AFTER_SECONDS`] after they began:
/// their job failed for good or was cancelled (a job that still exists absorbs the enqueue).
/// Returns how many got a new job.
pub(crate) fn resume_stalled_orders(
    db: &impl SubscriptionDatabase,
    clock: &dyn Clock,
) -> Result<usize, DomainError> {
    db.write_tx(|tx| {
        let now = clock.now();
        let stalled =
            tx.stalled_subscription_orders(now.plus_seconds(-STALLED_AFTER_SECONDS), DUE_BATCH)?;
        let mut resumed = 0;
        for order in stalled {
            if let Enqueued::New(_) = enqueue(
                tx,
                Some(order.shop_id),
                &OrderJob {
                    order_id: order.id,
                    resumed: true,
                },
                now,
                now,
            )? {
                log::warn!(
                    target: "mercer::scheduler",
                    "attempt {} of subscription {} had no job; it has one again",
                    order.id,
                    order.subscription_id
                );
                resumed += 1;
            }
        }
        Ok(resumed)
    })
}

/// Emits `subscription_expiring_payment` once per payment method, the shop's
/// `expiring_payment_notice_days` before it expires, for subscriptions that are not inactive.
/// Returns how many subscriptions were announced.
pub(crate) fn announce_expiring_payments(
    db: &impl SubscriptionDatabase,
    clock: &dyn Clock,
    control: &dyn JobControl,
) -> Result<usize, DomainError> {
    let shops = db.read_tx(|tx| Ok(tx.list_shops()?))?;
    let mut announced = 0;
    for shop in shops.into_iter().filter(|shop| shop.deleted_at.is_none()) {
        loop {
            if control.should_stop() {
                return Ok(announced);
            }
            let count = db.write_tx(|tx| {
                let now = clock.now();
                let by = now.plus_seconds(shop.expiring_payment_notice_days.saturating_mul(86_400));
                let ids = tx.expiring_payment_subscriptions(shop.id, by, EXPIRY_BATCH)?;
                for &id in &ids {
                    tx.set_expiring_payment_notified(shop.id, id, Some(now))?;
                }
                let stored = tx.subscriptions_by_ids(shop.id, &ids)?;
                for subscription in resources(tx, &shop, stored, false)? {
                    emit(
                        tx,
                        &shop,
                        Topic::SubscriptionExpiringPayment,
                        &subscription,
                        now,
                    )?;
                }
                Ok(ids.len())
            })?;
            announced += count;
            if count < EXPIRY_BATCH {
                break;
            }
        }
    }
    Ok(announced)
}

/// How one run of an [`OrderJob`] ended, for the caller's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The order was placed; `lag` is from when it came due to now.
    Placed {
        /// The attempt's number: 1 for the first of its date, 2 for its first retry…
        attempt: i64,
        /// Microseconds from when the order came due to when it was placed.
        lag_micros: i64,
    },
    /// The attempt failed; `ended` when it was the last one allowed.
    Failed {
        /// The attempt's number: 1 for the first of its date, 2 for its first retry…
        attempt: i64,
        /// Whether it was the last attempt the shop's dunning policy allows (its
        /// `at_max_retries` was applied).
        ended: bool,
    },
    /// Nothing to do: the attempt had ended already.
    Nothing,
    /// Its process is stopping: the job goes back to the queue.
    Interrupted,
}

/// What an attempt needs, read before the connector is called.
struct AttemptContext {
    order: SubscriptionOrder,
    shop: Shop,
    subscription: Subscription,
    customer: OrderCustomer,
    target: Option<ConnectorTarget>,
    /// The platform order of this date an earlier attempt or run created: it may have been paid.
    known_platform_order: Option<String>,
}

fn read_attempt(
    db: &impl SubscriptionDatabase,
    clock: &dyn Clock,
    order_id: SubscriptionOrderId,
) -> Result<Option<AttemptContext>, DomainError> {
    db.read_tx(|tx| {
        let Some(order) = tx.subscription_order(order_id)? else {
            return Ok(None);
        };
        if order.status != OrderAttemptStatus::Placing {
            return Ok(None);
        }
        // A deleted shop places no more orders, even one begun before it was deleted.
        let Some(shop) = tx
            .shop_by_id(order.shop_id)?
            .filter(|shop| shop.deleted_at.is_none())
        else {
            return Ok(None);
        };
        let subscription = one_resource(tx, &shop, order.subscription_id)?;
        let customer = tx
            .directory_customer(shop.id, subscription.customer_id)?
            .map(|customer| OrderCustomer {
                platform_id: customer.platform_id,
                email: customer.email,
            })
            .unwrap_or_default();
        let target = live_target(tx, &shop, DestinationTopic::Orders, clock.now())?
            .map(|(_, target)| target);
        let known_platform_order = match &order.platform_order_id {
            Some(id) => Some(id.clone()),
            // The date's first attempt has no earlier one to have got an order.
            None if order.attempt <= 1 => None,
            None => tx
                .attempts_of_date(order.subscription_id, order.scheduled_at)?
                .into_iter()
                .find_map(|attempt| attempt.platform_order_id),
        };
        Ok(Some(AttemptContext {
            order,
            shop,
            subscription,
            customer,
            target,
            known_platform_order,
        }))
    })
}

/// Why an attempt failed: a code and a sentence for `last_failure_*`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AttemptFailure {
    code: String,
    reason: String,
    message: String,
}

impl AttemptFailure {
    fn new(code: &str, reason: &str, message: impl Into<String>) -> Self {
        AttemptFailure {
            code: code.to_string(),
            reason: reason.to_string(),
            message: message.into(),
        }
    }

    /// The payment method failed (`subscription_payment_failed`), rather than the
    /// connector or the shop's set-up.
    fn is_payment_failure(&self) -> bool {
        matches!(
            self.code.as_str(),
            "payment_declined" | "payment_method_missing"
        )
    }

    fn placement(error: &PlacementError) -> Self {
        let reason = match error.code() {
            "payment_declined" => "the payment was declined",
            "connector_timeout" => "the platform connector did not answer in time",
            "connector_unreachable" => "the platform connector could not be reached",
            "connector_not_found" => "the platform connector does not know the order",
            "connector_malformed" => "the platform connector's answer could not be read",
            _ => "the platform connector answered with an error",
        };
        AttemptFailure::new(error.code(), reason, error.message())
    }
}

/// What one order of a subscription holds, when it is not its line items as subscribed: a box
/// line item gives way to the box's contents for the order's date (`box_builder::orders`).
#[derive(Debug, Clone, PartialEq)]
pub struct ComposedOrder {
    /// The line items the order holds.
    pub line_items: Vec<SubscriptionLineItem>,
    /// Said in the order's note, after the subscription's `order_note`.
    pub note: Option<String>,
}

/// Decides what an order holds. A port, so that the subscriptions feature does not depend on
/// the box builder that fills it.
pub trait OrderContents: Send + Sync {
    /// The order of `subscription` on `order_datetime`; None: its line items as subscribed.
    fn compose(
        &self,
        shop: &Shop,
        subscription: &Subscription,
        order_datetime: Timestamp,
    ) -> Result<Option<ComposedOrder>, DomainError>;
}

/// Orders hold the subscription's line items as subscribed.
pub struct AsSubscribed;

impl OrderContents for AsSubscribed {
    fn compose(
        &self,
        _shop: &Shop,
        _subscription: &Subscription,
        _order_datetime: Timestamp,
    ) -> Result<Option<ComposedOrder>, DomainError> {
        Ok(None)
    }
}

/// The subscription as this order places it: its line items and note as `contents` composes
/// them.
fn compose_order(
    contents: &dyn OrderContents,
    context: &mut AttemptContext,
) -> Result<(), DomainError> {
    let composed = contents.compose(
        &context.shop,
        &context.subscription,
        context.order.scheduled_at,
    )?;
    let Some(composed) = composed else {
        return Ok(());
    };
    let subscription = &mut context.subscription;
    subscription.line_items = composed.line_items;
    subscription.order_note = match (subscription.order_note.take(), composed.note) {
        (Some(own), Some(note)) => Some(format!("{own}\n{note}")),
        (own, note) => own.or(note),
    };
    Ok(())
}

/// Runs an [`OrderJob`]: places the attempt's order, with what `contents` puts in it, and
/// records how it went. Storage errors fail the job (it is retried, and resumes from what the
/// attempt stored). In a job runner, the outcome's transaction completes the job too
/// ([`JobControl::complete_in`]).
pub fn place_order(
    db: &impl SubscriptionDatabase,
    connector: &dyn PlatformConnector,
    clock: &dyn Clock,
    contents: &dyn OrderContents,
    job: OrderJob,
    control: &dyn JobControl,
) -> Result<Placement, JobFailure> {
    let Some(mut context) = read_attempt(db, clock, job.order_id)? else {
        return Ok(Placement::Nothing);
    };
    if control.should_stop() {
        return Ok(Placement::Interrupted);
    }
    compose_order(contents, &mut context)?;
    // What a box's contents add up to is only known now, so an order too large to charge is
    // an attempt that fails, never an amount cut down to what fits.
    let Some(amounts) = try_charge(&context.subscription) else {
        let failure = AttemptFailure::new(
            "amount_overflow",
            "the order's amounts are too large to charge",
            "the order's line items, discount and shipping add up past the largest amount",
        );
        let shown = OrderCharge::default();
        let called = Called::failed(failure);
        return Ok(record_outcome(
            db, clock, control, &context, &shown, called,
        )?);
    };
    // The job's first run, in a runner: no earlier run of this attempt can have got past
    // Create Order, so the platform order id can wait for the outcome's transaction.
    let first_run = control.attempt() == Some(1) && !job.resumed;
    let called = call_connector(db, connector, clock, &context, &amounts, first_run)?;
    Ok(record_outcome(
        db, clock, control, &context, &amounts, called,
    )?)
}

/// What the connector calls came to: the platform order and payment, or the failure.
type CallResult = Result<(String, Option<String>), AttemptFailure>;

/// The connector calls' result, and the platform order id Create Order answered when it is not
/// stored yet (the outcome's transaction stores it, whatever the outcome).
struct Called {
    result: CallResult,
    unsaved_order: Option<String>,
}

impl Called {
    fn failed(failure: AttemptFailure) -> Called {
        Called {
            result: Err(failure),
            unsaved_order: None,
        }
    }
}

/// Create Order (unless an earlier run or attempt got the order), then Create Payment (unless
/// an earlier one of the date went through). The order id is stored before paying unless this
/// is the job's `first_run`: then nothing before it can have paid, and a crash after this
/// point leaves a run that is not the first, which stores the id at once and looks for the
/// payment (Get Order) before paying.
fn call_connector(
    db: &impl SubscriptionDatabase,
    connector: &dyn PlatformConnector,
    clock: &dyn Clock,
    context: &AttemptContext,
    amounts: &OrderCharge,
    first_run: bool,
) -> Result<Called, DomainError> {
    let (order, subscription) = (&context.order, &context.subscription);
    let Some(target) = &context.target else {
        return Ok(Called::failed(AttemptFailure::new(
            "no_orders_destination",
            "the shop has no orders destination",
            "the shop has no live platform connector destination for the orders topic",
        )));
    };
    let pays = amounts.total > Cents::ZERO;
    if pays
        && (subscription.payment_method_token.is_none()
            || subscription.payment_gateway_public_id.is_none())
    {
        return Ok(Called::failed(AttemptFailure::new(
            "payment_method_missing",
            "the subscription has no payment method",
            "the subscription has no payment_method_token and payment_gateway_public_id to pay with",
        )));
    }
    // This attempt's run before, or an earlier attempt, got past Create Order: it may have
    // paid, even when its answer was a failure (a timeout after the platform charged). A run
    // that is not the job's first may follow one that paid without storing the order id.
    let resumed = order.platform_order_id.is_some();
    let earlier_payments = (context.known_platform_order.is_some() || !first_run)
        .then(|| payment_keys_of_date(&order.idempotency_key));
    let platform_order_id = match &context.known_platform_order {
        Some(id) => id.clone(),
        None => {
            let body = platform_order(
                subscription,
                amounts,
                &context.customer,
                order.scheduled_at,
                clock.now(),
            );
            match placement::create_order(connector, target, &body, &order.idempotency_key) {
                Ok(placed) => placed.platform_id,
                Err(error) => return Ok(Called::failed(AttemptFailure::placement(&error))),
            }
        }
    };
    let unsaved_order = match (resumed, first_run) {
        (true, _) => None,
        (false, true) => Some(platform_order_id.clone()),
        (false, false) => {
            db.write_tx(|tx| {
                Ok(tx.set_order_platform_id(order.id, &platform_order_id, clock.now())?)
            })?;
            None
        }
    };
    if !pays {
        return Ok(Called {
            result: Ok((platform_order_id, None)),
            unsaved_order,
        });
    }
    let payment = platform_payment(
        subscription,
        amounts,
        &payment_key(&order.idempotency_key, order.attempt),
    );
    let result = match placement::pay_once(
        connector,
        target,
        &platform_order_id,
        &payment,
        earlier_payments.as_deref(),
    ) {
        Ok(paid) => Ok((platform_order_id, paid.platform_payment_id)),
        Err(error) => Err(AttemptFailure::placement(&error)),
    };
    Ok(Called {
        result,
        unsaved_order,
    })
}

/// Writes the attempt's outcome and what it does to the subscription, in one transaction, and
/// only while the attempt is still `placing`; the platform order id Create Order answered, when
/// it was not stored yet, and (in a job runner) the job's completion commit with it.
fn record_outcome(
    db: &impl SubscriptionDatabase,
    clock: &dyn Clock,
    control: &dyn JobControl,
    context: &AttemptContext,
    amounts: &OrderCharge,
    called: Called,
) -> Result<Placement, DomainError> {
    let (order, shop) = (&context.order, &context.shop);
    let Called {
        result,
        unsaved_order,
    } = called;
    db.write_tx(|tx| {
        let now = clock.now();
        // First, so that every way out of this transaction ends the job with it.
        control.complete_in(tx, now)?;
        tx.lock_subscription(shop.id, order.subscription_id)?;
        if let (Some(platform_order_id), Err(_)) = (&unsaved_order, &result) {
            // A failed payment's retry must find the order (and look for a charge on it).
            tx.set_order_platform_id(order.id, platform_order_id, now)?;
        }
        let end = match &result {
            Ok((platform_order_id, platform_payment_id)) => OrderAttemptEnd::Placed {
                platform_order_id: platform_order_id.clone(),
                platform_payment_id: platform_payment_id.clone(),
            },
            Err(failure) => OrderAttemptEnd::Failed {
                code: failure.code.clone(),
                reason: failure.message.clone(),
            },
        };
        let Some(finished) = tx.finish_subscription_order(order.id, &end, now)? else {
            return Ok(Placement::Nothing);
        };
        let stored = tx
            .subscription(shop.id, order.subscription_id)?
            .ok_or_else(|| missing_subscription(order.subscription_id))?;
        if stored.state.subscription_status != SubscriptionStatus::Processing {
            // Not expected: a processing subscription refuses every change. The attempt is
            // ended above; the subscription is left as it is.
            log::warn!(
                target: "mercer::scheduler",
                "subscription {} was {} when its order attempt {} ended",
                order.subscription_id,
                stored.state.subscription_status,
                order.id
            );
            return Ok(Placement::Nothing);
        }
        match result {
            Ok(_) => {
                count_order(tx, shop, &stored.state, Some(amounts.total), now)?;
                order_placed(tx, shop, stored, &finished, amounts, now)?;
                record_one(tx, shop.id, Activity::OrdersPlaced, now, 1)?;
                Ok(Placement::Placed {
                    attempt: order.attempt,
                    lag_micros: now.as_micros().saturating_sub(order.due_at.as_micros()),
                })
            }
            Err(failure) => {
                count_order(tx, shop, &stored.state, None, now)?;
                let ended = order_failed(tx, shop, stored, &finished, amounts, &failure, now)?;
                Ok(Placement::Failed {
                    attempt: order.attempt,
                    ended,
                })
            }
        }
    })
}

/// Topics in the order given, `subscription_updated` once and last.
fn ordered(topics: impl IntoIterator<Item = Topic>) -> Vec<Topic> {
    let mut ordered: Vec<Topic> = Vec::new();
    for topic in topics {
        if topic != Topic::SubscriptionUpdated && !ordered.contains(&topic) {
            ordered.push(topic);
        }
    }
    ordered.push(Topic::SubscriptionUpdated);
    ordered
}

/// Says `topics` about the subscription as saved and the attempt that changed it.
fn emit_all(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    saved: StoredSubscription,
    topics: Vec<Topic>,
    order: &SubscriptionOrder,
    amounts: &OrderCharge,
    now: Timestamp,
) -> Result<(), DomainError> {
    let id = saved.id;
    let subscription = resources(tx, shop, vec![saved], false)?
        .pop()
        .ok_or_else(|| missing_subscription(id))?;
    let order = order_data(order, amounts, subscription.charged_currency.as_str());
    emit_about_attempt(tx, shop, &topics, &subscription, &order, now)
}

/// The order went through: the subscription counts it, moves to its next order date (or ends
/// when its rule has none left), and says so.
fn order_placed(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    stored: StoredSubscription,
    order: &SubscriptionOrder,
    amounts: &OrderCharge,
    now: Timestamp,
) -> Result<(), DomainError> {
    let id = stored.id;
    let mut state = stored.state.clone();
    let placed = take_action(
        id,
        state.subscription_status,
        Action::OrderPlaced,
        Actor::system(),
        now,
        false,
    )?;
    state.subscription_status = placed.status;
    state.status_changed_at = Some(now);
    state.updated_at = now;
    state.orders_processed = state.orders_processed.saturating_add(1);
    state.current_retries = 0;
    state.next_processing_datetime = None;
    state.last_order_datetime = Some(order.scheduled_at);
    state.last_processed_datetime = Some(now);
    if amounts.total > Cents::ZERO {
        state.last_payment_datetime = Some(now);
    }
    // Missed dates are not made up: one order for the date owed, then the next date to come.
    let ended = move_to_next_date(shop, id, &mut state, order.scheduled_at.max(now), now)?;
    let advanced = advance_prepaid(&stored.line_items, now);
    for item in &advanced {
        tx.update_line_item(shop.id, id, item, now)?;
    }
    let mut logs = vec![placed.log];
    let mut topics = placed.topics;
    if let Some(completed) = ended {
        logs.push(completed.log);
        topics.extend(completed.topics);
    }
    let (first_log, later_logs) = logs.split_first().ok_or_else(|| missing_subscription(id))?;
    let mut latest = tx.save_with_status_log(shop.id, id, &state, first_log)?;
    for log in later_logs {
        latest = tx.insert_status_log(shop.id, log)?;
    }
    let mut items = stored.line_items.clone();
    for item in &advanced {
        if let Some(slot) = items.iter_mut().find(|slot| slot.id == item.id) {
            *slot = item.clone();
        }
    }
    count_saved(
        tx,
        shop,
        (&stored.state, &stored.line_items),
        (&state, &items),
        None,
        now,
    )?;
    let saved = as_saved(stored, state, &advanced, latest);
    emit_all(tx, shop, saved, ordered(topics), order, amounts, now)
}

/// The attempt failed: the subscription counts the failure and waits the next interval of the
/// shop's dunning policy, or, with no interval left, gets the policy's `at_max_retries` (see
/// [`give_up_order`]). Returns whether the retries ran out.
fn order_failed(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    stored: StoredSubscription,
    order: &SubscriptionOrder,
    amounts: &OrderCharge,
    failure: &AttemptFailure,
    now: Timestamp,
) -> Result<bool, DomainError> {
    let id = stored.id;
    let policy = shop_dunning(tx, shop)?.policy;
    let mut state = stored.state.clone();
    // The payment method failed on the subscription's first transaction: Mercer never placed
    // one of its orders.
    let first_payment_failed = state.orders_processed == 0 && failure.is_payment_failure();
    state.current_retries = state.current_retries.saturating_add(1);
    state.last_failure_code = Some(failure.code.clone());
    state.last_failure_reason = Some(failure.reason.clone());
    state.last_failure_details = Some(FailureDetails {
        message: failure.message.clone(),
    });
    state.updated_at = now;
    let after = policy.after_failure(state.current_retries);
    let (logs, own_topics) = match after {
        AfterFailure::RetryIn(seconds) => {
            let outcome = take_action(
                id,
                state.subscription_status,
                Action::OrderFailed,
                Actor::system(),
                now,
                false,
            )?;
            state.subscription_status = outcome.status;
            state.next_processing_datetime = Some(now.plus_seconds(seconds));
            (vec![outcome.log], outcome.topics)
        }
        AfterFailure::GiveUp(at_max_retries) => {
            give_up_order(shop, id, &mut state, order, at_max_retries, now)?
        }
    };
    state.status_changed_at = Some(now);
    let (first_log, later_logs) = logs.split_first().ok_or_else(|| missing_subscription(id))?;
    let mut latest = tx.save_with_status_log(shop.id, id, &state, first_log)?;
    for log in later_logs {
        latest = tx.insert_status_log(shop.id, log)?;
    }
    count_saved(
        tx,
        shop,
        (&stored.state, &stored.line_items),
        (&state, &stored.line_items),
        None,
        now,
    )?;
    let mut topics = Vec::with_capacity(own_topics.len() + 1);
    for topic in own_topics {
        topics.push(topic);
        if topic == Topic::SubscriptionOrderTransactionFailed && first_payment_failed {
            topics.push(Topic::SubscriptionPaymentFailed);
        }
    }
    emit_all(
        tx,
        shop,
        as_saved(stored, state, &[], latest),
        ordered(topics),
        order,
        amounts,
        now,
    )?;
    Ok(matches!(after, AfterFailure::GiveUp(_)))
}

/// The order's last retry failed: `state` (still `processing`) gets the policy's outcome. Its
/// status log entries and topics, in order (each outcome says
/// `subscription_order_max_retries_reached` after `subscription_order_transaction_failed`):
/// - `cancel`: inactive, `max_retries_reached` (no `subscription_cancelled`, as before policies).
/// - `pause`: the failure (`order_failed`, active), then `paused` by Mercer;
///   `subscription_paused`. No retry is pending: a resume starts afresh.
/// - `skip_order`: the failure, then `order_skipped` by Mercer; `subscription_skipped`. The
///   order's date is given up for the rule's next date to come (or, with none left, the
///   subscription completes as after its last order).
fn give_up_order(
    shop: &Shop,
    id: SubscriptionId,
    state: &mut SubscriptionState,
    order: &SubscriptionOrder,
    at_max_retries: AtMaxRetries,
    now: Timestamp,
) -> Result<(Vec<NewStatusLog>, Vec<Topic>), DomainError> {
    state.next_processing_datetime = None;
    let take = |from, action| take_action(id, from, action, Actor::system(), now, false);
    if at_max_retries == AtMaxRetries::Cancel {
        let ended = take(state.subscription_status, Action::RetriesExhausted)?;
        state.subscription_status = ended.status;
        // As before dunning policies: the end by retries is told by
        // `subscription_order_max_retries_reached`, not `subscription_cancelled`.
        return Ok((vec![ended.log], ended.topics));
    }
    let failed = take(state.subscription_status, Action::OrderFailed)?;
    let mut topics = failed.topics;
    topics.push(Topic::SubscriptionOrderMaxRetriesReached);
    let mut logs = vec![failed.log];
    state.current_retries = 0;
    let then = if at_max_retries == AtMaxRetries::Pause {
        take(failed.status, Action::Pause)?
    } else {
        take(failed.status, Action::Skip)?
    };
    state.subscription_status = then.status;
    logs.push(then.log);
    topics.extend(then.topics);
    if at_max_retries == AtMaxRetries::SkipOrder
        && let Some(completed) =
            move_to_next_date(shop, id, state, order.scheduled_at.max(now), now)?
    {
        logs.push(completed.log);
        topics.extend(completed.topics);
    }
    Ok((logs, topics))
}

/// Why a subscription is in `mercer subscriptions due`'s list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DueReason {
    /// Scheduled: it starts with its first order, which is due.
    Starts,
    /// Its order date has come; `attempt` is 1, or the retry it is at.
    Due {
        /// The attempt it is at: 1, or 2 for the first retry…
        attempt: i64,
    },
    /// A failed attempt waits for its retry.
    WaitingRetry {
        /// The attempt the retry will be.
        attempt: i64,
        /// When the retry wait ends (`next_processing_datetime`).
        retry_at: Timestamp,
        /// The code of the last failure (`last_failure_code`), when there is one.
        failure_code: Option<String>,
    },
    /// Paused until a date that has come (`resume_on`): the scheduler resumes it.
    Resumes {
        /// The day given as `resume_on`.
        on: chrono::NaiveDate,
        /// When that day began in the shop's zone.
        at: Timestamp,
    },
    /// Being placed now.
    Placing {
        /// The number of the attempt being made.
        attempt: i64,
        /// When the attempt began.
        since: Timestamp,
        /// The platform's id of the order, once the connector created it.
        platform_order_id: Option<String>,
    },
}

impl DueReason {
    /// Why, in words, as `mercer subscriptions due` and the console show it.
    pub fn describe(&self) -> String {
        match self {
            DueReason::Starts => "starts: scheduled, its first order date has come; it becomes \
                                  active and the order is placed"
                .to_string(),
            DueReason::Due { attempt: 1 } => "due: its order date has come".to_string(),
            DueReason::Due { attempt } => format!(
                "due: retry {} of its order, the retry wait is over",
                attempt - 1
            ),
            DueReason::WaitingRetry {
                attempt,
                retry_at,
                failure_code,
            } => format!(
                "waiting: retry {} at {} after {}",
                attempt - 1,
                retry_at.to_rfc3339_seconds(),
                failure_code.as_deref().unwrap_or("a failure")
            ),
            DueReason::Resumes { on, at } => format!(
                "resumes: paused until {on} (began {}); it becomes active again",
                at.to_rfc3339_seconds()
            ),
            DueReason::Placing {
                attempt,
                since,
                platform_order_id,
            } => format!(
                "being placed: attempt {attempt} since {}{}",
                since.to_rfc3339_seconds(),
                platform_order_id
                    .as_deref()
                    .map(|id| format!(", platform order {}", id.escape_debug()))
                    .unwrap_or_default()
            ),
        }
    }
}

/// A line of `mercer subscriptions due`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueEntry {
    /// The subscription's id.
    pub subscription_id: SubscriptionId,
    /// The subscription's status.
    pub status: SubscriptionStatus,
    /// When its next order falls (UTC).
    pub next_order_datetime: Option<Timestamp>,
    /// The order date in the shop's zone, for people (`2026-03-09 09:00 America/New_York`).
    pub local_order_time: Option<String>,
    /// Why it is listed.
    pub reason: DueReason,
    /// For an order being retried: which retry it is, of how many the shop's dunning policy
    /// allows, and what follows the last.
    pub retry: Option<RetryProgress>,
}

/// Where a retried order is in the shop's dunning policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryProgress {
    /// The retry (1 for the first).
    pub retry: i64,
    /// How many retries the policy allows.
    pub of: i64,
    /// What happens when the last one fails.
    pub then: AtMaxRetries,
}

impl RetryProgress {
    /// `retry 1 of 2; after the last, the subscription is paused`.
    pub fn describe(&self) -> String {
        format!(
            "retry {} of {}; after the last, {}",
            self.retry,
            self.of,
            self.then.describe()
        )
    }
}

impl DueEntry {
    /// Why it is listed, in words, with where a retry is in the dunning policy, as `mercer
    /// subscriptions due` and the console show it.
    pub fn describe(&self) -> String {
        match &self.retry {
            Some(retry) => format!("{} ({})", self.reason.describe(), retry.describe()),
            None => self.reason.describe(),
        }
    }
}

/// The shop's subscriptions paused until a date that has come at `at`, then those whose order
/// is due at `at` (now, or a later time to look ahead), being placed, or waiting for a retry,
/// with why; each part earliest first, at most `limit` in all.
pub fn due_report(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    at: Timestamp,
    limit: usize,
) -> Result<Vec<DueEntry>, DomainError> {
    let resuming: Vec<SubscriptionId> = tx
        .due_resumptions(Some(shop.id), at, limit)?
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    let mut ids = resuming.clone();
    ids.extend(tx.upcoming_subscription_ids(shop.id, at, limit - resuming.len())?);
    let stored = tx.subscriptions_by_ids(shop.id, &ids)?;
    let latest = tx.orders_of_subscriptions(&ids, 1)?;
    let policy = shop_dunning(tx, shop)?.policy;
    let zone = crate::subscriptions::recurrence::ShopZone::of_shop(&shop.timezone);
    Ok(stored
        .into_iter()
        .map(|s| {
            let state = &s.state;
            let attempt = state.current_retries + 1;
            let last = latest.iter().find(|o| o.subscription_id == s.id);
            let reason = match state.subscription_status {
                SubscriptionStatus::Paused => match state.resume_on {
                    Some(resume) => DueReason::Resumes {
                        on: resume.on,
                        at: resume.at,
                    },
                    None => DueReason::Due { attempt },
                },
                SubscriptionStatus::Scheduled => DueReason::Starts,
                SubscriptionStatus::Processing => DueReason::Placing {
                    attempt: last.map_or(attempt, |o| o.attempt),
                    since: last.map_or(state.updated_at, |o| o.created_at),
                    platform_order_id: last.and_then(|o| o.platform_order_id.clone()),
                },
                _ => match state.next_processing_datetime {
                    Some(retry_at) if retry_at > at => DueReason::WaitingRetry {
                        attempt,
                        retry_at,
                        failure_code: state.last_failure_code.clone(),
                    },
                    _ => DueReason::Due { attempt },
                },
            };
            let retrying = match reason {
                DueReason::Due { attempt }
                | DueReason::WaitingRetry { attempt, .. }
                | DueReason::Placing { attempt, .. } => attempt - 1,
                DueReason::Starts | DueReason::Resumes { .. } => 0,
            };
            DueEntry {
                retry: (retrying > 0).then(|| RetryProgress {
                    retry: retrying,
                    of: policy.max_retries(),
                    then: policy.at_max_retries,
                }),
                subscription_id: s.id,
                status: state.subscription_status,
                next_order_datetime: state.next_order_datetime,
                local_order_time: state.next_order_datetime.map(|next| {
                    format!(
                        "{} {}",
                        zone.local_time(next).format("%Y-%m-%d %H:%M"),
                        zone.name()
                    )
                }),
                reason,
            }
        })
        .collect())
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
