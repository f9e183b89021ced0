//! The checks that write test records (docs/connector.md sections 3.2, 3.4, 3.5 and 3.6): creates,
//! partial updates, Create Order's idempotency and Validate Customer JWT. The records they make
//! are marked as test data (`testdata`) and removed at the end of the run.

use mercer_domain::platform::resources::{Customer, CustomerAddress, Order};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::checks::{
    ADDRESS_PARTIAL_UPDATE, CREATE_ADDRESS, CREATE_CUSTOMER, CREATE_ORDER, CUSTOMER_PARTIAL_UPDATE,
    ORDER_IDEMPOTENCY, ORDER_PARTIAL_UPDATE, VALIDATE_CUSTOMER_JWT,
};
use super::session::{
    Call, Made, Session, TestCustomer, address_of, as_json, entity, json, kept, listed_by_email,
    status,
};
use super::{CustomerToken, Outcome, Record, absence, testdata};
use crate::client::Method;

/// Customers made: enough for List Customers to page over three records in an empty shop.
const TEST_CUSTOMERS: usize = 3;

/// The creates, when the connector passed the verification echo (otherwise nothing is written
/// to it: Mercer would not register it).
pub(crate) fn create(session: &mut Session, verified: bool, record: &mut Record<'_>) {
    if !verified {
        let reason = "not run: verification-echo failed, and no test data is written to a \
                      connector Mercer would not register";
        for check in [&CREATE_CUSTOMER, &CREATE_ADDRESS, &CREATE_ORDER] {
            record(check, Err(reason.to_string()));
        }
        return;
    }
    record(&CREATE_CUSTOMER, create_customers(session));
    record(&CREATE_ADDRESS, create_address(session));
    record(&CREATE_ORDER, create_order(session));
}

/// The checks on the records made, then the not-found and delete checks.
pub(crate) fn run(session: &mut Session, token: Option<&CustomerToken>, record: &mut Record<'_>) {
    record(&CUSTOMER_PARTIAL_UPDATE, customer_partial_update(session));
    record(&ADDRESS_PARTIAL_UPDATE, address_partial_update(session));
    record(&ORDER_PARTIAL_UPDATE, order_partial_update(session));
    record(&ORDER_IDEMPOTENCY, order_idempotency(session));
    record(&VALIDATE_CUSTOMER_JWT, validate(session, token));
    absence::run(session, record);
}

/// Every field of `sent` (or only `fields`) answered as sent.
fn echoed(sent: &Value, answered: &Value, fields: Option<&[&str]>) -> Result<(), String> {
    for (field, value) in sent.as_object().into_iter().flatten() {
        if fields.is_some_and(|fields| !fields.contains(&field.as_str())) {
            continue;
        }
        let got = answered.get(field).unwrap_or(&Value::Null);
        if got != value {
            return Err(format!(
                "{field} was answered as {got}, not the {value} sent"
            ));
        }
    }
    Ok(())
}

/// Sends a create and reads its answer: 201, `data.{key}` as `T` with a platform id.
fn created<T: DeserializeOwned + Serialize>(
    session: &mut Session,
    call: Call<'_>,
    key: &str,
) -> Result<(String, T, Value), String> {
    let what = call.what.to_string();
    let answer = session.send(call)?;
    status(&answer, &what, &[201])?;
    let made: T = entity(&answer, &what, key)?;
    let value = as_json(&made);
    let id = match value.get("platform_id") {
        Some(Value::String(id)) if !id.trim().is_empty() => id.clone(),
        _ => return Err(format!("{what}: the answer's {key} has no platform_id")),
    };
    Ok((id, made, value))
}

fn create_customers(session: &mut Session) -> Outcome {
    let what = "Create Customer";
    for n in 1..=TEST_CUSTOMERS {
        let email = testdata::email(&session.run_id, n);
        session.fixtures.emails.push(email.clone());
        let sent = testdata::customer(&email);
        let call = Call::new(what, Method::Post, &["customers"]).data("customer", sent.clone());
        let (id, customer, value) = created::<Customer>(session, call, "customer")?;
        if session.fixtures.customers.iter().any(|c| c.id() == id) {
            return Err(format!(
                "{what} answered {id} twice: platform ids are unique"
            ));
        }
        session.fixtures.customers.push(TestCustomer {
            made: Made {
                id,
                sent: sent.clone(),
                created: value.clone(),
            },
            email,
            deleted: false,
        });
        if customer.platform_created_at.is_none() || customer.platform_updated_at.is_none() {
            return Err(format!(
                "{what}: the answer lacks platform_created_at or platform_updated_at"
            ));
        }
        echoed(&sent, &value, None).map_err(|reason| format!("{what}: {reason}"))?;
    }
    Ok(String::new())
}

fn create_address(session: &mut Session) -> Outcome {
    let customer = session.customer()?;
    let what = "Create Address";
    let sent = testdata::address();
    let segments = ["customers", customer.id(), "addresses"];
    let call = Call::new(what, Method::Post, &segments).data("address", sent.clone());
    let (id, address, value) = created::<CustomerAddress>(session, call, "address")?;
    session.fixtures.address = Some(Made {
        id,
        sent: sent.clone(),
        created: value.clone(),
    });
    let owner = address.platform_customer_id.as_ref().map(|id| id.as_str());
    if owner != Some(customer.id()) {
        return Err(format!(
            "{what}: platform_customer_id is {owner:?}, not {}",
            customer.id()
        ));
    }
    echoed(&sent, &value, None).map_err(|reason| format!("{what}: {reason}"))?;
    Ok(String::new())
}

/// Create Order's Idempotency-Key in this run.
fn idempotency_key(session: &Session) -> String {
    format!("mercer-conformance-{}", session.run_id)
}

fn create_order(session: &mut Session) -> Outcome {
    let customer = session.customer()?;
    let what = "Create Order";
    let sent = testdata::order(&session.run_id, customer.id());
    let key = idempotency_key(session);
    let call = Call::new(what, Method::Post, &["orders"])
        .data("order", sent.clone())
        .idempotency_key(&key);
    let (id, order, value) = created::<Order>(session, call, "order")?;
    session.fixtures.order = Some(Made {
        id,
        sent: sent.clone(),
        created: value.clone(),
    });
    if order.platform_updated_at.is_none() {
        return Err(format!("{what}: the answer has no platform_updated_at"));
    }
    echoed(&sent, &value, Some(testdata::ORDER_FIELDS_KEPT))
        .map_err(|reason| format!("{what}: {reason}"))?;
    Ok(String::new())
}

/// Sends a one-field update and checks the answer, then `stored` (the record read back).
fn partial_update<T: DeserializeOwned + Serialize>(
    session: &mut Session,
    call: Call<'_>,
    key: &str,
    made: &Made,
    (field, value): (&str, Value),
) -> Result<(), String> {
    let what = call.what.to_string();
    let answer = session.send(call.data(key, json!({ field: value.clone() })))?;
    status(&answer, &what, &[200])?;
    let updated: T = entity(&answer, &what, key)?;
    kept(&made.sent, &made.created, &as_json(&updated), field, &value)
        .map_err(|reason| format!("{what}'s answer: {reason}"))
}

fn customer_partial_update(session: &mut Session) -> Outcome {
    let customer = session.customer()?;
    let change = ("last_name", json!("Conformance-Updated"));
    let segments = ["customers", customer.id()];
    let call = Call::new("Update Customer", Method::Patch, &segments);
    partial_update::<Customer>(session, call, "customer", &customer.made, change.clone())?;
    let stored = only(listed_by_email(session, &customer.email)?, &customer.email)?;
    kept(
        &customer.made.sent,
        &customer.made.created,
        &as_json(&stored),
        change.0,
        &change.1,
    )
    .map_err(|reason| format!("as List Customers shows it: {reason}"))?;
    Ok(String::new())
}

/// The one customer a List Customers by email answered.
fn only(mut listed: Vec<Customer>, email: &str) -> Result<Customer, String> {
    match listed.len() {
        1 => Ok(listed.remove(0)),
        count => Err(format!(
            "List Customers (email={email}) answered {count} customers, not 1"
        )),
    }
}

fn address_partial_update(session: &mut Session) -> Outcome {
    let customer = session.customer()?;
    let address = session.address()?;
    let change = ("city", json!("Testville-Updated"));
    let segments = ["customers", customer.id(), "addresses", &address.id];
    let call = Call::new("Update Address", Method::Patch, &segments);
    partial_update::<CustomerAddress>(session, call, "address", &address, change.clone())?;
    let owner = only(listed_by_email(session, &customer.email)?, &customer.email)?;
    let stored = address_of(&owner, &address.id)
        .ok_or_else(|| format!("the customer's addresses no longer hold {}", address.id))?;
    kept(
        &address.sent,
        &address.created,
        &as_json(&stored),
        change.0,
        &change.1,
    )
    .map_err(|reason| format!("as List Customers shows it: {reason}"))?;
    Ok(String::new())
}

fn order_partial_update(session: &mut Session) -> Outcome {
    let order = session.order()?;
    let change = (
        "notes",
        json!("A test order made by mercer conformance (updated): safe to delete."),
    );
    let segments = ["orders", order.id.as_str()];
    let call = Call::new("Update Order", Method::Patch, &segments);
    partial_update::<Order>(session, call, "order", &order, change.clone())?;
    let what = "Get Order";
    let answer = session.send(Call::new(what, Method::Get, &segments))?;
    status(&answer, what, &[200])?;
    let stored: Order = entity(&answer, what, "order")?;
    kept(
        &order.sent,
        &order.created,
        &as_json(&stored),
        change.0,
        &change.1,
    )
    .map_err(|reason| format!("as Get Order shows it: {reason}"))?;
    Ok(String::new())
}

fn order_idempotency(session: &mut Session) -> Outcome {
    let order = session.order()?;
    let what = "Create Order again with the same Idempotency-Key";
    let key = idempotency_key(session);
    let call = Call::new(what, Method::Post, &["orders"])
        .data("order", order.sent.clone())
        .idempotency_key(&key);
    let answer = session.send(call)?;
    status(&answer, what, &[200, 201])?;
    let again: Order = entity(&answer, what, "order")?;
    let id = again
        .platform_id
        .map(|id| id.to_string())
        .unwrap_or_default();
    if id != order.id {
        if !id.is_empty() {
            session.fixtures.extra_orders.push(id.clone());
        }
        return Err(format!(
            "{what} answered order {id:?}, not the first one ({})",
            order.id
        ));
    }
    Ok(String::new())
}

/// Validate Customer JWT's answer for `token` and customer `id`.
fn active(session: &mut Session, id: &str, token: &str) -> Result<bool, String> {
    let what = "Validate Customer JWT";
    let segments = ["customers", id, "validate"];
    let call =
        Call::new(what, Method::Post, &segments).data("token_info", json!({ "token": token }));
    let answer = session.send(call)?;
    status(&answer, what, &[200])?;
    json(&answer, what)?
        .pointer("/data/token_status/active")
        .and_then(Value::as_bool)
        .ok_or_else(|| format!("{what}: the answer has no boolean data.token_status.active"))
}

/// A token never issued is not active; with a customer's real token, it is active for that
/// customer and for no other.
fn validate(session: &mut Session, token: Option<&CustomerToken>) -> Outcome {
    let customer = session.customer()?;
    let never_issued = format!("mercer-conformance-not-a-token-{}", session.run_id);
    if active(session, customer.id(), &never_issued)? {
        return Err(format!(
            "a token the platform never issued is active for {}",
            customer.id()
        ));
    }
    let Some(token) = token else {
        return Ok("no customer token given: only an inactive token was tried".to_string());
    };
    if !active(session, &token.platform_customer_id, &token.token)? {
        return Err(format!(
            "the customer token given is not active for its customer {}",
            token.platform_customer_id
        ));
    }
    if active(session, customer.id(), &token.token)? {
        return Err(format!(
            "the token of customer {} is active for customer {}: a token is its customer's only",
            token.platform_customer_id,
            customer.id()
        ));
    }
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoed_fields_are_compared_as_sent() {
        let sent = json!({"test": true, "notes": "n", "total": "0.00"});
        let normalised = json!({"test": true, "notes": "n", "total": "0"});
        assert!(echoed(&sent, &normalised, None).is_err());
        assert_eq!(echoed(&sent, &normalised, Some(&["test", "notes"])), Ok(()));
        let lost = json!({"notes": "n"});
        let reason = echoed(&sent, &lost, Some(&["test"])).unwrap_err();
        assert_eq!(reason, "test was answered as null, not the true sent");
    }
}
