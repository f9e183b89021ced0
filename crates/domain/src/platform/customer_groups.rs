//! The customer groups a platform says its customers belong to (wholesale, staff, VIP): the
//! `groups` of a customer, a Mercer extension of the connector's customer, from Customer Saved
//! events and synced customers alike.
//!
//! - A customer whose event leaves `groups` out keeps the groups it has. One whose event gives
//!   `groups`, even empty, belongs to those groups and no other from then on.
//! - Groups are the shop's, known by their platform id. A group takes the newest name it is
//!   given, in the order events are applied; one given without a name keeps its own (a new one
//!   is stored with an empty name). A group no customer belongs to any more stays stored.
//! - Groups come with the customer's state: only an event the out-of-sequence rule applies
//!   changes them (a stale event, or one that changes nothing, changes no group either), in the
//!   transaction that stores the rest of the customer. A batch gives what applying its events
//!   one by one gives.

use std::collections::HashMap;

use crate::kernel::error::{DomainError, StorageError};
use crate::kernel::ids::{CustomerGroupId, CustomerId, ShopId};
use crate::kernel::time::Timestamp;
use crate::platform::PlatformRepositories;
use crate::platform::resources::CustomerGroup;

/// A customer group as an applied event names it, to store in its shop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCustomerGroup {
    /// The group's platform id (never blank).
    pub platform_id: String,
    /// The newest name given; None when no applied event gave one (a stored group keeps its
    /// name, a new one is stored with an empty name).
    pub name: Option<String>,
}

/// What a batch of applied events says of one shop's groups.
#[derive(Debug, Default)]
struct ShopGroups {
    /// The groups named, in order of first appearance, with the newest name given.
    groups: Vec<NewCustomerGroup>,
    /// Where each group is in `groups`, by platform id.
    group_index: HashMap<String, usize>,
    /// Each customer's whole list of groups as its last applied event gave it, by the
    /// customer's platform id then the groups' platform ids (each once), in order of first
    /// appearance.
    members: Vec<(String, Vec<String>)>,
    /// Where each customer is in `members`, by platform id.
    member_index: HashMap<String, usize>,
}

/// The groups the applied events of a batch gave, gathered event by event and stored once the
/// batch's customers are.
#[derive(Debug, Default)]
pub(crate) struct GroupsSeen {
    shops: Vec<(ShopId, ShopGroups)>,
}

impl GroupsSeen {
    /// Notes an applied Customer Saved event that gave `groups` for the customer of platform id
    /// `customer`: its whole list from now on, and the names given. A group without a platform
    /// id (intake refuses one) is passed over.
    pub(crate) fn record(&mut self, shop_id: ShopId, customer: &str, groups: &[CustomerGroup]) {
        let index = match self.shops.iter().position(|(shop, _)| *shop == shop_id) {
            Some(index) => index,
            None => {
                self.shops.push((shop_id, ShopGroups::default()));
                self.shops.len() - 1
            }
        };
        let shop = &mut self.shops[index].1;
        let mut list: Vec<String> = Vec::with_capacity(groups.len());
        for group in groups {
            let Some(platform_id) = group.platform_id.as_ref().filter(|id| !id.is_blank()) else {
                continue;
            };
            let platform_id = platform_id.as_str();
            match shop.group_index.get(platform_id) {
                Some(&at) => {
                    if group.name.is_some() {
                        shop.groups[at].name.clone_from(&group.name);
                    }
                }
                None => {
                    shop.group_index
                        .insert(platform_id.to_string(), shop.groups.len());
                    shop.groups.push(NewCustomerGroup {
                        platform_id: platform_id.to_string(),
                        name: group.name.clone(),
                    });
                }
            }
            if !list.iter().any(|listed| listed == platform_id) {
                list.push(platform_id.to_string());
            }
        }
        match shop.member_index.get(customer) {
            Some(&at) => shop.members[at].1 = list,
            None => {
                shop.member_index
                    .insert(customer.to_string(), shop.members.len());
                shop.members.push((customer.to_string(), list));
            }
        }
    }

    /// Stores what was noted, shop by shop: the groups (added, or renamed when the name given
    /// differs), then each noted customer's memberships made its list. The customers must be
    /// stored already. Three statements a shop at most, whatever the number of customers.
    pub(crate) fn store(
        self,
        tx: &mut dyn PlatformRepositories,
        now: Timestamp,
    ) -> Result<(), DomainError> {
        for (shop_id, shop) in self.shops {
            let ids: HashMap<String, CustomerGroupId> = tx
                .put_customer_groups(shop_id, &shop.groups, now)?
                .into_iter()
                .collect();
            let platform_ids: Vec<&str> = shop.members.iter().map(|(id, _)| id.as_str()).collect();
            let customers: HashMap<String, CustomerId> = tx
                .customer_ids(shop_id, &platform_ids)?
                .into_iter()
                .collect();
            let mut memberships = Vec::with_capacity(shop.members.len());
            for (customer, groups) in &shop.members {
                // Stored just before in the same transaction; should one not be, it has no
                // memberships to change.
                let Some(&customer_id) = customers.get(customer) else {
                    continue;
                };
                let group_ids = groups
                    .iter()
                    .map(|group| {
                        ids.get(group).copied().ok_or_else(|| {
                            StorageError::other(format!(
                                "customer group {group} of shop {shop_id} was not stored"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                memberships.push((customer_id, group_ids));
            }
            tx.set_customer_groups(shop_id, &memberships)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::access::shop::{Shop, ShopInput, create_shop};
    use crate::directory::{get_customer_by_platform_id, list_customers, parse_directory_query};
    use crate::kernel::error::DomainError;
    use crate::kernel::time::Timestamp;
    use crate::platform::events::{
        EntityKind, EventAction, EventSource, NewInboundEvent, Outcome, apply_events, parse_event,
        synced_customer_events,
    };
    use crate::platform::resources::Customer;
    use crate::ports::Database;
    use crate::testing::MemoryDatabase;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_micros(1_700_000_000_000_000).plus_seconds(seconds)
    }

    fn shop(db: &MemoryDatabase, domain: &str) -> Shop {
        db.write(|tx| {
            create_shop(
                tx,
                ShopInput {
                    shop_domain: domain.into(),
                    ..ShopInput::default()
                },
                at(0),
            )
        })
        .unwrap()
    }

    /// A Customer Saved event of `shop` for customer `id` at `seconds`, with `fields`.
    fn saved(shop: &Shop, id: &str, seconds: i64, fields: Value) -> NewInboundEvent {
        let mut customer = fields;
        customer["platform_id"] = json!(id);
        customer["platform_updated_at"] = json!(at(seconds).to_rfc3339());
        parse_event(
            shop.id,
            EntityKind::Customer,
            EventAction::Saved,
            &json!({"data": {"customer": customer}}),
            EventSource::Webhook,
            at(0),
        )
        .unwrap()
    }

    fn deleted(shop: &Shop, id: &str, seconds: i64) -> NewInboundEvent {
        let body = json!({"data": {"customer": {"platform_id": id, "platform_deleted_at": at(seconds).to_rfc3339()}}});
        parse_event(
            shop.id,
            EntityKind::Customer,
            EventAction::Deleted,
            &body,
            EventSource::Webhook,
            at(0),
        )
        .unwrap()
    }

    /// Applies the events as one batch at `now`.
    fn apply(db: &MemoryDatabase, events: &[NewInboundEvent], now: Timestamp) -> Vec<Outcome> {
        let refs: Vec<&NewInboundEvent> = events.iter().collect();
        db.write(|tx| apply_events(tx, &refs, now)).unwrap()
    }

    /// (platform id, name) of the customer's groups, as the directory answers them.
    fn groups(db: &MemoryDatabase, shop: &Shop, customer: &str) -> Vec<(String, String)> {
        db.read(|tx| get_customer_by_platform_id(tx, shop, customer))
            .unwrap()
            .groups
            .into_iter()
            .map(|group| (group.platform_id, group.name))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(id, name)| (id.to_string(), name.to_string()))
            .collect()
    }

    fn stored_groups(db: &MemoryDatabase) -> usize {
        db.with_state(|state| state.customer_groups.len())
    }

    #[test]
    fn groups_left_out_stay_and_groups_given_are_the_whole_list_even_empty() {
        let db = MemoryDatabase::default();
        let shop = shop(&db, "a.shop.test");
        let given = json!({"email": "ada@example.test", "groups": [
            {"platform_id": "g1", "name": "Wholesale"},
            {"platform_id": "g2", "name": "VIP"},
            {"platform_id": 7, "name": "VIP"},
        ]});
        apply(&db, &[saved(&shop, "c1", 10, given)], at(100));
        assert_eq!(
            groups(&db, &shop, "c1"),
            pairs(&[("7", "VIP"), ("g2", "VIP"), ("g1", "Wholesale")]),
            "by name, then platform id"
        );

        let left_out = json!({"email": "grace@example.test"});
        apply(&db, &[saved(&shop, "c1", 20, left_out)], at(200));
        assert_eq!(
            groups(&db, &shop, "c1"),
            pairs(&[("7", "VIP"), ("g2", "VIP"), ("g1", "Wholesale")]),
            "left out: the groups do not change"
        );

        let fewer = json!({"groups": [{"platform_id": "g2", "name": "VIP"}, {"platform_id": "g3", "name": "Staff"}]});
        apply(&db, &[saved(&shop, "c1", 30, fewer)], at(300));
        assert_eq!(
            groups(&db, &shop, "c1"),
            pairs(&[("g3", "Staff"), ("g2", "VIP")]),
            "given: the customer's whole list, the others removed"
        );

        apply(
            &db,
            &[saved(&shop, "c1", 40, json!({"groups": []}))],
            at(400),
        );
        assert!(groups(&db, &shop, "c1").is_empty(), "given empty: none");
        assert_eq!(
            stored_groups(&db),
            4,
            "a group no customer belongs to stays stored"
        );
        let customer = db
            .read(|tx| get_customer_by_platform_id(tx, &shop, "c1"))
            .unwrap();
        assert_eq!(customer.email, "grace@example.test");
    }

    #[test]
    fn a_group_is_the_shops_by_platform_id_and_takes_the_newest_name() {
        let db = MemoryDatabase::default();
        let shop = shop(&db, "a.shop.test");
        let other = self::shop(&db, "b.shop.test");
        let wholesale = json!({"groups": [{"platform_id": "g1", "name": "Wholesale"}]});
        apply(
            &db,
            &[
                saved(&shop, "c1", 10, wholesale.clone()),
                saved(&other, "c1", 10, wholesale),
            ],
            at(100),
        );
        let first = db
            .read(|tx| get_customer_by_platform_id(tx, &shop, "c1"))
            .unwrap()
            .groups;
        assert_eq!(
            (first[0].created_at, first[0].updated_at),
            (at(100), at(100))
        );
        assert_eq!(first[0].shop_identifier, shop.identifier.as_str());

        // Another customer of the shop, later, names the group otherwise: the group is renamed
        // for every member; the other shop's group of the same platform id is not.
        let trade = json!({"groups": [{"platform_id": "g1", "name": "Trade"}]});
        apply(&db, &[saved(&shop, "c2", 20, trade)], at(200));
        for customer in ["c1", "c2"] {
            let group = &db
                .read(|tx| get_customer_by_platform_id(tx, &shop, customer))
                .unwrap()
                .groups[0];
            assert_eq!((group.id, group.name.as_str()), (first[0].id, "Trade"));
            assert_eq!(
                (group.created_at, group.updated_at),
                (at(100), at(200)),
                "renamed at the time it was"
            );
        }
        assert_eq!(groups(&db, &other, "c1"), pairs(&[("g1", "Wholesale")]));

        // Given without a name, the group keeps its own; the same name again changes nothing.
        let unnamed = json!({"email": "x@example.test", "groups": [{"platform_id": "g1"}]});
        let same =
            json!({"email": "y@example.test", "groups": [{"platform_id": "g1", "name": "Trade"}]});
        apply(&db, &[saved(&shop, "c1", 30, unnamed)], at(300));
        apply(&db, &[saved(&shop, "c2", 30, same)], at(400));
        let group = &db
            .read(|tx| get_customer_by_platform_id(tx, &shop, "c1"))
            .unwrap()
            .groups[0];
        assert_eq!((group.name.as_str(), group.updated_at), ("Trade", at(200)));
        assert_eq!(stored_groups(&db), 2, "one group a shop");
    }

    #[test]
    fn a_stale_event_or_one_that_changes_nothing_changes_no_group() {
        let db = MemoryDatabase::default();
        let shop = shop(&db, "a.shop.test");
        let newest = saved(
            &shop,
            "c1",
            20,
            json!({"groups": [{"platform_id": "g1", "name": "Wholesale"}]}),
        );
        apply(&db, std::slice::from_ref(&newest), at(100));
        let stale = saved(
            &shop,
            "c1",
            10,
            json!({"groups": [{"platform_id": "g1", "name": "Old name"}, {"platform_id": "g2", "name": "VIP"}]}),
        );
        assert_eq!(
            apply(&db, &[stale, newest], at(200)),
            [Outcome::Stale, Outcome::Unchanged]
        );
        assert_eq!(groups(&db, &shop, "c1"), pairs(&[("g1", "Wholesale")]));
        assert_eq!(stored_groups(&db), 1, "a stale event adds no group");

        // Saves at or before a deletion are stale too; a later one brings the customer back
        // with the groups it gives.
        let gone = deleted(&shop, "c1", 30);
        let before_deletion = saved(
            &shop,
            "c1",
            30,
            json!({"groups": [{"platform_id": "g2", "name": "VIP"}]}),
        );
        assert_eq!(
            apply(&db, &[gone, before_deletion], at(300)),
            [Outcome::Applied, Outcome::Stale]
        );
        apply(
            &db,
            &[saved(
                &shop,
                "c1",
                40,
                json!({"groups": [{"platform_id": "g2", "name": "VIP"}]}),
            )],
            at(400),
        );
        assert_eq!(groups(&db, &shop, "c1"), pairs(&[("g2", "VIP")]));
    }

    #[test]
    fn a_batch_gives_what_one_by_one_gives() {
        let events = |shop: &Shop| {
            vec![
                saved(
                    shop,
                    "c1",
                    10,
                    json!({"groups": [{"platform_id": "g1", "name": "A"}, {"platform_id": "g2", "name": "B"}]}),
                ),
                saved(
                    shop,
                    "c2",
                    10,
                    json!({"groups": [{"platform_id": "g1", "name": "A2"}]}),
                ),
                saved(shop, "c1", 5, json!({"groups": []})),
                saved(
                    shop,
                    "c1",
                    20,
                    json!({"groups": [{"platform_id": "g2", "name": "B"}, {"platform_id": "g2", "name": "B2"}]}),
                ),
                saved(shop, "c1", 30, json!({"email": "ada@example.test"})),
                saved(
                    shop,
                    "c3",
                    10,
                    json!({"groups": [{"platform_id": "g3", "name": "C"}]}),
                ),
                deleted(shop, "c3", 20),
            ]
        };
        let batch = MemoryDatabase::default();
        let shop = self::shop(&batch, "a.shop.test");
        apply(&batch, &events(&shop), at(100));
        let one_by_one = MemoryDatabase::default();
        let same_shop = self::shop(&one_by_one, "a.shop.test");
        for event in events(&same_shop) {
            apply(&one_by_one, &[event], at(100));
        }
        for db in [&batch, &one_by_one] {
            assert_eq!(groups(db, &shop, "c1"), pairs(&[("g2", "B2")]));
            assert_eq!(groups(db, &shop, "c2"), pairs(&[("g1", "A2")]));
            assert_eq!(stored_groups(db), 3);
        }
        // The directory's page reads every customer's groups at once.
        let query = parse_directory_query(&[]).unwrap();
        let page = batch.read(|tx| list_customers(tx, &shop, &query)).unwrap();
        let listed: Vec<(String, Vec<String>)> = page
            .customers
            .iter()
            .map(|c| {
                let groups = c.groups.iter().map(|g| g.name.clone()).collect();
                (c.platform_id.string_value.clone(), groups)
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("c1".to_string(), vec!["B2".to_string()]),
                ("c2".to_string(), vec!["A2".to_string()]),
            ]
        );
    }

    #[test]
    fn synced_customers_bring_their_groups_by_the_same_rules() {
        let db = MemoryDatabase::default();
        let shop = shop(&db, "a.shop.test");
        let customer = |seconds: i64, groups: Option<Value>| -> Customer {
            let mut customer =
                json!({"platform_id": "c1", "platform_updated_at": at(seconds).to_rfc3339()});
            if let Some(groups) = groups {
                customer["groups"] = groups;
            }
            serde_json::from_value(customer).unwrap()
        };
        let sync = |customers: &[Customer]| {
            let (events, skipped) = synced_customer_events(shop.id, customers, at(100));
            assert_eq!(skipped, 0);
            apply(&db, &events, at(100))
        };
        sync(&[customer(
            10,
            Some(json!([{"platform_id": "g1", "name": "Wholesale"}])),
        )]);
        sync(&[customer(20, None)]);
        assert_eq!(groups(&db, &shop, "c1"), pairs(&[("g1", "Wholesale")]));
        sync(&[customer(30, Some(json!([])))]);
        assert!(groups(&db, &shop, "c1").is_empty());
    }

    #[test]
    fn a_group_needs_its_platform_id_and_a_customer_holds_at_most_250() {
        let refused = |groups: Value| {
            let body = json!({"data": {"customer": {"platform_id": "c1", "platform_updated_at": at(0).to_rfc3339(), "groups": groups}}});
            match parse_event(
                crate::kernel::ids::ShopId(1),
                EntityKind::Customer,
                EventAction::Saved,
                &body,
                EventSource::Webhook,
                at(0),
            ) {
                Err(DomainError::Invalid(problems)) => problems
                    .into_iter()
                    .map(|p| (p.field, p.code))
                    .collect::<Vec<_>>(),
                other => panic!("must be refused: {other:?}"),
            }
        };
        assert_eq!(
            refused(json!([{"platform_id": "g1"}, {"name": "VIP"}, {"platform_id": " "}])),
            [
                (
                    "data.customer.groups[1].platform_id".to_string(),
                    "required"
                ),
                (
                    "data.customer.groups[2].platform_id".to_string(),
                    "required"
                ),
            ]
        );
        let many: Vec<Value> = (0..251)
            .map(|i| json!({"platform_id": i.to_string()}))
            .collect();
        assert_eq!(
            refused(Value::Array(many)),
            [("data.customer.groups".to_string(), "too_many")]
        );
        let body = json!({"data": {"customer": {"platform_id": "c1", "platform_updated_at": at(0).to_rfc3339(), "groups": "VIP"}}});
        let Err(DomainError::Invalid(problems)) = parse_event(
            crate::kernel::ids::ShopId(1),
            EntityKind::Customer,
            EventAction::Saved,
            &body,
            EventSource::Webhook,
            at(0),
        ) else {
            panic!("groups must be a list");
        };
        assert_eq!(problems[0].field, "data.customer.groups");
    }
}
