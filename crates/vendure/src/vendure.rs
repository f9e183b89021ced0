//! Vendure's two GraphQL APIs as the connector calls them: the Admin API with the connector's
//! API key (header `vendure-api-key`), and the Shop API with a customer's session token.

use std::time::Duration;

use mercer_outbound::PrivateAddressGuard;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Why a call to Vendure did not answer what was asked.
#[derive(Debug, thiserror::Error)]
pub enum VendureError {
    /// Vendure could not be reached, or answered something that is not GraphQL.
    #[error("Vendure could not be reached: {0}")]
    Unreachable(String),
    /// The entity asked for does not exist (Vendure's `ENTITY_NOT_FOUND`, or a null answer).
    #[error("not found")]
    NotFound,
    /// Vendure refused the request as invalid: an error result (`EMAIL_ADDRESS_CONFLICT_ERROR`)
    /// or a GraphQL error about the input.
    #[error("Vendure refused the request: {0}")]
    Refused(String),
    /// Vendure refused the connector's API key.
    #[error("Vendure refused the API key")]
    Forbidden,
}

/// One Vendure: its root URL and the connector's Admin API key.
#[derive(Clone)]
pub struct Vendure {
    root: String,
    api_key: String,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Vendure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The API key stays out of logs.
        f.debug_struct("Vendure").field("root", &self.root).finish()
    }
}

/// How long one call to Vendure may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

impl Vendure {
    /// Vendure at `root` (`http://127.0.0.1:3000`), called with `api_key`.
    pub fn new(root: &str, api_key: &str, guard: PrivateAddressGuard) -> Vendure {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(CALL_TIMEOUT));
        Vendure {
            root: root.trim_end_matches('/').to_string(),
            api_key: api_key.to_string(),
            agent: mercer_outbound::agent(guard, config),
        }
    }

    /// Runs an Admin API operation and reads its `data` as `T`.
    pub fn admin<T: DeserializeOwned>(
        &self,
        query: &str,
        variables: Value,
    ) -> Result<T, VendureError> {
        let url = format!("{}/admin-api", self.root);
        let request = self
            .agent
            .post(&url)
            .header("vendure-api-key", &self.api_key);
        let body = json!({ "query": query, "variables": variables });
        let answer = request
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .map_err(|error| VendureError::Unreachable(error.to_string()))?;
        read_data(answer)
    }

    /// The id of the customer whose Shop API session `token` is, if it is one's.
    pub fn active_customer(&self, token: &str) -> Result<Option<String>, VendureError> {
        let url = format!("{}/shop-api", self.root);
        let body = json!({ "query": "{ activeCustomer { id } }" });
        let answer = self
            .agent
            .post(&url)
            .header("Authorization", &format!("Bearer {token}"))
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .map_err(|error| VendureError::Unreachable(error.to_string()))?;
        #[derive(serde::Deserialize)]
        struct Active {
            #[serde(rename = "activeCustomer")]
            active_customer: Option<Id>,
        }
        #[derive(serde::Deserialize)]
        struct Id {
            id: String,
        }
        match read_data::<Active>(answer) {
            Ok(active) => Ok(active.active_customer.map(|customer| customer.id)),
            // A token Vendure does not know is a customer of no one.
            Err(VendureError::Forbidden) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

fn read_data<T: DeserializeOwned>(
    mut answer: ureq::http::Response<ureq::Body>,
) -> Result<T, VendureError> {
    let status = answer.status().as_u16();
    let body: Value = answer
        .body_mut()
        .read_json()
        .map_err(|error| VendureError::Unreachable(format!("status {status}: {error}")))?;
    if let Some(errors) = body.get("errors").and_then(Value::as_array)
        && let Some(first) = errors.first()
    {
        let code = first
            .pointer("/extensions/code")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let message = first
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("an error")
            .to_string();
        return Err(match code {
            "ENTITY_NOT_FOUND" => VendureError::NotFound,
            "FORBIDDEN" => VendureError::Forbidden,
            "BAD_USER_INPUT" | "USER_INPUT_ERROR" | "GRAPHQL_VALIDATION_FAILED" => {
                VendureError::Refused(message)
            }
            _ => VendureError::Unreachable(message),
        });
    }
    let data = body.get("data").cloned().unwrap_or(Value::Null);
    serde_json::from_value(data)
        .map_err(|error| VendureError::Unreachable(format!("an answer not understood: {error}")))
}

/// A union answer of a mutation: the entity, or Vendure's error result (`errorCode`,
/// `message`), as a [`VendureError::Refused`].
pub fn entity_or_refusal<T: DeserializeOwned>(value: Value) -> Result<T, VendureError> {
    if let Some(code) = value.get("errorCode").and_then(Value::as_str) {
        let message = value
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(VendureError::Refused(format!("{code}: {message}")));
    }
    if value.is_null() {
        return Err(VendureError::NotFound);
    }
    serde_json::from_value(value)
        .map_err(|error| VendureError::Unreachable(format!("an answer not understood: {error}")))
}
