//! A subscription's states and what moves it between them:
//!
//! ```text
//! scheduled ──start──▶ active ◀──resume── paused
//!                       │  ▲ ──pause──────▶ │
//!          place order  │  │ order placed   │
//!                       ▼  │ / failed       │
//!                    processing             │
//!   active, paused ──cancel──▶ inactive ◀───┘ (cancel)
//!   inactive ──reactivate──▶ active;  processing ──retries exhausted──▶ inactive
//! ```
//!
//! Any other move is 422 `subscription.invalid_transition`. The edits among the nine actions
//! (skip, quantity, frequency, shipping address, payment method) keep the status but are
//! refused in some states too (see `transition`). Every action writes a status log entry
//! naming who acted, and emits the webhook topics [`topics`] lists.

use std::fmt;

use crate::kernel::error::DomainError;
use crate::kernel::ids::{StatusLogId, SubscriptionId};
use crate::kernel::time::Timestamp;
use crate::subscriptions::resources::{Actor, StatusLog, StatusLogMetadata, SubscriptionStatus};
use crate::subscriptions::topics::Topic;

use SubscriptionStatus::{Active, Inactive, Paused, Processing, Scheduled};

/// The type of the 422 for a move the state machine does not allow.
pub const INVALID_TRANSITION: &str = "subscription.invalid_transition";

/// What can happen to a subscription: the nine client actions, and Mercer's own moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Action {
    /// Cancel an active or paused subscription: it becomes inactive.
    Cancel,
    /// Make an inactive (cancelled) subscription active again.
    Reactivate,
    /// Pause an active subscription: no orders while paused.
    Pause,
    /// Make a paused subscription active again.
    Resume,
    /// Skip a ship date.
    Skip,
    /// Change the quantity of a line item.
    ChangeQuantity,
    /// Change the order rule (`order_rrule`) or the next order date.
    ChangeFrequency,
    /// Change the shipping address.
    ChangeShippingAddress,
    /// Change the payment method.
    ChangePaymentMethod,
    /// Mercer: a scheduled subscription's start is reached.
    Start,
    /// Mercer: `next_order_datetime` is reached and the order is being placed.
    PlaceOrder,
    /// Mercer: the order was placed.
    OrderPlaced,
    /// Mercer: placing the order failed; it is tried again later.
    OrderFailed,
    /// Mercer: placing the order failed for the last time allowed.
    RetriesExhausted,
    /// Mercer: the rule has no order date left (its `COUNT` or `UNTIL` is reached).
    Complete,
}

impl Action {
    /// The nine actions a client can ask for.
    pub const CLIENT_ACTIONS: [Action; 9] = [
        Action::Cancel,
        Action::Reactivate,
        Action::Pause,
        Action::Resume,
        Action::Skip,
        Action::ChangeQuantity,
        Action::ChangeFrequency,
        Action::ChangeShippingAddress,
        Action::ChangePaymentMethod,
    ];

    /// Mercer's own moves, made by the scheduler.
    pub const SYSTEM_ACTIONS: [Action; 6] = [
        Action::Start,
        Action::PlaceOrder,
        Action::OrderPlaced,
        Action::OrderFailed,
        Action::RetriesExhausted,
        Action::Complete,
    ];

    /// The action's name (`cancel`, `change_quantity`, `place_order`), as refusals name it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The `reason` of the status log entry the action writes.
    pub fn reason(self) -> &'static str {
        match self {
            Action::Cancel => "cancelled",
            Action::Reactivate => "reactivated",
            Action::Pause => "paused",
            Action::Resume => "resumed",
            Action::Skip => "order_skipped",
            Action::ChangeQuantity => "quantity_changed",
            Action::ChangeFrequency => "frequency_changed",
            Action::ChangeShippingAddress => "shipping_address_changed",
            Action::ChangePaymentMethod => "payment_method_changed",
            Action::Start => "started",
            Action::PlaceOrder => "order_processing",
            Action::OrderPlaced => "order_placed",
            Action::OrderFailed => "order_failed",
            Action::RetriesExhausted => "max_retries_reached",
            Action::Complete => "completed",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A move the state machine refuses: 422 [`INVALID_TRANSITION`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InvalidTransition {
    /// The action cannot be taken from this status.
    Action {
        from: SubscriptionStatus,
        action: Action,
    },
    /// Update Subscription asked for a status no client action reaches from this one.
    Status {
        from: SubscriptionStatus,
        to: SubscriptionStatus,
    },
}

impl fmt::Display for InvalidTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            InvalidTransition::Action { from, action } => {
                let allowed: Vec<&str> = action
                    .allowed_from()
                    .iter()
                    .map(|status| status.as_str())
                    .collect();
                write!(
                    f,
                    "a subscription that is {from} cannot {}; it must be {}",
                    action.as_str().replace('_', " "),
                    allowed.join(" or ")
                )
            }
            InvalidTransition::Status { from, to } if from == Processing || to == Processing => {
                write!(
                    f,
                    "subscription_status cannot change from {from} to {to}: only Mercer moves \
                     a subscription in and out of processing, while it places an order"
                )
            }
            InvalidTransition::Status { from, to } => {
                write!(f, "subscription_status cannot change from {from} to {to}")
            }
        }
    }
}

impl From<InvalidTransition> for DomainError {
    fn from(error: InvalidTransition) -> Self {
        DomainError::Unprocessable {
            code: INVALID_TRANSITION,
            message: error.to_string(),
        }
    }
}

impl Action {
    /// The statuses the action may be taken from.
    pub fn allowed_from(self) -> &'static [SubscriptionStatus] {
        match self {
            Action::Cancel => &[Active, Paused],
            Action::Reactivate => &[Inactive],
            Action::Pause => &[Active],
            Action::Resume => &[Paused],
            // Only a subscription with orders to come has a ship date to skip.
            Action::Skip => &[Active, Paused, Scheduled],
            // Edits wait while an order is being placed, so the order and the subscription
            // agree on what was ordered.
            Action::ChangeQuantity
            | Action::ChangeFrequency
            | Action::ChangeShippingAddress
            | Action::ChangePaymentMethod => &[Active, Paused, Scheduled, Inactive],
            Action::Start => &[Scheduled],
            Action::PlaceOrder => &[Active],
            Action::OrderPlaced | Action::OrderFailed | Action::RetriesExhausted => &[Processing],
            // After the order of its last date was placed.
            Action::Complete => &[Active],
        }
    }
}

/// The status after `action` is taken from `from`, or the refusal.
pub(crate) fn transition(
    from: SubscriptionStatus,
    action: Action,
) -> Result<SubscriptionStatus, InvalidTransition> {
    if !action.allowed_from().contains(&from) {
        return Err(InvalidTransition::Action { from, action });
    }
    Ok(match action {
        Action::Cancel | Action::RetriesExhausted | Action::Complete => Inactive,
        Action::Reactivate
        | Action::Resume
        | Action::Start
        | Action::OrderPlaced
        | Action::OrderFailed => Active,
        Action::Pause => Paused,
        Action::PlaceOrder => Processing,
        Action::Skip
        | Action::ChangeQuantity
        | Action::ChangeFrequency
        | Action::ChangeShippingAddress
        | Action::ChangePaymentMethod => from,
    })
}

/// Which action a client's change of `subscription_status` (Update Subscription) is: `None`
/// when the status stays; `processing` is Mercer's alone to enter or leave.
pub(crate) fn action_for_status_change(
    from: SubscriptionStatus,
    to: SubscriptionStatus,
) -> Result<Option<Action>, InvalidTransition> {
    if from == to {
        return Ok(None);
    }
    let action = match (from, to) {
        (Scheduled, Active) => Action::Start,
        (Active, Paused) => Action::Pause,
        (Paused, Active) => Action::Resume,
        (Active | Paused, Inactive) => Action::Cancel,
        (Inactive, Active) => Action::Reactivate,
        _ => return Err(InvalidTransition::Status { from, to }),
    };
    Ok(Some(action))
}

/// The webhook topics an action emits, in the order they are sent: the action's own topic
/// first, `subscription_updated` (any edit) last.
///
/// `next_order_moved` says whether the action moved `next_order_datetime` (a skip of the next
/// date, a resume or reactivation that had to find a new date); a client action that did emits
/// `subscription_frequency_updated` too ("`next_order_datetime` updated"). The
/// scheduler's routine advance after an order does not: `subscription_order_created` says it.
pub fn topics(action: Action, next_order_moved: bool) -> Vec<Topic> {
    let moved = next_order_moved.then_some(Topic::SubscriptionFrequencyUpdated);
    let (own, also): (&[Topic], Option<Topic>) = match action {
        Action::Cancel => (&[Topic::SubscriptionCancelled], None),
        Action::Reactivate => (&[Topic::SubscriptionReactivated], moved),
        Action::Pause => (&[Topic::SubscriptionPaused], None),
        Action::Resume => (&[Topic::SubscriptionResumed], moved),
        Action::Skip => (&[Topic::SubscriptionSkipped], moved),
        Action::ChangeQuantity => (&[Topic::SubscriptionQuantityUpdated], None),
        Action::ChangeFrequency => (&[Topic::SubscriptionFrequencyUpdated], None),
        Action::ChangeShippingAddress => (&[Topic::SubscriptionShippingAddressUpdated], None),
        // Both topics' triggers are a change of payment method; every Mercer
        // shop is checkout-based, since Mercer serves its checkout.
        Action::ChangePaymentMethod => (
            &[
                Topic::SubscriptionCreditCardUpdated,
                Topic::SubscriptionPaymentMethodUpdated,
            ],
            None,
        ),
        Action::Start => (&[], None),
        // `processing` is a moment inside order placement, not an edit of the subscription.
        Action::PlaceOrder => return vec![Topic::SubscriptionUpcomingOrder],
        Action::OrderPlaced => (&[Topic::SubscriptionOrderCreated], None),
        Action::OrderFailed => (&[Topic::SubscriptionOrderTransactionFailed], None),
        Action::RetriesExhausted => (
            &[
                Topic::SubscriptionOrderTransactionFailed,
                Topic::SubscriptionOrderMaxRetriesReached,
            ],
            None,
        ),
        // The subscription ends as a cancelled one does: the topic clients know for the end.
        Action::Complete => (&[Topic::SubscriptionCancelled], None),
    };
    let mut topics = own.to_vec();
    topics.extend(also);
    topics.push(Topic::SubscriptionUpdated);
    topics
}

/// The topics of Create Subscription: `customer_created` first when the customer was created
/// for it (no customer had the email), then `subscription_created`. A subscription created
/// through the API has no order yet, so no `subscription_order_created`.
pub(crate) fn creation_topics(customer_created: bool) -> Vec<Topic> {
    let mut topics = Vec::with_capacity(2);
    if customer_created {
        topics.push(Topic::CustomerCreated);
    }
    topics.push(Topic::SubscriptionCreated);
    topics
}

/// The `reason` of the entry Create Subscription writes.
pub(crate) const CREATED_REASON: &str = "created";

/// A status log entry before the store gives it its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewStatusLog {
    /// The subscription's id (the service's integer).
    pub subscription_id: SubscriptionId,
    /// The subscription's status after the action.
    pub subscription_status: SubscriptionStatus,
    /// Why the entry was written: the action's [`Action::reason`] (`paused`), or `created`.
    pub reason: String,
    /// Who acted.
    pub metadata: StatusLogMetadata,
    /// When the action was taken.
    pub created_at: Timestamp,
}

impl NewStatusLog {
    /// The entry for subscription `subscription_id`, now in `subscription_status`, for `reason`,
    /// by `actor` at `at`.
    pub fn new(
        subscription_id: SubscriptionId,
        subscription_status: SubscriptionStatus,
        reason: impl Into<String>,
        actor: Actor,
        at: Timestamp,
    ) -> Self {
        NewStatusLog {
            subscription_id,
            subscription_status,
            reason: reason.into(),
            metadata: StatusLogMetadata {
                user: actor,
                cancellation: None,
            },
            created_at: at,
        }
    }

    /// The entry as `latest_status_log` shows it, once stored under `id`.
    pub fn stored(self, id: StatusLogId) -> StatusLog {
        StatusLog {
            id,
            subscription_status: self.subscription_status,
            reason: self.reason,
            metadata: self.metadata,
            created_at: self.created_at,
            subscription_id: self.subscription_id,
        }
    }
}

/// What taking an action does to a subscription's status: the new status, its log entry and
/// the topics to emit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActionOutcome {
    pub status: SubscriptionStatus,
    /// Whether `subscription_status` changed (and so `status_changed_at` moves).
    pub status_changed: bool,
    pub log: NewStatusLog,
    pub topics: Vec<Topic>,
}

/// Takes `action` on subscription `subscription_id` in status `from`, by `actor` at `at`.
pub(crate) fn take_action(
    subscription_id: SubscriptionId,
    from: SubscriptionStatus,
    action: Action,
    actor: Actor,
    at: Timestamp,
    next_order_moved: bool,
) -> Result<ActionOutcome, InvalidTransition> {
    let status = transition(from, action)?;
    Ok(ActionOutcome {
        status,
        status_changed: status != from,
        log: NewStatusLog::new(subscription_id, status, action.reason(), actor, at),
        topics: topics(action, next_order_moved),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subscriptions::resources::ActorType;

    fn all_actions() -> impl Iterator<Item = Action> {
        Action::CLIENT_ACTIONS
            .into_iter()
            .chain(Action::SYSTEM_ACTIONS)
    }

    /// The client's actions, and the edits that keep the status.
    #[test]
    fn the_client_actions_move_as_documented() {
        let allowed = [
            (Scheduled, Action::Start, Active),
            (Active, Action::Pause, Paused),
            (Paused, Action::Resume, Active),
            (Active, Action::Cancel, Inactive),
            (Paused, Action::Cancel, Inactive),
            (Inactive, Action::Reactivate, Active),
            (Active, Action::PlaceOrder, Processing),
            (Processing, Action::OrderPlaced, Active),
            (Processing, Action::OrderFailed, Active),
            (Processing, Action::RetriesExhausted, Inactive),
            (Active, Action::Complete, Inactive),
        ];
        for (from, action, to) in allowed {
            assert_eq!(transition(from, action), Ok(to), "{from} {action}");
        }
    }

    #[test]
    fn every_other_move_is_an_invalid_transition() {
        let mut refused = 0;
        for from in SubscriptionStatus::ALL {
            for action in all_actions() {
                let result = transition(from, action);
                assert_eq!(
                    result.is_ok(),
                    action.allowed_from().contains(&from),
                    "{from} {action}"
                );
                if let Err(error) = result {
                    refused += 1;
                    match DomainError::from(error) {
                        DomainError::Unprocessable { code, message } => {
                            assert_eq!(code, "subscription.invalid_transition");
                            assert!(message.contains(from.as_str()), "{message}");
                        }
                        other => panic!("{other:?}"),
                    }
                }
            }
        }
        assert!(refused > 40, "{refused}");
        // The ones a reader would try first.
        for (from, action) in [
            (Inactive, Action::Pause),
            (Inactive, Action::Resume),
            (Inactive, Action::Cancel),
            (Active, Action::Resume),
            (Active, Action::Reactivate),
            (Paused, Action::Pause),
            (Paused, Action::Reactivate),
            (Scheduled, Action::Pause),
            (Scheduled, Action::Cancel),
            (Processing, Action::Cancel),
            (Processing, Action::Pause),
            (Paused, Action::PlaceOrder),
            (Active, Action::OrderPlaced),
        ] {
            assert_eq!(
                transition(from, action),
                Err(InvalidTransition::Action { from, action })
            );
        }
    }

    #[test]
    fn edits_keep_the_status_and_wait_while_an_order_is_placed() {
        for action in [
            Action::ChangeQuantity,
            Action::ChangeFrequency,
            Action::ChangeShippingAddress,
            Action::ChangePaymentMethod,
        ] {
            for from in [Active, Paused, Scheduled, Inactive] {
                assert_eq!(transition(from, action), Ok(from));
            }
            assert!(transition(Processing, action).is_err());
        }
        for from in [Active, Paused, Scheduled] {
            assert_eq!(transition(from, Action::Skip), Ok(from));
        }
        assert!(transition(Inactive, Action::Skip).is_err());
        assert!(transition(Processing, Action::Skip).is_err());
    }

    #[test]
    fn the_refusal_says_what_the_status_must_be() {
        let message = InvalidTransition::Action {
            from: Inactive,
            action: Action::Pause,
        }
        .to_string();
        assert_eq!(
            message,
            "a subscription that is inactive cannot pause; it must be active"
        );
        let message = InvalidTransition::Action {
            from: Scheduled,
            action: Action::Cancel,
        }
        .to_string();
        assert!(message.ends_with("active or paused"), "{message}");
    }

    #[test]
    fn a_status_change_of_update_subscription_is_an_action() {
        assert_eq!(action_for_status_change(Active, Active), Ok(None));
        assert_eq!(
            action_for_status_change(Active, Paused),
            Ok(Some(Action::Pause))
        );
        assert_eq!(
            action_for_status_change(Paused, Active),
            Ok(Some(Action::Resume))
        );
        assert_eq!(
            action_for_status_change(Paused, Inactive),
            Ok(Some(Action::Cancel))
        );
        assert_eq!(
            action_for_status_change(Inactive, Active),
            Ok(Some(Action::Reactivate))
        );
        assert_eq!(
            action_for_status_change(Scheduled, Active),
            Ok(Some(Action::Start))
        );
        for (from, to) in [
            (Active, Processing),
            (Processing, Active),
            (Active, Scheduled),
            (Inactive, Paused),
            (Scheduled, Inactive),
            (Processing, Inactive),
        ] {
            assert_eq!(
                action_for_status_change(from, to),
                Err(InvalidTransition::Status { from, to })
            );
        }
        let message = InvalidTransition::Status {
            from: Active,
            to: Processing,
        }
        .to_string();
        assert!(message.contains("only Mercer"), "{message}");
        // Every allowed change agrees with the state machine.
        for from in SubscriptionStatus::ALL {
            for to in SubscriptionStatus::ALL {
                if let Ok(Some(action)) = action_for_status_change(from, to) {
                    assert_eq!(transition(from, action), Ok(to), "{from} -> {to}");
                }
            }
        }
    }

    #[test]
    fn each_action_emits_its_topics_in_order() {
        use Topic::*;
        let cases: [(Action, bool, Vec<Topic>); 17] = [
            (
                Action::Cancel,
                false,
                vec![SubscriptionCancelled, SubscriptionUpdated],
            ),
            (
                Action::Reactivate,
                true,
                vec![
                    SubscriptionReactivated,
                    SubscriptionFrequencyUpdated,
                    SubscriptionUpdated,
                ],
            ),
            (
                Action::Reactivate,
                false,
                vec![SubscriptionReactivated, SubscriptionUpdated],
            ),
            (
                Action::Pause,
                false,
                vec![SubscriptionPaused, SubscriptionUpdated],
            ),
            (
                Action::Resume,
                false,
                vec![SubscriptionResumed, SubscriptionUpdated],
            ),
            (
                Action::Skip,
                true,
                vec![
                    SubscriptionSkipped,
                    SubscriptionFrequencyUpdated,
                    SubscriptionUpdated,
                ],
            ),
            (
                Action::Skip,
                false,
                vec![SubscriptionSkipped, SubscriptionUpdated],
            ),
            (
                Action::ChangeQuantity,
                false,
                vec![SubscriptionQuantityUpdated, SubscriptionUpdated],
            ),
            (
                Action::ChangeFrequency,
                true,
                vec![SubscriptionFrequencyUpdated, SubscriptionUpdated],
            ),
            (
                Action::ChangeShippingAddress,
                false,
                vec![SubscriptionShippingAddressUpdated, SubscriptionUpdated],
            ),
            (
                Action::ChangePaymentMethod,
                false,
                vec![
                    SubscriptionCreditCardUpdated,
                    SubscriptionPaymentMethodUpdated,
                    SubscriptionUpdated,
                ],
            ),
            (Action::Start, false, vec![SubscriptionUpdated]),
            (Action::PlaceOrder, true, vec![SubscriptionUpcomingOrder]),
            (
                Action::OrderPlaced,
                true,
                vec![SubscriptionOrderCreated, SubscriptionUpdated],
            ),
            (
                Action::OrderFailed,
                false,
                vec![SubscriptionOrderTransactionFailed, SubscriptionUpdated],
            ),
            (
                Action::RetriesExhausted,
                false,
                vec![
                    SubscriptionOrderTransactionFailed,
                    SubscriptionOrderMaxRetriesReached,
                    SubscriptionUpdated,
                ],
            ),
            (
                Action::Complete,
                false,
                vec![SubscriptionCancelled, SubscriptionUpdated],
            ),
        ];
        for (action, moved, expected) in cases {
            assert_eq!(topics(action, moved), expected, "{action} moved={moved}");
        }
        // Change frequency says so whether or not the next date moved.
        assert_eq!(
            topics(Action::ChangeFrequency, false),
            vec![SubscriptionFrequencyUpdated, SubscriptionUpdated]
        );
    }

    #[test]
    fn creation_emits_customer_created_only_for_a_new_customer() {
        assert_eq!(
            creation_topics(true),
            vec![Topic::CustomerCreated, Topic::SubscriptionCreated]
        );
        assert_eq!(creation_topics(false), vec![Topic::SubscriptionCreated]);
    }

    #[test]
    fn taking_an_action_logs_who_acted() {
        let at = Timestamp::parse_rfc3339("2024-05-01T12:00:00Z").unwrap();
        let actor = Actor {
            kind: ActorType::Staff,
            id: 3,
            name: "Grace".into(),
        };
        let outcome = take_action(
            SubscriptionId(42),
            Active,
            Action::Pause,
            actor.clone(),
            at,
            false,
        )
        .unwrap();
        assert_eq!(outcome.status, Paused);
        assert!(outcome.status_changed);
        assert_eq!(
            outcome.topics,
            vec![Topic::SubscriptionPaused, Topic::SubscriptionUpdated]
        );
        assert_eq!(
            serde_json::to_value(outcome.log.stored(StatusLogId(9))).unwrap(),
            serde_json::json!({
                "id": 9,
                "subscription_status": "paused",
                "reason": "paused",
                "metadata": {"user": {"type": "staff", "id": 3, "name": "Grace"}},
                "created_at": "2024-05-01T12:00:00Z",
                "subscription_id": 42
            })
        );
        let skip = take_action(
            SubscriptionId(42),
            Active,
            Action::Skip,
            Actor::system(),
            at,
            true,
        )
        .unwrap();
        assert!(!skip.status_changed);
        assert_eq!(skip.log.subscription_status, Active);
        assert_eq!(skip.log.reason, "order_skipped");
        assert_eq!(skip.log.metadata.user.kind, ActorType::System);
        assert_eq!(
            take_action(
                SubscriptionId(42),
                Inactive,
                Action::Pause,
                actor,
                at,
                false
            ),
            Err(InvalidTransition::Action {
                from: Inactive,
                action: Action::Pause
            })
        );
    }

    #[test]
    fn every_action_has_a_distinct_name_and_reason() {
        let names: std::collections::HashSet<_> = all_actions().map(Action::as_str).collect();
        let reasons: std::collections::HashSet<_> = all_actions().map(Action::reason).collect();
        assert_eq!(names.len(), 15);
        assert_eq!(reasons.len(), 15);
        assert!(!reasons.contains(CREATED_REASON));
    }
}
