//! A shop's subscription analytics (docs/subscriptions.md, "Analytics"): counters kept per shop
//! and per shop-local day, added to in the same unit of work as the write they count, so a
//! period's figures sum a few thousand day rows however many subscriptions the shop has.
//!
//! Each day holds what happened that day: subscriptions created (`new`), ended (`cancelled`,
//! and the same again under their reason), paused, the scheduler's orders placed and failed,
//! the revenue of the placed ones, and the day's change of the active count and of the monthly
//! recurring revenue (MRR). The active count or MRR at the end of a day is the sum of the
//! changes of every day up to it.
//!
//! Every write that changes a subscription's status or price goes through
//! [`count_created`] or [`count_saved`] with the subscription before and after: [`changes`]
//! (a pure function) says what that write adds to the counters.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::shop::Shop;
use crate::kernel::body::Field;
use crate::kernel::error::{DomainError, FieldError, Problems, StoreResult};
use crate::kernel::ids::{ShopId, SubscriptionId};
use crate::kernel::time::Timestamp;
use crate::subscriptions::recurrence::{OrderSchedule, ShopZone};
use crate::subscriptions::repository::SubscriptionState;
use crate::subscriptions::resources::{Cents, SubscriptionLineItem, SubscriptionStatus};

/// The longest period a query may span, in days (about ten years).
pub const MAX_PERIOD_DAYS: i64 = 3_660;
/// The console's default period: the last 30 days, today included.
pub const DEFAULT_PERIOD_DAYS: i64 = 30;
/// MRR is a subscription's order total over this many days.
const MONTH_DAYS: u128 = 30;

/// What a day counts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    /// Subscriptions created.
    New,
    /// Subscriptions that became inactive.
    Cancelled,
    /// Subscriptions that became inactive, by the reason's code (`None`: no reason given).
    Reason(Option<String>),
    /// Subscriptions that became paused.
    Paused,
    /// Orders the scheduler placed.
    OrdersPlaced,
    /// Order attempts that failed.
    OrdersFailed,
    /// The totals of the placed orders charged in the shop's currency, in cents.
    Revenue,
    /// The change of the active count.
    Active,
    /// The change of MRR, in cents.
    Mrr,
}

impl Metric {
    /// The name as stored: `new`, `reason:CODE` (`reason:` for none)…
    pub fn name(&self) -> String {
        match self {
            Metric::New => "new".into(),
            Metric::Cancelled => "cancelled".into(),
            Metric::Reason(code) => format!("reason:{}", code.as_deref().unwrap_or("")),
            Metric::Paused => "paused".into(),
            Metric::OrdersPlaced => "orders_placed".into(),
            Metric::OrdersFailed => "orders_failed".into(),
            Metric::Revenue => "revenue".into(),
            Metric::Active => "active".into(),
            Metric::Mrr => "mrr".into(),
        }
    }

    /// The metric a stored name names.
    pub fn parse(text: &str) -> Option<Metric> {
        if let Some(code) = text.strip_prefix("reason:") {
            return Some(Metric::Reason((!code.is_empty()).then(|| code.to_string())));
        }
        Some(match text {
            "new" => Metric::New,
            "cancelled" => Metric::Cancelled,
            "paused" => Metric::Paused,
            "orders_placed" => Metric::OrdersPlaced,
            "orders_failed" => Metric::OrdersFailed,
            "revenue" => Metric::Revenue,
            "active" => Metric::Active,
            "mrr" => Metric::Mrr,
            _ => return None,
        })
    }

    /// The metrics whose sum over every day before a period is its starting figure.
    pub fn running() -> [Metric; 2] {
        [Metric::Active, Metric::Mrr]
    }
}

/// One day's addition to one metric of one shop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayCount {
    /// The shop.
    pub shop_id: ShopId,
    /// The shop-local day, as days since 1970-01-01 ([`day_number`]).
    pub day: i64,
    /// What is counted.
    pub metric: Metric,
    /// How much.
    pub value: i64,
}

/// The day's number: days since 1970-01-01.
pub fn day_number(date: NaiveDate) -> i64 {
    (date - NaiveDate::default()).num_days()
}

/// The day of a number [`day_number`] gave.
pub fn day_date(number: i64) -> NaiveDate {
    NaiveDate::default() + chrono::Duration::days(number)
}

/// The shop-local day of `at`.
pub fn shop_day(shop: &Shop, at: Timestamp) -> i64 {
    day_number(ShopZone::of_shop(&shop.timezone).local_date(at))
}

/// Whether a subscription of this status counts as active: `active`, or `processing` (an
/// active one whose order is being placed). Paused, scheduled and inactive ones do not.
pub fn is_active(status: SubscriptionStatus) -> bool {
    matches!(
        status,
        SubscriptionStatus::Active | SubscriptionStatus::Processing
    )
}

/// A subscription as analytics see it: its status and what it brings in a month (whether it
/// is active or not; only an active one's counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// Its status.
    pub status: SubscriptionStatus,
    /// Its MRR in cents ([`monthly_value`] of [`order_value`]); 0 when it is charged in another
    /// currency than the shop's.
    pub mrr: i64,
}

impl Standing {
    /// What it adds to the active count and to MRR.
    fn counted(&self) -> (i64, i64) {
        if is_active(self.status) {
            (1, self.mrr)
        } else {
            (0, 0)
        }
    }
}

/// One order's total after discounts, in the charged currency, as the scheduler charges it
/// between prepaid periods: each line item's discounted unit price times its quantity, less
/// the subscription's percent discount off their subtotal (rounded half away from zero), plus
/// its shipping lines. `None` when it overflows.
pub fn order_value(state: &SubscriptionState, items: &[SubscriptionLineItem]) -> Option<Cents> {
    let lines = items
        .iter()
        .map(|item| item.discounted_price_charged.times(item.quantity))
        .collect::<Option<Vec<_>>>()?;
    let subtotal = Cents::checked_sum(lines)?;
    let discount = crate::subscriptions::orders::percent_discount(subtotal, state.percent_discount);
    let shipping = Cents::checked_sum(state.shipping_lines.iter().map(|l| l.value_charged))?;
    subtotal.checked_sub(discount)?.checked_add(shipping)
}

/// An order total scaled to 30 days by the rule's average period (`period_days` as the
/// fraction `(numerator, denominator)` of [`OrderSchedule::average_period_days`]): `value × 30
/// ÷ period`, worked out exactly and rounded half up to the cent. `None` when it overflows or
/// the period is zero.
pub fn monthly_value(value: Cents, period_days: (u128, u128)) -> Option<Cents> {
    let (numerator, denominator) = period_days;
    if numerator == 0 || value.0 < 0 {
        return None;
    }
    let scaled = u128::try_from(value.0)
        .ok()?
        .checked_mul(MONTH_DAYS)?
        .checked_mul(denominator)?;
    let rounded = scaled.checked_add(numerator / 2)? / numerator;
    i64::try_from(rounded).ok().map(Cents)
}

/// The subscription's standing: its status and MRR. MRR counts only a subscription charged in
/// the shop's currency (no exchange rate is guessed); a rule that no longer reads counts 0.
pub fn standing(
    shop: &Shop,
    state: &SubscriptionState,
    items: &[SubscriptionLineItem],
) -> Result<Standing, DomainError> {
    let mut mrr = 0;
    if state
        .charged_currency
        .as_str()
        .eq_ignore_ascii_case(&shop.currency)
        && let Ok(schedule) = OrderSchedule::parse(
            &state.order_rrule,
            ShopZone::of_shop(&shop.timezone),
            "order_rrule",
        )
    {
        mrr = order_value(state, items)
            .and_then(|value| monthly_value(value, schedule.average_period_days()))
            .ok_or_else(|| crate::subscriptions::operations::too_large("subscription"))?
            .0;
    }
    Ok(Standing {
        status: state.subscription_status,
        mrr,
    })
}

/// What one write adds to the counters: the subscription before it (`None`: created by it) and
/// after, and the reason given when it is cancelled. A creation is `new`; a move into
/// `inactive` is `cancelled` (with its reason); a move into `paused` is `paused`; the active
/// count and MRR change by the difference of what the two standings count.
pub fn changes(
    before: Option<&Standing>,
    after: &Standing,
    reason: Option<&str>,
) -> Vec<(Metric, i64)> {
    let mut out = Vec::new();
    let (active_before, mrr_before) = before.map_or((0, 0), Standing::counted);
    let (active_after, mrr_after) = after.counted();
    match before {
        None => out.push((Metric::New, 1)),
        Some(before) => {
            if before.status != SubscriptionStatus::Inactive
                && after.status == SubscriptionStatus::Inactive
            {
                out.push((Metric::Cancelled, 1));
                out.push((Metric::Reason(reason.map(str::to_string)), 1));
            }
            if before.status != SubscriptionStatus::Paused
                && after.status == SubscriptionStatus::Paused
            {
                out.push((Metric::Paused, 1));
            }
        }
    }
    out.push((Metric::Active, active_after - active_before));
    out.push((Metric::Mrr, mrr_after - mrr_before));
    out.retain(|(_, value)| *value != 0);
    out
}

/// Additions gathered before they are stored in one go, merged by day and metric (in key
/// order, so two units of work lock the same rows in the same order).
#[derive(Debug, Default)]
pub struct Tally(BTreeMap<(ShopId, i64, Metric), i64>);

impl Tally {
    /// Adds `value` to the metric of the shop's day.
    pub fn add(&mut self, shop_id: ShopId, day: i64, metric: Metric, value: i64) {
        if value != 0 {
            *self.0.entry((shop_id, day, metric)).or_default() += value;
        }
    }

    /// The additions, by shop, day and metric (zeros left out).
    pub fn counts(self) -> Vec<DayCount> {
        self.0
            .into_iter()
            .filter(|(_, value)| *value != 0)
            .map(|((shop_id, day, metric), value)| DayCount {
                shop_id,
                day,
                metric,
                value,
            })
            .collect()
    }

    /// Stores the additions in the caller's unit of work.
    pub fn record(self, tx: &mut (impl AnalyticsRepository + ?Sized)) -> StoreResult<()> {
        let counts = self.counts();
        if counts.is_empty() {
            return Ok(());
        }
        tx.add_analytics(&counts)
    }
}

fn record(
    tx: &mut (impl AnalyticsRepository + ?Sized),
    shop: &Shop,
    now: Timestamp,
    changes: Vec<(Metric, i64)>,
) -> Result<(), DomainError> {
    let day = shop_day(shop, now);
    let mut tally = Tally::default();
    for (metric, value) in changes {
        tally.add(shop.id, day, metric, value);
    }
    Ok(tally.record(tx)?)
}

/// Counts a subscription just created (at `now`, on the shop's day).
pub fn count_created(
    tx: &mut (impl AnalyticsRepository + ?Sized),
    shop: &Shop,
    state: &SubscriptionState,
    items: &[SubscriptionLineItem],
    now: Timestamp,
) -> Result<(), DomainError> {
    let after = standing(shop, state, items)?;
    record(tx, shop, now, changes(None, &after, None))
}

/// Counts a write of a subscription: `before` and `before_items` as it was read, `state` and
/// `items` as written now, and the reason given when the write cancels it.
pub fn count_saved(
    tx: &mut (impl AnalyticsRepository + ?Sized),
    shop: &Shop,
    (before, before_items): (&SubscriptionState, &[SubscriptionLineItem]),
    (state, items): (&SubscriptionState, &[SubscriptionLineItem]),
    reason: Option<&str>,
    now: Timestamp,
) -> Result<(), DomainError> {
    let unchanged_price = before_items == items
        && before.order_rrule == state.order_rrule
        && before.percent_discount == state.percent_discount
        && before.shipping_lines == state.shipping_lines
        && before.charged_currency == state.charged_currency;
    if unchanged_price && before.subscription_status == state.subscription_status {
        return Ok(());
    }
    // The rule is read only when the MRR counted can change: a price changed, or the
    // subscription became active or stopped being so.
    let (old, new) = if !unchanged_price {
        (
            standing(shop, before, before_items)?,
            standing(shop, state, items)?,
        )
    } else {
        let mrr = if is_active(before.subscription_status) != is_active(state.subscription_status) {
            standing(shop, before, before_items)?.mrr
        } else {
            0
        };
        let of = |status| Standing { status, mrr };
        (
            of(before.subscription_status),
            of(state.subscription_status),
        )
    };
    record(tx, shop, now, changes(Some(&old), &new, reason))
}

/// Counts an order attempt's end: placed (with its total, counted as revenue when it is charged
/// in the shop's currency) or failed.
pub fn count_order(
    tx: &mut (impl AnalyticsRepository + ?Sized),
    shop: &Shop,
    state: &SubscriptionState,
    placed_total: Option<Cents>,
    now: Timestamp,
) -> Result<(), DomainError> {
    let mut out = Vec::new();
    match placed_total {
        Some(total) => {
            out.push((Metric::OrdersPlaced, 1));
            if state
                .charged_currency
                .as_str()
                .eq_ignore_ascii_case(&shop.currency)
            {
                out.push((Metric::Revenue, total.0));
            }
        }
        None => out.push((Metric::OrdersFailed, 1)),
    }
    record(tx, shop, now, out)
}

/// The storage of the counters: one count per shop, day and metric, however it is kept.
pub trait AnalyticsRepository {
    /// Adds each count to its day's row (created at zero when new).
    fn add_analytics(&mut self, counts: &[DayCount]) -> StoreResult<()>;
    /// The shop's rows of `metrics` for days before `day`.
    fn analytics_before(
        &mut self,
        shop_id: ShopId,
        day: i64,
        metrics: &[Metric],
    ) -> StoreResult<Vec<DayCount>>;
    /// The shop's rows of the days `from..=to`.
    fn analytics_between(
        &mut self,
        shop_id: ShopId,
        from: i64,
        to: i64,
    ) -> StoreResult<Vec<DayCount>>;
    /// Whether the counters still wait for the subscriptions stored before they were kept.
    fn analytics_backfill_pending(&mut self) -> StoreResult<bool>;
    /// Records that they do not any more.
    fn finish_analytics_backfill(&mut self) -> StoreResult<()>;
    /// Up to `limit` subscriptions (shop, id) of every shop with an id above `after`, by id.
    fn subscription_ids_after(
        &mut self,
        after: SubscriptionId,
        limit: usize,
    ) -> StoreResult<Vec<(ShopId, SubscriptionId)>>;
}

/// A checked period: `from..=to`, shop-local days.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    /// The first day.
    pub from: NaiveDate,
    /// The last day.
    pub to: NaiveDate,
}

/// The query of `GET /analytics`: both days required.
#[derive(Debug, Clone, Default, Deserialize, ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AnalyticsQuery {
    /// The first day of the period, `YYYY-MM-DD`, in the shop's time zone.
    #[serde(default)]
    #[schema(value_type = String, format = Date, required = true)]
    #[param(value_type = String, format = Date, required = true)]
    pub from: Field<NaiveDate>,
    /// The last day of the period (included), `YYYY-MM-DD`, at most 3,660 days after `from`.
    #[serde(default)]
    #[schema(value_type = String, format = Date, required = true)]
    #[param(value_type = String, format = Date, required = true)]
    pub to: Field<NaiveDate>,
}

impl AnalyticsQuery {
    /// The period: 422 on `from` or `to` when one is missing or not a date, on `to` when it is
    /// before `from` or more than [`MAX_PERIOD_DAYS`] days after it.
    pub fn validate(self) -> Result<Period, DomainError> {
        let mut problems = Problems::new();
        let mut check = crate::kernel::body::Check::root(&mut problems);
        let from = check.required("from", self.from);
        let to = check.required("to", self.to);
        if let (Some(from), Some(to)) = (from, to) {
            if to < from {
                problems.push(FieldError::new(
                    "to",
                    "out_of_range",
                    "to must not be before from",
                ));
            } else if (to - from).num_days() >= MAX_PERIOD_DAYS {
                problems.push(FieldError::new(
                    "to",
                    "out_of_range",
                    format!("a period spans at most {MAX_PERIOD_DAYS} days"),
                ));
            } else {
                return Ok(Period { from, to });
            }
        }
        problems.into_result()?;
        Err(DomainError::invalid("from", "required", "from is required"))
    }
}

/// The default period: the last [`DEFAULT_PERIOD_DAYS`] shop-local days, today included.
pub fn default_period(shop: &Shop, now: Timestamp) -> Period {
    let to = day_date(shop_day(shop, now));
    Period {
        from: to - chrono::Duration::days(DEFAULT_PERIOD_DAYS - 1),
        to,
    }
}

/// Cancellations of one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ReasonCount {
    /// The reason's code; null for cancellations given no reason (by the dunning policy, a
    /// rule with no date left, or a client that named none).
    pub reason: Option<String>,
    /// How many subscriptions were cancelled with it in the period.
    pub count: i64,
}

/// A shop's subscription figures over a period, amounts in cents of the shop's currency.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Analytics {
    /// The shop's currency (ISO 4217): every amount is in its minor units.
    pub currency: String,
    /// Subscriptions active (status `active` or `processing`) at the start of `from`.
    pub active_start: i64,
    /// Subscriptions active at the end of `to`.
    pub active_end: i64,
    /// Subscriptions created in the period.
    pub new: i64,
    /// Subscriptions that became inactive in the period (cancelled by a client or by the
    /// dunning policy, or ended with their rule).
    pub cancelled: i64,
    /// Subscriptions paused in the period (by a client or by the dunning policy).
    pub paused: i64,
    /// `cancelled ÷ active_start`, rounded half up to 4 decimals; null when `active_start` is
    /// 0. Subscriptions both created and cancelled in the period count among the cancelled.
    pub churn_rate: Option<f64>,
    /// Monthly recurring revenue at the start of `from`: each active subscription's order total
    /// after discounts (its shipping included), scaled to 30 days by its rule's average
    /// period, rounded half up to the cent per subscription. Subscriptions charged in another
    /// currency are left out.
    pub mrr_start_cents: i64,
    /// Monthly recurring revenue at the end of `to`.
    pub mrr_end_cents: i64,
    /// Orders the scheduler placed in the period.
    pub orders_placed: i64,
    /// Order attempts that failed in the period (each retry that fails counts).
    pub orders_failed: i64,
    /// The totals of the orders placed in the period, charged in the shop's currency.
    pub revenue_cents: i64,
    /// The period's cancellations by reason, most frequent first (then by code).
    pub cancellation_reasons: Vec<ReasonCount>,
}

/// The answer of `GET /analytics`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct AnalyticsAnswer {
    /// The figures.
    pub analytics: Analytics,
}

/// One day's standing at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayFigures {
    /// The day.
    pub day: NaiveDate,
    /// Subscriptions active at its end.
    pub active: i64,
    /// MRR at its end, in cents.
    pub mrr_cents: i64,
}

/// The figures of a period, with each day's active count and MRR (for a chart).
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The period.
    pub period: Period,
    /// The figures.
    pub analytics: Analytics,
    /// Each day of the period, in order.
    pub days: Vec<DayFigures>,
}

/// `cancelled ÷ active`, rounded half up to 4 decimals (integer arithmetic; the float only
/// carries the result).
pub fn churn_rate(cancelled: i64, active_start: i64) -> Option<f64> {
    if active_start <= 0 {
        return None;
    }
    let (c, a) = (i128::from(cancelled.max(0)), i128::from(active_start));
    let ten_thousandths = (c * 20_000 + a) / (2 * a);
    Some(ten_thousandths as f64 / 10_000.0)
}

fn checked(total: &mut i64, value: i64) -> Result<(), DomainError> {
    *total = total.checked_add(value).ok_or_else(|| {
        DomainError::Storage(crate::StorageError::other("analytics: a sum overflows"))
    })?;
    Ok(())
}

/// The shop's figures over `period`.
pub fn shop_analytics(
    tx: &mut (impl AnalyticsRepository + ?Sized),
    shop: &Shop,
    period: Period,
) -> Result<Report, DomainError> {
    let (from, to) = (day_number(period.from), day_number(period.to));
    let (mut active, mut mrr) = (0i64, 0i64);
    for row in tx.analytics_before(shop.id, from, &Metric::running())? {
        match row.metric {
            Metric::Active => checked(&mut active, row.value)?,
            Metric::Mrr => checked(&mut mrr, row.value)?,
            _ => {}
        }
    }
    let mut analytics = Analytics {
        currency: shop.currency.clone(),
        active_start: active,
        active_end: active,
        new: 0,
        cancelled: 0,
        paused: 0,
        churn_rate: None,
        mrr_start_cents: mrr,
        mrr_end_cents: mrr,
        orders_placed: 0,
        orders_failed: 0,
        revenue_cents: 0,
        cancellation_reasons: Vec::new(),
    };
    let mut reasons: BTreeMap<Option<String>, i64> = BTreeMap::new();
    let mut daily: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for row in tx.analytics_between(shop.id, from, to)? {
        let a = &mut analytics;
        match row.metric {
            Metric::New => checked(&mut a.new, row.value)?,
            Metric::Cancelled => checked(&mut a.cancelled, row.value)?,
            Metric::Paused => checked(&mut a.paused, row.value)?,
            Metric::OrdersPlaced => checked(&mut a.orders_placed, row.value)?,
            Metric::OrdersFailed => checked(&mut a.orders_failed, row.value)?,
            Metric::Revenue => checked(&mut a.revenue_cents, row.value)?,
            Metric::Reason(code) => checked(reasons.entry(code).or_default(), row.value)?,
            Metric::Active => checked(&mut daily.entry(row.day).or_default().0, row.value)?,
            Metric::Mrr => checked(&mut daily.entry(row.day).or_default().1, row.value)?,
        }
    }
    let mut days = Vec::new();
    for day in from..=to {
        if let Some((active_change, mrr_change)) = daily.get(&day) {
            checked(&mut analytics.active_end, *active_change)?;
            checked(&mut analytics.mrr_end_cents, *mrr_change)?;
        }
        days.push(DayFigures {
            day: day_date(day),
            active: analytics.active_end,
            mrr_cents: analytics.mrr_end_cents,
        });
    }
    analytics.churn_rate = churn_rate(analytics.cancelled, analytics.active_start);
    let mut reasons: Vec<ReasonCount> = reasons
        .into_iter()
        .filter(|(_, count)| *count != 0)
        .map(|(reason, count)| ReasonCount { reason, count })
        .collect();
    reasons.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    analytics.cancellation_reasons = reasons;
    Ok(Report {
        period,
        analytics,
        days,
    })
}

/// How many subscriptions one page of the backfill reads.
const BACKFILL_PAGE: usize = 500;

/// Counts the subscriptions stored before the counters were kept, once (the migration that
/// made the counters marks them pending; this runs right after it, before any other write):
/// each is `new` on its creation's shop-local day, and its standing now is added to the
/// active count and MRR of that day. Cancellations, pauses and orders before the counters
/// were kept are not counted. Returns how many subscriptions were counted.
pub fn backfill(
    tx: &mut dyn crate::subscriptions::repository::SubscriptionRepositories,
) -> Result<usize, DomainError> {
    if !tx.analytics_backfill_pending()? {
        return Ok(0);
    }
    let mut shops: BTreeMap<ShopId, Option<Shop>> = BTreeMap::new();
    let (mut after, mut counted) = (SubscriptionId(0), 0);
    loop {
        let page = tx.subscription_ids_after(after, BACKFILL_PAGE)?;
        let Some(last) = page.last() else { break };
        after = last.1;
        let mut by_shop: BTreeMap<ShopId, Vec<SubscriptionId>> = BTreeMap::new();
        for (shop_id, id) in page {
            by_shop.entry(shop_id).or_default().push(id);
        }
        let mut tally = Tally::default();
        for (shop_id, ids) in by_shop {
            if let std::collections::btree_map::Entry::Vacant(slot) = shops.entry(shop_id) {
                slot.insert(tx.shop_by_id(shop_id)?);
            }
            let Some(Some(shop)) = shops.get(&shop_id) else {
                continue;
            };
            for stored in tx.subscriptions_by_ids(shop_id, &ids)? {
                let day = shop_day(shop, stored.created_at);
                let now = standing(shop, &stored.state, &stored.line_items)?;
                for (metric, value) in changes(None, &now, None) {
                    tally.add(shop_id, day, metric, value);
                }
                counted += 1;
            }
        }
        tally.record(tx)?;
    }
    tx.finish_analytics_backfill()?;
    Ok(counted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(rule: &str) -> (u128, u128) {
        OrderSchedule::parse(
            &format!("DTSTART:20260105T090000Z\nRRULE:{rule}"),
            ShopZone::UTC,
            "order_rrule",
        )
        .expect("a valid rule")
        .average_period_days()
    }

    fn mrr(value: i64, rule: &str) -> i64 {
        monthly_value(Cents(value), schedule(rule)).expect("fits").0
    }

    #[test]
    fn the_average_period_follows_the_rule_unit_interval_and_days() {
        let days = |rule: &str| {
            let (n, d) = schedule(rule);
            n as f64 / d as f64
        };
        assert_eq!(days("FREQ=DAILY;INTERVAL=10"), 10.0);
        assert_eq!(days("FREQ=WEEKLY"), 7.0);
        assert_eq!(days("FREQ=WEEKLY;INTERVAL=2"), 14.0);
        assert_eq!(days("FREQ=WEEKLY;BYDAY=MO,TH"), 3.5);
        assert_eq!(days("FREQ=MONTHLY"), 30.436875);
        assert_eq!(days("FREQ=MONTHLY;INTERVAL=3"), 91.310625);
        assert_eq!(days("FREQ=MONTHLY;BYMONTHDAY=1,15"), 30.436875 / 2.0);
        assert_eq!(days("FREQ=MONTHLY;BYDAY=1MO"), 30.436875);
        assert_eq!(days("FREQ=MONTHLY;BYDAY=MO"), 7.0);
        assert_eq!(days("FREQ=YEARLY"), 365.2425);
        assert_eq!(days("FREQ=DAILY;BYDAY=MO,WE,FR"), 7.0 / 3.0);
    }

    #[test]
    fn mrr_scales_an_order_total_to_thirty_days_rounding_half_up() {
        // Every 10 days: three orders in 30 days.
        assert_eq!(mrr(1_000, "FREQ=DAILY;INTERVAL=10"), 3_000);
        // Weekly: 30/7 of an order; 1,000 × 30 / 7 = 4,285.71… → 4,286.
        assert_eq!(mrr(1_000, "FREQ=WEEKLY"), 4_286);
        // Every two weeks: 1,000 × 30 / 14 = 2,142.857… → 2,143.
        assert_eq!(mrr(1_000, "FREQ=WEEKLY;INTERVAL=2"), 2_143);
        // Monthly: 4,999 × 30 × 4,800 / 146,097 = 4,927.4… → 4,927.
        assert_eq!(mrr(4_999, "FREQ=MONTHLY"), 4_927);
        // Quarterly: 9,000 × 30 × 4,800 / 438,291 = 2,956.9… → 2,957.
        assert_eq!(mrr(9_000, "FREQ=MONTHLY;INTERVAL=3"), 2_957);
        // Exactly half a cent rounds up: 7 cents every 60 days is 3.5 cents a month.
        assert_eq!(mrr(7, "FREQ=DAILY;INTERVAL=60"), 4);
        assert_eq!(mrr(0, "FREQ=WEEKLY"), 0);
        assert_eq!(monthly_value(Cents(i64::MAX), (1, 1)), None);
        assert_eq!(monthly_value(Cents(5), (0, 1)), None);
    }

    #[test]
    fn active_means_active_or_processing() {
        use SubscriptionStatus::*;
        assert!(is_active(Active));
        assert!(is_active(Processing));
        for status in [Paused, Scheduled, Inactive] {
            assert!(!is_active(status));
        }
    }

    fn standing_of(status: SubscriptionStatus, mrr: i64) -> Standing {
        Standing { status, mrr }
    }

    #[test]
    fn a_creation_is_new_and_adds_an_active_subscription_and_its_mrr() {
        let created = changes(None, &standing_of(SubscriptionStatus::Active, 500), None);
        assert_eq!(
            created,
            vec![(Metric::New, 1), (Metric::Active, 1), (Metric::Mrr, 500)]
        );
        let paused = changes(None, &standing_of(SubscriptionStatus::Paused, 500), None);
        assert_eq!(paused, vec![(Metric::New, 1)]);
    }

    #[test]
    fn a_cancellation_counts_its_reason_and_takes_its_mrr_away() {
        let before = standing_of(SubscriptionStatus::Active, 700);
        let after = standing_of(SubscriptionStatus::Inactive, 700);
        assert_eq!(
            changes(Some(&before), &after, Some("too_expensive")),
            vec![
                (Metric::Cancelled, 1),
                (Metric::Reason(Some("too_expensive".into())), 1),
                (Metric::Active, -1),
                (Metric::Mrr, -700),
            ]
        );
        // Cancelling a paused one: no active change.
        let paused = standing_of(SubscriptionStatus::Paused, 700);
        assert_eq!(
            changes(Some(&paused), &after, None),
            vec![(Metric::Cancelled, 1), (Metric::Reason(None), 1)]
        );
    }

    #[test]
    fn a_pause_and_a_price_change_move_the_running_figures() {
        let active = standing_of(SubscriptionStatus::Active, 700);
        let paused = standing_of(SubscriptionStatus::Paused, 700);
        assert_eq!(
            changes(Some(&active), &paused, None),
            vec![
                (Metric::Paused, 1),
                (Metric::Active, -1),
                (Metric::Mrr, -700)
            ]
        );
        let dearer = standing_of(SubscriptionStatus::Active, 900);
        assert_eq!(
            changes(Some(&active), &dearer, None),
            vec![(Metric::Mrr, 200)]
        );
        let processing = standing_of(SubscriptionStatus::Processing, 700);
        assert!(changes(Some(&active), &processing, None).is_empty());
    }

    #[test]
    fn metric_names_round_trip() {
        for metric in [
            Metric::New,
            Metric::Cancelled,
            Metric::Reason(None),
            Metric::Reason(Some("moved".into())),
            Metric::Paused,
            Metric::OrdersPlaced,
            Metric::OrdersFailed,
            Metric::Revenue,
            Metric::Active,
            Metric::Mrr,
        ] {
            assert_eq!(Metric::parse(&metric.name()), Some(metric));
        }
        assert_eq!(Metric::parse("other"), None);
    }

    #[test]
    fn churn_is_cancelled_over_active_at_the_start_to_four_decimals() {
        assert_eq!(churn_rate(1, 3), Some(0.3333));
        assert_eq!(churn_rate(2, 3), Some(0.6667));
        assert_eq!(churn_rate(0, 10), Some(0.0));
        assert_eq!(churn_rate(4, 0), None);
    }

    fn query(from: &str, to: &str) -> AnalyticsQuery {
        serde_json::from_value(serde_json::json!({"from": from, "to": to})).unwrap()
    }

    fn problem_fields(error: DomainError) -> Vec<(String, String)> {
        match error {
            DomainError::Invalid(problems) => problems
                .into_iter()
                .map(|p| (p.field.clone(), p.code.to_string()))
                .collect(),
            other => panic!("not a 422: {other:?}"),
        }
    }

    #[test]
    fn a_period_needs_two_dates_in_order_within_the_cap() {
        let period = query("2026-01-01", "2026-01-31").validate().unwrap();
        assert_eq!(day_number(period.to) - day_number(period.from), 30);
        let fields = problem_fields(query("2026-02-01", "2026-01-31").validate().unwrap_err());
        assert_eq!(fields, vec![("to".into(), "out_of_range".into())]);
        let fields = problem_fields(query("2000-01-01", "2026-01-31").validate().unwrap_err());
        assert_eq!(fields, vec![("to".into(), "out_of_range".into())]);
        let fields = problem_fields(query("2026-1-1", "").validate().unwrap_err());
        assert_eq!(
            fields,
            vec![
                ("from".into(), "invalid_date".into()),
                ("to".into(), "required".into())
            ]
        );
        let fields = problem_fields(AnalyticsQuery::default().validate().unwrap_err());
        assert_eq!(fields.len(), 2);
    }

    fn new_york_shop(db: &crate::testing::MemoryDatabase) -> Shop {
        crate::ports::Database::write(db, |tx| {
            crate::access::shop::create_shop(
                tx,
                crate::access::shop::ShopInput {
                    shop_domain: "analytics.shop.test".into(),
                    timezone: Some("America/New_York".into()),
                    ..Default::default()
                },
                Timestamp::parse_rfc3339("2030-01-01T00:00:00Z").unwrap(),
            )
        })
        .unwrap()
    }

    fn actor() -> crate::subscriptions::resources::Actor {
        crate::subscriptions::resources::Actor {
            kind: crate::subscriptions::resources::ActorType::Api,
            id: 1,
            name: "test".into(),
        }
    }

    /// Creating and cancelling go through the counters on the shop's day; the backfill of the
    /// same subscriptions, counted afresh, gives the creation's figures.
    #[test]
    fn use_cases_count_on_the_shop_day_and_the_backfill_counts_what_exists() {
        use crate::ports::Database;
        let db = crate::testing::MemoryDatabase::default();
        let shop = new_york_shop(&db);
        // 03:00 UTC on the 7th is the 6th in New York.
        let now = Timestamp::parse_rfc3339("2030-01-07T03:00:00Z").unwrap();
        let body = |email: &str| {
            serde_json::json!({"customer": {"email": email}, "subscription": {
                "subscription_status": "active",
                "order_rrule": "DTSTART:20300201T150000Z\nRRULE:FREQ=WEEKLY",
                "line_items": [{"platform_product_id": "p", "platform_variant_id": "v",
                                "quantity": 2, "price": 1250}],
                "shipping_address": {"street1": "1 Main St", "city": "New York", "country_code": "US"}
            }})
        };
        let ids: Vec<_> = ["a@example.test", "b@example.test"]
            .iter()
            .map(|email| {
                db.write(|tx| {
                    let made = crate::subscriptions::operations::create_subscription_from_body(
                        tx,
                        &shop,
                        &body(email),
                        actor(),
                        now,
                    )?;
                    Ok(made.0.id)
                })
                .unwrap()
            })
            .collect();
        let period = |from: &str, to: &str| Period {
            from: NaiveDate::parse_from_str(from, "%Y-%m-%d").unwrap(),
            to: NaiveDate::parse_from_str(to, "%Y-%m-%d").unwrap(),
        };
        let report = |p: Period| db.read(|tx| shop_analytics(tx, &shop, p)).unwrap();
        let weekly = 2 * 1250 * 30 * 10 / 7; // 10,714.28… → 10,714
        let sixth = report(period("2030-01-06", "2030-01-06")).analytics;
        assert_eq!((sixth.new, sixth.active_end), (2, 2));
        assert_eq!(sixth.mrr_end_cents, 2 * ((weekly + 5) / 10));
        assert_eq!(report(period("2030-01-07", "2030-01-07")).analytics.new, 0);

        let later = now.plus_seconds(86_400);
        db.write(|tx| {
            let cancel = crate::subscriptions::cancellation::CancelRequest::default();
            crate::subscriptions::operations::take_subscription_action(
                tx,
                &shop,
                ids[0],
                crate::subscriptions::operations::ActionRequest::Cancel(cancel),
                actor(),
                later,
            )
        })
        .unwrap();
        let seventh = report(period("2030-01-07", "2030-01-07")).analytics;
        assert_eq!(
            (seventh.active_start, seventh.cancelled, seventh.active_end),
            (2, 1, 1)
        );
        assert_eq!(seventh.churn_rate, Some(0.5));
        assert_eq!(
            seventh.cancellation_reasons,
            vec![ReasonCount {
                reason: None,
                count: 1
            }]
        );

        // Counted afresh: both are new on their creation's day, and only the live one active.
        db.with_state(|state| {
            state.analytics.clear();
            state.analytics_backfill_pending = true;
        });
        assert_eq!(db.write(|tx| backfill(tx)).unwrap(), 2);
        let again = report(period("2030-01-06", "2030-01-07")).analytics;
        assert_eq!((again.new, again.active_start, again.active_end), (2, 0, 1));
        assert_eq!(again.mrr_end_cents, (weekly + 5) / 10);
        assert_eq!(db.write(|tx| backfill(tx)).unwrap(), 0, "once only");
    }

    #[test]
    fn day_numbers_count_from_1970() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        assert_eq!(day_date(day_number(day)), day);
        assert_eq!(day_number(NaiveDate::from_ymd_opt(1970, 1, 2).unwrap()), 1);
    }
}
