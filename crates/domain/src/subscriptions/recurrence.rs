//! `order_rrule`: when a subscription's orders fall. The text is
//! RFC 5545 content lines: one `DTSTART`, one `RRULE`, and any `EXDATE`s:
//!
//! ```text
//! DTSTART;TZID=America/Toronto:20240304T090000
//! RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO
//! EXDATE;TZID=America/Toronto:20240401T090000
//! ```
//!
//! The rule is expanded by the `rrule` crate in one time zone, so a weekly 09:00 stays 09:00
//! on the wall clock across daylight saving time: the `TZID` of `DTSTART` when it has one,
//! otherwise the shop's. A `DTSTART` in UTC (`…Z`) gives the first order's instant, and later
//! orders keep its wall-clock time in the shop's zone; a floating one (no `Z`, no `TZID`) is
//! the shop's local time. docs/subscriptions.md has the rest of the rules.

use std::str::FromStr;

use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};
use rrule::{Frequency, NWeekday, RRule, RRuleSet, Unvalidated, Validated, Weekday};

use crate::kernel::error::FieldError;
use crate::kernel::time::Timestamp;

/// How many occurrences a search looks at before it gives up: a daily rule for a century. A
/// search starts near the date it looks for (see `OrderSchedule::scan_start`), so only a rule
/// with a `COUNT` walks from `DTSTART`, and it ends within its count.
const MAX_SCAN: usize = 40_000;
/// The largest `COUNT`: a rule with one is walked from `DTSTART` (its dates are counted from
/// there), and this bounds that walk (a daily rule for 27 years, a weekly one for 190).
const MAX_COUNT: u32 = 10_000;

/// A shop's time zone, an IANA name (the shop's `timezone`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShopZone(chrono_tz::Tz);

impl ShopZone {
    /// Coordinated Universal Time.
    pub const UTC: ShopZone = ShopZone(chrono_tz::Tz::UTC);

    /// The zone with the IANA name `name` (`America/Toronto`); `None` for a name the zone
    /// database does not know.
    pub fn parse(name: &str) -> Option<ShopZone> {
        chrono_tz::Tz::from_str(name.trim()).ok().map(ShopZone)
    }

    /// The shop's zone; a name the zone database does not know (the shop's settings check
    /// only its form) counts as UTC, so a shop's subscriptions still have dates.
    pub fn of_shop(timezone: &str) -> ShopZone {
        ShopZone::parse(timezone).unwrap_or(ShopZone::UTC)
    }

    /// The zone's IANA name.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// `at` on the zone's wall clock.
    pub fn local_time(self, at: Timestamp) -> DateTime<chrono_tz::Tz> {
        at.to_datetime().with_timezone(&self.0)
    }

    /// The calendar day of `at` in the zone.
    pub fn local_date(self, at: Timestamp) -> NaiveDate {
        self.local_time(at).date_naive()
    }

    /// The first instant of `day` in the zone: its midnight, or the first whole hour the
    /// clocks show that day when they skip midnight. `None` past what RFC 3339 can write.
    pub fn start_of_day(self, day: NaiveDate) -> Option<Timestamp> {
        (0..24)
            .filter_map(|hour| day.and_hms_opt(hour, 0, 0))
            .find_map(|local| self.0.from_local_datetime(&local).earliest())
            .map(|start| Timestamp::from(start.with_timezone(&Utc)))
            .filter(|start| start.is_writable())
    }
}

/// A date that `EXDATE` leaves out: an exact occurrence, or every occurrence of a local day
/// (`EXDATE;VALUE=DATE:20240401`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exclusion {
    At(Timestamp),
    Day(NaiveDate),
}

/// A checked `order_rrule`.
#[derive(Debug, Clone)]
pub struct OrderSchedule {
    source: String,
    zone: chrono_tz::Tz,
    start: DateTime<chrono_tz::Tz>,
    rule: RRule<Unvalidated>,
    /// The rule with what `DTSTART` implies written out (its time of day, weekday, day of the
    /// month), so it can be walked from a later start and give the same dates.
    validated: RRule<Validated>,
    exclusions: Vec<Exclusion>,
}

fn invalid(field: &str, message: impl Into<String>) -> FieldError {
    FieldError::new(field, "invalid_rrule", message)
}

fn unsupported(field: &str, message: impl Into<String>) -> FieldError {
    FieldError::new(field, "unsupported_rrule", message)
}

/// One content line: its name (upper case), its parameters and its value.
struct ContentLine<'a> {
    name: String,
    params: Vec<(String, &'a str)>,
    value: &'a str,
}

impl ContentLine<'_> {
    fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| *value)
    }
}

fn content_line<'a>(field: &str, line: &'a str) -> Result<ContentLine<'a>, FieldError> {
    let (head, value) = line
        .split_once(':')
        .ok_or_else(|| invalid(field, format!("{line:?} is not a NAME:value line")))?;
    let mut parts = head.split(';');
    let name = parts.next().unwrap_or_default().trim().to_ascii_uppercase();
    let mut params = Vec::new();
    for part in parts {
        let (key, param) = part
            .split_once('=')
            .ok_or_else(|| invalid(field, format!("{part:?} is not a KEY=value parameter")))?;
        params.push((key.trim().to_ascii_uppercase(), param.trim()));
    }
    Ok(ContentLine {
        name,
        params,
        value: value.trim(),
    })
}

/// Lines of the text, with RFC 5545 folding undone (a line that starts with a space or tab
/// goes on the line before).
fn unfold(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for raw in text.split('\n') {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        match (raw.strip_prefix([' ', '\t']), lines.last_mut()) {
            (Some(rest), Some(last)) => last.push_str(rest),
            _ => lines.push(raw.to_string()),
        }
    }
    lines.retain(|line| !line.trim().is_empty());
    lines
}

/// A DATE or DATE-TIME value: its local date and time, and whether it was UTC (`Z`).
struct IcalTime {
    local: NaiveDateTime,
    utc: bool,
    date_only: bool,
}

fn ical_time(field: &str, property: &str, text: &str) -> Result<IcalTime, FieldError> {
    let bad = || {
        invalid(
            field,
            format!(
                "{property} value {text:?} must be a date (20240304) or date-time \
                 (20240304T090000, or 20240304T090000Z in UTC)"
            ),
        )
    };
    let text = text.trim();
    if text.len() == 8 && text.bytes().all(|b| b.is_ascii_digit()) {
        let date = NaiveDate::parse_from_str(text, "%Y%m%d").map_err(|_| bad())?;
        return Ok(IcalTime {
            local: date.and_time(chrono::NaiveTime::MIN),
            utc: false,
            date_only: true,
        });
    }
    let (digits, utc) = match text.strip_suffix(['Z', 'z']) {
        Some(digits) => (digits, true),
        None => (text, false),
    };
    let well_formed = digits.len() == 15
        && digits.bytes().enumerate().all(|(i, b)| {
            if i == 8 {
                b == b'T' || b == b't'
            } else {
                b.is_ascii_digit()
            }
        });
    if !well_formed {
        return Err(bad());
    }
    let local = NaiveDateTime::parse_from_str(&digits.to_ascii_uppercase(), "%Y%m%dT%H%M%S")
        .map_err(|_| bad())?;
    Ok(IcalTime {
        local,
        utc,
        date_only: false,
    })
}

/// A local time in `zone`: the earlier one when the clocks go back, refused when the clocks
/// skip it.
fn in_zone(
    field: &str,
    property: &str,
    zone: chrono_tz::Tz,
    local: NaiveDateTime,
) -> Result<DateTime<chrono_tz::Tz>, FieldError> {
    match zone.from_local_datetime(&local) {
        LocalResult::Single(time) | LocalResult::Ambiguous(time, _) => Ok(time),
        LocalResult::None => Err(invalid(
            field,
            format!(
                "{property} {local} does not exist in {} (the clocks skip it)",
                zone.name()
            ),
        )),
    }
}

fn zone_param(
    field: &str,
    line: &ContentLine<'_>,
    default: chrono_tz::Tz,
) -> Result<(chrono_tz::Tz, bool), FieldError> {
    match line.param("TZID") {
        Some(name) => chrono_tz::Tz::from_str(name.trim_matches('"'))
            .map(|zone| (zone, true))
            .map_err(|_| invalid(field, format!("{} has an unknown TZID {name:?}", line.name))),
        None => Ok((default, false)),
    }
}

fn check_value_param(field: &str, line: &ContentLine<'_>) -> Result<(), FieldError> {
    match line.param("VALUE").map(str::to_ascii_uppercase).as_deref() {
        None | Some("DATE") | Some("DATE-TIME") => Ok(()),
        Some(other) => Err(invalid(
            field,
            format!("{} VALUE must be DATE or DATE-TIME, not {other}", line.name),
        )),
    }
}

/// The rule's `UNTIL` written in UTC, as the `rrule` crate wants it beside a zoned start; a
/// floating `UNTIL` is local time in `zone`, a date one the end of that local day.
fn until_in_utc(field: &str, rule: &str, zone: chrono_tz::Tz) -> Result<String, FieldError> {
    let mut parts = Vec::new();
    for part in rule.split(';') {
        let Some((key, value)) = part.split_once('=') else {
            parts.push(part.to_string());
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("UNTIL") {
            parts.push(part.to_string());
            continue;
        }
        let until = ical_time(field, "UNTIL", value)?;
        let instant = if until.utc {
            Utc.from_utc_datetime(&until.local)
        } else {
            let local = if until.date_only {
                until.local + Duration::days(1) - Duration::seconds(1)
            } else {
                until.local
            };
            in_zone(field, "UNTIL", zone, local)?.with_timezone(&Utc)
        };
        parts.push(format!("UNTIL={}", instant.format("%Y%m%dT%H%M%SZ")));
    }
    Ok(parts.join(";"))
}

fn to_timestamp<Z: TimeZone>(time: &DateTime<Z>) -> Timestamp {
    Timestamp::from(time.with_timezone(&Utc))
}

impl OrderSchedule {
    /// Checks `text` as an `order_rrule` whose floating and UTC times belong to `shop`'s zone;
    /// every problem names `field`.
    pub fn parse(text: &str, shop: ShopZone, field: &str) -> Result<OrderSchedule, FieldError> {
        let source = text.trim().replace("\r\n", "\n");
        if source.is_empty() {
            return Err(FieldError::required(field));
        }
        let mut dtstart = None;
        let mut rrule_value = None;
        let mut exdates = Vec::new();
        let lines = unfold(&source);
        for line in &lines {
            let line = content_line(field, line)?;
            match line.name.as_str() {
                "DTSTART" if dtstart.is_some() => {
                    return Err(invalid(field, "order_rrule has more than one DTSTART"));
                }
                "DTSTART" => dtstart = Some(line),
                "RRULE" if rrule_value.is_some() => {
                    return Err(unsupported(field, "order_rrule may have only one RRULE"));
                }
                "RRULE" => rrule_value = Some(line.value),
                "EXDATE" => exdates.push(line),
                "RDATE" | "EXRULE" => {
                    return Err(unsupported(
                        field,
                        format!(
                            "{} is not supported; use DTSTART, RRULE and EXDATE",
                            line.name
                        ),
                    ));
                }
                other => {
                    return Err(invalid(
                        field,
                        format!("unknown line {other:?}; use DTSTART, RRULE and EXDATE"),
                    ));
                }
            }
        }
        let dtstart = dtstart.ok_or_else(|| invalid(field, "order_rrule needs a DTSTART line"))?;
        let rrule_value = rrule_value.ok_or_else(|| {
            FieldError::new(
                field,
                "not_recurring",
                "order_rrule needs an RRULE line: a subscription repeats",
            )
        })?;

        check_value_param(field, &dtstart)?;
        let (zone, zoned) = zone_param(field, &dtstart, shop.0)?;
        let start_time = ical_time(field, "DTSTART", dtstart.value)?;
        if start_time.utc && zoned {
            return Err(invalid(field, "DTSTART with a TZID must not end in Z"));
        }
        let start = if start_time.utc {
            Utc.from_utc_datetime(&start_time.local)
                .with_timezone(&zone)
        } else {
            in_zone(field, "DTSTART", zone, start_time.local)?
        };

        let rule_text = until_in_utc(field, rrule_value, zone)?;
        let rule = RRule::<Unvalidated>::from_str(&rule_text)
            .map_err(|error| invalid(field, format!("RRULE: {error}")))?;
        if rule.get_freq() > Frequency::Daily {
            return Err(unsupported(
                field,
                format!(
                    "FREQ={} is not supported: orders repeat at most daily",
                    rule.get_freq()
                ),
            ));
        }
        if rule.get_by_hour().len() > 1
            || rule.get_by_minute().len() > 1
            || rule.get_by_second().len() > 1
        {
            return Err(unsupported(
                field,
                "a subscription places at most one order a day: give at most one BYHOUR, \
                 BYMINUTE and BYSECOND",
            ));
        }
        if rule.get_count().is_some_and(|count| count > MAX_COUNT) {
            return Err(unsupported(
                field,
                format!("COUNT may be at most {MAX_COUNT}"),
            ));
        }
        let validated = rule
            .clone()
            .validate(start.with_timezone(&rrule::Tz::Tz(zone)))
            .map_err(|error| invalid(field, format!("RRULE: {error}")))?;

        let mut exclusions = Vec::new();
        for line in &exdates {
            check_value_param(field, line)?;
            let (exdate_zone, zoned) = zone_param(field, line, zone)?;
            for value in line.value.split(',') {
                let time = ical_time(field, "EXDATE", value)?;
                if time.utc && zoned {
                    return Err(invalid(field, "EXDATE with a TZID must not end in Z"));
                }
                exclusions.push(if time.date_only {
                    Exclusion::Day(time.local.date())
                } else if time.utc {
                    Exclusion::At(Timestamp::from(Utc.from_utc_datetime(&time.local)))
                } else {
                    Exclusion::At(to_timestamp(&in_zone(
                        field,
                        "EXDATE",
                        exdate_zone,
                        time.local,
                    )?))
                });
            }
        }

        let schedule = OrderSchedule {
            source,
            zone,
            start,
            rule,
            validated,
            exclusions,
        };
        if schedule.upcoming(None, &[]).take(2).count() < 2 {
            return Err(FieldError::new(
                field,
                "not_recurring",
                "order_rrule must repeat: it gives at most one order date",
            ));
        }
        Ok(schedule)
    }

    /// The text as given (trimmed, with `\n` line ends): what `order_rrule` shows.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The zone the rule is expanded in.
    pub fn zone_name(&self) -> &'static str {
        self.zone.name()
    }

    /// `DTSTART`, as an instant.
    pub fn start(&self) -> Timestamp {
        to_timestamp(&self.start)
    }

    /// The calendar day of `at` in the rule's zone.
    pub fn local_date(&self, at: Timestamp) -> NaiveDate {
        at.to_datetime().with_timezone(&self.zone).date_naive()
    }

    fn is_excluded(&self, at: Timestamp) -> bool {
        self.exclusions.iter().any(|exclusion| match exclusion {
            Exclusion::At(instant) => *instant == at,
            Exclusion::Day(day) => *day == self.local_date(at),
        })
    }

    /// Where a walk of the rule may start to find its dates from `reference` on: a start of
    /// the rule's own period (day, week, month or year, in steps of its `INTERVAL`), at least
    /// one period before `reference`, from which the rule gives the same dates as from
    /// `DTSTART`. `DTSTART` itself when the rule has a `COUNT` (its dates are counted from
    /// there) or `reference` is near it. Without this, a daily rule that began in 1900 would
    /// walk 45,000 dates to reach today, and give up first.
    fn scan_start(&self, reference: Timestamp) -> DateTime<chrono_tz::Tz> {
        if self.rule.get_count().is_some() {
            return self.start;
        }
        let interval = i64::from(self.rule.get_interval().max(1));
        let start = self.start.naive_local();
        let target = reference
            .to_datetime()
            .with_timezone(&self.zone)
            .naive_local();
        // How many of the rule's units lie between the two, and the start moved by some.
        let (units, moved): (i64, &dyn Fn(i64) -> Option<NaiveDateTime>) =
            match self.rule.get_freq() {
                Frequency::Daily => ((target - start).num_days(), &|days| {
                    start.checked_add_signed(Duration::days(days))
                }),
                Frequency::Weekly => ((target - start).num_days() / 7, &|weeks| {
                    start.checked_add_signed(Duration::weeks(weeks))
                }),
                Frequency::Monthly => (
                    i64::from(target.year() - start.year()) * 12 + i64::from(target.month())
                        - i64::from(start.month()),
                    &|months| {
                        NaiveDate::from_ymd_opt(start.year(), start.month(), 1)?
                            .checked_add_months(chrono::Months::new(u32::try_from(months).ok()?))
                            .map(|day| day.and_time(start.time()))
                    },
                ),
                Frequency::Yearly => (i64::from(target.year() - start.year()), &|years| {
                    let year = start.year().checked_add(i32::try_from(years).ok()?)?;
                    NaiveDate::from_ymd_opt(year, 1, 1).map(|day| day.and_time(start.time()))
                }),
                _ => return self.start,
            };
        // Whole steps of the interval that stay a period clear of the reference; a step back
        // more when that wall-clock time does not exist there (the clocks skip it).
        let mut steps = (units / interval - 1) * interval;
        for _ in 0..8 {
            if steps <= 0 {
                break;
            }
            if let Some(at) = moved(steps)
                .filter(|local| *local > start)
                .and_then(|local| self.zone.from_local_datetime(&local).earliest())
            {
                return at;
            }
            steps -= interval;
        }
        self.start
    }

    /// The rule's dates in order from `start` (`DTSTART` or a [`Self::scan_start`]), up to the
    /// last instant RFC 3339 can write.
    fn dates_from(&self, start: DateTime<chrono_tz::Tz>) -> impl Iterator<Item = Timestamp> {
        // A rule with a COUNT is walked from DTSTART, to its end if need be.
        let scan = self
            .rule
            .get_count()
            .map_or(MAX_SCAN, |count| count as usize);
        RRuleSet::new(start.with_timezone(&rrule::Tz::Tz(self.zone)))
            .rrule(self.validated.clone())
            .limit()
            .into_iter()
            .take(scan)
            .map(|time| to_timestamp(&time))
            .take_while(|at| *at <= Timestamp::LATEST)
    }

    /// The order dates in order, less `EXDATE`s and `skipped`: from `DTSTART`, or only those
    /// after `after` when given.
    fn upcoming<'a>(
        &'a self,
        after: Option<Timestamp>,
        skipped: &'a [Timestamp],
    ) -> impl Iterator<Item = Timestamp> + 'a {
        let start = after.map_or(self.start, |after| self.scan_start(after));
        self.dates_from(start)
            .filter(move |at| after.is_none_or(|after| *at > after))
            .filter(move |at| !self.is_excluded(*at) && !skipped.contains(at))
    }

    /// The first order date strictly after `after` that no `EXDATE` leaves out and is not in
    /// `skipped`; `None` when the rule has ended.
    pub fn next_after(&self, after: Timestamp, skipped: &[Timestamp]) -> Option<Timestamp> {
        self.upcoming(Some(after), skipped).next()
    }

    /// [`Self::first_from`], or the 422 on `field` that says the rule has no order date left
    /// at `now`: what a subscription that must place orders is checked with (Create
    /// Subscription, Change Frequency, Update Subscription, a checkout's plan).
    pub fn upcoming_order(
        &self,
        now: Timestamp,
        skipped: &[Timestamp],
        field: &str,
    ) -> Result<Timestamp, FieldError> {
        self.first_from(now, skipped).ok_or_else(|| {
            FieldError::new(
                field,
                "no_upcoming_order",
                format!("{field} has no order date after {now}"),
            )
        })
    }

    /// The first order date at `at` or later (`DTSTART` itself when it lies ahead).
    pub fn first_from(&self, at: Timestamp, skipped: &[Timestamp]) -> Option<Timestamp> {
        self.next_after(
            Timestamp::from_micros(at.as_micros().saturating_sub(1)),
            skipped,
        )
    }

    /// The order date that falls on the local calendar `day`, if any.
    pub fn occurrence_on(&self, day: NaiveDate, skipped: &[Timestamp]) -> Option<Timestamp> {
        // From the day before in UTC: every zone's `day` begins after it.
        let before = day.pred_opt().map(|eve| {
            Timestamp::from(Utc.from_utc_datetime(&eve.and_time(chrono::NaiveTime::MIN)))
        });
        let start = before.map_or(self.start, |before| self.scan_start(before));
        self.dates_from(start)
            .filter(|at| !self.is_excluded(*at) && !skipped.contains(at))
            .take_while(|at| self.local_date(*at) <= day)
            .find(|at| self.local_date(*at) == day)
    }

    /// The rule in plain English: "every 2 weeks on Monday", "every month on the 1st and
    /// 15th", "every day, 10 times", "every week on Friday until March 1, 2025".
    pub fn text(&self) -> String {
        describe(&self.rule, &self.start, self.zone)
    }

    /// The average time between two orders, in days, as an exact fraction `(numerator,
    /// denominator)`: the rule's unit times its `INTERVAL`, shared among the orders one unit
    /// holds. A day is 1, a week 7, a month the Gregorian average (146,097 days in 4,800
    /// months), a year 12 of those. A unit holds one order for each `BYSETPOS` value, else each
    /// `BYMONTHDAY` (times each `BYMONTH` of a yearly rule), else each `BYDAY` (a weekday of a
    /// daily rule is one seventh of a week's days; an unnumbered weekday of a monthly or yearly
    /// rule, every such weekday of the month), else one. `COUNT`, `UNTIL` and `EXDATE` are left
    /// out: the rule's pace while it runs.
    pub fn average_period_days(&self) -> (u128, u128) {
        // Units and counts are in 4,800ths of a day / of a month's weeks, to stay exact.
        const MONTH: u128 = 146_097;
        const SCALE: u128 = 4_800;
        let rule = &self.rule;
        let unit = match rule.get_freq() {
            Frequency::Daily => SCALE,
            Frequency::Weekly => 7 * SCALE,
            Frequency::Monthly => MONTH,
            _ => 12 * MONTH,
        };
        let interval = u128::from(rule.get_interval().max(1));
        // Orders per unit, as `per / per_scale`.
        let count = |n: usize| u128::try_from(n.max(1)).unwrap_or(1);
        let months = if rule.get_freq() == Frequency::Yearly {
            count(rule.get_by_month().len())
        } else {
            1
        };
        let days = rule.get_by_weekday();
        let (per, per_scale) = if !rule.get_by_set_pos().is_empty() {
            (count(rule.get_by_set_pos().len()), 1)
        } else if !rule.get_by_month_day().is_empty() {
            (count(rule.get_by_month_day().len()) * months, 1)
        } else if days.is_empty() {
            (months, 1)
        } else {
            match rule.get_freq() {
                Frequency::Daily => (count(days.len()), 7),
                Frequency::Weekly => (count(days.len()), 1),
                _ => {
                    // A numbered weekday falls once a month; an unnumbered one every week of
                    // it: 146,097 / 33,600 times.
                    let of = |numbered: bool| {
                        let n = days
                            .iter()
                            .filter(|d| matches!(d, NWeekday::Nth(..)) == numbered)
                            .count();
                        u128::try_from(n).unwrap_or(0)
                    };
                    let (nth, every) = (of(true), of(false));
                    ((nth * 7 * SCALE + every * MONTH) * months, 7 * SCALE)
                }
            }
        };
        (unit * interval * per_scale, SCALE * per)
    }
}

/// What skipping a ship date does: the order date left out (kept in the subscription's
/// skipped dates, not written into `order_rrule`), and where `next_order_datetime` goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SkipPlan {
    pub skipped: Timestamp,
    pub next_order_datetime: Option<Timestamp>,
    /// Whether `next_order_datetime` moved (the skipped date was the next one).
    pub next_order_moved: bool,
}

/// Skips the order of the shop-local day of `requested` (Skip a ship date's `order_datetime`:
/// the day counts, not the time of day). The day must hold an upcoming order: the current
/// `next_order_datetime` or a later date of the rule that no `EXDATE` or earlier skip removed.
/// Problems name `field`.
pub(crate) fn plan_skip(
    schedule: &OrderSchedule,
    requested: Timestamp,
    next_order: Option<Timestamp>,
    skipped: &[Timestamp],
    now: Timestamp,
    field: &str,
) -> Result<SkipPlan, FieldError> {
    let day = schedule.local_date(requested);
    let target = match next_order {
        Some(next) if schedule.local_date(next) == day => Some(next),
        _ => schedule.occurrence_on(day, skipped),
    }
    .filter(|at| *at > now && next_order.is_none_or(|next| *at >= next));
    let Some(target) = target else {
        return Err(FieldError::new(
            field,
            "not_an_order_date",
            format!(
                "{day} is not an upcoming order date of this subscription (days are in {})",
                schedule.zone_name()
            ),
        ));
    };
    if next_order != Some(target) {
        return Ok(SkipPlan {
            skipped: target,
            next_order_datetime: next_order,
            next_order_moved: false,
        });
    }
    let mut all_skipped = skipped.to_vec();
    all_skipped.push(target);
    let next = schedule.next_after(target, &all_skipped);
    Ok(SkipPlan {
        skipped: target,
        next_order_datetime: next,
        next_order_moved: next != next_order,
    })
}

/// `next_order_datetime` when a subscription comes back (resume, reactivate): kept when it is
/// still ahead, else the rule's next date after `now`. The flag says whether it moved. A rule
/// with no date left is refused (422 `no_upcoming_order` on `field`): the subscription would
/// be active and never order; a new rule (Change Frequency) brings it back.
pub(crate) fn next_order_on_return(
    schedule: &OrderSchedule,
    next_order: Option<Timestamp>,
    skipped: &[Timestamp],
    now: Timestamp,
    field: &str,
) -> Result<(Timestamp, bool), FieldError> {
    match next_order {
        Some(next) if next > now => Ok((next, false)),
        _ => {
            let next = schedule.next_after(now, skipped).ok_or_else(|| {
                FieldError::new(
                    field,
                    "no_upcoming_order",
                    format!(
                        "the subscription's order_rrule has no order date after {now}; give it \
                         a new one (Change Frequency) first"
                    ),
                )
            })?;
            Ok((next, Some(next) != next_order))
        }
    }
}

const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

fn weekday_name(day: Weekday) -> &'static str {
    WEEKDAYS[day.num_days_from_monday() as usize]
}

fn month_name(month: u32) -> &'static str {
    MONTHS
        .get((month as usize).wrapping_sub(1))
        .copied()
        .unwrap_or("?")
}

/// "a", "a and b", "a, b and c".
fn join_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// 1st, 2nd, 3rd, 4th, 11th, 21st…
fn ordinal(n: i64) -> String {
    let suffix = match (n % 100, n % 10) {
        (11..=13, _) => "th",
        (_, 1) => "st",
        (_, 2) => "nd",
        (_, 3) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The nth of a month for BYDAY: first…fifth, last, second to last, or 6th.
fn nth_word(n: i64) -> String {
    let word = |n: i64| match n {
        1 => "first".to_string(),
        2 => "second".to_string(),
        3 => "third".to_string(),
        4 => "fourth".to_string(),
        5 => "fifth".to_string(),
        n => ordinal(n),
    };
    match n {
        -1 => "last".to_string(),
        n if n < 0 => format!("{} to last", word(-n)),
        n => word(n),
    }
}

fn month_day(n: i8) -> String {
    match n {
        -1 => "the last day".to_string(),
        n if n < 0 => format!("the {} to last day", ordinal(-i64::from(n))),
        n => format!("the {}", ordinal(i64::from(n))),
    }
}

fn every(interval: u16, unit: &str) -> String {
    if interval == 1 {
        format!("every {unit}")
    } else {
        format!("every {interval} {unit}s")
    }
}

fn weekdays(days: &[NWeekday]) -> Vec<Weekday> {
    let mut days: Vec<Weekday> = days
        .iter()
        .map(|day| match day {
            NWeekday::Every(day) | NWeekday::Nth(_, day) => *day,
        })
        .collect();
    days.sort_by_key(|day| day.num_days_from_monday());
    days.dedup();
    days
}

fn weekday_list(days: &[Weekday]) -> String {
    join_list(
        &days
            .iter()
            .map(|day| weekday_name(*day).to_string())
            .collect::<Vec<_>>(),
    )
}

fn describe(
    rule: &RRule<Unvalidated>,
    start: &DateTime<chrono_tz::Tz>,
    zone: chrono_tz::Tz,
) -> String {
    let interval = rule.get_interval().max(1);
    let by_day = rule.get_by_weekday();
    let by_month_day = rule.get_by_month_day();
    let by_month = rule.get_by_month();
    let custom = !rule.get_by_set_pos().is_empty()
        || !rule.get_by_week_no().is_empty()
        || !rule.get_by_year_day().is_empty();
    let unit = match rule.get_freq() {
        Frequency::Daily => "day",
        Frequency::Weekly => "week",
        Frequency::Monthly => "month",
        _ => "year",
    };
    let base = every(interval, unit);
    let body = (|| {
        if custom {
            return None;
        }
        match rule.get_freq() {
            Frequency::Daily if by_month.is_empty() && by_month_day.is_empty() => {
                let days = weekdays(by_day);
                let working_week = [
                    Weekday::Mon,
                    Weekday::Tue,
                    Weekday::Wed,
                    Weekday::Thu,
                    Weekday::Fri,
                ];
                Some(if days.is_empty() {
                    base.clone()
                } else if interval == 1 && days == working_week {
                    "every weekday".to_string()
                } else {
                    format!("{base} on {}", weekday_list(&days))
                })
            }
            Frequency::Weekly if by_month.is_empty() && by_month_day.is_empty() => {
                let mut days = weekdays(by_day);
                if days.is_empty() {
                    days.push(start.weekday());
                }
                Some(format!("{base} on {}", weekday_list(&days)))
            }
            Frequency::Monthly if by_month.is_empty() => match (by_day, by_month_day) {
                ([], []) => Some(format!("{base} on {}", month_day(start.day() as i8))),
                ([], days) => {
                    let mut days = days.to_vec();
                    days.sort_by_key(|day| (*day < 0, day.abs()));
                    days.dedup();
                    let names: Vec<String> = days.iter().map(|day| month_day(*day)).collect();
                    Some(format!("{base} on {}", join_list(&names)))
                }
                (weekdays, []) => {
                    let mut weekdays = weekdays.to_vec();
                    weekdays.sort_by_key(|day| match day {
                        NWeekday::Every(day) => (0, 0, day.num_days_from_monday()),
                        NWeekday::Nth(n, day) => {
                            (1 + i16::from(*n < 0), n.abs(), day.num_days_from_monday())
                        }
                    });
                    weekdays.dedup();
                    let names: Vec<String> = weekdays
                        .iter()
                        .map(|day| match day {
                            NWeekday::Every(day) => format!("every {}", weekday_name(*day)),
                            NWeekday::Nth(n, day) => {
                                format!("the {} {}", nth_word(i64::from(*n)), weekday_name(*day))
                            }
                        })
                        .collect();
                    Some(format!("{base} on {}", join_list(&names)))
                }
                _ => None,
            },
            Frequency::Yearly if by_day.is_empty() => {
                let months: Vec<u32> = if by_month.is_empty() {
                    vec![start.month()]
                } else {
                    by_month.iter().map(|month| u32::from(*month)).collect()
                };
                let days: Vec<i8> = if by_month_day.is_empty() {
                    vec![start.day() as i8]
                } else {
                    by_month_day.to_vec()
                };
                if days.iter().any(|day| *day < 1) || months.len() * days.len() > 4 {
                    return None;
                }
                let dates: Vec<String> = months
                    .iter()
                    .flat_map(|month| {
                        days.iter()
                            .map(move |day| format!("{} {day}", month_name(*month)))
                    })
                    .collect();
                Some(format!("{base} on {}", join_list(&dates)))
            }
            _ => None,
        }
    })();
    let mut text = body.unwrap_or_else(|| format!("{base} on a custom schedule"));
    if let Some(count) = rule.get_count() {
        text.push_str(&format!(", {count} times"));
    }
    if let Some(until) = rule.get_until() {
        let local = until.with_timezone(&zone);
        text.push_str(&format!(
            " until {} {}, {}",
            month_name(local.month()),
            local.day(),
            local.year()
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    fn zone(name: &str) -> ShopZone {
        ShopZone::parse(name).unwrap()
    }

    fn schedule(text: &str, shop: &str) -> OrderSchedule {
        OrderSchedule::parse(text, zone(shop), "subscription.order_rrule")
            .unwrap_or_else(|error| panic!("{text}: {error:?}"))
    }

    fn refused(text: &str) -> FieldError {
        OrderSchedule::parse(text, ShopZone::UTC, "subscription.order_rrule")
            .map(|_| ())
            .unwrap_err()
    }

    fn dates(schedule: &OrderSchedule, from: &str, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        let mut after = at(from);
        for _ in 0..n {
            match schedule.next_after(after, &[]) {
                Some(next) => {
                    out.push(next.to_rfc3339());
                    after = next;
                }
                None => break,
            }
        }
        out
    }

    #[test]
    fn a_weekly_rule_keeps_its_local_time_across_daylight_saving() {
        // New York moves its clocks on 2024-03-10 and 2024-11-03.
        let weekly = schedule(
            "DTSTART;TZID=America/New_York:20240301T090000\nRRULE:FREQ=WEEKLY",
            "UTC",
        );
        assert_eq!(
            dates(&weekly, "2024-03-01T00:00:00Z", 3),
            vec![
                "2024-03-01T14:00:00Z",
                "2024-03-08T14:00:00Z",
                "2024-03-15T13:00:00Z"
            ]
        );
        assert_eq!(
            dates(&weekly, "2024-10-27T00:00:00Z", 2),
            vec!["2024-11-01T13:00:00Z", "2024-11-08T14:00:00Z"]
        );
        assert_eq!(weekly.zone_name(), "America/New_York");
    }

    #[test]
    fn floating_and_utc_starts_are_expanded_in_the_shop_zone() {
        let floating = schedule(
            "DTSTART:20240301T090000\nRRULE:FREQ=WEEKLY",
            "America/New_York",
        );
        assert_eq!(
            dates(&floating, "2024-03-02T00:00:00Z", 2),
            vec!["2024-03-08T14:00:00Z", "2024-03-15T13:00:00Z"]
        );
        // 14:00Z is 09:00 in New York in March; later orders stay at 09:00 local.
        let utc = schedule(
            "DTSTART:20240301T140000Z\nRRULE:FREQ=WEEKLY",
            "America/New_York",
        );
        assert_eq!(utc.start(), at("2024-03-01T14:00:00Z"));
        assert_eq!(
            dates(&utc, "2024-03-02T00:00:00Z", 2),
            vec!["2024-03-08T14:00:00Z", "2024-03-15T13:00:00Z"]
        );
        // In a UTC shop, UTC it stays.
        let plain = schedule("DTSTART:20240301T140000Z\nRRULE:FREQ=WEEKLY", "UTC");
        assert_eq!(
            dates(&plain, "2024-03-09T00:00:00Z", 1),
            vec!["2024-03-15T14:00:00Z"]
        );
    }

    #[test]
    fn a_daily_rule_through_the_spring_gap_keeps_its_time() {
        let daily = schedule(
            "DTSTART;TZID=Europe/Berlin:20240329T080000\nRRULE:FREQ=DAILY",
            "UTC",
        );
        // Berlin moves from +01:00 to +02:00 on 2024-03-31.
        assert_eq!(
            dates(&daily, "2024-03-29T00:00:00Z", 3),
            vec![
                "2024-03-29T07:00:00Z",
                "2024-03-30T07:00:00Z",
                "2024-03-31T06:00:00Z"
            ]
        );
    }

    #[test]
    fn next_after_skips_exdates_and_skipped_dates() {
        let weekly = schedule(
            "DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY;BYDAY=MO\nEXDATE:20240311T090000Z",
            "UTC",
        );
        assert_eq!(
            weekly.next_after(at("2024-03-04T09:00:00Z"), &[]),
            Some(at("2024-03-18T09:00:00Z"))
        );
        assert_eq!(
            weekly.next_after(at("2024-03-04T09:00:00Z"), &[at("2024-03-18T09:00:00Z")]),
            Some(at("2024-03-25T09:00:00Z"))
        );
        // Strictly after: an order date is not its own next one.
        assert_eq!(
            weekly.next_after(at("2024-03-18T09:00:00Z"), &[]),
            Some(at("2024-03-25T09:00:00Z"))
        );
        assert_eq!(
            weekly.first_from(at("2024-03-18T09:00:00Z"), &[]),
            Some(at("2024-03-18T09:00:00Z"))
        );
        assert_eq!(
            weekly.first_from(at("2024-01-01T00:00:00Z"), &[]),
            Some(at("2024-03-04T09:00:00Z"))
        );
    }

    #[test]
    fn exdates_may_be_dates_zoned_lists_or_floating() {
        let daily = schedule(
            "DTSTART:20240301T090000\nRRULE:FREQ=DAILY\n\
             EXDATE;VALUE=DATE:20240302\n\
             EXDATE;TZID=America/New_York:20240303T090000,20240304T090000\n\
             EXDATE:20240305T090000",
            "America/New_York",
        );
        assert_eq!(
            daily.next_after(at("2024-03-01T14:00:00Z"), &[]),
            Some(at("2024-03-06T14:00:00Z"))
        );
    }

    #[test]
    fn a_rule_ends_at_until_or_count() {
        let counted = schedule("DTSTART:20240301T090000Z\nRRULE:FREQ=DAILY;COUNT=3", "UTC");
        assert_eq!(dates(&counted, "2024-01-01T00:00:00Z", 5).len(), 3);
        assert_eq!(counted.next_after(at("2024-03-03T09:00:00Z"), &[]), None);
        let until = schedule(
            "DTSTART;TZID=America/Toronto:20240301T090000\nRRULE:FREQ=DAILY;UNTIL=20240303",
            "UTC",
        );
        assert_eq!(
            dates(&until, "2024-01-01T00:00:00Z", 5),
            vec![
                "2024-03-01T14:00:00Z",
                "2024-03-02T14:00:00Z",
                "2024-03-03T14:00:00Z"
            ]
        );
        let floating_until = schedule(
            "DTSTART:20240301T090000\nRRULE:FREQ=DAILY;UNTIL=20240302T090000",
            "America/Toronto",
        );
        assert_eq!(dates(&floating_until, "2024-01-01T00:00:00Z", 5).len(), 2);
    }

    #[test]
    fn occurrence_on_finds_the_order_of_a_local_day() {
        let weekly = schedule(
            "DTSTART:20240304T230000\nRRULE:FREQ=WEEKLY",
            "America/Los_Angeles",
        );
        // 23:00 in Los Angeles is the next day in UTC; the day is the shop's.
        let day = NaiveDate::from_ymd_opt(2024, 3, 11).unwrap();
        assert_eq!(
            weekly.occurrence_on(day, &[]),
            Some(at("2024-03-12T06:00:00Z"))
        );
        assert_eq!(weekly.local_date(at("2024-03-12T06:00:00Z")), day);
        assert_eq!(
            weekly.occurrence_on(NaiveDate::from_ymd_opt(2024, 3, 12).unwrap(), &[]),
            None
        );
        assert_eq!(
            weekly.occurrence_on(day, &[at("2024-03-12T06:00:00Z")]),
            None
        );
    }

    #[test]
    fn text_is_plain_english() {
        let cases = [
            (
                "RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO",
                "every 2 weeks on Monday",
            ),
            ("RRULE:FREQ=WEEKLY", "every week on Monday"),
            (
                "RRULE:FREQ=WEEKLY;BYDAY=FR,MO,WE",
                "every week on Monday, Wednesday and Friday",
            ),
            (
                "RRULE:FREQ=WEEKLY;BYDAY=TU,TH",
                "every week on Tuesday and Thursday",
            ),
            ("RRULE:FREQ=DAILY", "every day"),
            ("RRULE:FREQ=DAILY;INTERVAL=3", "every 3 days"),
            ("RRULE:FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR", "every weekday"),
            ("RRULE:FREQ=MONTHLY", "every month on the 4th"),
            ("RRULE:FREQ=MONTHLY;INTERVAL=2", "every 2 months on the 4th"),
            (
                "RRULE:FREQ=MONTHLY;BYMONTHDAY=15,1",
                "every month on the 1st and the 15th",
            ),
            (
                "RRULE:FREQ=MONTHLY;BYMONTHDAY=-1",
                "every month on the last day",
            ),
            (
                "RRULE:FREQ=MONTHLY;BYMONTHDAY=22,-2",
                "every month on the 22nd and the 2nd to last day",
            ),
            (
                "RRULE:FREQ=MONTHLY;BYDAY=1MO",
                "every month on the first Monday",
            ),
            (
                "RRULE:FREQ=MONTHLY;BYDAY=-1FR,2TU",
                "every month on the second Tuesday and the last Friday",
            ),
            ("RRULE:FREQ=YEARLY", "every year on March 4"),
            (
                "RRULE:FREQ=YEARLY;BYMONTH=1,7;BYMONTHDAY=15",
                "every 2 years on January 15 and July 15",
            ),
            ("RRULE:FREQ=DAILY;COUNT=10", "every day, 10 times"),
            (
                "RRULE:FREQ=WEEKLY;BYDAY=FR;UNTIL=20250301T000000Z",
                "every week on Friday until March 1, 2025",
            ),
            (
                "RRULE:FREQ=MONTHLY;BYDAY=MO,TU;BYSETPOS=1",
                "every month on a custom schedule",
            ),
            (
                "RRULE:FREQ=YEARLY;BYWEEKNO=20",
                "every year on a custom schedule",
            ),
        ];
        for (rule, expected) in cases {
            let rule = if expected.starts_with("every 2 years") {
                rule.replace("YEARLY", "YEARLY;INTERVAL=2")
            } else {
                rule.to_string()
            };
            let text = format!("DTSTART:20240304T090000Z\n{rule}");
            assert_eq!(schedule(&text, "UTC").text(), expected, "{rule}");
        }
        assert_eq!(ordinal(11), "11th");
        assert_eq!(ordinal(21), "21st");
        assert_eq!(ordinal(112), "112th");
        assert_eq!(ordinal(23), "23rd");
        assert_eq!(nth_word(-2), "second to last");
    }

    #[test]
    fn the_text_of_until_is_the_day_in_the_rule_zone() {
        let rule = schedule(
            "DTSTART;TZID=Asia/Tokyo:20240301T090000\n\
             RRULE:FREQ=WEEKLY;UNTIL=20240331T200000Z",
            "UTC",
        );
        assert_eq!(rule.text(), "every week on Friday until April 1, 2024");
    }

    #[test]
    fn malformed_rules_are_refused_naming_the_field() {
        for (text, code, why) in [
            ("", "required", "required"),
            ("RRULE:FREQ=WEEKLY", "invalid_rrule", "DTSTART"),
            ("DTSTART:20240301T090000Z", "not_recurring", "RRULE"),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=WEEKLY;COUNT=1",
                "not_recurring",
                "at most one",
            ),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=DAILY;COUNT=2\n\
                 EXDATE:20240302T090000Z",
                "not_recurring",
                "at most one",
            ),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=FORTNIGHTLY",
                "invalid_rrule",
                "RRULE",
            ),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=WEEKLY;BYDAY=XX",
                "invalid_rrule",
                "RRULE",
            ),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=MONTHLY;BYMONTHDAY=40",
                "invalid_rrule",
                "RRULE",
            ),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=DAILY;UNTIL=20230101T000000Z",
                "invalid_rrule",
                "RRULE",
            ),
            (
                "DTSTART:2024-03-01\nRRULE:FREQ=DAILY",
                "invalid_rrule",
                "DTSTART value",
            ),
            (
                "DTSTART:20241301T090000Z\nRRULE:FREQ=DAILY",
                "invalid_rrule",
                "DTSTART",
            ),
            (
                "DTSTART;TZID=Mars/Olympus:20240301T090000\nRRULE:FREQ=DAILY",
                "invalid_rrule",
                "TZID",
            ),
            (
                "DTSTART;TZID=Europe/Paris:20240301T090000Z\nRRULE:FREQ=DAILY",
                "invalid_rrule",
                "must not end in Z",
            ),
            (
                "DTSTART;TZID=Europe/Paris:20240331T023000\nRRULE:FREQ=DAILY",
                "invalid_rrule",
                "does not exist",
            ),
            (
                "DTSTART:20240301T090000Z\nDTSTART:20240302T090000Z\nRRULE:FREQ=DAILY",
                "invalid_rrule",
                "more than one DTSTART",
            ),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=HOURLY;BYMINUTE=0",
                "unsupported_rrule",
                "at most daily",
            ),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=DAILY;BYHOUR=9,17",
                "unsupported_rrule",
                "one order a day",
            ),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=DAILY\nRRULE:FREQ=WEEKLY",
                "unsupported_rrule",
                "only one RRULE",
            ),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=DAILY\nRDATE:20240401T090000Z",
                "unsupported_rrule",
                "RDATE",
            ),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=DAILY\nSUMMARY:Coffee",
                "invalid_rrule",
                "unknown line",
            ),
            ("every monday", "invalid_rrule", "NAME:value"),
            (
                "DTSTART:20240301T090000Z\nRRULE:FREQ=DAILY\nEXDATE:soon",
                "invalid_rrule",
                "EXDATE value",
            ),
        ] {
            let error = refused(text);
            assert_eq!(error.field, "subscription.order_rrule", "{text}");
            assert_eq!(error.code, code, "{text}: {}", error.message);
            assert!(error.message.contains(why), "{text}: {}", error.message);
        }
    }

    #[test]
    fn crlf_folded_and_lower_case_text_is_read() {
        let rule = schedule(
            "dtstart:20240304T090000Z\r\nRRULE:FREQ=WEEKLY;\r\n INTERVAL=2;BYDAY=MO\r\n",
            "UTC",
        );
        assert_eq!(rule.text(), "every 2 weeks on Monday");
        assert_eq!(
            rule.source(),
            "dtstart:20240304T090000Z\nRRULE:FREQ=WEEKLY;\n INTERVAL=2;BYDAY=MO"
        );
    }

    /// An order time the clocks skip moves on by the gap (02:30 becomes 03:30); one they pass
    /// twice is the earlier.
    #[test]
    fn order_times_in_a_gap_or_an_overlap() {
        let spring = schedule(
            "DTSTART;TZID=America/New_York:20240308T023000\nRRULE:FREQ=DAILY",
            "UTC",
        );
        assert_eq!(
            dates(&spring, "2024-03-09T00:00:00Z", 3),
            vec![
                "2024-03-09T07:30:00Z",
                "2024-03-10T07:30:00Z",
                "2024-03-11T06:30:00Z"
            ]
        );
        let autumn = schedule(
            "DTSTART;TZID=America/New_York:20241101T013000\nRRULE:FREQ=DAILY",
            "UTC",
        );
        assert_eq!(
            dates(&autumn, "2024-11-02T00:00:00Z", 3),
            vec![
                "2024-11-02T05:30:00Z",
                "2024-11-03T05:30:00Z",
                "2024-11-04T06:30:00Z"
            ]
        );
    }

    #[test]
    fn a_start_when_the_clocks_go_back_is_the_earlier_time() {
        // 01:30 happens twice in New York on 2024-11-03; the first is 05:30Z.
        let rule = schedule(
            "DTSTART;TZID=America/New_York:20241103T013000\nRRULE:FREQ=DAILY",
            "UTC",
        );
        assert_eq!(rule.start(), at("2024-11-03T05:30:00Z"));
    }

    #[test]
    fn skipping_the_next_date_moves_next_order_past_it() {
        let weekly = schedule(
            "DTSTART:20240304T090000\nRRULE:FREQ=WEEKLY\nEXDATE:20240318T090000",
            "America/Toronto",
        );
        let now = at("2024-03-05T00:00:00Z");
        let next = Some(at("2024-03-11T13:00:00Z"));
        // Any time of the shop's day will do.
        let plan = plan_skip(
            &weekly,
            at("2024-03-11T23:59:00-04:00"),
            next,
            &[],
            now,
            "f",
        )
        .unwrap();
        assert_eq!(
            plan,
            SkipPlan {
                skipped: at("2024-03-11T13:00:00Z"),
                // The 18th is an EXDATE.
                next_order_datetime: Some(at("2024-03-25T13:00:00Z")),
                next_order_moved: true,
            }
        );
        // A later date: recorded, next order stays.
        let plan = plan_skip(&weekly, at("2024-04-01T12:00:00Z"), next, &[], now, "f").unwrap();
        assert_eq!(plan.skipped, at("2024-04-01T13:00:00Z"));
        assert_eq!(plan.next_order_datetime, next);
        assert!(!plan.next_order_moved);
        // Skipping the next date when the one after is skipped already.
        let plan = plan_skip(
            &weekly,
            at("2024-03-11T12:00:00Z"),
            next,
            &[at("2024-03-25T13:00:00Z")],
            now,
            "f",
        )
        .unwrap();
        assert_eq!(plan.next_order_datetime, Some(at("2024-04-01T13:00:00Z")));
    }

    #[test]
    fn a_next_order_set_by_hand_can_be_skipped_too() {
        let weekly = schedule("DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY", "UTC");
        let manual = Some(at("2024-03-13T15:00:00Z"));
        let plan = plan_skip(
            &weekly,
            at("2024-03-13T00:00:00Z"),
            manual,
            &[],
            at("2024-03-12T00:00:00Z"),
            "f",
        )
        .unwrap();
        assert_eq!(plan.skipped, at("2024-03-13T15:00:00Z"));
        assert_eq!(plan.next_order_datetime, Some(at("2024-03-18T09:00:00Z")));
    }

    #[test]
    fn only_upcoming_order_dates_can_be_skipped() {
        let weekly = schedule(
            "DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY\nEXDATE:20240325T090000Z",
            "UTC",
        );
        let now = at("2024-03-12T00:00:00Z");
        let next = Some(at("2024-03-18T09:00:00Z"));
        for (requested, skipped) in [
            ("2024-03-19T09:00:00Z", vec![]), // not an order day
            ("2024-03-11T09:00:00Z", vec![]), // past
            ("2024-03-25T09:00:00Z", vec![]), // an EXDATE
            ("2024-04-01T09:00:00Z", vec![at("2024-04-01T09:00:00Z")]), // skipped already
        ] {
            let error = plan_skip(
                &weekly,
                at(requested),
                next,
                &skipped,
                now,
                "order_datetime",
            )
            .unwrap_err();
            assert_eq!(
                (error.field.as_str(), error.code),
                ("order_datetime", "not_an_order_date"),
                "{requested}"
            );
        }
        // Before a next order pushed later by hand.
        let later = Some(at("2024-04-08T09:00:00Z"));
        assert!(plan_skip(&weekly, at("2024-04-01T09:00:00Z"), later, &[], now, "f").is_err());
    }

    #[test]
    fn coming_back_finds_a_next_order_ahead() {
        let weekly = schedule("DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY", "UTC");
        let now = at("2024-04-02T00:00:00Z");
        assert_eq!(
            next_order_on_return(&weekly, Some(at("2024-04-08T09:00:00Z")), &[], now, "f"),
            Ok((at("2024-04-08T09:00:00Z"), false))
        );
        assert_eq!(
            next_order_on_return(&weekly, Some(at("2024-03-11T09:00:00Z")), &[], now, "f"),
            Ok((at("2024-04-08T09:00:00Z"), true))
        );
        assert_eq!(
            next_order_on_return(&weekly, None, &[at("2024-04-08T09:00:00Z")], now, "f"),
            Ok((at("2024-04-15T09:00:00Z"), true))
        );
        let ended = schedule("DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY;COUNT=3", "UTC");
        let problem = next_order_on_return(&ended, None, &[], now, "order_rrule").unwrap_err();
        assert_eq!(problem.code, "no_upcoming_order");
    }

    #[test]
    fn a_shop_zone_the_database_does_not_know_is_utc() {
        assert_eq!(ShopZone::of_shop("Mars/Olympus"), ShopZone::UTC);
        assert_eq!(ShopZone::of_shop("Europe/Paris").name(), "Europe/Paris");
        assert_eq!(ShopZone::parse("nowhere"), None);
    }

    /// Every date of the rule after `after`, walked from `DTSTART` with no limit: what a
    /// search from a later start must agree with.
    fn walked_from_dtstart(schedule: &OrderSchedule, after: Timestamp, n: usize) -> Vec<Timestamp> {
        RRuleSet::new(schedule.start.with_timezone(&rrule::Tz::Tz(schedule.zone)))
            .rrule(schedule.validated.clone())
            .into_iter()
            .map(|time| to_timestamp(&time))
            .filter(|at| *at > after && !schedule.is_excluded(*at))
            .take(n)
            .collect()
    }

    fn next_dates(schedule: &OrderSchedule, after: Timestamp, n: usize) -> Vec<Timestamp> {
        let mut out = Vec::new();
        let mut from = after;
        while out.len() < n {
            let Some(next) = schedule.next_after(from, &[]) else {
                break;
            };
            out.push(next);
            from = next;
        }
        out
    }

    #[test]
    fn a_search_started_near_its_date_finds_what_a_walk_from_dtstart_finds() {
        let rules = [
            ("DTSTART:19700101T090000Z\nRRULE:FREQ=DAILY", "UTC"),
            (
                "DTSTART:19700102T090000\nRRULE:FREQ=DAILY;INTERVAL=3",
                "America/Toronto",
            ),
            (
                "DTSTART:19700103T023000\nRRULE:FREQ=DAILY;BYMONTH=3,11",
                "America/Toronto",
            ),
            (
                "DTSTART:19700105T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR",
                "Europe/Paris",
            ),
            (
                "DTSTART:19700106T090000\nRRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;WKST=SU",
                "UTC",
            ),
            (
                "DTSTART:19700131T100000\nRRULE:FREQ=MONTHLY",
                "Australia/Sydney",
            ),
            (
                "DTSTART:19700101T100000\nRRULE:FREQ=MONTHLY;BYMONTHDAY=1,15,31",
                "Europe/Paris",
            ),
            (
                "DTSTART:19700130T100000\nRRULE:FREQ=MONTHLY;INTERVAL=5;BYDAY=-1FR",
                "UTC",
            ),
            (
                "DTSTART:19700102T080000\nRRULE:FREQ=MONTHLY;BYSETPOS=-1;BYDAY=MO,TU,WE,TH,FR",
                "UTC",
            ),
            ("DTSTART:19720229T120000\nRRULE:FREQ=YEARLY", "UTC"),
            (
                "DTSTART:19710315T120000\nRRULE:FREQ=YEARLY;INTERVAL=4",
                "America/Toronto",
            ),
            (
                "DTSTART:19700101T090000Z\nRRULE:FREQ=WEEKLY;UNTIL=20270301T000000Z\n\
                 EXDATE:20261203T090000Z",
                "UTC",
            ),
        ];
        let references = [
            "1970-01-01T00:00:00Z",
            "1999-12-31T23:59:59Z",
            "2026-03-08T06:59:59Z",
            "2026-11-01T05:30:00Z",
            "2026-11-25T13:00:00Z",
            "2027-02-28T12:00:00Z",
            "2031-03-09T07:30:00Z",
        ];
        for (text, zone_name) in rules {
            let schedule = schedule(text, zone_name);
            for reference in references {
                assert_eq!(
                    next_dates(&schedule, at(reference), 4),
                    walked_from_dtstart(&schedule, at(reference), 4),
                    "{text} after {reference}"
                );
            }
            // The searches near today did start near today.
            assert!(
                schedule.scan_start(at("2026-11-25T13:00:00Z")) > schedule.start,
                "{text}"
            );
        }
    }

    #[test]
    fn a_search_whose_start_the_clocks_skip_steps_back_a_period() {
        // 02:30 does not exist in Toronto on 8 March 2026; a search near it must not go back
        // to 1900 (and give up after a century of dates).
        let daily = schedule(
            "DTSTART;TZID=America/Toronto:19000101T023000\nRRULE:FREQ=DAILY",
            "UTC",
        );
        for reference in [
            "2026-03-08T06:00:00Z",
            "2026-03-09T06:30:00Z",
            "2026-03-09T12:00:00Z",
            "2026-03-10T06:29:00Z",
        ] {
            assert!(daily.scan_start(at(reference)) > daily.start, "{reference}");
            assert_eq!(
                next_dates(&daily, at(reference), 3),
                walked_from_dtstart(&daily, at(reference), 3),
                "after {reference}"
            );
        }
        // Samoa skipped 30 December 2011 whole.
        let samoa = schedule(
            "DTSTART;TZID=Pacific/Apia:19700101T090000\nRRULE:FREQ=DAILY",
            "UTC",
        );
        let reference = at("2011-12-31T12:00:00Z");
        assert!(samoa.scan_start(reference) > samoa.start);
        assert_eq!(
            next_dates(&samoa, reference, 3),
            walked_from_dtstart(&samoa, reference, 3)
        );
    }

    #[test]
    fn a_daily_rule_begun_long_ago_still_has_its_dates() {
        // The walk from 1900 to today is 46,000 dates: more than a search looks at.
        for start in ["19000101T090000Z", "19160301T090000Z", "19490101T090000Z"] {
            let daily = schedule(&format!("DTSTART:{start}\nRRULE:FREQ=DAILY"), "UTC");
            let now = at("2026-11-25T13:00:00Z");
            assert_eq!(
                daily.upcoming_order(now, &[], "order_rrule"),
                Ok(at("2026-11-26T09:00:00Z")),
                "{start}"
            );
            assert_eq!(
                daily.occurrence_on(NaiveDate::from_ymd_opt(2026, 12, 1).unwrap(), &[]),
                Some(at("2026-12-01T09:00:00Z"))
            );
        }
        let toronto = schedule(
            "DTSTART:19000105T090000\nRRULE:FREQ=WEEKLY;BYDAY=FR",
            "America/Toronto",
        );
        assert_eq!(
            toronto.next_after(at("2026-11-25T13:00:00Z"), &[]),
            Some(at("2026-11-27T14:00:00Z"))
        );
    }

    #[test]
    fn a_rule_with_no_date_ahead_has_no_upcoming_order() {
        let ended = schedule("DTSTART:20200101T090000Z\nRRULE:FREQ=DAILY;COUNT=2", "UTC");
        let problem = ended
            .upcoming_order(at("2026-11-25T00:00:00Z"), &[], "subscription.order_rrule")
            .unwrap_err();
        assert_eq!(
            (problem.field.as_str(), problem.code),
            ("subscription.order_rrule", "no_upcoming_order")
        );
        assert_eq!(
            ended.upcoming_order(at("2019-12-31T00:00:00Z"), &[], "f"),
            Ok(at("2020-01-01T09:00:00Z"))
        );
        // Counted from DTSTART, within MAX_COUNT; above it, refused.
        let counted = schedule(
            "DTSTART:20000101T090000Z\nRRULE:FREQ=DAILY;COUNT=10000",
            "UTC",
        );
        assert_eq!(
            counted.next_after(at("2026-11-25T13:00:00Z"), &[]),
            Some(at("2026-11-26T09:00:00Z"))
        );
        assert_eq!(counted.next_after(at("2027-05-18T09:00:00Z"), &[]), None);
        let problem = refused("DTSTART:20000101T090000Z\nRRULE:FREQ=DAILY;COUNT=10001");
        assert_eq!(problem.code, "unsupported_rrule");
    }

    #[test]
    fn no_date_is_given_past_the_year_9999() {
        let problem = refused("DTSTART;TZID=America/Toronto:99991230T230000\nRRULE:FREQ=DAILY");
        assert_eq!(
            problem.code, "not_recurring",
            "one date, then the year 10000 in UTC"
        );
        let last = schedule("DTSTART:99991201T090000Z\nRRULE:FREQ=DAILY", "UTC");
        assert_eq!(last.next_after(at("9999-12-31T09:00:00Z"), &[]), None);
        assert_eq!(
            last.next_after(at("9999-12-30T09:00:00Z"), &[]),
            Some(at("9999-12-31T09:00:00Z"))
        );
    }
}
