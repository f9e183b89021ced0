//! Records that do not exist (docs/connector.md section 3.7) and deleted ones (section 3.8): 404 for ids the
//! platform does not know, and deletes that take the record out of every operation. The
//! unknown ids are made up for the run, so no existing record is touched.

use serde_json::json;

use super::checks::{
    ADDRESS_NOT_FOUND, ADDRESS_SOFT_DELETE, CUSTOMER_NOT_FOUND, CUSTOMER_SOFT_DELETE,
    ORDER_NOT_FOUND,
};
use super::session::{Call, Session, address_of, listed_by_email, status};
use super::{Outcome, Record, testdata};
use crate::client::Method;

pub(crate) fn run(session: &mut Session, record: &mut Record<'_>) {
    record(&CUSTOMER_NOT_FOUND, customer_not_found(session));
    record(&ADDRESS_NOT_FOUND, address_not_found(session));
    record(&ORDER_NOT_FOUND, order_not_found(session));
    record(&ADDRESS_SOFT_DELETE, address_soft_delete(session));
    record(&CUSTOMER_SOFT_DELETE, customer_soft_delete(session));
}

/// An id no platform assigned.
fn unknown(session: &Session) -> String {
    format!("mercer-conformance-unknown-{}", session.run_id)
}

/// Every call answers 404.
fn all_not_found(session: &mut Session, calls: Vec<Call<'_>>) -> Outcome {
    for call in calls {
        let what = call.what.to_string();
        let answer = session.send(call)?;
        status(&answer, &what, &[404])?;
    }
    Ok(String::new())
}

fn customer_not_found(session: &mut Session) -> Outcome {
    let id = unknown(session);
    let one = ["customers", id.as_str()];
    let validate = ["customers", id.as_str(), "validate"];
    let calls = vec![
        Call::new("Update Customer of an unknown id", Method::Patch, &one)
            .data("customer", json!({"first_name": "Mercer"})),
        Call::new("Delete Customer of an unknown id", Method::Delete, &one),
        Call::new(
            "Validate Customer JWT of an unknown id",
            Method::Post,
            &validate,
        )
        .data("token_info", json!({"token": "mercer-conformance"})),
    ];
    all_not_found(session, calls)
}

fn address_not_found(session: &mut Session) -> Outcome {
    let id = unknown(session);
    let of_unknown = ["customers", id.as_str(), "addresses"];
    let unknown_of_unknown = ["customers", id.as_str(), "addresses", id.as_str()];
    let mut calls = vec![
        Call::new(
            "Create Address of an unknown customer",
            Method::Post,
            &of_unknown,
        )
        .data("address", testdata::address()),
        Call::new(
            "Update Address of an unknown customer",
            Method::Patch,
            &unknown_of_unknown,
        )
        .data("address", json!({"city": "Testville"})),
        Call::new(
            "Delete Address of an unknown customer",
            Method::Delete,
            &unknown_of_unknown,
        ),
    ];
    // An unknown address of a customer that exists, when the run made one.
    let customer = session.customer().ok();
    let unknown_of_known = customer
        .as_ref()
        .map(|customer| ["customers", customer.id(), "addresses", id.as_str()]);
    if let Some(segments) = &unknown_of_known {
        calls.push(
            Call::new(
                "Update Address of an unknown address",
                Method::Patch,
                segments,
            )
            .data("address", json!({"city": "Testville"})),
        );
        calls.push(Call::new(
            "Delete Address of an unknown address",
            Method::Delete,
            segments,
        ));
    }
    all_not_found(session, calls)
}

fn order_not_found(session: &mut Session) -> Outcome {
    let id = unknown(session);
    let one = ["orders", id.as_str()];
    let calls = vec![
        Call::new("Get Order of an unknown id", Method::Get, &one),
        Call::new("Update Order of an unknown id", Method::Patch, &one)
            .data("order", json!({"notes": "mercer conformance"})),
    ];
    all_not_found(session, calls)
}

fn address_soft_delete(session: &mut Session) -> Outcome {
    let customer = session.customer()?;
    let address = session.address()?;
    let segments = ["customers", customer.id(), "addresses", address.id.as_str()];
    let what = "Delete Address";
    let answer = session.send(Call::new(what, Method::Delete, &segments))?;
    status(&answer, what, &[204])?;
    let what = "Update Address of the deleted address";
    let call =
        Call::new(what, Method::Patch, &segments).data("address", json!({"city": "Testville"}));
    let answer = session.send(call)?;
    status(&answer, what, &[404])?;
    for listed in listed_by_email(session, &customer.email)? {
        if address_of(&listed, &address.id).is_some() {
            return Err(format!(
                "List Customers still shows the deleted address {} of {}",
                address.id,
                customer.id()
            ));
        }
    }
    Ok(String::new())
}

fn customer_soft_delete(session: &mut Session) -> Outcome {
    let customer = session.customer()?;
    let segments = ["customers", customer.id()];
    let what = "Delete Customer";
    let answer = session.send(Call::new(what, Method::Delete, &segments))?;
    status(&answer, what, &[204])?;
    if let Some(made) = session.fixtures.customers.first_mut() {
        made.deleted = true;
    }
    let listed = listed_by_email(session, &customer.email)?;
    if !listed.is_empty() {
        return Err(format!(
            "List Customers (email={}) still shows the deleted customer",
            customer.email
        ));
    }
    let what = "Update Customer of the deleted customer";
    let call =
        Call::new(what, Method::Patch, &segments).data("customer", json!({"first_name": "Mercer"}));
    let answer = session.send(call)?;
    status(&answer, what, &[404])?;
    Ok(String::new())
}
