//! Property tests of what Mercer reads from outside (the reliability suite; docs/testing.md):
//! connector event bodies, the customer directory's filter expressions, subscriptions'
//! `order_rrule` and List Subscriptions' cursors. Whatever the input, the parsers never panic;
//! what they accept round-trips. `PROPTEST_CASES` sets the cases per property (256 by default;
//! `cargo xtask chaos` runs 5,000).

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use mercer_domain::Timestamp;
use mercer_domain::directory::{FilterField, FilterValue, parse_filters};
use mercer_domain::kernel::filter::FilterOp;
use mercer_domain::kernel::ids::ShopId;
use mercer_domain::kernel::ids::SubscriptionId;
use mercer_domain::platform::events::{
    EntityKind, EventAction, EventDocument, EventSource, parse_event_body,
};
use mercer_domain::subscriptions::query::Cursor;
use mercer_domain::subscriptions::recurrence::{OrderSchedule, ShopZone};
use proptest::prelude::*;
use serde_json::{Value, json};

const KINDS: [EntityKind; 4] = [
    EntityKind::Customer,
    EntityKind::Order,
    EntityKind::Product,
    EntityKind::Category,
];

/// Any JSON value, a few levels deep, with the event's own keys among the names.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        ".{0,12}".prop_map(Value::String),
        Just(json!("2026-11-01T00:00:00Z")),
    ];
    let key = prop_oneof![
        Just("data".to_string()),
        Just("customer".to_string()),
        Just("order".to_string()),
        Just("product".to_string()),
        Just("platform_id".to_string()),
        Just("platform_updated_at".to_string()),
        Just("platform_deleted_at".to_string()),
        Just("email".to_string()),
        Just("variants".to_string()),
        Just("price".to_string()),
        "[a-z_]{1,10}",
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn parse(kind: EntityKind, action: EventAction, body: &[u8]) -> bool {
    parse_event_body(
        ShopId(1),
        kind,
        action,
        body,
        EventSource::Webhook,
        Timestamp::from_micros(1_800_000_000_000_000),
    )
    .is_ok()
}

proptest! {
    #[test]
    fn event_bodies_of_any_bytes_never_panic(kind in 0..4usize, saved: bool,
                                             body in prop::collection::vec(any::<u8>(), 0..256)) {
        let action = if saved { EventAction::Saved } else { EventAction::Deleted };
        parse(KINDS[kind], action, &body);
    }

    #[test]
    fn event_bodies_of_any_json_never_panic(kind in 0..4usize, saved: bool, body in any_json()) {
        let action = if saved { EventAction::Saved } else { EventAction::Deleted };
        parse(KINDS[kind], action, body.to_string().as_bytes());
        parse(KINDS[kind], action, json!({"data": {"customer": body}}).to_string().as_bytes());
    }

    /// A saved customer that parses keeps its id and time, and its stored document reads back
    /// as the same document.
    #[test]
    fn a_saved_customer_round_trips(platform_id in "[A-Za-z0-9_-]{1,40}",
                                    seconds in 0i64..4_000_000_000,
                                    email in "[a-z]{1,10}@[a-z]{1,10}\\.test",
                                    first_name in "\\PC{0,20}") {
        let at = Timestamp::from_micros(seconds * 1_000_000);
        let body = json!({"data": {"customer": {"platform_id": platform_id,
            "platform_updated_at": at.to_rfc3339(), "email": email, "first_name": first_name}}});
        let event = parse_event_body(ShopId(1), EntityKind::Customer, EventAction::Saved,
            body.to_string().as_bytes(), EventSource::Webhook, at).unwrap();
        prop_assert_eq!(&event.platform_id, &platform_id);
        prop_assert_eq!(event.occurred_at, at);
        let document = event.document.unwrap();
        let again = EventDocument::from_json(EntityKind::Customer, document.json().to_string())
            .unwrap();
        prop_assert_eq!(again, document);
    }

    #[test]
    fn filter_expressions_never_panic(text in "\\PC{0,80}") {
        let _ = parse_filters(&text);
    }

    #[test]
    fn filter_expressions_of_the_grammar_never_panic(
        parts in prop::collection::vec(("(gt|gte|lt|lte|eq|like|xx)", "(id|email|created_at|phone|nope)",
                                        "[^()]{0,20}"), 0..4)) {
        let text: Vec<String> = parts.iter()
            .map(|(op, field, value)| format!("{op}({field}:{value})"))
            .collect();
        let _ = parse_filters(&text.join(","));
    }

    /// Text conditions as a client writes them parse back to the same field, operator and value.
    #[test]
    fn text_filters_round_trip(conditions in prop::collection::vec(
        (prop_oneof![Just(FilterOp::Eq), Just(FilterOp::Like)],
         prop_oneof![Just(("email", FilterField::Email)), Just(("first_name", FilterField::FirstName)),
                     Just(("platform_id", FilterField::PlatformId))],
         "[^()\\x00]{0,30}"), 1..4),
        id in any::<i64>()) {
        let mut text: Vec<String> = conditions.iter()
            .map(|(op, (name, _), value)| format!("{}({name}:{value})", op.as_str()))
            .collect();
        text.push(format!("gte(id:{id})"));
        let parsed = parse_filters(&text.join(",")).unwrap();
        prop_assert_eq!(parsed.len(), conditions.len() + 1);
        for (filter, (op, (_, field), value)) in parsed.iter().zip(&conditions) {
            prop_assert_eq!(filter.op, *op);
            prop_assert_eq!(filter.field, *field);
            prop_assert_eq!(&filter.value, &FilterValue::Text(value.clone()));
        }
        prop_assert_eq!(&parsed[conditions.len()].value, &FilterValue::Integer(id));
    }

    #[test]
    fn rrules_never_panic(text in "\\PC{0,120}") {
        let _ = OrderSchedule::parse(&text, ShopZone::parse("UTC").unwrap(), "order_rrule");
    }

    #[test]
    fn rrules_of_the_grammar_never_panic(
        start in "(DTSTART(;TZID=(UTC|Europe/Paris|Nowhere/Else))?:2026[01][0-9][0-3][0-9]T[0-2][0-9][0-5][0-9][0-5][0-9]Z?\n)?",
        parts in prop::collection::vec(
            "(FREQ=(DAILY|WEEKLY|MONTHLY|YEARLY|SECONDLY)|INTERVAL=-?[0-9]{1,4}|COUNT=[0-9]{1,4}|BYDAY=(MO|TU|1FR|-1SU)(,WE)?|BYMONTHDAY=-?[0-9]{1,2}|UNTIL=2027[01][0-9]01T000000Z|WKST=MO)",
            0..5)) {
        let text = format!("{start}RRULE:{}", parts.join(";"));
        let _ = OrderSchedule::parse(&text, ShopZone::parse("America/New_York").unwrap(), "order_rrule");
    }

    /// A rule that parses is kept as a text (`source`, what `order_rrule` shows and the store
    /// keeps) that parses again to the same rule: the same description and the same dates.
    #[test]
    fn rrules_round_trip(day in 1u32..=28, hour in 0u32..24, frequency in 0..3usize,
                         interval in 1u32..10, count in prop::option::of(2u32..20),
                         zone in prop_oneof![Just("UTC"), Just("Europe/Paris"), Just("America/New_York")]) {
        let frequency = ["DAILY", "WEEKLY", "MONTHLY"][frequency];
        let count = count.map_or_else(String::new, |count| format!(";COUNT={count}"));
        let text = format!("DTSTART;TZID={zone}:202603{day:02}T{hour:02}0000\n\
                            RRULE:FREQ={frequency};INTERVAL={interval}{count}");
        let shop = ShopZone::parse("UTC").unwrap();
        let schedule = match OrderSchedule::parse(&text, shop, "order_rrule") {
            Ok(schedule) => schedule,
            // The one refusal of such a rule: a start the clocks skip (a change to summer time).
            Err(refused) => {
                prop_assert!(refused.message.contains("does not exist"), "{refused:?}");
                return Ok(());
            }
        };
        let again = OrderSchedule::parse(schedule.source(), shop, "order_rrule").unwrap();
        prop_assert_eq!(again.source(), schedule.source());
        prop_assert_eq!(again.text(), schedule.text());
        let mut after = schedule.start();
        for _ in 0..5 {
            let next = schedule.next_after(after, &[]);
            prop_assert_eq!(again.next_after(after, &[]), next);
            match next {
                Some(next) => { prop_assert!(next > after); after = next; }
                None => break,
            }
        }
    }

    #[test]
    fn cursors_of_any_text_never_panic(text in "\\PC{0,60}") {
        let _ = Cursor::decode(&text);
    }

    #[test]
    fn cursors_round_trip(after_id in any::<i64>(), total in prop::option::of(0i64..i64::MAX)) {
        let cursor = Cursor { after_id: SubscriptionId(after_id), total };
        prop_assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));
    }
}
