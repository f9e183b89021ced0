//! Ids as types: each resource's integer id is a type of its own (`ShopId`, `BoxId`), so a
//! box's id cannot be passed where a shop's is wanted. They are written as bare integers
//! (`#[serde(transparent)]`).
//!
//! Read from a request's path, an id that is not a number names the resource it was to find:
//! it fails with [`not_found_message`], which the server turns into that resource's 404.

use std::fmt;

use serde::de::{Deserializer, Error};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What reading an id that is not a number fails with: the resource's 404, as a message the
/// server's path error handler reads back with [`resource_not_found`].
pub fn not_found_message(resource: &str) -> String {
    format!("{NOT_FOUND_PREFIX}{resource}")
}

const NOT_FOUND_PREFIX: &str = "not found: ";

/// The resource a path error of an id names (see [`not_found_message`]).
pub fn resource_not_found(message: &str) -> Option<&str> {
    message.strip_prefix(NOT_FOUND_PREFIX)
}

/// An id as a path or a body gives it: an integer, or its decimal text.
fn read_id<'de, D: Deserializer<'de>>(deserializer: D, resource: &str) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        Number(i64),
        Text(String),
    }
    match Given::deserialize(deserializer) {
        Ok(Given::Number(id)) => Ok(id),
        Ok(Given::Text(text)) => text
            .trim()
            .parse()
            .map_err(|_| D::Error::custom(not_found_message(resource))),
        Err(_) => Err(D::Error::custom(not_found_message(resource))),
    }
}

macro_rules! id_types {
    ($($(#[$doc:meta])* $name:ident => $resource:literal;)+) => {
        $(
            $(#[$doc])*
            #[derive(
                Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize,
                ToSchema,
            )]
            #[serde(transparent)]
            pub struct $name(pub i64);

            impl $name {
                /// The resource's name in a 404 (`resource.not_found`).
                pub const RESOURCE: &'static str = $resource;
            }

            impl fmt::Display for $name {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    self.0.fmt(f)
                }
            }

            impl<'de> Deserialize<'de> for $name {
                fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                    read_id(deserializer, $resource).map($name)
                }
            }
        )+
    };
}

id_types! {
    /// A shop's id (the service's integer; paths name shops by their identifier).
    ShopId => "shop";
    /// A subscription's id.
    SubscriptionId => "subscription";
    /// A subscription line item's id.
    LineItemId => "line_item";
    /// A subscription group's id.
    GroupId => "subscription_group";
    /// An attempt's id, of those that place a subscription's orders.
    SubscriptionOrderId => "subscription_order";
    /// A subscription customer's id.
    CustomerId => "customer";
    /// A box's id.
    BoxId => "box";
    /// A box product's id.
    BoxProductId => "box_product";
    /// A box size's id.
    BoxSizeId => "box_size";
    /// A platform sync's id.
    SyncId => "sync";
    /// A background job's id.
    JobId => "job";
    /// A time slot's id.
    TimeSlotId => "time_slot";
    /// A selection's id.
    SelectionId => "selection";
    /// A webhook endpoint's row id (paths name webhooks by their 32-hex public id).
    WebhookId => "webhook";
    /// A webhook message's row id (not its `webhook-id`, the `msg_…` text clients see).
    MessageId => "message";
    /// A customer address's id.
    AddressId => "address";
    /// A customer label's id.
    LabelId => "label";
    /// A platform connector destination's id.
    DestinationId => "destination";
    /// A queued platform event's id.
    EventId => "event";
    /// An API override's row id (paths name overrides by their 32-hex public id).
    OverrideId => "override";
    /// An API token's row id (not the token, nor its prefix).
    TokenId => "token";
    /// A staff account's row id.
    StaffId => "staff_account";
    /// An operator console session's row id (the browser holds only its token).
    StaffSessionId => "staff_session";
    /// An OAuth app's row id (apps name themselves by their `client_id`).
    OAuthAppId => "oauth_app";
    /// An OAuth authorization code's row id (never the code itself).
    AuthorizationCodeId => "authorization_code";
    /// A line's row id in the console's audit log (a page's cursor).
    AuditEntryId => "audit_entry";
    /// A connector call's row id in the outbox.
    OutboxCallId => "outbox_call";
    /// A headless checkout's row id (the storefront names it by its 32-hex public order id).
    CheckoutOrderId => "checkout";
    /// A subscription group's billing rule's row id (a line item's `interval_id`).
    BillingRuleId => "billing_rule";
    /// A subscription status log entry's row id.
    StatusLogId => "status_log";
    /// A customer group's id in the directory.
    CustomerGroupId => "customer_group";
    /// A subscriber portal session's row id (the browser holds only its token).
    PortalSessionId => "portal_session";
    /// A subscription CSV import's id (its progress at `GET …/imports/{import_id}`).
    ImportId => "import";
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_id_reads_from_a_number_or_its_text_and_writes_a_number() {
        assert_eq!(serde_json::from_value::<BoxId>(json!(7)).unwrap(), BoxId(7));
        assert_eq!(
            serde_json::from_value::<BoxId>(json!(" 7")).unwrap(),
            BoxId(7)
        );
        assert_eq!(serde_json::to_value(BoxId(7)).unwrap(), json!(7));
        assert_eq!(BoxId(7).to_string(), "7");
    }

    #[test]
    fn an_id_that_is_not_a_number_names_its_resource() {
        for given in [json!("seven"), json!(1.5), json!(null)] {
            let error = serde_json::from_value::<TimeSlotId>(given)
                .unwrap_err()
                .to_string();
            assert_eq!(resource_not_found(&error), Some("time_slot"), "{error}");
        }
        assert_eq!(resource_not_found("invalid digit found in string"), None);
    }
}
