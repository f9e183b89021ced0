//! Pause until a date: Pause may name the day the subscription comes back (`resume_on`, a date
//! after today in the shop's zone), and the scheduler resumes it once that day has begun in
//! the shop's zone, as the Resume action does (the same next order date, status log entry
//! `resumed` by `system`, `subscription_resumed`). A manual resume or cancel drops the date
//! (docs/subscriptions.md).

use chrono::NaiveDate;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::access::shop::Shop;
use crate::kernel::body::{BodyObject, Field, read_body};
use crate::kernel::error::DomainError;
use crate::kernel::ids::{ShopId, SubscriptionId};
use crate::kernel::jobs::JobControl;
use crate::kernel::time::{Clock, Timestamp};
use crate::subscriptions::operations::{ActionRequest, take_subscription_action};
use crate::subscriptions::recurrence::ShopZone;
use crate::subscriptions::repository::SubscriptionDatabase;
use crate::subscriptions::resources::{Actor, SubscriptionStatus};

/// Subscriptions looked at in one pass of [`resume_due_pauses`].
const RESUME_BATCH: usize = 100;

/// Pause as a client asks for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PauseRequest {
    /// The day the subscription comes back by itself; `None`: it stays paused until resumed.
    /// The use case checks it is after today in the shop's zone.
    pub resume_on: Option<NaiveDate>,
}

/// The body of Pause: optional; a body left out is `{}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionPauseRequest {
    /// The day (`YYYY-MM-DD`, after today in the shop's time zone) Mercer resumes the
    /// subscription; left out, it stays paused until resumed.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = Date, example = "2024-07-01")]
    pub resume_on: Field<NaiveDate>,
}
impl BodyObject for SubscriptionPauseRequest {}

/// Pause's body: `{"resume_on"}`, optional (blank or null count as left out).
pub fn parse_pause(body: &Value) -> Result<PauseRequest, DomainError> {
    read_body::<SubscriptionPauseRequest, _>(body, |body, check| {
        if let Field::Invalid(_) = body.resume_on {
            check.optional("resume_on", body.resume_on);
            return None;
        }
        Some(PauseRequest {
            resume_on: body.resume_on.into_value(),
        })
    })
}

/// When a paused subscription comes back by itself: the day, and the instant it begins in the
/// shop's zone (worked out when it was paused), when the scheduler resumes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoResume {
    /// The day given as `resume_on`.
    pub on: NaiveDate,
    /// The start of that day in the shop's zone.
    pub at: Timestamp,
}

impl AutoResume {
    /// The day as written and stored: `YYYY-MM-DD`.
    pub fn day(&self) -> String {
        self.on.format("%Y-%m-%d").to_string()
    }

    /// The automatic resume as stored: the day as [`Self::day`] writes it, and its start.
    pub fn read(day: &str, at: Timestamp) -> Option<AutoResume> {
        let on = NaiveDate::parse_from_str(day, "%Y-%m-%d").ok()?;
        Some(AutoResume { on, at })
    }
}

/// The automatic resume of a pause until `on`, asked for at `now`: `on` must come after the
/// shop's today (422 `out_of_range` on `field` otherwise).
pub fn plan_resume(
    shop: &Shop,
    on: NaiveDate,
    now: Timestamp,
    field: &str,
) -> Result<AutoResume, DomainError> {
    let zone = ShopZone::of_shop(&shop.timezone);
    let today = zone.local_date(now);
    if on <= today {
        return Err(DomainError::invalid(
            field,
            "out_of_range",
            format!(
                "{field} must be a date after today ({today} in {}, the shop's time zone)",
                zone.name()
            ),
        ));
    }
    let at = zone.start_of_day(on).ok_or_else(|| {
        DomainError::invalid(field, "out_of_range", format!("{field} is too far ahead"))
    })?;
    Ok(AutoResume { on, at })
}

/// What became of one subscription due to resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Resumed.
    Resumed,
    /// The Resume action refused it: it stays paused and its date is dropped.
    Refused,
    /// Another unit of work holds it, or it is no longer due.
    Skipped,
}

/// Resumes the paused subscriptions whose `resume_on` has begun in their shop's zone, each in a
/// unit of work of its own that takes the Resume action as Mercer (actor `system`). Returns
/// how many were resumed. One the Resume action refuses (its rule has no order date left)
/// stays paused without its date, and the refusal is logged.
pub fn resume_due_pauses(
    db: &impl SubscriptionDatabase,
    clock: &dyn Clock,
    control: &dyn JobControl,
) -> Result<usize, DomainError> {
    let mut resumed = 0;
    loop {
        let now = clock.now();
        let due = db.read_tx(|tx| Ok(tx.due_resumptions(None, now, RESUME_BATCH)?))?;
        let mut progressed = false;
        for (shop_id, id) in &due {
            if control.should_stop() {
                return Ok(resumed);
            }
            match resume_one(db, clock, *shop_id, *id)? {
                Outcome::Resumed => {
                    resumed += 1;
                    progressed = true;
                }
                Outcome::Refused => progressed = true,
                Outcome::Skipped => {}
            }
        }
        if due.len() < RESUME_BATCH || !progressed {
            return Ok(resumed);
        }
    }
}

fn resume_one(
    db: &impl SubscriptionDatabase,
    clock: &dyn Clock,
    shop_id: ShopId,
    id: SubscriptionId,
) -> Result<Outcome, DomainError> {
    let result = db.write_tx(|tx| {
        let now = clock.now();
        // Locked and checked again: another scheduler may have resumed it, or a client changed
        // it, since it was found.
        if !tx.lock_due_resumption(shop_id, id, now)? {
            return Ok(Outcome::Skipped);
        }
        let Some(shop) = tx.shop_by_id(shop_id)? else {
            return Ok(Outcome::Skipped);
        };
        take_subscription_action(tx, &shop, id, ActionRequest::Resume, Actor::system(), now)?;
        Ok(Outcome::Resumed)
    });
    let refusal = match result {
        Err(DomainError::Storage(error)) => return Err(DomainError::Storage(error)),
        Err(refusal) => refusal,
        done => return done,
    };
    log::warn!(
        target: "mercer::scheduler",
        "subscription {id} was not resumed on its resume_on date and stays paused: {refusal}"
    );
    db.write_tx(|tx| {
        if !tx.lock_due_resumption(shop_id, id, clock.now())? {
            return Ok(Outcome::Skipped);
        }
        if let Some(mut stored) = tx.subscription(shop_id, id)?
            && stored.state.subscription_status == SubscriptionStatus::Paused
        {
            stored.state.resume_on = None;
            // Neither its status nor its price changes: nothing for the analytics counters.
            tx.save_subscription(shop_id, id, &stored.state)?;
        }
        Ok(Outcome::Refused)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::access::shop::ShopInput;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    fn day(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap()
    }

    fn shop_in(zone: &str) -> Shop {
        let db = crate::testing::MemoryDatabase::default();
        crate::ports::Database::write(&db, |tx| {
            crate::access::shop::create_shop(
                tx,
                ShopInput {
                    shop_domain: "pause.shop.test".into(),
                    timezone: Some(zone.into()),
                    ..ShopInput::default()
                },
                at("2024-01-01T00:00:00Z"),
            )
        })
        .unwrap()
    }

    fn problem(result: Result<impl std::fmt::Debug, DomainError>) -> (String, &'static str) {
        match result {
            Err(DomainError::Invalid(problems)) => (problems[0].field.clone(), problems[0].code),
            other => panic!("expected 422, got {other:?}"),
        }
    }

    #[test]
    fn the_body_is_optional_and_its_date_is_written_yyyy_mm_dd() {
        for left_out in [
            json!({}),
            json!({"resume_on": null}),
            json!({"resume_on": " "}),
        ] {
            assert_eq!(
                parse_pause(&left_out).unwrap().resume_on,
                None,
                "{left_out}"
            );
        }
        assert_eq!(
            parse_pause(&json!({"resume_on": "2024-07-01"}))
                .unwrap()
                .resume_on,
            Some(day("2024-07-01"))
        );
        for wrong in [
            json!({"resume_on": "2024-7-1"}),
            json!({"resume_on": "2024-02-30"}),
            json!({"resume_on": "2024-07-01T00:00:00Z"}),
            json!({"resume_on": 20240701}),
        ] {
            assert_eq!(
                problem(parse_pause(&wrong)),
                ("resume_on".to_string(), "invalid_date"),
                "{wrong}"
            );
        }
    }

    #[test]
    fn the_date_must_come_after_today_in_the_shops_zone() {
        // 06:00Z on 5 March is 22:00 on the 4th in Los Angeles and 19:00 on the 5th in
        // Auckland, where the 6th begins at 11:00Z.
        let now = at("2024-03-05T06:00:00Z");
        let la = shop_in("America/Los_Angeles");
        let planned = plan_resume(&la, day("2024-03-05"), now, "resume_on").unwrap();
        // Midnight in Los Angeles (PST, UTC-8).
        assert_eq!(planned.at, at("2024-03-05T08:00:00Z"));
        assert_eq!(
            problem(plan_resume(&la, day("2024-03-04"), now, "resume_on")),
            ("resume_on".to_string(), "out_of_range")
        );
        let auckland = shop_in("Pacific/Auckland");
        assert_eq!(
            problem(plan_resume(&auckland, day("2024-03-05"), now, "resume_on")),
            ("resume_on".to_string(), "out_of_range")
        );
        let planned = plan_resume(&auckland, day("2024-03-06"), now, "resume_on").unwrap();
        assert_eq!(planned.at, at("2024-03-05T11:00:00Z"));
        // A zone whose clocks skip midnight (Santiago, 7 September 2024): the day begins at
        // 01:00 there.
        let santiago = shop_in("America/Santiago");
        let planned = plan_resume(&santiago, day("2024-09-08"), now, "resume_on").unwrap();
        assert_eq!(planned.at, at("2024-09-08T04:00:00Z"));
        assert_eq!(
            AutoResume::read(&planned.day(), planned.at),
            Some(planned),
            "stored as written"
        );
    }
}
