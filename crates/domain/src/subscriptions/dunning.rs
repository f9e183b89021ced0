//! The dunning policy: how a shop's failed subscription orders are tried again, and what happens
//! when the last try fails (docs/subscriptions.md, "Dunning policy").
//!
//! A policy is a list of waits, `retry_intervals_s`: after the first failure of an order the
//! scheduler waits the first, after the second failure the second, and so on; the failure that
//! finds no wait left applies `at_max_retries`: the subscription is cancelled (made inactive),
//! paused, or the order is given up and the subscription moves on to its next date.
//!
//! A shop that never set a policy has the one its older settings describe,
//! `order_max_retries` waits of `order_retry_interval_seconds` each and `cancel`, so that a shop
//! behaves as it did before policies existed. Once set, the policy is the shop's own; `mercer
//! shop update --order-retry-interval/--order-max-retries` then make it that uniform list again
//! (keeping its `at_max_retries`), see [`update_shop_and_dunning`].

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::access::shop::{ORDER_RETRY_INTERVAL_RANGE, Shop, ShopSettings, update_shop_settings};
use crate::kernel::body::{BodyObject, Check, Field, Wrapped, read_resource};
use crate::kernel::error::{DomainError, FieldError, StoreResult};
use crate::kernel::ids::ShopId;
use crate::kernel::time::Timestamp;
use crate::subscriptions::repository::SubscriptionRepositories;

/// The most retries a policy holds: the bound of the older `order_max_retries`, so that every
/// policy a shop answers can be sent back as it is.
pub const MAX_RETRY_INTERVALS: usize = 100;
/// A wait is one second to thirty days, as the older `order_retry_interval_seconds`.
pub const RETRY_INTERVAL_RANGE: RangeInclusive<i64> = ORDER_RETRY_INTERVAL_RANGE;

/// What happens when an order's last retry fails.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[strum(serialize_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum AtMaxRetries {
    /// The subscription is made inactive (`max_retries_reached` in its status log;
    /// `subscription_order_max_retries_reached` tells it, not `subscription_cancelled`).
    Cancel,
    /// The subscription is paused (`paused` by `system` in its status log,
    /// `subscription_paused`) until someone resumes it.
    Pause,
    /// The order is given up: the subscription stays active and moves on to its rule's next
    /// date (`order_skipped` by `system`, `subscription_skipped`).
    SkipOrder,
}

impl AtMaxRetries {
    /// Every outcome, as the API lists them.
    pub const ALL: [AtMaxRetries; 3] = [
        AtMaxRetries::Cancel,
        AtMaxRetries::Pause,
        AtMaxRetries::SkipOrder,
    ];

    /// The outcome's name in the API (`skip_order`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The outcome of that name; `None` for any other text.
    pub fn parse(text: &str) -> Option<AtMaxRetries> {
        text.parse().ok()
    }

    /// What it does, for people (`mercer subscriptions due`, the console).
    pub fn describe(self) -> &'static str {
        match self {
            AtMaxRetries::Cancel => "the subscription is cancelled",
            AtMaxRetries::Pause => "the subscription is paused",
            AtMaxRetries::SkipOrder => "the order is skipped and the next one scheduled",
        }
    }
}

/// A shop's dunning policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DunningPolicy {
    /// Seconds to wait before each retry of a failed order, in turn: the first retry comes
    /// `retry_intervals_s[0]` after the first failure. Its length is how many retries an order
    /// gets (0 to 100); each wait is 1 to 2,592,000 (30 days).
    #[schema(example = json!([86400, 259200, 604800]), max_items = 100)]
    pub retry_intervals_s: Vec<i64>,
    /// What happens when the last retry fails.
    pub at_max_retries: AtMaxRetries,
}

/// What the scheduler does after an order's `failures`-th failure in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Try again this many seconds from now.
    RetryIn(i64),
    /// No retry is left: this happens.
    GiveUp(AtMaxRetries),
}

impl DunningPolicy {
    /// The policy a shop's older settings describe: `order_max_retries` waits of
    /// `order_retry_interval_seconds`, then the subscription ends.
    pub fn of_retry_settings(shop: &Shop) -> DunningPolicy {
        let count = usize::try_from(shop.order_max_retries.max(0)).unwrap_or(0);
        DunningPolicy {
            retry_intervals_s: vec![shop.order_retry_interval_seconds; count],
            at_max_retries: AtMaxRetries::Cancel,
        }
    }

    /// How many times a failed order is tried again.
    pub fn max_retries(&self) -> i64 {
        i64::try_from(self.retry_intervals_s.len()).unwrap_or(i64::MAX)
    }

    /// What follows an order's `failures`-th failure in a row (1 for its first attempt's).
    pub fn after_failure(&self, failures: i64) -> AfterFailure {
        let wait = usize::try_from(failures.saturating_sub(1))
            .ok()
            .and_then(|index| self.retry_intervals_s.get(index));
        match wait {
            Some(&seconds) => AfterFailure::RetryIn(seconds),
            None => AfterFailure::GiveUp(self.at_max_retries),
        }
    }

    /// The waits in words: `after 60 s, 120 s, then the subscription is paused`.
    pub fn describe(&self) -> String {
        if self.retry_intervals_s.is_empty() {
            return format!("no retry: {}", self.at_max_retries.describe());
        }
        let waits: Vec<String> = self
            .retry_intervals_s
            .iter()
            .map(|seconds| format!("{seconds} s"))
            .collect();
        let retries = if waits.len() == 1 { "retry" } else { "retries" };
        format!(
            "{} {retries}, after {}; then {}",
            waits.len(),
            waits.join(", "),
            self.at_max_retries.describe()
        )
    }
}

/// `{"dunning": {…}}`: the answer of Get and Set Dunning Policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Dunning {
    /// The shop's policy (the one its retry settings describe, until it sets one).
    pub dunning: DunningPolicy,
}

/// The shop's policy, and whether the shop set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShopDunning {
    /// The policy the scheduler follows.
    pub policy: DunningPolicy,
    /// The shop set it (Set Dunning Policy); false: its retry settings describe it.
    pub set: bool,
}

/// The shops' dunning policies.
pub trait DunningPolicyRepository {
    /// The policy the shop set; `None` for a shop that never set one.
    fn dunning_policy(&mut self, shop_id: ShopId) -> StoreResult<Option<DunningPolicy>>;
    /// Stores the shop's policy (already checked), replacing the one before.
    fn save_dunning_policy(
        &mut self,
        shop_id: ShopId,
        policy: &DunningPolicy,
        now: Timestamp,
    ) -> StoreResult<()>;
}

/// The policy's fields in the body of Set Dunning Policy.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct DunningFields {
    /// Seconds to wait before each retry, in turn (0 to 100 of them, each 1 to 2,592,000);
    /// `[]`: no retry.
    #[serde(default)]
    #[schema(value_type = Vec<i64>, required = true, max_items = 100, example = json!([86400, 259200, 604800]))]
    pub retry_intervals_s: Field<Vec<Field<i64>>>,
    /// `cancel`, `pause` or `skip_order`.
    #[serde(default)]
    #[schema(value_type = AtMaxRetries, required = true)]
    pub at_max_retries: Field<String>,
}
impl BodyObject for DunningFields {}

/// The body of Set Dunning Policy: `{"dunning": {"retry_intervals_s", "at_max_retries"}}` (the
/// fields alone are read too).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct DunningRequest {
    /// The whole policy, which replaces the shop's.
    #[serde(default)]
    #[schema(value_type = DunningFields, required = true)]
    pub dunning: Field<DunningFields>,
}
impl BodyObject for DunningRequest {}
impl Wrapped for DunningRequest {
    type Fields = DunningFields;
    const KEY: &'static str = "dunning";
    fn resource(self) -> Field<DunningFields> {
        self.dunning
    }
}

/// The waits: required, at most [`MAX_RETRY_INTERVALS`], each an integer (or its text) within
/// [`RETRY_INTERVAL_RANGE`], each problem on its element (`retry_intervals_s[2]`).
fn retry_intervals(check: &mut Check<'_>, given: Field<Vec<Field<i64>>>) -> Option<Vec<i64>> {
    let name = "retry_intervals_s";
    let items = check.required(name, given)?;
    let items = check.at_most(name, items, MAX_RETRY_INTERVALS);
    let mut waits = Vec::with_capacity(items.len());
    let mut valid = !check.has_problem(name);
    for (index, item) in items.into_iter().enumerate() {
        let path = format!("{}[{index}]", check.field(name));
        match item {
            Field::Given(seconds) if RETRY_INTERVAL_RANGE.contains(&seconds) => waits.push(seconds),
            Field::Given(_) => {
                let message = format!(
                    "{path} must be between {} and {} seconds (30 days)",
                    RETRY_INTERVAL_RANGE.start(),
                    RETRY_INTERVAL_RANGE.end()
                );
                check.push(FieldError::new(path, "out_of_range", message));
                valid = false;
            }
            Field::Invalid(mismatch) => {
                check.push(mismatch.at(path));
                valid = false;
            }
            Field::Absent | Field::Null | Field::Blank => {
                let message = format!("{path} must be an integer");
                check.push(FieldError::new(path, "invalid_type", message));
                valid = false;
            }
        }
    }
    valid.then_some(waits)
}

/// What happens after the last retry: required, one of [`AtMaxRetries::ALL`].
fn at_max_retries(check: &mut Check<'_>, given: Field<String>) -> Option<AtMaxRetries> {
    let name = "at_max_retries";
    let text = check.required(name, given)?;
    let outcome = AtMaxRetries::parse(&text);
    if outcome.is_none() {
        check.problem(name, "invalid_value", |field| {
            format!("{field} must be one of cancel, pause, skip_order, not {text:?}")
        });
    }
    outcome
}

/// Set Dunning Policy's body, checked: every problem on its path (`dunning.retry_intervals_s[2]`).
pub fn parse_dunning(body: &Value) -> Result<DunningPolicy, DomainError> {
    read_resource::<DunningRequest, _>(body, |fields, check| {
        let waits = retry_intervals(check, fields.retry_intervals_s);
        let outcome = at_max_retries(check, fields.at_max_retries);
        Some(DunningPolicy {
            retry_intervals_s: waits?,
            at_max_retries: outcome?,
        })
    })
}

/// The shop's policy: the one it set, else the one its retry settings describe.
pub fn shop_dunning(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
) -> Result<ShopDunning, DomainError> {
    Ok(match tx.dunning_policy(shop.id)? {
        Some(policy) => ShopDunning { policy, set: true },
        None => ShopDunning {
            policy: DunningPolicy::of_retry_settings(shop),
            set: false,
        },
    })
}

/// Get Dunning Policy.
pub fn dunning_policy(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
) -> Result<Dunning, DomainError> {
    Ok(Dunning {
        dunning: shop_dunning(tx, shop)?.policy,
    })
}

/// Set Dunning Policy: the checked policy replaces the shop's; answers it as stored. Orders
/// waiting for a retry keep the wait they were given; their next failure follows the new
/// policy.
pub fn set_dunning_policy(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    policy: DunningPolicy,
    now: Timestamp,
) -> Result<Dunning, DomainError> {
    tx.save_dunning_policy(shop.id, &policy, now)?;
    dunning_policy(tx, shop)
}

/// `mercer shop update`: changes the shop's settings ([`update_shop_settings`]), and when
/// `--order-retry-interval` or `--order-max-retries` is given to a shop that set a policy, makes
/// its policy the uniform one those settings now describe (`order_max_retries` waits of
/// `order_retry_interval_seconds`), keeping its `at_max_retries`. A shop that set none follows
/// its settings anyway. Answers the shop and its policy.
pub fn update_shop_and_dunning(
    tx: &mut dyn SubscriptionRepositories,
    identifier: &str,
    settings: ShopSettings,
    now: Timestamp,
) -> Result<(Shop, ShopDunning), DomainError> {
    let retries_given =
        settings.order_retry_interval_seconds.is_some() || settings.order_max_retries.is_some();
    let shop = update_shop_settings(tx, identifier, settings, now)?;
    let mut dunning = shop_dunning(tx, &shop)?;
    if retries_given && dunning.set {
        dunning.policy = DunningPolicy {
            at_max_retries: dunning.policy.at_max_retries,
            ..DunningPolicy::of_retry_settings(&shop)
        };
        tx.save_dunning_policy(shop.id, &dunning.policy, now)?;
    }
    Ok((shop, dunning))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::access::shop::{ShopInput, create_shop};
    use crate::ports::Database;
    use crate::testing::MemoryDatabase;

    fn now() -> Timestamp {
        Timestamp::parse_rfc3339("2026-03-01T12:00:00Z").unwrap()
    }

    fn problems(body: Value) -> Vec<(String, &'static str)> {
        match parse_dunning(&body) {
            Err(DomainError::Invalid(problems)) => {
                problems.into_iter().map(|p| (p.field, p.code)).collect()
            }
            other => panic!("expected 422, got {other:?}"),
        }
    }

    fn world() -> (MemoryDatabase, Shop) {
        let db = MemoryDatabase::default();
        let shop = db
            .write(|tx| {
                create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "dunning.shop.test".into(),
                        ..ShopInput::default()
                    },
                    now(),
                )
            })
            .unwrap();
        (db, shop)
    }

    #[test]
    fn a_body_is_read_wrapped_or_bare_with_numbers_as_text() {
        let policy = parse_dunning(&json!({"dunning": {
            "retry_intervals_s": [86400, "259200", " 604800 "],
            "at_max_retries": "skip_order"
        }}))
        .unwrap();
        assert_eq!(
            policy,
            DunningPolicy {
                retry_intervals_s: vec![86_400, 259_200, 604_800],
                at_max_retries: AtMaxRetries::SkipOrder,
            }
        );
        let bare =
            parse_dunning(&json!({"retry_intervals_s": [], "at_max_retries": "pause"})).unwrap();
        assert_eq!(bare.retry_intervals_s, Vec::<i64>::new());
        assert_eq!(bare.at_max_retries, AtMaxRetries::Pause);
    }

    #[test]
    fn every_problem_is_reported_on_its_path() {
        assert_eq!(
            problems(json!({"dunning": {
                "retry_intervals_s": [60, 0, "soon", 2_592_001, null, 2_592_000],
                "at_max_retries": "refund"
            }})),
            [
                ("dunning.retry_intervals_s[1]".to_string(), "out_of_range"),
                ("dunning.retry_intervals_s[2]".to_string(), "invalid_type"),
                ("dunning.retry_intervals_s[3]".to_string(), "out_of_range"),
                ("dunning.retry_intervals_s[4]".to_string(), "invalid_type"),
                ("dunning.at_max_retries".to_string(), "invalid_value"),
            ]
        );
        assert_eq!(
            problems(json!({"dunning": {}})),
            [
                ("dunning.retry_intervals_s".to_string(), "required"),
                ("dunning.at_max_retries".to_string(), "required"),
            ]
        );
        assert_eq!(
            problems(json!({"dunning": {"retry_intervals_s": 60, "at_max_retries": 1}})),
            [
                ("dunning.retry_intervals_s".to_string(), "invalid_type"),
                ("dunning.at_max_retries".to_string(), "invalid_type"),
            ]
        );
        assert_eq!(
            problems(json!({"dunning": "cancel"})),
            [("dunning".to_string(), "invalid_type")]
        );
        // 100 waits are taken; 101 are one problem on the list.
        let hundred = vec![60; MAX_RETRY_INTERVALS];
        assert!(
            parse_dunning(
                &json!({"dunning": {"retry_intervals_s": hundred, "at_max_retries": "cancel"}})
            )
            .is_ok()
        );
        let more = vec![60; MAX_RETRY_INTERVALS + 1];
        assert_eq!(
            problems(json!({"dunning": {"retry_intervals_s": more, "at_max_retries": "cancel"}})),
            [("dunning.retry_intervals_s".to_string(), "too_many")]
        );
    }

    #[test]
    fn the_retry_schedule_walks_the_intervals_then_gives_up() {
        let policy = DunningPolicy {
            retry_intervals_s: vec![60, 3_600, 86_400],
            at_max_retries: AtMaxRetries::Pause,
        };
        assert_eq!(policy.max_retries(), 3);
        assert_eq!(policy.after_failure(1), AfterFailure::RetryIn(60));
        assert_eq!(policy.after_failure(2), AfterFailure::RetryIn(3_600));
        assert_eq!(policy.after_failure(3), AfterFailure::RetryIn(86_400));
        assert_eq!(
            policy.after_failure(4),
            AfterFailure::GiveUp(AtMaxRetries::Pause)
        );
        // A count a client set past the list gives up too.
        assert_eq!(
            policy.after_failure(40),
            AfterFailure::GiveUp(AtMaxRetries::Pause)
        );
        let none = DunningPolicy {
            retry_intervals_s: Vec::new(),
            at_max_retries: AtMaxRetries::SkipOrder,
        };
        assert_eq!(
            none.after_failure(1),
            AfterFailure::GiveUp(AtMaxRetries::SkipOrder)
        );
        assert_eq!(
            policy.describe(),
            "3 retries, after 60 s, 3600 s, 86400 s; then the subscription is paused"
        );
        assert_eq!(
            none.describe(),
            "no retry: the order is skipped and the next one scheduled"
        );
    }

    #[test]
    fn a_shop_without_a_policy_has_the_one_its_retry_settings_describe() {
        let (db, shop) = world();
        let answer = db.read(|tx| dunning_policy(tx, &shop)).unwrap();
        assert_eq!(
            serde_json::to_value(&answer).unwrap(),
            json!({"dunning": {"retry_intervals_s": [86400, 86400, 86400], "at_max_retries": "cancel"}})
        );
        // The settings changed: the default follows them.
        let settings = ShopSettings {
            order_retry_interval_seconds: Some(600),
            order_max_retries: Some(2),
            ..ShopSettings::default()
        };
        let (shop, dunning) = db
            .write(|tx| update_shop_and_dunning(tx, shop.identifier.as_str(), settings, now()))
            .unwrap();
        assert!(!dunning.set);
        assert_eq!(dunning.policy.retry_intervals_s, [600, 600]);
        let none_stored = db.read(|tx| Ok(tx.dunning_policy(shop.id)?)).unwrap();
        assert_eq!(none_stored, None, "the default is not stored");
        let zero = ShopSettings {
            order_max_retries: Some(0),
            ..ShopSettings::default()
        };
        let (_, dunning) = db
            .write(|tx| update_shop_and_dunning(tx, shop.identifier.as_str(), zero, now()))
            .unwrap();
        assert_eq!(
            dunning.policy.after_failure(1),
            AfterFailure::GiveUp(AtMaxRetries::Cancel)
        );
    }

    #[test]
    fn a_set_policy_is_kept_until_the_retry_flags_make_it_uniform_again() {
        let (db, shop) = world();
        let policy = DunningPolicy {
            retry_intervals_s: vec![60, 120],
            at_max_retries: AtMaxRetries::SkipOrder,
        };
        let answer = db
            .write(|tx| set_dunning_policy(tx, &shop, policy.clone(), now()))
            .unwrap();
        assert_eq!(answer.dunning, policy);
        assert_eq!(
            db.read(|tx| dunning_policy(tx, &shop)).unwrap().dunning,
            policy
        );
        let id = shop.identifier.as_str();
        // Another setting leaves the policy as it is.
        let zone = ShopSettings {
            timezone: Some("Europe/Paris".into()),
            ..ShopSettings::default()
        };
        let (_, kept) = db
            .write(|tx| update_shop_and_dunning(tx, id, zone, now()))
            .unwrap();
        assert_eq!((kept.set, kept.policy), (true, policy));
        // A retry flag: the uniform list of the settings as they now are, its outcome kept.
        let retries = ShopSettings {
            order_max_retries: Some(4),
            ..ShopSettings::default()
        };
        let (_, uniform) = db
            .write(|tx| update_shop_and_dunning(tx, id, retries, now()))
            .unwrap();
        let expected = DunningPolicy {
            retry_intervals_s: vec![86_400; 4],
            at_max_retries: AtMaxRetries::SkipOrder,
        };
        assert_eq!(uniform.policy, expected);
        assert_eq!(
            db.read(|tx| dunning_policy(tx, &shop)).unwrap().dunning,
            expected
        );
        // A refused setting changes neither.
        let bad = ShopSettings {
            order_retry_interval_seconds: Some(0),
            ..ShopSettings::default()
        };
        assert!(matches!(
            db.write(|tx| update_shop_and_dunning(tx, id, bad, now())),
            Err(DomainError::Invalid(_))
        ));
        assert_eq!(
            db.read(|tx| dunning_policy(tx, &shop)).unwrap().dunning,
            expected
        );
    }
}
