//! The rules of erasing: which values are personal, and what replaces them.
//!
//! Text values are replaced whole, never cut: a JSON document keeps its shape (only its string
//! values change), and any other text that mentions the customer becomes the placeholder.

use serde_json::Value;

use crate::kernel::ids::CustomerId;
use crate::privacy::repository::PersonalRecord;

/// What replaces a personal text value.
pub const PLACEHOLDER: &str = "redacted";

/// What replaces a customer's email address: unique per customer, and at a domain that never
/// receives mail.
pub fn email_placeholder(customer: CustomerId) -> String {
    format!("redacted+{}@invalid", customer.0)
}

/// The keys of a JSON document whose string values are personal in a record of the customer.
const PERSONAL_KEYS: &[&str] = &[
    "email",
    "first_name",
    "last_name",
    "firstName",
    "lastName",
    "full_name",
    "phone",
    "company",
    "street_1",
    "street_2",
    "street1",
    "street2",
    "address1",
    "address2",
    "street",
    "streetLine1",
    "streetLine2",
    "city",
    "postal_code",
    "postalCode",
    "zip",
    "note",
    "notes",
];

/// Values short enough to occur by chance inside other words are matched whole only.
const MIN_STRONG_CHARS: usize = 4;

/// The customer's personal values, lower-case: `strong` ones are distinctive enough to find
/// inside a longer text, `weak` ones (a first name, a city) are matched whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needles {
    /// The customer's email address (lower-case).
    pub email: String,
    /// Found inside texts: email, phone, full name, street lines.
    pub strong: Vec<String>,
    /// Matched whole: names, cities, postal codes, companies.
    pub weak: Vec<String>,
}

impl Needles {
    /// The personal values of `record` and of its addresses.
    pub fn of(record: &PersonalRecord) -> Self {
        let mut needles = Needles {
            email: record.email.trim().to_lowercase(),
            ..Needles::default()
        };
        needles.add_strong(&record.email);
        needles.add_strong(&record.phone);
        needles.add_strong(&format!("{} {}", record.first_name, record.last_name));
        needles.add_weak(&record.first_name);
        needles.add_weak(&record.last_name);
        for (_, document) in &record.addresses {
            let Ok(Value::Object(address)) = serde_json::from_str::<Value>(document) else {
                continue;
            };
            let text = |key: &str| address.get(key).and_then(Value::as_str).unwrap_or("");
            for key in [
                "street_1", "street_2", "address1", "address2", "email", "phone",
            ] {
                needles.add_strong(text(key));
            }
            needles.add_strong(&format!("{} {}", text("first_name"), text("last_name")));
            for key in [
                "first_name",
                "last_name",
                "company",
                "city",
                "postal_code",
                "zip",
            ] {
                needles.add_weak(text(key));
            }
        }
        needles
    }

    fn add_strong(&mut self, value: &str) {
        let value = value.trim().to_lowercase();
        if value.chars().count() >= MIN_STRONG_CHARS && !self.strong.contains(&value) {
            self.strong.push(value);
        } else {
            self.add_weak(&value);
        }
    }

    fn add_weak(&mut self, value: &str) {
        let value = value.trim().to_lowercase();
        if !value.is_empty() && !self.weak.contains(&value) && !self.strong.contains(&value) {
            self.weak.push(value);
        }
    }

    /// Whether `text` is, or holds, one of the customer's values.
    pub fn matches(&self, text: &str) -> bool {
        let lower = text.trim().to_lowercase();
        if lower.is_empty() {
            return false;
        }
        self.weak.contains(&lower) || self.strong.iter().any(|needle| lower.contains(needle))
    }

    /// Whether `value` is the customer's email address.
    fn is_email(&self, value: &Value) -> bool {
        let text = value.as_str().unwrap_or("").trim();
        !self.email.is_empty() && text.eq_ignore_ascii_case(&self.email)
    }

    /// The placeholder of a text that matched: the email placeholder for the email itself.
    fn replacement(&self, text: &str, customer: CustomerId) -> String {
        if !self.email.is_empty() && text.trim().eq_ignore_ascii_case(&self.email) {
            email_placeholder(customer)
        } else {
            PLACEHOLDER.to_string()
        }
    }
}

/// `text` with every value of the customer replaced; with `owned`, every value under a
/// personal key as well. A JSON document stays JSON; other text is replaced whole.
pub fn scrub_text(text: &str, needles: &Needles, customer: CustomerId, owned: bool) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(mut value @ (Value::Object(_) | Value::Array(_))) => {
            scrub_value(&mut value, needles, customer, owned, false);
            value.to_string()
        }
        _ if needles.matches(text) => needles.replacement(text, customer),
        _ => text.to_string(),
    }
}

fn scrub_value(
    value: &mut Value,
    needles: &Needles,
    customer: CustomerId,
    owned: bool,
    personal_key: bool,
) {
    match value {
        Value::String(text) => {
            if personal_key && !text.trim().is_empty() {
                *text = if text.contains('@') {
                    email_placeholder(customer)
                } else {
                    PLACEHOLDER.to_string()
                };
            } else if needles.matches(text) {
                *text = needles.replacement(text, customer);
            }
        }
        Value::Array(items) => {
            for item in items {
                scrub_value(item, needles, customer, owned, personal_key);
            }
        }
        Value::Object(map) => {
            // An object that holds the customer's email is a record of the customer's.
            let owned = owned || map.values().any(|v| needles.is_email(v));
            for (key, item) in map.iter_mut() {
                let personal = owned && PERSONAL_KEYS.contains(&key.as_str());
                scrub_value(item, needles, customer, owned, personal);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The customer's record with every personal value erased (ids and times kept).
pub fn erased(record: &PersonalRecord, needles: &Needles) -> PersonalRecord {
    let blank = |value: &str| {
        if value.trim().is_empty() {
            String::new()
        } else {
            PLACEHOLDER.to_string()
        }
    };
    let id = record.customer_id;
    PersonalRecord {
        customer_id: id,
        platform_id: record.platform_id.clone(),
        email: email_placeholder(id),
        first_name: blank(&record.first_name),
        last_name: blank(&record.last_name),
        phone: blank(&record.phone),
        pii_redacted_at: record.pii_redacted_at,
        document: (record.document.as_deref()).map(|text| scrub_text(text, needles, id, true)),
        addresses: (record.addresses.iter())
            .map(|(row, text)| (*row, scrub_text(text, needles, id, true)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> PersonalRecord {
        PersonalRecord {
            customer_id: CustomerId(7),
            platform_id: Some("c-1".into()),
            email: "Zelda.Quark@example.com".into(),
            first_name: "Zelda".into(),
            last_name: "Quark".into(),
            phone: "+15550001234".into(),
            pii_redacted_at: None,
            document: Some(r#"{"email":"zelda.quark@example.com","first_name":"Zelda"}"#.into()),
            addresses: vec![(
                3,
                r#"{"street_1":"12 Wibble Lane","city":"Ostrava","country_code":"CZ"}"#.into(),
            )],
        }
    }

    #[test]
    fn mentions_lose_the_customers_values_and_keep_the_rest() {
        let record = record();
        let needles = Needles::of(&record);
        let payload = r#"{"id":5,"total":1250,"customer":{"email":"ZELDA.QUARK@example.com",
            "name":"Zelda Quark","city":"Ostrava","note":"ship to 12 wibble lane please",
            "sku":"ZELDA-TEA"},"currency":"EUR"}"#;
        let out: Value = serde_json::from_str(&scrub_text(payload, &needles, CustomerId(7), false))
            .expect("json");
        assert_eq!(out["customer"]["email"], "redacted+7@invalid");
        assert_eq!(out["customer"]["name"], "redacted");
        assert_eq!(out["customer"]["city"], "redacted");
        assert_eq!(out["customer"]["note"], "redacted");
        // A product code that merely contains the first name is not the customer's.
        assert_eq!(out["customer"]["sku"], "ZELDA-TEA");
        assert_eq!(out["total"], 1250);
        let record_of_theirs =
            r#"{"customer":{"email":"zelda.quark@example.com","notes":"call Zelda"}}"#;
        let theirs = scrub_text(record_of_theirs, &needles, CustomerId(7), false);
        assert!(!theirs.to_lowercase().contains("zelda"), "{theirs}");
        assert_eq!(out["currency"], "EUR");
        assert_eq!(
            scrub_text("Zelda Quark", &needles, CustomerId(7), false),
            "redacted"
        );
        assert_eq!(scrub_text("paid", &needles, CustomerId(7), false), "paid");
    }

    #[test]
    fn own_records_lose_every_personal_key() {
        let record = record();
        let needles = Needles::of(&record);
        let out = erased(&record, &needles);
        assert_eq!(out.email, "redacted+7@invalid");
        assert_eq!(out.first_name, "redacted");
        let address: Value = serde_json::from_str(&out.addresses[0].1).expect("json");
        assert_eq!(address["street_1"], "redacted");
        assert_eq!(address["city"], "redacted");
        assert_eq!(address["country_code"], "CZ");
        let document = out.document.expect("document");
        assert!(!document.to_lowercase().contains("zelda"), "{document}");
    }
}
