//! One conformance run's connection to the connector: calls sent through the client's signing
//! and sending code, every answer noted for the JSON check, and the test records made so far.

use mercer_domain::access::credentials::{Secret, random_hex};
use mercer_domain::platform::connector::{ConnectorError, ConnectorTarget};
use mercer_domain::platform::resources::{Customer, CustomerAddress};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Config, Outcome};
use crate::HttpConnector;
use crate::client::{self, Answer, Method, Request, Signing};

/// One call of a check: the operation's name (for messages) and what to send.
pub(crate) struct Call<'a> {
    pub what: &'a str,
    pub method: Method,
    pub segments: &'a [&'a str],
    pub query: &'a [(&'a str, &'a str)],
    pub body: Option<Value>,
    pub idempotency_key: Option<&'a str>,
}

impl<'a> Call<'a> {
    pub fn new(what: &'a str, method: Method, segments: &'a [&'a str]) -> Call<'a> {
        Call {
            what,
            method,
            segments,
            query: &[],
            body: None,
            idempotency_key: None,
        }
    }

    pub fn query(self, query: &'a [(&'a str, &'a str)]) -> Call<'a> {
        Call { query, ..self }
    }

    /// The body `{"data": {key: value}}`.
    pub fn data(self, key: &str, value: Value) -> Call<'a> {
        let body = serde_json::json!({ "data": { key: value } });
        Call {
            body: Some(body),
            ..self
        }
    }

    pub fn idempotency_key(self, key: &'a str) -> Call<'a> {
        Call {
            idempotency_key: Some(key),
            ..self
        }
    }
}

/// A test record the run made: its platform id, what was sent to create it, and what the
/// create answered (the fields a partial update must leave as they were).
#[derive(Debug, Clone)]
pub(crate) struct Made {
    pub id: String,
    pub sent: Value,
    pub created: Value,
}

/// A test customer the run made, and whether it has been deleted since.
#[derive(Debug, Clone)]
pub(crate) struct TestCustomer {
    pub made: Made,
    pub email: String,
    pub deleted: bool,
}

impl TestCustomer {
    pub fn id(&self) -> &str {
        &self.made.id
    }
}

/// The test records of the run.
#[derive(Debug, Default)]
pub(crate) struct Fixtures {
    /// Every email a Create Customer was sent with, answered or not: the clean-up looks for
    /// each, since a call that timed out may still have created its customer.
    pub emails: Vec<String>,
    /// The customers made, the first one the customer of the address and the order.
    pub customers: Vec<TestCustomer>,
    /// The address of the first customer.
    pub address: Option<Made>,
    /// The order of the first customer.
    pub order: Option<Made>,
    /// Orders a connector made though it should not have (a repeated Idempotency-Key).
    pub extra_orders: Vec<String>,
}

/// An answer the connector gave, as the JSON check needs it.
struct Noted {
    what: String,
    status: u16,
    problem: Option<String>,
}

pub(crate) struct Session {
    client: HttpConnector,
    pub target: ConnectorTarget,
    noted: Vec<Noted>,
    /// Distinguishes this run's test data from another run's.
    pub run_id: String,
    /// Whether the verification echo passed: writes go only to a connector Mercer would register.
    pub verified: bool,
    pub fixtures: Fixtures,
}

impl Session {
    pub fn new(config: &Config) -> Session {
        Session {
            client: HttpConnector::new(config.guard),
            target: ConnectorTarget {
                base_url: config.connector_url.clone(),
                version: "v1".to_string(),
                shop_identifier: config.shop_identifier.clone(),
                timeout: config.timeout,
                secret: config.secret.clone(),
                compatible_secret: config.secret.clone(),
            },
            noted: Vec::new(),
            run_id: random_hex(4),
            verified: false,
            fixtures: Fixtures::default(),
        }
    }

    /// The run's target signed with other secrets (`X-HMAC`, `X-Compatible-HMAC`).
    pub fn target_signed_with(&self, secret: &str, compatible: &str) -> ConnectorTarget {
        ConnectorTarget {
            secret: Secret::new(secret),
            compatible_secret: Secret::new(compatible),
            ..self.target.clone()
        }
    }

    /// Sends a call signed by the rules.
    pub fn send(&mut self, call: Call<'_>) -> Result<Answer, String> {
        let target = self.target.clone();
        self.send_to(&target, call, Signing::Now)
    }

    /// Sends a call to `target` signed as `signing` says; a failure on the way is the reason
    /// the check fails.
    pub fn send_to(
        &mut self,
        target: &ConnectorTarget,
        call: Call<'_>,
        signing: Signing,
    ) -> Result<Answer, String> {
        let request = Request {
            method: call.method,
            segments: call.segments,
            query: call.query,
            body: call.body.map(|body| body.to_string().into_bytes()),
            idempotency_key: call.idempotency_key,
            signing,
        };
        let what = call.what;
        match self.client.send(target, request) {
            Ok(answer) => {
                self.note(what, &answer);
                Ok(answer)
            }
            Err(error) => Err(format!("{what}: {}", transport(error))),
        }
    }

    fn note(&mut self, what: &str, answer: &Answer) {
        self.noted.push(Noted {
            what: what.to_string(),
            status: answer.status,
            problem: json_problem(answer),
        });
    }

    /// The verdict of `json-answers` on every answer of the run so far.
    pub fn json_answers(&self) -> Outcome {
        let successes = self.noted.iter().filter(|n| (200..300).contains(&n.status));
        let bad: Vec<&Noted> = successes.filter(|n| n.problem.is_some()).collect();
        match bad.first() {
            None if self.noted.is_empty() => Err("the connector answered no call".to_string()),
            None => Ok(String::new()),
            Some(first) => Err(format!(
                "{} answer(s) were not JSON; first: {} ({}): {}",
                bad.len(),
                first.what,
                first.status,
                first.problem.as_deref().unwrap_or_default()
            )),
        }
    }

    /// Test records the interface cannot delete, for the report.
    pub fn left_on_platform(&self) -> Vec<String> {
        let orders = self.fixtures.order.iter().map(|order| &order.id);
        orders
            .chain(&self.fixtures.extra_orders)
            .map(|id| format!("test order {id} (test: true; the interface has no Delete Order)"))
            .collect()
    }

    /// The first test customer (of the address, the order and the partial updates).
    pub fn customer(&self) -> Result<TestCustomer, String> {
        self.fixtures
            .customers
            .first()
            .cloned()
            .ok_or_else(|| needs(super::checks::CREATE_CUSTOMER.name))
    }

    /// The test address (of the first customer).
    pub fn address(&self) -> Result<Made, String> {
        self.fixtures
            .address
            .clone()
            .ok_or_else(|| needs(super::checks::CREATE_ADDRESS.name))
    }

    /// The test order (of the first customer).
    pub fn order(&self) -> Result<Made, String> {
        self.fixtures
            .order
            .clone()
            .ok_or_else(|| needs(super::checks::CREATE_ORDER.name))
    }
}

/// Why a check that needs another's record did not run.
pub(crate) fn needs(check: &str) -> String {
    format!("not run: needs the test record of {check}, which did not pass")
}

/// A transport failure in words for the connector's author (their own connector: the address
/// and the OS's reason may be told).
pub(crate) fn transport(error: ConnectorError) -> String {
    match error {
        ConnectorError::Timeout(limit) => format!("no answer within {} ms", limit.as_millis()),
        ConnectorError::Unreachable(detail) => {
            format!("the connector could not be reached: {detail}")
        }
        ConnectorError::Refused(detail) => detail,
        ConnectorError::Malformed(detail) => detail,
        other => other.to_string(),
    }
}

/// What is wrong with a successful answer's body as JSON, if anything. Empty bodies (a 204)
/// are fine.
fn json_problem(answer: &Answer) -> Option<String> {
    if !(200..300).contains(&answer.status) || answer.body.is_empty() {
        return None;
    }
    let content_type = answer.content_type.as_deref().unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Some(format!(
            "Content-Type is {:?}, not application/json",
            content_type
        ));
    }
    match serde_json::from_slice::<Value>(&answer.body) {
        Ok(Value::Object(_)) => None,
        Ok(_) => Some("the body is JSON but not an object".to_string()),
        Err(error) => Some(format!("the body is not JSON: {error}")),
    }
}

/// `Ok` when the answer's status is one of `wanted`, else why not (with a hint for redirects).
pub(crate) fn status(answer: &Answer, what: &str, wanted: &[u16]) -> Result<(), String> {
    if wanted.contains(&answer.status) {
        return Ok(());
    }
    let expected: Vec<String> = wanted.iter().map(u16::to_string).collect();
    let mut reason = format!(
        "{what} answered {}, not {}",
        answer.status,
        expected.join(" or ")
    );
    if (300..400).contains(&answer.status) {
        let to = answer.location.as_deref().unwrap_or("nowhere");
        reason.push_str(&format!(
            " (a redirect to {to}: Mercer never follows redirects)"
        ));
    }
    Err(reason)
}

/// `data.{key}` of a successful answer, as `T`.
pub(crate) fn entity<T: DeserializeOwned>(
    answer: &Answer,
    what: &str,
    key: &str,
) -> Result<T, String> {
    client::data(&answer.body, key).map_err(|error| format!("{what}: {}", transport(error)))
}

/// The answer's body as JSON.
pub(crate) fn json(answer: &Answer, what: &str) -> Result<Value, String> {
    serde_json::from_slice(&answer.body)
        .map_err(|error| format!("{what}: the answer is not JSON: {error}"))
}

/// Field by field: every field of `sent` but `changed` has the value it had in `before` (what
/// the create answered), and `changed` has `expected`. Times the platform keeps are left out.
pub(crate) fn kept(
    sent: &Value,
    before: &Value,
    after: &Value,
    changed: &str,
    expected: &Value,
) -> Result<(), String> {
    let fields = sent.as_object().into_iter().flatten();
    for (field, _) in fields.filter(|(field, _)| field.as_str() != changed) {
        let old = before.get(field).unwrap_or(&Value::Null);
        let new = after.get(field).unwrap_or(&Value::Null);
        if old != new {
            return Err(format!(
                "{field} changed from {old} to {new} though the update left it out"
            ));
        }
    }
    let now = after.get(changed).unwrap_or(&Value::Null);
    if now != expected {
        return Err(format!("{changed} is {now}, not the {expected} sent"));
    }
    Ok(())
}

/// A typed resource as JSON, for field comparisons.
pub(crate) fn as_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// What the customers of the run look like to List Customers filtered by `email`.
pub(crate) fn listed_by_email(session: &mut Session, email: &str) -> Result<Vec<Customer>, String> {
    let what = "List Customers (email=)";
    let query = [("email", email)];
    let call = Call::new(what, Method::Get, &["customers"]).query(&query);
    let answer = session.send(call)?;
    status(&answer, what, &[200])?;
    client::list::<Customer>(&answer.body, "customers")
        .map(|page| page.items)
        .map_err(|error| format!("{what}: {}", transport(error)))
}

/// The address `id` among `customer`'s addresses.
pub(crate) fn address_of(customer: &Customer, id: &str) -> Option<CustomerAddress> {
    customer
        .addresses
        .iter()
        .flatten()
        .find(|address| {
            address
                .platform_id
                .as_ref()
                .is_some_and(|pid| pid.as_str() == id)
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(status: u16, content_type: Option<&str>, body: &str) -> Answer {
        Answer {
            status,
            body: body.as_bytes().to_vec(),
            sent_timestamp: String::new(),
            hmac: None,
            sent_nonce: None,
            proof: None,
            content_type: content_type.map(str::to_string),
            location: Some("http://elsewhere.example/".to_string()),
        }
    }

    #[test]
    fn successful_bodies_must_be_json_objects_said_so() {
        let json_type = Some("application/json; charset=utf-8");
        assert_eq!(json_problem(&answer(200, json_type, "{}")), None);
        assert_eq!(json_problem(&answer(204, None, "")), None);
        assert_eq!(json_problem(&answer(500, Some("text/html"), "<h1>")), None);
        assert!(json_problem(&answer(200, Some("text/html"), "{}")).is_some());
        assert!(json_problem(&answer(200, None, "{}")).is_some());
        assert!(json_problem(&answer(200, json_type, "{\"data\": not json")).is_some());
        assert!(json_problem(&answer(200, json_type, "[]")).is_some());
    }

    #[test]
    fn a_wrong_status_is_named_and_a_redirect_explained() {
        assert_eq!(status(&answer(201, None, ""), "Create", &[201]), Ok(()));
        assert_eq!(
            status(&answer(500, None, ""), "Create", &[201]),
            Err("Create answered 500, not 201".to_string())
        );
        let redirect = status(&answer(302, None, ""), "Get", &[200, 204]).unwrap_err();
        assert!(redirect.contains("not 200 or 204"), "{redirect}");
        assert!(redirect.contains("http://elsewhere.example/"), "{redirect}");
    }

    #[test]
    fn kept_compares_every_sent_field_but_the_changed_one() {
        let sent = json!({"email": "a@x.test", "last_name": "A", "phone": "1"});
        let before = json!({"email": "a@x.test", "last_name": "A", "phone": "1", "platform_updated_at": "t1"});
        let good = json!({"email": "a@x.test", "last_name": "B", "phone": "1", "platform_updated_at": "t2"});
        assert_eq!(
            kept(&sent, &before, &good, "last_name", &json!("B")),
            Ok(())
        );
        let dropped = json!({"email": "a@x.test", "last_name": "B"});
        let error = kept(&sent, &before, &dropped, "last_name", &json!("B")).unwrap_err();
        assert!(error.starts_with("phone changed"), "{error}");
        let unchanged = kept(&sent, &before, &before, "last_name", &json!("B")).unwrap_err();
        assert!(unchanged.starts_with("last_name is \"A\""), "{unchanged}");
    }
}
