//! Cancellation reasons: the shop's list of reasons a subscription may be cancelled for (a
//! code with a label for people), and what a cancellation carries: one of those codes and a
//! comment, both optional, kept on the `cancelled` status log entry and sent in
//! `subscription_cancelled`'s payload as `cancellation` (docs/subscriptions.md).
//!
//! A shop starts with no reasons. A cancellation's `reason` is never required; when given it
//! must be one of the shop's codes at that moment, so a shop without reasons only takes
//! cancellations without one. A reason later removed from the list stays on the entries that
//! name it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::access::shop::Shop;
use crate::kernel::body::{BodyObject, Check, Field, read_body};
use crate::kernel::error::{DomainError, FieldError, StoreResult};
use crate::kernel::ids::ShopId;
use crate::kernel::time::Timestamp;
use crate::subscriptions::repository::SubscriptionRepositories;

/// The most reasons a shop has.
pub const MAX_REASONS: usize = 50;
/// A code's length, in characters.
pub const MAX_CODE_CHARS: usize = 64;
/// A label's length, in characters.
pub const MAX_LABEL_CHARS: usize = 200;
/// A cancellation comment's length, in characters.
pub const MAX_COMMENT_CHARS: usize = 1000;

/// One reason a subscription may be cancelled for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CancellationReason {
    /// What clients send as a cancellation's `reason`: 1 to 64 of `a`-`z`, `0`-`9`, `_`
    /// and `-`, unique in the shop.
    #[schema(
        example = "too_expensive",
        min_length = 1,
        max_length = 64,
        pattern = "^[a-z0-9_-]+$"
    )]
    pub code: String,
    /// The reason as people read it (1 to 200 characters).
    #[schema(example = "It costs too much", min_length = 1, max_length = 200)]
    pub label: String,
}

/// What a cancellation carries: `cancellation` of its status log entry's `metadata` and of the
/// `subscription_cancelled` payload. Each is `null` when not given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Cancellation {
    /// The code of one of the shop's cancellation reasons.
    pub reason: Option<String>,
    /// The canceller's own words (at most 1,000 characters).
    pub comment: Option<String>,
}

/// `{"cancellation_reasons": [{"code", "label"}]}`: the shop's reasons, in their order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct CancellationReasons {
    /// The reasons, in the order the shop gave them (at most 50).
    pub cancellation_reasons: Vec<CancellationReason>,
}

/// The shop's cancellation reasons.
pub trait CancellationReasonRepository {
    /// The shop's reasons, in their order; none for a shop that never set any.
    fn cancellation_reasons(&mut self, shop_id: ShopId) -> StoreResult<Vec<CancellationReason>>;
    /// Replaces the shop's reasons with `reasons` (already checked: unique codes), in order.
    fn replace_cancellation_reasons(
        &mut self,
        shop_id: ShopId,
        reasons: &[CancellationReason],
        now: Timestamp,
    ) -> StoreResult<()>;
}

/// One reason of the body of Set Cancellation Reasons.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CancellationReasonFields {
    /// 1 to 64 of `a`-`z`, `0`-`9`, `_` and `-`, unique in the list.
    #[serde(default)]
    #[schema(value_type = String, required = true, example = "too_expensive", min_length = 1, max_length = 64, pattern = "^[a-z0-9_-]+$")]
    pub code: Field<String>,
    /// The reason as people read it, 1 to 200 characters.
    #[serde(default)]
    #[schema(value_type = String, required = true, example = "It costs too much", min_length = 1, max_length = 200)]
    pub label: Field<String>,
}
impl BodyObject for CancellationReasonFields {}

/// The body of Set Cancellation Reasons: the whole list, which replaces the shop's.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CancellationReasonsRequest {
    /// Every reason, in the order people are shown them; `[]` removes them all.
    #[serde(default)]
    #[schema(value_type = Vec<CancellationReasonFields>, required = true, max_items = 50)]
    pub cancellation_reasons: Field<Vec<Field<CancellationReasonFields>>>,
}
impl BodyObject for CancellationReasonsRequest {}

fn is_code_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'
}

/// A reason's code: required, 1 to [`MAX_CODE_CHARS`] of `a-z0-9_-`.
fn code(check: &mut Check<'_>, given: Field<String>) -> Option<String> {
    let code = check.required("code", given)?;
    if code.chars().count() > MAX_CODE_CHARS {
        check.problem("code", "too_long", |field| {
            format!("{field} must be at most {MAX_CODE_CHARS} characters long")
        });
        return None;
    }
    if !code.chars().all(is_code_char) {
        check.problem("code", "invalid_value", |field| {
            format!("{field} must be made of a-z, 0-9, _ and - only, such as too_expensive")
        });
        return None;
    }
    Some(code)
}

/// A reason's label: required, 1 to [`MAX_LABEL_CHARS`] characters.
fn label(check: &mut Check<'_>, given: Field<String>) -> Option<String> {
    let label = check.required("label", given)?;
    if label.chars().count() > MAX_LABEL_CHARS {
        check.problem("label", "too_long", |field| {
            format!("{field} must be at most {MAX_LABEL_CHARS} characters long")
        });
        return None;
    }
    Some(label)
}

/// Set Cancellation Reasons' body: `{"cancellation_reasons": [{"code", "label"}]}`, at most
/// [`MAX_REASONS`], codes unique (a repeated code is a problem on the repeat's `code`).
pub fn parse_cancellation_reasons(body: &Value) -> Result<Vec<CancellationReason>, DomainError> {
    read_body::<CancellationReasonsRequest, _>(body, |body, check| {
        if !body.cancellation_reasons.is_given() {
            check.push(FieldError::required("cancellation_reasons"));
            return None;
        }
        let mut seen: Vec<String> = Vec::new();
        let read = check.each(
            "cancellation_reasons",
            body.cancellation_reasons,
            MAX_REASONS,
            |check, fields| {
                let code = code(check, fields.code);
                let label = label(check, fields.label);
                let code = code?;
                if seen.contains(&code) {
                    check.problem("code", "duplicate", |field| {
                        format!("{field} {code:?} is given to an earlier reason already")
                    });
                    return None;
                }
                seen.push(code.clone());
                Some(CancellationReason {
                    code,
                    label: label?,
                })
            },
        )?;
        read.into_iter().collect()
    })
}

/// Get Cancellation Reasons: the shop's list, empty for a shop that never set one.
pub fn cancellation_reasons(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
) -> Result<CancellationReasons, DomainError> {
    Ok(CancellationReasons {
        cancellation_reasons: tx.cancellation_reasons(shop.id)?,
    })
}

/// Set Cancellation Reasons: the checked list replaces the shop's; answers it as stored.
pub fn set_cancellation_reasons(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    reasons: Vec<CancellationReason>,
    now: Timestamp,
) -> Result<CancellationReasons, DomainError> {
    tx.replace_cancellation_reasons(shop.id, &reasons, now)?;
    cancellation_reasons(tx, shop)
}

/// The body of Cancel: both fields optional; a body left out is `{}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SubscriptionCancelRequest {
    /// The code of one of the shop's cancellation reasons (Get Cancellation Reasons).
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "too_expensive", max_length = 64)]
    pub reason: Field<String>,
    /// The canceller's own words, at most 1,000 characters.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "Moving abroad for a year", max_length = 1000)]
    pub comment: Field<String>,
}
impl BodyObject for SubscriptionCancelRequest {}

/// Cancel as a client asks for it: the reason is checked against the shop's list by the use
/// case ([`check_reason`]), inside its unit of work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CancelRequest {
    /// The code of one of the shop's cancellation reasons; `None` when not given.
    pub reason: Option<String>,
    /// The canceller's comment, at most [`MAX_COMMENT_CHARS`] characters; `None` when not
    /// given.
    pub comment: Option<String>,
}

/// A comment: at most [`MAX_COMMENT_CHARS`] characters (blank counts as not given).
pub fn check_comment(field: &str, comment: Option<String>) -> Result<Option<String>, DomainError> {
    match comment {
        Some(text) if text.chars().count() > MAX_COMMENT_CHARS => Err(DomainError::invalid(
            field,
            "too_long",
            format!("{field} must be at most {MAX_COMMENT_CHARS} characters long"),
        )),
        Some(text) if text.trim().is_empty() => Ok(None),
        comment => Ok(comment),
    }
}

/// Cancel's body: `{"reason", "comment"}`, both optional (blank text counts as left out); the
/// comment at most [`MAX_COMMENT_CHARS`] characters.
pub fn parse_cancel(body: &Value) -> Result<CancelRequest, DomainError> {
    read_body::<SubscriptionCancelRequest, _>(body, |body, check| {
        let reason = check.optional("reason", body.reason);
        let comment = check.optional("comment", body.comment);
        if comment
            .as_ref()
            .is_some_and(|text| text.chars().count() > MAX_COMMENT_CHARS)
        {
            check.problem("comment", "too_long", |field| {
                format!("{field} must be at most {MAX_COMMENT_CHARS} characters long")
            });
            return None;
        }
        Some(CancelRequest { reason, comment })
    })
}

/// The cancellation a request makes, its reason one of the shop's codes (422 on `reason`
/// otherwise) and its comment within [`MAX_COMMENT_CHARS`] (422 on `comment`).
pub(crate) fn check_reason(
    tx: &mut dyn SubscriptionRepositories,
    shop: &Shop,
    request: CancelRequest,
) -> Result<Cancellation, DomainError> {
    let comment = check_comment("comment", request.comment)?;
    let reason = match request.reason.filter(|reason| !reason.trim().is_empty()) {
        None => None,
        Some(reason) => {
            let reasons = tx.cancellation_reasons(shop.id)?;
            if !reasons.iter().any(|known| known.code == reason) {
                let message = if reasons.is_empty() {
                    "reason must be left out: the shop has no cancellation reasons".to_string()
                } else {
                    let codes: Vec<&str> = reasons.iter().map(|r| r.code.as_str()).collect();
                    format!(
                        "reason must be one of the shop's cancellation reasons: {}",
                        codes.join(", ")
                    )
                };
                return Err(DomainError::invalid("reason", "invalid_value", message));
            }
            Some(reason)
        }
    };
    Ok(Cancellation { reason, comment })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::access::shop::ShopInput;
    use crate::kernel::ids::SubscriptionId;
    use crate::ports::Database;
    use crate::subscriptions::input::NewSubscription;
    use crate::subscriptions::operations::{
        ActionRequest, create_subscription, get_subscription, take_subscription_action,
    };
    use crate::subscriptions::resources::{Actor, ActorType, Subscription, SubscriptionStatus};
    use crate::testing::MemoryDatabase;
    use crate::webhooks::{NewWebhookEndpoint, WebhookKind};

    fn now() -> Timestamp {
        Timestamp::parse_rfc3339("2024-03-05T12:00:00Z").unwrap()
    }

    fn api() -> Actor {
        Actor {
            kind: ActorType::Api,
            id: 3,
            name: "demo".into(),
        }
    }

    fn problems(result: Result<impl std::fmt::Debug, DomainError>) -> Vec<(String, &'static str)> {
        match result {
            Err(DomainError::Invalid(problems)) => {
                problems.into_iter().map(|p| (p.field, p.code)).collect()
            }
            other => panic!("expected 422, got {other:?}"),
        }
    }

    /// A shop with a webhook endpoint for `subscription_cancelled` and one active subscription.
    fn world() -> (MemoryDatabase, Shop, Subscription) {
        let db = MemoryDatabase::default();
        let shop = db
            .write(|tx| {
                let shop = crate::access::shop::create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "cancel.shop.test".into(),
                        ..ShopInput::default()
                    },
                    now(),
                )?;
                tx.insert_webhook_endpoint(&NewWebhookEndpoint {
                    shop_id: shop.id,
                    kind: WebhookKind::Subscription,
                    topic: "subscription_cancelled".into(),
                    callback_url: "http://127.0.0.1:9/hook".into(),
                    secret: None,
                    created_at: now(),
                })?;
                Ok(shop)
            })
            .unwrap();
        let body = json!({
            "customer": {"email": "ada@example.test"},
            "subscription": {
                "subscription_status": "active",
                "order_rrule": "DTSTART:20240304T090000Z\nRRULE:FREQ=WEEKLY",
                "line_items": [{"platform_product_id": "p-1", "platform_variant_id": "v-1",
                                "quantity": 1, "price": 1000}],
                "shipping_address": {"street1": "1 Main St", "city": "Lyon", "country_code": "FR"}
            }
        });
        let new = NewSubscription::parse(&body, &shop, now()).unwrap();
        let (subscription, _) = db
            .write(|tx| create_subscription(tx, &shop, new, api(), now()))
            .unwrap();
        (db, shop, subscription)
    }

    fn cancel(
        db: &MemoryDatabase,
        shop: &Shop,
        id: SubscriptionId,
        body: Value,
    ) -> Result<Subscription, DomainError> {
        let request = parse_cancel(&body)?;
        db.write(|tx| {
            take_subscription_action(tx, shop, id, ActionRequest::Cancel(request), api(), now())
        })
    }

    fn set(
        db: &MemoryDatabase,
        shop: &Shop,
        body: Value,
    ) -> Result<CancellationReasons, DomainError> {
        let reasons = parse_cancellation_reasons(&body)?;
        db.write(|tx| set_cancellation_reasons(tx, shop, reasons, now()))
    }

    /// The `cancellation` of every `subscription_cancelled` payload sent, in order.
    fn cancellations_sent(db: &MemoryDatabase) -> Vec<Value> {
        db.with_state(|state| {
            let mut messages: Vec<_> = state.webhook_messages.iter().collect();
            messages.sort_by_key(|m| m.id);
            messages
                .iter()
                .filter(|m| m.topic == "subscription_cancelled")
                .map(|m| serde_json::from_str::<Value>(&m.payload).unwrap()["cancellation"].clone())
                .collect()
        })
    }

    #[test]
    fn every_problem_of_a_list_is_reported_on_its_path() {
        let long_code = "a".repeat(MAX_CODE_CHARS + 1);
        let long_label = "é".repeat(MAX_LABEL_CHARS + 1);
        let found = problems(parse_cancellation_reasons(
            &json!({"cancellation_reasons": [
                {"code": "too_expensive", "label": "It costs too much"},
                {"code": "Too Expensive", "label": "x"},
                {"code": long_code, "label": long_label},
                {"code": "too_expensive", "label": "Again"},
                {"code": " ", "label": 3},
                "moving"
            ]}),
        ));
        assert_eq!(
            found,
            [
                ("cancellation_reasons[1].code".to_string(), "invalid_value"),
                ("cancellation_reasons[2].code".to_string(), "too_long"),
                ("cancellation_reasons[2].label".to_string(), "too_long"),
                ("cancellation_reasons[3].code".to_string(), "duplicate"),
                ("cancellation_reasons[4].code".to_string(), "required"),
                ("cancellation_reasons[4].label".to_string(), "invalid_type"),
                ("cancellation_reasons[5]".to_string(), "invalid_type"),
            ]
        );
        let too_many: Vec<Value> = (0..=MAX_REASONS)
            .map(|n| json!({"code": format!("r{n}"), "label": "A reason"}))
            .collect();
        assert_eq!(
            problems(parse_cancellation_reasons(
                &json!({"cancellation_reasons": too_many})
            )),
            [("cancellation_reasons".to_string(), "too_many")]
        );
        for missing in [json!({}), json!({"cancellation_reasons": null})] {
            assert_eq!(
                problems(parse_cancellation_reasons(&missing)),
                [("cancellation_reasons".to_string(), "required")]
            );
        }
        assert_eq!(
            parse_cancellation_reasons(&json!({"cancellation_reasons": [
                {"code": "a-b_9", "label": "  Trimmed  "}]}))
            .unwrap(),
            [CancellationReason {
                code: "a-b_9".into(),
                label: "Trimmed".into()
            }]
        );
        assert_eq!(
            parse_cancellation_reasons(&json!({"cancellation_reasons": []})).unwrap(),
            []
        );
    }

    #[test]
    fn a_cancel_body_is_optional_and_its_comment_at_most_a_thousand_characters() {
        for left_out in [
            json!({}),
            json!(null),
            json!({"reason": "", "comment": "  "}),
            json!({"reason": null, "comment": null}),
        ] {
            assert_eq!(
                parse_cancel(&left_out).unwrap(),
                CancelRequest::default(),
                "{left_out}"
            );
        }
        let longest = "ü".repeat(MAX_COMMENT_CHARS);
        assert_eq!(
            parse_cancel(&json!({"comment": longest}))
                .unwrap()
                .comment
                .map(|c| c.chars().count()),
            Some(MAX_COMMENT_CHARS)
        );
        assert_eq!(
            problems(parse_cancel(
                &json!({"comment": format!("{longest}x"), "reason": 7})
            )),
            [
                ("reason".to_string(), "invalid_type"),
                ("comment".to_string(), "too_long")
            ]
        );
    }

    #[test]
    fn a_reason_must_be_one_of_the_shops_codes() {
        let (db, shop, s) = world();
        assert_eq!(
            db.read(|tx| cancellation_reasons(tx, &shop))
                .unwrap()
                .cancellation_reasons,
            [],
            "a new shop has none"
        );
        // No reasons: a reason is refused, none is fine (tried on a copy of the world).
        assert_eq!(
            problems(cancel(&db, &shop, s.id, json!({"reason": "moving"}))),
            [("reason".to_string(), "invalid_value")]
        );
        set(
            &db,
            &shop,
            json!({"cancellation_reasons": [
            {"code": "too_expensive", "label": "It costs too much"},
            {"code": "moving", "label": "I am moving"}]}),
        )
        .unwrap();
        assert_eq!(
            problems(cancel(&db, &shop, s.id, json!({"reason": "bored"}))),
            [("reason".to_string(), "invalid_value")]
        );
        let untouched = db
            .read(|tx| get_subscription(tx, &shop, s.id, false))
            .unwrap();
        assert_eq!(untouched.subscription_status, SubscriptionStatus::Active);
        assert!(cancellations_sent(&db).is_empty());

        let cancelled = cancel(
            &db,
            &shop,
            s.id,
            json!({"reason": "moving", "comment": "Off to Lisbon"}),
        )
        .unwrap();
        assert_eq!(cancelled.subscription_status, SubscriptionStatus::Inactive);
        let log = cancelled.latest_status_log.unwrap();
        assert_eq!(log.reason, "cancelled");
        let kept = Cancellation {
            reason: Some("moving".into()),
            comment: Some("Off to Lisbon".into()),
        };
        assert_eq!(log.metadata.cancellation, Some(kept));
        assert_eq!(
            serde_json::to_value(&log.metadata).unwrap()["cancellation"],
            json!({"reason": "moving", "comment": "Off to Lisbon"})
        );
        assert_eq!(
            cancellations_sent(&db),
            [json!({"reason": "moving", "comment": "Off to Lisbon"})]
        );
        // The list is replaced as a whole; a removed reason stays on the entries naming it.
        let emptied = set(&db, &shop, json!({"cancellation_reasons": []})).unwrap();
        assert_eq!(emptied.cancellation_reasons, []);
        let still = db
            .read(|tx| get_subscription(tx, &shop, s.id, false))
            .unwrap();
        assert_eq!(
            still
                .latest_status_log
                .unwrap()
                .metadata
                .cancellation
                .unwrap()
                .reason
                .as_deref(),
            Some("moving")
        );
    }

    #[test]
    fn a_cancel_without_a_body_sends_a_cancellation_of_nulls() {
        let (db, shop, s) = world();
        let cancelled = cancel(&db, &shop, s.id, json!({})).unwrap();
        let log = cancelled.latest_status_log.unwrap();
        assert_eq!(log.metadata.cancellation, None);
        assert_eq!(
            serde_json::to_value(&log.metadata).unwrap(),
            json!({"user": {"type": "api", "id": 3, "name": "demo"}}),
            "the entry's metadata as before"
        );
        assert_eq!(
            cancellations_sent(&db),
            [json!({"reason": null, "comment": null})]
        );
        // A reason is checked only against a move the state machine allows: cancelling again
        // is the invalid transition, whatever the reason.
        match cancel(&db, &shop, s.id, json!({"reason": "unknown"})) {
            Err(DomainError::Unprocessable { code, .. }) => {
                assert_eq!(code, "subscription.invalid_transition")
            }
            other => panic!("{other:?}"),
        }
    }
}
