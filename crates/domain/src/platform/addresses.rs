//! A customer's addresses as rows: how each address is keyed, and which rows a new document
//! writes and which it marks gone. The store and the in-memory database both go by this, so
//! they keep the same rows with the same ids.
//!
//! An address is keyed by its platform id, or by its position (`#0`, `#1`…) when it has none.
//! Two addresses with one platform id: the later wins, as it would field by field. A new
//! document is compared with the customer's previous document when there is one, with the
//! stored rows otherwise; only the rows that change are written, and the live rows whose key
//! the document no longer has are marked gone. A document that leaves `addresses` out is no
//! change to them at all (the caller does not ask). Matching goes by hash maps of the keys, so it
//! takes time in proportion to the addresses (at most 250 a customer, checked at intake).

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::platform::resources::CustomerAddress;

/// Which of a customer's address rows an address is: its platform id, or `#<position>` for an
/// address without one. Unique per customer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddressKey(String);

impl AddressKey {
    /// The key of the address at `position` of its customer's list.
    pub fn of(position: usize, address: &CustomerAddress) -> AddressKey {
        match &address.platform_id {
            Some(id) => AddressKey(id.as_str().to_string()),
            None => AddressKey(format!("#{position}")),
        }
    }

    /// A key as stored.
    pub fn stored(text: impl Into<String>) -> AddressKey {
        AddressKey(text.into())
    }

    /// The key of a row merged into another (`merged:<its id>`): the row, marked deleted, gives
    /// its key up to the one it was merged into and keeps this one, which no document names.
    pub fn merged(row_id: i64) -> AddressKey {
        AddressKey(format!("merged:{row_id}"))
    }

    /// The key as text (a platform id, or `#<position>`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key as an owned string, to store.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for AddressKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A customer's addresses by key, in the order their rows are written: by position, an address
/// whose platform id comes again taking the place of the later one. Linear in the addresses: each
/// key is kept at its last position.
pub(crate) fn keyed_addresses(
    addresses: &[CustomerAddress],
) -> Vec<(AddressKey, &CustomerAddress)> {
    let keys: Vec<AddressKey> = addresses
        .iter()
        .enumerate()
        .map(|(position, address)| AddressKey::of(position, address))
        .collect();
    let keep: Vec<bool> = {
        let mut last: HashMap<&AddressKey, usize> = HashMap::with_capacity(keys.len());
        for (position, key) in keys.iter().enumerate() {
            last.insert(key, position);
        }
        keys.iter()
            .enumerate()
            .map(|(position, key)| last.get(key) == Some(&position))
            .collect()
    };
    keys.into_iter()
        .zip(addresses)
        .zip(keep)
        .filter_map(|(keyed, keep)| keep.then_some(keyed))
        .collect()
}

/// The columns of an address row, pulled out of the address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressRow {
    /// Which of the customer's rows this is.
    pub key: AddressKey,
    /// The address's platform id, if it has one.
    pub platform_id: Option<String>,
    /// Whether this is the customer's default address (`false` when the platform does not say).
    pub is_default: bool,
    /// The address as JSON text.
    pub document: String,
}

impl AddressRow {
    /// The row of `address`, kept under `key`.
    pub fn of(key: AddressKey, address: &CustomerAddress) -> AddressRow {
        AddressRow {
            key,
            platform_id: address
                .platform_id
                .as_ref()
                .map(|id| id.as_str().to_string()),
            is_default: address.is_default.unwrap_or(false),
            // Strings, booleans and ids only: it serializes.
            document: serde_json::to_string(address).unwrap_or_else(|_| "{}".to_string()),
        }
    }
}

/// An address row as stored, live or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAddress {
    /// The row's columns.
    pub row: AddressRow,
    /// Whether the row is marked gone (no longer in the customer's document).
    pub deleted: bool,
}

/// What a new document is compared with.
#[derive(Debug, Clone, Copy)]
pub enum AddressesBefore<'a> {
    /// The customer's previous live document, which the store holds.
    Document(&'a [CustomerAddress]),
    /// The customer's stored rows (live or not), when the previous document is not known.
    Stored(&'a [StoredAddress]),
}

/// A row to write: inserted, or updated in place when `stored` (a row of that key is believed
/// stored; when it is not after all, the write inserts it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressWrite {
    /// The row to write.
    pub row: AddressRow,
    /// Whether a row of this key is believed stored, so the write updates it in place.
    pub stored: bool,
}

/// What a new document does to a customer's address rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressChanges {
    /// The rows to write, in the order to write them (so new rows take ids in that order).
    pub written: Vec<AddressWrite>,
    /// The keys of the live rows to mark deleted.
    pub gone: Vec<AddressKey>,
}

impl AddressChanges {
    /// Whether the document changes no row at all.
    pub fn is_empty(&self) -> bool {
        self.written.is_empty() && self.gone.is_empty()
    }
}

/// The changes that make a customer's address rows those of `addresses`: matched by key, rows
/// keep their ids; an unchanged one is not written; the others are marked gone.
pub fn address_changes(
    before: AddressesBefore<'_>,
    addresses: &[CustomerAddress],
) -> AddressChanges {
    let keyed = keyed_addresses(addresses);
    let kept: HashSet<&AddressKey> = keyed.iter().map(|(key, _)| key).collect();
    let mut changes = AddressChanges::default();
    match before {
        AddressesBefore::Document(previous) => {
            let before = keyed_addresses(previous);
            for (key, _) in &before {
                if !kept.contains(key) {
                    changes.gone.push(key.clone());
                }
            }
            // Keys are unique in a keyed list.
            let old_by_key: HashMap<&AddressKey, &CustomerAddress> =
                before.iter().map(|(key, old)| (key, *old)).collect();
            for (key, address) in &keyed {
                let old = old_by_key.get(key);
                if old.is_some_and(|old| *old == *address) {
                    continue;
                }
                changes.written.push(AddressWrite {
                    row: AddressRow::of(key.clone(), address),
                    stored: old.is_some(),
                });
            }
        }
        AddressesBefore::Stored(stored) => {
            for old in stored.iter().filter(|old| !old.deleted) {
                if !kept.contains(&old.row.key) {
                    changes.gone.push(old.row.key.clone());
                }
            }
            // The first stored row of each key, as a scan in order would find it.
            let mut stored_by_key: HashMap<&AddressKey, &StoredAddress> =
                HashMap::with_capacity(stored.len());
            for old in stored {
                stored_by_key.entry(&old.row.key).or_insert(old);
            }
            for (key, address) in &keyed {
                let row = AddressRow::of(key.clone(), address);
                let old = stored_by_key.get(key);
                if old.is_some_and(|old| !old.deleted && old.row == row) {
                    continue;
                }
                changes.written.push(AddressWrite {
                    row,
                    stored: old.is_some(),
                });
            }
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::resources::PlatformId;

    fn address(id: Option<&str>, city: &str) -> CustomerAddress {
        CustomerAddress {
            platform_id: id.map(PlatformId::new),
            city: Some(city.to_string()),
            ..CustomerAddress::default()
        }
    }

    fn keys(keyed: &[(AddressKey, &CustomerAddress)]) -> Vec<String> {
        keyed.iter().map(|(key, _)| key.to_string()).collect()
    }

    fn written(changes: &AddressChanges) -> Vec<(&str, bool)> {
        changes
            .written
            .iter()
            .map(|write| (write.row.key.as_str(), write.stored))
            .collect()
    }

    fn gone(changes: &AddressChanges) -> Vec<&str> {
        changes.gone.iter().map(AddressKey::as_str).collect()
    }

    fn stored(addresses: &[CustomerAddress]) -> Vec<StoredAddress> {
        keyed_addresses(addresses)
            .into_iter()
            .map(|(key, address)| StoredAddress {
                row: AddressRow::of(key, address),
                deleted: false,
            })
            .collect()
    }

    #[test]
    fn addresses_are_keyed_by_platform_id_else_by_position() {
        let addresses = [
            address(Some("a1"), "Lyon"),
            address(None, "Paris"),
            address(Some("a3"), "Nice"),
            address(None, "Lille"),
        ];
        assert_eq!(keys(&keyed_addresses(&addresses)), ["a1", "#1", "a3", "#3"]);
    }

    #[test]
    fn of_two_addresses_with_one_id_the_later_wins_in_its_place() {
        let addresses = [
            address(Some("a1"), "Lyon"),
            address(Some("a2"), "Paris"),
            address(Some("a1"), "Nice"),
        ];
        let keyed = keyed_addresses(&addresses);
        assert_eq!(keys(&keyed), ["a2", "a1"]);
        assert_eq!(keyed[1].1.city.as_deref(), Some("Nice"));
        let changes = address_changes(AddressesBefore::Document(&[]), &addresses);
        assert_eq!(written(&changes), [("a2", false), ("a1", false)]);
        assert_eq!(
            changes.written[1].row.document,
            r#"{"platform_id":"a1","city":"Nice"}"#
        );
    }

    #[test]
    fn a_row_holds_the_columns_of_its_address() {
        let mut default = address(Some("a1"), "Lyon");
        default.is_default = Some(true);
        let row = AddressRow::of(AddressKey::of(0, &default), &default);
        assert_eq!(row.key.as_str(), "a1");
        assert_eq!(row.platform_id.as_deref(), Some("a1"));
        assert!(row.is_default);
        assert_eq!(
            row.document,
            r#"{"platform_id":"a1","city":"Lyon","is_default":true}"#
        );
        let plain = AddressRow::of(
            AddressKey::of(4, &address(None, "Paris")),
            &address(None, "Paris"),
        );
        assert_eq!(
            (plain.key.as_str(), plain.platform_id, plain.is_default),
            ("#4", None, false)
        );
    }

    #[test]
    fn an_unchanged_document_writes_nothing() {
        let addresses = [address(Some("a1"), "Lyon"), address(None, "Paris")];
        let by_document = address_changes(AddressesBefore::Document(&addresses), &addresses);
        assert!(by_document.is_empty(), "{by_document:?}");
        let rows = stored(&addresses);
        let by_rows = address_changes(AddressesBefore::Stored(&rows), &addresses);
        assert!(by_rows.is_empty(), "{by_rows:?}");
    }

    #[test]
    fn only_the_changed_addresses_are_written_and_the_dropped_ones_go() {
        let before = [
            address(Some("a1"), "Lyon"),
            address(Some("a2"), "Paris"),
            address(Some("a3"), "Nice"),
        ];
        let after = [
            address(Some("a2"), "Paris"),
            address(Some("a1"), "Marseille"),
            address(Some("a4"), "Lille"),
        ];
        for changes in [
            address_changes(AddressesBefore::Document(&before), &after),
            address_changes(AddressesBefore::Stored(&stored(&before)), &after),
        ] {
            assert_eq!(written(&changes), [("a1", true), ("a4", false)]);
            assert_eq!(gone(&changes), ["a3"]);
        }
    }

    #[test]
    fn a_reorder_moves_nothing_keyed_by_id_and_rewrites_positions() {
        let before = [address(Some("a1"), "Lyon"), address(Some("a2"), "Paris")];
        let after = [address(Some("a2"), "Paris"), address(Some("a1"), "Lyon")];
        assert!(address_changes(AddressesBefore::Document(&before), &after).is_empty());
        // Without ids, the rows are positions: swapping two addresses rewrites both.
        let before = [address(None, "Lyon"), address(None, "Paris")];
        let after = [address(None, "Paris"), address(None, "Lyon")];
        for changes in [
            address_changes(AddressesBefore::Document(&before), &after),
            address_changes(AddressesBefore::Stored(&stored(&before)), &after),
        ] {
            assert_eq!(written(&changes), [("#0", true), ("#1", true)]);
            assert!(changes.gone.is_empty());
        }
    }

    #[test]
    fn removing_every_address_marks_every_row_gone() {
        let before = [address(Some("a1"), "Lyon"), address(None, "Paris")];
        for changes in [
            address_changes(AddressesBefore::Document(&before), &[]),
            address_changes(AddressesBefore::Stored(&stored(&before)), &[]),
        ] {
            assert!(changes.written.is_empty());
            assert_eq!(gone(&changes), ["a1", "#1"]);
        }
    }

    #[test]
    fn stored_rows_that_are_deleted_are_written_again_and_not_marked_gone() {
        let addresses = [address(Some("a1"), "Lyon"), address(Some("a2"), "Paris")];
        let mut rows = stored(&addresses);
        rows[0].deleted = true;
        rows.push(StoredAddress {
            row: AddressRow::of(AddressKey::stored("a9"), &address(Some("a9"), "Brest")),
            deleted: true,
        });
        let changes = address_changes(AddressesBefore::Stored(&rows), &addresses);
        assert_eq!(written(&changes), [("a1", true)], "a2 is live and the same");
        assert!(changes.gone.is_empty(), "a9 is gone already");
    }

    /// The matching as first written, a scan of every list for every address: what the hash
    /// maps must give, to the row and in the same order.
    mod by_scans {
        use super::*;

        pub(super) fn keyed(addresses: &[CustomerAddress]) -> Vec<(AddressKey, &CustomerAddress)> {
            let mut keyed: Vec<(AddressKey, &CustomerAddress)> = Vec::new();
            for (position, address) in addresses.iter().enumerate() {
                let key = AddressKey::of(position, address);
                keyed.retain(|(known, _)| *known != key);
                keyed.push((key, address));
            }
            keyed
        }

        pub(super) fn changes(
            before: AddressesBefore<'_>,
            addresses: &[CustomerAddress],
        ) -> AddressChanges {
            let keyed = keyed(addresses);
            let mut changes = AddressChanges::default();
            match before {
                AddressesBefore::Document(previous) => {
                    let before = keyed_addresses(previous);
                    for (key, _) in &before {
                        if !keyed.iter().any(|(kept, _)| kept == key) {
                            changes.gone.push(key.clone());
                        }
                    }
                    for (key, address) in keyed {
                        let old = before.iter().find(|(old_key, _)| *old_key == key);
                        if old.is_some_and(|(_, old)| *old == address) {
                            continue;
                        }
                        changes.written.push(AddressWrite {
                            row: AddressRow::of(key, address),
                            stored: old.is_some(),
                        });
                    }
                }
                AddressesBefore::Stored(stored) => {
                    for old in stored.iter().filter(|old| !old.deleted) {
                        if !keyed.iter().any(|(kept, _)| *kept == old.row.key) {
                            changes.gone.push(old.row.key.clone());
                        }
                    }
                    for (key, address) in keyed {
                        let row = AddressRow::of(key, address);
                        let old = stored.iter().find(|old| old.row.key == row.key);
                        if old.is_some_and(|old| !old.deleted && old.row == row) {
                            continue;
                        }
                        changes.written.push(AddressWrite {
                            row,
                            stored: old.is_some(),
                        });
                    }
                }
            }
            changes
        }
    }

    /// `count` addresses drawn from `seed`: some without an id, some with an id that comes
    /// again (one even spelled like a position key, `#3`), over a few cities.
    fn drawn(seed: u64, count: usize) -> Vec<CustomerAddress> {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let mut next = move |below: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % below
        };
        (0..count)
            .map(|_| {
                let id = match next(4) {
                    0 => None,
                    1 => Some("#3".to_string()),
                    _ => Some(format!("a{}", next(count as u64 + 1))),
                };
                address(id.as_deref(), ["Lyon", "Paris", "Nice"][next(3) as usize])
            })
            .collect()
    }

    #[test]
    fn matching_by_hash_maps_gives_what_scanning_gave_up_to_the_limit() {
        use crate::platform::resources::MAX_ENTITY_LIST_ITEMS;
        for seed in 0..40 {
            let sizes = [0, 1, 7, MAX_ENTITY_LIST_ITEMS];
            let (before, after) = (
                drawn(seed, sizes[seed as usize % 4]),
                drawn(seed + 1000, sizes[(seed as usize / 4) % 4]),
            );
            assert_eq!(
                keys(&keyed_addresses(&after)),
                keys(&by_scans::keyed(&after)),
                "seed {seed}"
            );
            let mut rows = stored(&before);
            // Some rows marked gone, and one written twice (as no store keeps it, but the scan
            // took the first).
            for row in rows.iter_mut().step_by(3) {
                row.deleted = true;
            }
            if let Some(first) = rows.first().cloned() {
                let mut again = first;
                again.deleted = !again.deleted;
                rows.push(again);
            }
            for previous in [
                AddressesBefore::Document(&before),
                AddressesBefore::Stored(&rows),
            ] {
                assert_eq!(
                    address_changes(previous, &after),
                    by_scans::changes(previous, &after),
                    "seed {seed}"
                );
            }
        }
    }

    #[test]
    fn a_full_list_of_addresses_without_ids_matches_row_for_row() {
        use crate::platform::resources::MAX_ENTITY_LIST_ITEMS;
        let before: Vec<CustomerAddress> = (0..MAX_ENTITY_LIST_ITEMS)
            .map(|_| CustomerAddress::default())
            .collect();
        let mut after = before.clone();
        after[MAX_ENTITY_LIST_ITEMS - 1].city = Some("Lyon".into());
        let last = format!("#{}", MAX_ENTITY_LIST_ITEMS - 1);
        for changes in [
            address_changes(AddressesBefore::Document(&before), &after),
            address_changes(AddressesBefore::Stored(&stored(&before)), &after),
        ] {
            assert_eq!(written(&changes), [(last.as_str(), true)]);
            assert!(changes.gone.is_empty());
        }
        let changes = address_changes(AddressesBefore::Document(&before), &after[..10]);
        assert!(changes.written.is_empty());
        assert_eq!(changes.gone.len(), MAX_ENTITY_LIST_ITEMS - 10);
        assert_eq!(changes.gone[0].as_str(), "#10");
    }

    #[test]
    fn a_stored_row_that_differs_in_any_column_is_written() {
        let addresses = [address(Some("a1"), "Lyon")];
        let mut rows = stored(&addresses);
        rows[0].row.is_default = true;
        let changes = address_changes(AddressesBefore::Stored(&rows), &addresses);
        assert_eq!(written(&changes), [("a1", true)]);
        assert!(!changes.written[0].row.is_default);
    }
}
