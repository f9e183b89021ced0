//! The checks' test data (docs/connector.md section 6.3): how each record is marked, and its removal
//! at the end of the run, whatever the checks found.

use serde_json::{Value, json};

use super::Outcome;
use super::session::{Call, Session, listed_by_email, status};
use crate::client::Method;

/// The email domain of every test customer: `.test` is reserved (RFC 2606), so no mail to
/// these addresses can reach anyone, and a platform's staff can find them all by it.
pub const TEST_EMAIL_DOMAIN: &str = "conformance.mercer.test";

/// The `n`th test customer's email in run `run_id`.
pub(crate) fn email(run_id: &str, n: usize) -> String {
    format!("mercer-conformance-{run_id}-{n}@{TEST_EMAIL_DOMAIN}")
}

/// A test customer, as Create Customer is sent it. The phone is one of the 555-01xx numbers
/// reserved for fiction.
pub(crate) fn customer(email: &str) -> Value {
    json!({
        "email": email,
        "first_name": "Mercer",
        "last_name": "Conformance",
        "phone": "+15555550100",
    })
}

/// A test address, as Create Address is sent it.
pub(crate) fn address() -> Value {
    json!({
        "address_type": "shipping",
        "first_name": "Mercer",
        "last_name": "Conformance",
        "company": "Mercer conformance test data",
        "street_1": "1 Conformance Way",
        "city": "Testville",
        "province": "Oregon",
        "province_code": "OR",
        "country": "United States",
        "country_code": "US",
        "postal_code": "97000",
        "phone": "+15555550100",
    })
}

/// A test order of the test customer: `test: true`, a note and a custom attribute that say so,
/// no lines and nothing to pay.
pub(crate) fn order(run_id: &str, customer_id: &str) -> Value {
    json!({
        "test": true,
        "platform_customer_id": customer_id,
        "notes": "A test order made by mercer conformance: safe to delete.",
        "created_via": "mercer-conformance",
        "source": "mercer-conformance",
        "custom_attributes": {
            "mercer_conformance": {"description": "made by mercer conformance", "value": run_id}
        },
        "currency": "USD",
        "subtotal": "0.00",
        "total_tax": "0.00",
        "total": "0.00",
    })
}

/// The fields of [`order`] Create Order must answer as sent (a platform may number, price and
/// normalise the rest its own way).
pub(crate) const ORDER_FIELDS_KEPT: &[&str] =
    &["test", "platform_customer_id", "notes", "custom_attributes"];

/// Deletes every test customer of the run (and so their addresses): the ones whose creation
/// was answered, and any the connector made though its answer was lost (found by email). Then
/// checks that List Customers no longer shows any of them.
pub(crate) fn remove(session: &mut Session) -> Outcome {
    let emails = session.fixtures.emails.clone();
    if emails.is_empty() {
        return Ok("no test data was written".to_string());
    }
    let mut problems = Vec::new();
    let known: Vec<String> = session
        .fixtures
        .customers
        .iter()
        .filter(|customer| !customer.deleted)
        .map(|customer| customer.id().to_string())
        .collect();
    for id in known {
        problems.extend(delete_customer(session, &id).err());
    }
    for email in &emails {
        match listed_by_email(session, email) {
            Ok(found) => {
                let ids = found.iter().filter(|c| c.email.as_deref() == Some(email));
                let ids: Vec<String> = ids
                    .filter_map(|c| c.platform_id.as_ref().map(|id| id.to_string()))
                    .collect();
                for id in ids {
                    let known = session.fixtures.customers.iter().any(|c| c.id() == id);
                    if known {
                        problems.push(format!("{email} ({id}) is still listed after its deletion"));
                    } else {
                        // Made though its answer was lost (a timeout): deleted now.
                        problems.extend(delete_customer(session, &id).err());
                    }
                }
            }
            Err(reason) => problems.push(reason),
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let left = session.left_on_platform();
    Ok(match left.is_empty() {
        true => String::new(),
        false => format!("left on the platform: {}", left.join(", ")),
    })
}

fn delete_customer(session: &mut Session, id: &str) -> Result<(), String> {
    let what = format!("Delete Customer {id}");
    let answer = session.send(Call::new(&what, Method::Delete, &["customers", id]))?;
    // 404: it was gone already.
    status(&answer, &what, &[204, 200, 404])?;
    if let Some(customer) = session.fixtures.customers.iter_mut().find(|c| c.id() == id) {
        customer.deleted = true;
    }
    Ok(())
}
