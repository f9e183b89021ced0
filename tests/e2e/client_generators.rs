//! The published OpenAPI document (`docs/openapi.json`) as client tooling reads it: Redocly's
//! linter finds no error in it with its recommended rules, and openapi-python-client makes
//! every operation of it into a Python client that then drives a real `mercer`: a
//! subscription group, subscriptions paged with the cursor, the directory's customers, a box
//! with a time slot.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use mercer_tests::openapi_clients::{
    PythonClient, generate_python_client, install, lint, operation_count,
};
use mercer_tests::{Backend, MercerServer, backend_tests};
use serde_json::Value;

use crate::subscriptions::running_rule;

fn published_document() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json")
}

/// Writes past the test harness's capture, so the lines show in every run (warnings are
/// allowed, but said).
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

#[test]
fn redocly_finds_no_error_in_the_published_document() {
    let tools = install()
        .as_ref()
        .unwrap_or_else(|error| panic!("installing the OpenAPI tools failed: {error}"));
    let problems = lint(tools, &published_document()).unwrap();
    let (errors, warnings): (Vec<_>, Vec<_>) = problems
        .iter()
        .partition(|problem| problem.severity == "error");
    for warning in &warnings {
        say(&format!("redocly lint docs/openapi.json: {warning}"));
    }
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(
        errors.is_empty(),
        "redocly lint finds {} errors in docs/openapi.json:\n{}",
        errors.len(),
        errors.join("\n")
    );
}

/// The Python client of the published document, generated once per test run.
fn python_client() -> &'static PythonClient {
    static CLIENT: OnceLock<Result<PythonClient, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let tools = install().as_ref().map_err(Clone::clone)?;
            generate_python_client(tools, &published_document(), "python")
        })
        .as_ref()
        .unwrap_or_else(|error| panic!("generating the Python client failed: {error}"))
}

#[test]
fn openapi_python_client_makes_every_operation_of_the_published_document() {
    let document: Value =
        serde_json::from_str(&std::fs::read_to_string(published_document()).unwrap()).unwrap();
    let client = python_client();
    assert!(
        client.warnings.is_empty(),
        "openapi-python-client left something out:\n{}\n\nits whole output:\n{}",
        client.warnings.join("\n"),
        client.output
    );
    let expected = operation_count(&document);
    assert!(expected > 100, "the document has {expected} operations");
    assert_eq!(
        client.operations, expected,
        "the generated client has {} of the document's {expected} operations:\n{}",
        client.operations, client.output
    );
}

/// Run with the generated client's package importable: `BASE_URL SHOP TOKEN RULE`.
const FLOW: &str = r#"
import sys

from mercer_client import AuthenticatedClient
from mercer_client.api.box_builder_boxes import create_box
from mercer_client.api.box_builder_time_slots import create_time_slot
from mercer_client.api.customer_directory import list_directory_customers
from mercer_client.api.subscription_groups import create_subscription_group
from mercer_client.api.subscriptions import create_subscription, list_subscriptions
from mercer_client.models import (
    BoxAnswer, BoxRequest, DirectoryCustomerList, GroupAnswer, GroupRequest, SubscriptionAnswer,
    SubscriptionCreateRequest, SubscriptionList, TimeSlotCreated, TimeSlotRequest,
)
from mercer_client.types import UNSET

base_url, shop, token, rule = sys.argv[1:5]
VERSION = "2024-06-01"
client = AuthenticatedClient(base_url=base_url, token=token)


def expect(answer, status, kind):
    assert answer.status_code == status, (answer.status_code, answer.content)
    assert isinstance(answer.parsed, kind), (type(answer.parsed), answer.content)
    return answer.parsed


group = expect(
    create_subscription_group.sync_detailed(
        shop, client=client, svc_api_version_date=VERSION,
        body=GroupRequest.from_dict({"subscription_group": {
            "name": "Coffee club", "percent_discount": 15,
            "billing_rules": [{"interval_number": 2, "interval_type": "week"}]}})),
    201, GroupAnswer).subscription_group
assert group.name == "Coffee club", group
assert len(group.billing_rules) == 1, group.billing_rules
assert group.billing_rules[0].interval_number == 2, group.billing_rules

made = []
for n in range(3):
    body = SubscriptionCreateRequest.from_dict({
        "customer": {"email": f"client{n}@example.com", "first_name": "Ada"},
        "subscription": {
            "order_rrule": rule,
            "line_items": [{"platform_product_id": "101", "platform_variant_id": "201",
                            "quantity": 2, "price": 1299}],
            "shipping_address": {"street1": "1 Main St", "city": "Springfield",
                                 "country_code": "US"}}})
    subscription = expect(
        create_subscription.sync_detailed(
            shop, client=client, body=body, svc_api_version_date=VERSION),
        200, SubscriptionAnswer).subscription
    assert subscription.line_items[0].quantity == 2, subscription.line_items
    made.append(subscription.id)

seen, pages, cursor = [], 0, UNSET
while True:
    page = expect(
        list_subscriptions.sync_detailed(
            shop, client=client, limit=2, cursor=cursor, svc_api_version_date=VERSION),
        200, SubscriptionList)
    pages += 1
    assert page.pagination.total == 3, page.pagination
    seen += [subscription.id for subscription in page.subscriptions]
    if not isinstance(page.pagination.next_, str):
        break
    cursor = page.pagination.next_
    assert pages < 5, "the cursor does not end"
assert pages == 2, pages
assert sorted(seen) == sorted(made), (seen, made)

customers = expect(
    list_directory_customers.sync_detailed(
        shop, client=client, svc_api_version_date=VERSION),
    200, DirectoryCustomerList).customers
assert sorted(c.email for c in customers) == [
    f"client{n}@example.com" for n in range(3)], customers
for customer in customers:
    assert isinstance(customer.groups, list), customer.groups

box = expect(
    create_box.sync_detailed(
        shop, client=client, svc_api_version_date=VERSION,
        body=BoxRequest.from_dict({"box": {
            "svc_subscription_group_id": group.id, "box_name": "Veg box"}})),
    201, BoxAnswer).data.box
assert box.box_name == "Veg box", box
assert box.svc_subscription_group_id == group.id, box

slot = expect(
    create_time_slot.sync_detailed(
        shop, box.id, client=client, svc_api_version_date=VERSION,
        body=TimeSlotRequest.from_dict({"time_slot": {
            "time_slot_name": "Week 1",
            "visibility_date": "2030-01-01T00:00:00Z",
            "selection_deadline_date": "2030-01-04T00:00:00Z",
            "start_date": "2030-01-07T00:00:00Z",
            "end_date": "2030-01-13T23:59:59Z"}})),
    201, TimeSlotCreated).data.time_slot
assert slot.time_slot_name == "Week 1", slot
assert slot.start_date.isoformat() == "2030-01-07T00:00:00+00:00", slot.start_date

print(f"flow done: group {group.id}, subscriptions {made}, box {box.id}, slot {slot.id}")
"#;

fn a_generated_python_client_drives_a_real_server(backend: Backend) {
    let client = python_client();
    let server = MercerServer::start(backend);
    let demo = server.demo().clone();
    let python = &install().as_ref().unwrap().python;
    let output = Command::new(python)
        .env("PYTHONPATH", &client.path)
        .args(["-c", FLOW])
        .args([&server.base_url, &demo.shop, &demo.token, &running_rule()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the Python flow failed:\n{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("flow done"), "{stdout}");
}

backend_tests!(a_generated_python_client_drives_a_real_server);

/// The Python name openapi-python-client gives a JSON property or a schema's module
/// (`camelCase` and `snake_case` alike become `snake_case`; it adds a trailing `_` to a Python
/// keyword or builtin, which the caller allows for).
fn python_attribute(property: &str) -> String {
    let mut name = String::new();
    for (index, c) in property.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if index > 0 {
                name.push('_');
            }
            name.push(c.to_ascii_lowercase());
        } else if c.is_ascii_alphanumeric() {
            name.push(c);
        } else {
            name.push('_');
        }
    }
    name
}

/// Every request schema that lists required fields becomes a Python model whose required
/// attributes are plain (a client must give them), and whose other attributes may be `UNSET`.
#[test]
fn openapi_python_client_marks_required_fields_required() {
    let document: Value =
        serde_json::from_str(&std::fs::read_to_string(published_document()).unwrap()).unwrap();
    let client = python_client();
    let models = client.path.join(&client.package).join("models");
    let schemas = document["components"]["schemas"].as_object().unwrap();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (name, schema) in schemas {
        let Some(required) = schema["required"].as_array() else {
            continue;
        };
        let file = models.join(format!("{}.py", python_attribute(name)));
        let Ok(model) = std::fs::read_to_string(&file) else {
            continue;
        };
        for field in required.iter().filter_map(Value::as_str) {
            let attribute = python_attribute(field);
            let declared = model.lines().find(|line| {
                let line = line.trim_start();
                line.starts_with(&format!("{attribute}: "))
                    || line.starts_with(&format!("{attribute}_: "))
            });
            match declared {
                Some(line) if !line.contains("Unset") => checked += 1,
                other => wrong.push(format!("{name}.{field}: {other:?} in {}", file.display())),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "required fields the client leaves optional:\n{}",
        wrong.join("\n")
    );
    // The request bodies' required fields are among them (the box's name, the group's name …).
    assert!(
        checked > 100,
        "only {checked} required fields were found in the models"
    );
    let box_fields = std::fs::read_to_string(models.join("box_fields.py")).unwrap();
    assert!(box_fields.contains("    box_name: str\n"), "{box_fields}");
    assert!(
        box_fields.contains("attributes: ") && box_fields.contains("Unset"),
        "{box_fields}"
    );
}
