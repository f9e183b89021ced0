//! Platform connector destinations: where a shop's connector
//! serves one topic. Creating or changing one calls the connector's Verify operation first.

use crate::kernel::ids::ShopId;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::access::secrets::SecretKind;
use crate::access::shop::Shop;
use crate::kernel::error::{DomainError, FieldError, Problems};
use crate::kernel::ids::DestinationId;
use crate::kernel::outbound::AddressGuard;
use crate::kernel::time::Timestamp;
use crate::platform::PlatformDatabase;
use crate::platform::PlatformRepositories;
use crate::platform::connector::{ConnectorTarget, PlatformConnector, VerificationProof};

/// What a destination serves: a shop has at most one live destination per topic, and each
/// connector operation goes to the destination of its topic.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    utoipa::ToSchema,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[strum(serialize_all = "snake_case")]
#[schema(as = DestinationTopic, rename_all = "lowercase")]
pub enum Topic {
    /// Customers and their addresses (and customer token validation).
    Customers,
    /// Orders and their payments.
    Orders,
    /// Products and categories.
    Products,
}

impl Topic {
    /// Every topic, in the order they are listed.
    pub const ALL: [Topic; 3] = [Topic::Customers, Topic::Orders, Topic::Products];

    /// The topic's name in the API (`customers`, `orders`, `products`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The topic of an API name, or `None` for any other text.
    pub fn parse(text: &str) -> Option<Topic> {
        text.parse().ok()
    }
}

pub(crate) const DESTINATION_VERSIONS: [&str; 1] = ["v1"];
pub(crate) const MIN_TIMEOUT_MS: i64 = 100;
pub(crate) const MAX_TIMEOUT_MS: i64 = 30_000;
pub(crate) const DEFAULT_TIMEOUT_MS: i64 = 20_000;

/// A stored destination: where a shop's connector serves one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The destination's id (the service's integer).
    pub id: DestinationId,
    /// The id of the shop it belongs to.
    pub shop_id: ShopId,
    /// The topic it serves.
    pub topic: Topic,
    /// The connector's base URL.
    pub url: String,
    /// The connector API version to call (`v1`).
    pub version: String,
    /// How long a call to it may take, in milliseconds (100 to 30 000).
    pub timeout_ms: i64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last changed.
    pub updated_at: Timestamp,
    /// When it was deleted; `None` while it is live.
    pub deleted_at: Option<Timestamp>,
}

impl Destination {
    /// How long a call to it may take, `timeout_ms` kept within the allowed range.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.clamp(MIN_TIMEOUT_MS, MAX_TIMEOUT_MS) as u64)
    }
}

/// The settings of a destination, validated, before it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationSettings {
    /// The topic it serves.
    pub topic: Topic,
    /// The connector's base URL, checked, without a trailing `/`.
    pub url: String,
    /// The connector API version (`v1`).
    pub version: String,
    /// How long a call may take, in milliseconds (100 to 30 000).
    pub timeout_ms: i64,
}

/// `data.destination` of a create body: `topic` and `destination` are needed, and a missing one
/// is a 422 `required` on its path.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default)]
pub struct DestinationInput {
    /// The destination's id; a new destination is given its own, so any id here is ignored.
    #[schema(value_type = Option<i64>)]
    pub id: Option<serde_json::Value>,
    /// The shop's identifier; when given it must be the shop of the path.
    pub shop_identifier: Option<String>,
    /// The topic's name (`customers`, `orders` or `products`).
    #[schema(example = "customers", value_type = Topic, required = true)]
    pub topic: Option<String>,
    /// The connector's base URL: absolute http(s), no query, fragment or credentials.
    #[schema(
        example = "https://connector.example.com/mercer",
        format = "uri",
        value_type = String,
        required = true
    )]
    pub destination: Option<String>,
    /// The connector API version; `v1` (the default) is the only one.
    #[schema(example = "v1", pattern = "^v1$")]
    pub version: Option<String>,
    /// How long a call may take, in milliseconds (100 to 30 000; 20 000 by default).
    #[schema(example = 20000, minimum = 100, maximum = 30000)]
    pub timeout_ms: Option<i64>,
}

/// `data.destination` of an update body: the fields given replace the stored ones.
// A body of the wrong type is told it expected a `DestinationInput`, as before this type had a
// name of its own; the same holds for the update envelope and its `data`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default, expecting = "struct DestinationInput")]
pub struct DestinationUpdateInput {
    /// The destination's id; when given it must be the id of the path, as a number or its text.
    #[schema(value_type = Option<i64>)]
    pub id: Option<serde_json::Value>,
    /// The shop's identifier; when given it must be the shop of the path.
    pub shop_identifier: Option<String>,
    /// The topic's name (`customers`, `orders` or `products`).
    #[schema(example = "customers", value_type = Option<Topic>)]
    pub topic: Option<String>,
    /// The connector's base URL: absolute http(s), no query, fragment or credentials.
    #[schema(example = "https://connector.example.com/mercer", format = "uri")]
    pub destination: Option<String>,
    /// The connector API version; `v1` is the only one.
    #[schema(example = "v1", pattern = "^v1$")]
    pub version: Option<String>,
    /// How long a call may take, in milliseconds (100 to 30 000).
    #[schema(example = 20000, minimum = 100, maximum = 30000)]
    pub timeout_ms: Option<i64>,
}

impl From<DestinationUpdateInput> for DestinationInput {
    fn from(input: DestinationUpdateInput) -> Self {
        DestinationInput {
            id: input.id,
            shop_identifier: input.shop_identifier,
            topic: input.topic,
            destination: input.destination,
            version: input.version,
            timeout_ms: input.timeout_ms,
        }
    }
}

/// The body of a create request: `{"data": {"destination": {…}}}`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default)]
pub struct DestinationEnvelope {
    /// The `data` object.
    #[schema(required = true, value_type = DestinationData)]
    pub data: Option<DestinationData>,
}

/// The `data` object of a create body.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default)]
pub struct DestinationData {
    /// The destination's fields.
    #[schema(required = true, value_type = DestinationInput)]
    pub destination: Option<DestinationInput>,
}

/// The body of an update request: `{"data": {"destination": {…}}}`, both keys required as on
/// create.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default, expecting = "struct DestinationEnvelope")]
pub struct DestinationUpdateEnvelope {
    /// The `data` object.
    #[schema(required = true, value_type = DestinationUpdateData)]
    pub data: Option<DestinationUpdateData>,
}

/// The `data` object of an update body.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default, expecting = "struct DestinationData")]
pub struct DestinationUpdateData {
    /// The destination's fields to change.
    #[schema(required = true, value_type = DestinationUpdateInput)]
    pub destination: Option<DestinationUpdateInput>,
}

/// The fields under `data.destination`, or 422 when `data` or `data.destination` is missing.
fn unwrap_data<T>(data: Option<Option<T>>) -> Result<T, DomainError> {
    match data {
        None => Err(DomainError::Invalid(vec![FieldError::required("data")])),
        Some(None) => Err(DomainError::Invalid(vec![FieldError::required(
            "data.destination",
        )])),
        Some(Some(input)) => Ok(input),
    }
}

impl DestinationEnvelope {
    /// The destination's fields, or 422 when `data` or `data.destination` is missing.
    pub fn into_input(self) -> Result<DestinationInput, DomainError> {
        unwrap_data(self.data.map(|data| data.destination))
    }
}

impl DestinationUpdateEnvelope {
    /// The destination's fields (checked by [`DestinationInput::for_update`]), or 422 when
    /// `data` or `data.destination` is missing.
    pub fn into_input(self) -> Result<DestinationInput, DomainError> {
        unwrap_data(self.data.map(|data| data.destination)).map(DestinationInput::from)
    }
}

const FIELD: &str = "data.destination";

fn field(name: &str) -> String {
    format!("{FIELD}.{name}")
}

fn check_topic(text: &str) -> Result<Topic, FieldError> {
    Topic::parse(text).ok_or_else(|| {
        FieldError::new(
            field("topic"),
            "invalid_value",
            "topic must be one of customers, orders, products",
        )
    })
}

/// An absolute http(s) URL with a host, no query, no fragment, no credentials.
pub(crate) fn check_base_url(field_name: &str, text: &str) -> Result<String, FieldError> {
    let invalid =
        |why: &str| FieldError::new(field_name, "invalid_url", format!("{field_name} {why}"));
    let url = url::Url::parse(text).map_err(|_| invalid("must be an absolute http(s) URL"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("must be an absolute http(s) URL"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("must not have a query or fragment"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("must not carry credentials"));
    }
    Ok(text.trim_end_matches('/').to_string())
}

fn check_version(text: &str) -> Result<String, FieldError> {
    if DESTINATION_VERSIONS.contains(&text) {
        Ok(text.to_string())
    } else {
        Err(FieldError::new(
            field("version"),
            "invalid_value",
            "version must be v1",
        ))
    }
}

fn check_timeout(value: i64) -> Result<i64, FieldError> {
    if (MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&value) {
        Ok(value)
    } else {
        Err(FieldError::new(
            field("timeout_ms"),
            "out_of_range",
            format!("timeout_ms must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS}"),
        ))
    }
}

fn check_shop(input: &DestinationInput, shop: &Shop, problems: &mut Problems) {
    if let Some(named) = &input.shop_identifier
        && named != shop.identifier.as_str()
    {
        problems.push(FieldError::new(
            field("shop_identifier"),
            "mismatch",
            "shop_identifier must be the shop of the path",
        ));
    }
}

/// An update's body may repeat the destination's id (as a number or its text); another one is
/// a mistake worth saying, not a silent update of the destination in the path.
fn check_id(input: &DestinationInput, current: &Destination, problems: &mut Problems) {
    let Some(id) = input.id.as_ref().filter(|id| !id.is_null()) else {
        return;
    };
    let same = id.as_i64() == Some(current.id.0)
        || id.as_str().and_then(|text| text.parse::<i64>().ok()) == Some(current.id.0);
    if !same {
        problems.push(FieldError::new(
            field("id"),
            "mismatch",
            format!("id must be the id of the path ({})", current.id),
        ));
    }
}

impl DestinationInput {
    /// Settings for a new destination: topic and destination required, the rest defaulted.
    pub fn for_create(&self, shop: &Shop) -> Result<DestinationSettings, DomainError> {
        let mut problems = Problems::new();
        check_shop(self, shop, &mut problems);
        let topic = match &self.topic {
            Some(topic) => problems.check(check_topic(topic)),
            None => {
                problems.push(FieldError::required(field("topic")));
                None
            }
        };
        let url = match &self.destination {
            Some(url) => problems.check(check_base_url(&field("destination"), url)),
            None => {
                problems.push(FieldError::required(field("destination")));
                None
            }
        };
        let version = problems.check(check_version(self.version.as_deref().unwrap_or("v1")));
        let timeout_ms =
            problems.check(check_timeout(self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)));
        problems.into_result()?;
        match (topic, url, version, timeout_ms) {
            (Some(topic), Some(url), Some(version), Some(timeout_ms)) => Ok(DestinationSettings {
                topic,
                url,
                version,
                timeout_ms,
            }),
            _ => Err(DomainError::invalid(
                FIELD,
                "invalid",
                "the destination is invalid",
            )),
        }
    }

    /// The stored settings with the fields present in the body replacing them.
    pub fn for_update(
        &self,
        shop: &Shop,
        current: &Destination,
    ) -> Result<DestinationSettings, DomainError> {
        let mut problems = Problems::new();
        check_shop(self, shop, &mut problems);
        check_id(self, current, &mut problems);
        let topic = match &self.topic {
            Some(topic) => problems.check(check_topic(topic)),
            None => Some(current.topic),
        };
        let url = match &self.destination {
            Some(url) => problems.check(check_base_url(&field("destination"), url)),
            None => Some(current.url.clone()),
        };
        let version = match &self.version {
            Some(version) => problems.check(check_version(version)),
            None => Some(current.version.clone()),
        };
        let timeout_ms = match self.timeout_ms {
            Some(timeout) => problems.check(check_timeout(timeout)),
            None => Some(current.timeout_ms),
        };
        problems.into_result()?;
        match (topic, url, version, timeout_ms) {
            (Some(topic), Some(url), Some(version), Some(timeout_ms)) => Ok(DestinationSettings {
                topic,
                url,
                version,
                timeout_ms,
            }),
            _ => Err(DomainError::invalid(
                FIELD,
                "invalid",
                "the destination is invalid",
            )),
        }
    }
}

/// The Destination resource, with the base URL under `destination`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DestinationResource<'a> {
    /// The destination's id (the service's integer).
    #[schema(value_type = i64)]
    pub id: DestinationId,
    /// The identifier of the shop it belongs to.
    pub shop_identifier: &'a str,
    /// The topic it serves (`customers`, `orders` or `products`).
    #[schema(value_type = Topic)]
    pub topic: &'static str,
    /// The connector's base URL.
    pub destination: &'a str,
    /// The connector API version (`v1`).
    pub version: &'a str,
    /// How long a call may take, in milliseconds.
    pub timeout_ms: i64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last changed.
    pub updated_at: Timestamp,
    /// When it was deleted; `None` while it is live.
    pub deleted_at: Option<Timestamp>,
}

impl<'a> DestinationResource<'a> {
    /// The resource of `destination`, a destination of `shop`.
    pub fn new(destination: &'a Destination, shop: &'a Shop) -> Self {
        DestinationResource {
            id: destination.id,
            shop_identifier: shop.identifier.as_str(),
            topic: destination.topic.as_str(),
            destination: &destination.url,
            version: &destination.version,
            timeout_ms: destination.timeout_ms,
            created_at: destination.created_at,
            updated_at: destination.updated_at,
            deleted_at: destination.deleted_at,
        }
    }
}

fn topic_taken(topic: Topic) -> DomainError {
    DomainError::Conflict {
        code: "destination.topic_taken",
        message: format!(
            "the shop already has a live destination for {}; update or delete it first",
            topic.as_str()
        ),
    }
}

/// How to reach the connector of `settings` for `shop`, with the shop's connector secrets.
pub(crate) fn connector_target(
    tx: &mut dyn PlatformRepositories,
    shop: &Shop,
    url: &str,
    version: &str,
    timeout: Duration,
    now: Timestamp,
) -> Result<ConnectorTarget, DomainError> {
    let secret = tx
        .shared_secret(shop.id, SecretKind::Connector)?
        .ok_or_else(|| DomainError::Conflict {
            code: "connector.secret_not_configured",
            message: "the shop has no connector shared secret yet: rotate one first \
                      (POST /integrations/v1/shops/{shop}/shared_secret/rotate or \
                      `mercer secret rotate --kind connector`)"
                .to_string(),
        })?;
    Ok(ConnectorTarget {
        base_url: url.to_string(),
        version: version.to_string(),
        shop_identifier: shop.identifier.as_str().to_string(),
        timeout,
        compatible_secret: secret.compatible(now).clone(),
        secret: secret.current,
    })
}

/// The live destination of `topic` and a target to call it, or None when the topic has none.
pub(crate) fn live_target(
    tx: &mut dyn PlatformRepositories,
    shop: &Shop,
    topic: Topic,
    now: Timestamp,
) -> Result<Option<(Destination, ConnectorTarget)>, DomainError> {
    let Some(destination) = tx.live_destination(shop.id, topic)? else {
        return Ok(None);
    };
    let target = connector_target(
        tx,
        shop,
        &destination.url,
        &destination.version,
        destination.timeout(),
        now,
    )?;
    Ok(Some((destination, target)))
}

/// Calls the connector's Verify operation: its `X-HMAC` must match, and when the shop requires
/// message signatures its `X-Verification-Proof` must be the HMAC of the nonce sent too (an
/// `X-HMAC` alone may be an echo of Mercer's own header, by a destination without the secret).
fn verify(
    connector: &dyn PlatformConnector,
    target: &ConnectorTarget,
    shop: &Shop,
) -> Result<(), DomainError> {
    let answer = connector.verify(target).map_err(|error| {
        let code = if matches!(
            error,
            crate::platform::connector::ConnectorError::Timeout(_)
        ) {
            "connector.timeout"
        } else {
            "connector.verification_failed"
        };
        error.into_domain(code)
    })?;
    check_proof(shop.require_message_signatures, answer.proof)
}

/// A verification answer's proof, against the shop's setting: while the shop requires message
/// signatures, only a valid proof registers the connector (502 `connector.verification_failed`
/// otherwise); while it does not, the answer's `X-HMAC` is enough, as it always was.
fn check_proof(required: bool, proof: VerificationProof) -> Result<(), DomainError> {
    if !required || proof == VerificationProof::Valid {
        return Ok(());
    }
    let why = match proof {
        VerificationProof::Invalid => "is not the HMAC of the verification request's nonce",
        _ => "is missing",
    };
    Err(DomainError::Remote {
        code: "connector.verification_failed",
        timed_out: false,
        message: format!(
            "the connector's X-Verification-Proof {why}: the shop requires message \
             signatures, so the connector must prove it holds the secret"
        ),
        field: None,
    })
}

/// Where a destination leads, through the SSRF guard: 422 `address_not_allowed` on
/// `data.destination.destination` for a loopback, private, link-local or metadata address
/// (unless the operator allows private targets). Runs outside any transaction: the guard
/// resolves names. Each call is checked again when it is made.
fn check_address(guard: &dyn AddressGuard, url: &str) -> Result<(), DomainError> {
    guard.check(url).map_err(|reason| {
        DomainError::Invalid(vec![FieldError::new(
            field("destination"),
            "address_not_allowed",
            format!("destination is not allowed: {reason}"),
        )])
    })
}

/// Create Destination: checks, verifies with the connector (outside any transaction: it may
/// take up to `timeout_ms`), then stores.
pub fn create_destination(
    db: &impl PlatformDatabase,
    connector: &dyn PlatformConnector,
    guard: &dyn AddressGuard,
    shop: &Shop,
    input: &DestinationInput,
    now: Timestamp,
) -> Result<Destination, DomainError> {
    let settings = input.for_create(shop)?;
    check_address(guard, &settings.url)?;
    let timeout = Duration::from_millis(settings.timeout_ms as u64);
    let target = db.read_tx(|tx| {
        if tx.live_destination(shop.id, settings.topic)?.is_some() {
            return Err(topic_taken(settings.topic));
        }
        connector_target(tx, shop, &settings.url, &settings.version, timeout, now)
    })?;
    verify(connector, &target, shop)?;
    db.write_tx(|tx| {
        if tx.live_destination(shop.id, settings.topic)?.is_some() {
            return Err(topic_taken(settings.topic));
        }
        tx.insert_destination(shop.id, &settings, now)
            .map_err(|error| {
                if error.is_unique_violation() {
                    topic_taken(settings.topic)
                } else {
                    error.into()
                }
            })
    })
}

/// List Destinations: the shop's live destinations.
pub fn list_destinations(
    tx: &mut dyn PlatformRepositories,
    shop: &Shop,
) -> Result<Vec<Destination>, DomainError> {
    Ok(tx.live_destinations(shop.id)?)
}

/// A destination of the shop, deleted ones included; NotFound otherwise.
pub fn find_destination(
    tx: &mut dyn PlatformRepositories,
    shop: &Shop,
    id: DestinationId,
) -> Result<Destination, DomainError> {
    tx.destination(shop.id, id)?
        .ok_or(DomainError::not_found("destination"))
}

fn find_live_destination(
    tx: &mut dyn PlatformRepositories,
    shop: &Shop,
    id: DestinationId,
) -> Result<Destination, DomainError> {
    match find_destination(tx, shop, id)? {
        destination if destination.deleted_at.is_none() => Ok(destination),
        _ => Err(DomainError::not_found("destination")),
    }
}

/// Update Destination: fields present replace stored ones; the result is checked by the guard
/// (the stored URL too: the operator may have stopped allowing private targets) and verified
/// with the connector before it is stored.
pub fn update_destination(
    db: &impl PlatformDatabase,
    connector: &dyn PlatformConnector,
    guard: &dyn AddressGuard,
    shop: &Shop,
    id: DestinationId,
    input: &DestinationInput,
    now: Timestamp,
) -> Result<Destination, DomainError> {
    let (settings, target) = db.read_tx(|tx| {
        let current = find_live_destination(tx, shop, id)?;
        let settings = input.for_update(shop, &current)?;
        if let Some(other) = tx.live_destination(shop.id, settings.topic)?
            && other.id != id
        {
            return Err(topic_taken(settings.topic));
        }
        let timeout = Duration::from_millis(settings.timeout_ms as u64);
        let target = connector_target(tx, shop, &settings.url, &settings.version, timeout, now)?;
        Ok((settings, target))
    })?;
    check_address(guard, &settings.url)?;
    verify(connector, &target, shop)?;
    db.write_tx(|tx| {
        find_live_destination(tx, shop, id)?;
        if let Some(other) = tx.live_destination(shop.id, settings.topic)?
            && other.id != id
        {
            return Err(topic_taken(settings.topic));
        }
        tx.update_destination(shop.id, id, &settings, now)
            .map_err(|error| {
                if error.is_unique_violation() {
                    topic_taken(settings.topic)
                } else {
                    error.into()
                }
            })?;
        find_destination(tx, shop, id)
    })
}

/// Delete Destination: marks it deleted; from then on nothing calls that connector for its topic.
pub fn delete_destination(
    tx: &mut dyn PlatformRepositories,
    shop: &Shop,
    id: DestinationId,
    now: Timestamp,
) -> Result<(), DomainError> {
    find_live_destination(tx, shop, id)?;
    tx.delete_destination(shop.id, id, now)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(error: DomainError) -> Vec<String> {
        match error {
            DomainError::Invalid(problems) => problems
                .into_iter()
                .map(|problem| format!("{} {}", problem.field, problem.code))
                .collect(),
            other => panic!("not a 422: {other:?}"),
        }
    }

    #[test]
    fn create_and_update_bodies_need_data_and_its_destination() {
        for (body, wanted) in [
            (serde_json::json!({}), "data required"),
            (serde_json::json!({"data": {}}), "data.destination required"),
        ] {
            let create: DestinationEnvelope = serde_json::from_value(body.clone()).unwrap();
            assert_eq!(problems(create.into_input().unwrap_err()), [wanted]);
            let update: DestinationUpdateEnvelope = serde_json::from_value(body).unwrap();
            assert_eq!(problems(update.into_input().unwrap_err()), [wanted]);
        }
        let body = serde_json::json!({"data": {"destination": {"timeout_ms": 500, "id": "7"}}});
        let update: DestinationUpdateEnvelope = serde_json::from_value(body).unwrap();
        let input = update.into_input().unwrap();
        assert_eq!(input.timeout_ms, Some(500));
        assert_eq!(input.id, Some(serde_json::json!("7")));
        assert_eq!((input.topic, input.destination), (None, None));
    }

    #[test]
    fn the_update_body_fails_to_read_as_the_create_body_does() {
        for wrong in [
            serde_json::json!([]),
            serde_json::json!("text"),
            serde_json::json!({"data": 5}),
            serde_json::json!({"data": {"destination": "x"}}),
            serde_json::json!({"data": {"destination": {"timeout_ms": "fast"}}}),
        ] {
            let create = serde_json::from_value::<DestinationEnvelope>(wrong.clone());
            let update = serde_json::from_value::<DestinationUpdateEnvelope>(wrong.clone());
            assert_eq!(
                create.map(drop).map_err(|error| error.to_string()),
                update.map(drop).map_err(|error| error.to_string()),
                "{wrong}"
            );
        }
    }

    #[test]
    fn a_shop_that_requires_message_signatures_needs_a_valid_proof() {
        assert!(check_proof(true, VerificationProof::Valid).is_ok());
        for proof in [VerificationProof::Missing, VerificationProof::Invalid] {
            let Err(DomainError::Remote {
                code,
                timed_out,
                message,
                ..
            }) = check_proof(true, proof)
            else {
                panic!("{proof:?} is refused");
            };
            assert_eq!(code, "connector.verification_failed");
            assert!(!timed_out);
            assert!(message.contains("X-Verification-Proof"), "{message}");
        }
    }

    #[test]
    fn a_shop_that_does_not_takes_the_hmac_alone() {
        for proof in [
            VerificationProof::Valid,
            VerificationProof::Missing,
            VerificationProof::Invalid,
        ] {
            assert!(check_proof(false, proof).is_ok(), "{proof:?}");
        }
    }
}
