//! The OpenAPI 3.1 document of every route, served at `GET /openapi.json` and written to
//! `docs/openapi.json` by `cargo xtask openapi`.
//!
//! Each route folder describes its own routes (`#[utoipa::path]` on each handler, listed in the
//! folder's `Api`); the schemas come from the domain's types (`ToSchema`). This file joins the
//! folders' documents and adds what every route shares: the error body and the security schemes.

use std::collections::HashSet;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Operation, Parameter, ParameterBuilder, ParameterIn, PathItem};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, AuthorizationCode, Flow, HttpAuthScheme, HttpBuilder, OAuth2, Scopes,
    SecurityScheme,
};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, OpenApi as Document, Ref, RefOr, Required, Response,
    ResponseBuilder,
};
use utoipa::{Modify, OpenApi, ToSchema};

use super::error::ErrorEntry;
use super::routes;

/// The security scheme of API access tokens (`Authorization: Bearer <token>`), whether made by
/// `mercer token create` or issued by the OAuth flow. Its scopes are the route's scope.
pub const API_TOKEN: &str = "api_token";
/// The OAuth 2.0 authorization code flow of public integrations; the token it issues is an
/// ordinary API access token.
pub const OAUTH2: &str = "oauth2";
/// The headless checkout's storefront routes: `Authorization: Bearer <the order's JWT>`.
pub const CHECKOUT_JWT: &str = "checkout_jwt";
/// The box builder's customer routes: `?token=<the token the shop's platform issued the
/// customer>`.
pub const CUSTOMER_TOKEN: &str = "customer_token";

/// The JSON error body: one entry per problem found.
#[derive(ToSchema)]
#[allow(dead_code)] // Described, never built: `ApiError` writes the same shape.
pub struct ErrorBody {
    errors: Vec<ErrorEntry>,
}

/// Every scope an API access token can hold, with what it allows.
pub const SCOPES: [(&str, &str); 12] = [
    ("read_customers", "Read customers and their syncs"),
    (
        "write_customers",
        "Send customer events, start customer syncs",
    ),
    ("read_orders", "Read orders and their syncs"),
    ("write_orders", "Send order events, start order syncs"),
    ("read_products", "Read products, categories and their syncs"),
    (
        "write_products",
        "Send product and category events, start product syncs",
    ),
    ("read_shop_settings", "Read the shop's settings"),
    ("modify_shop_settings", "Change the shop's settings"),
    (
        "read_subscriptions",
        "Read subscriptions and their customers",
    ),
    (
        "write_subscriptions",
        "Change subscriptions and their customers",
    ),
    ("read_subscription_groups", "Read subscription groups"),
    ("write_subscription_groups", "Change subscription groups"),
];

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Mercer",
        description = "The HTTP API of Mercer, a self-hostable commerce integration backend. \
                       Errors answer `{\"errors\": [...]}` with one entry per problem.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    servers((url = "/", description = "The Mercer server that serves this document")),
    components(schemas(ErrorBody)),
    modifiers(&SecuritySchemes)
)]
struct Root;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, document: &mut Document) {
        let components = document
            .components
            .get_or_insert_with(|| ComponentsBuilder::new().build());
        let bearer = |description: &str, format: Option<&str>| {
            let mut scheme = HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(description));
            if let Some(format) = format {
                scheme = scheme.bearer_format(format);
            }
            SecurityScheme::Http(scheme.build())
        };
        components.add_security_scheme(
            API_TOKEN,
            bearer(
                "An API access token of the shop (`mercer token create`, or issued by the OAuth \
                 flow). The route's scope must be among the token's.",
                None,
            ),
        );
        let scopes = Scopes::from_iter(SCOPES);
        components.add_security_scheme(
            OAUTH2,
            SecurityScheme::OAuth2(OAuth2::with_description(
                [Flow::AuthorizationCode(AuthorizationCode::new(
                    "/accounts/dashboard/authorize",
                    "/auth/oauth2/token",
                    scopes,
                ))],
                "The authorization code flow of public integrations (PKCE S256 optional). The \
                 token it issues is an API access token.",
            )),
        );
        components.add_security_scheme(
            CHECKOUT_JWT,
            bearer(
                "The JWT of one checkout order, as the order's creation answered it.",
                Some("JWT"),
            ),
        );
        components.add_security_scheme(
            CUSTOMER_TOKEN,
            SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
                "token",
                "The customer's token, as the shop's platform issued it; the shop's connector \
                 validates it.",
            ))),
        );
    }
}

/// The whole document: the shared parts and every route folder's routes, each operation with
/// what every route shares (the version header, the error answers). An operation that names no
/// security requirement is public, and says so with an empty list.
pub fn document() -> Document {
    let mut document = Root::openapi();
    for feature in routes::documents() {
        document.merge(feature);
    }
    document
        .components
        .get_or_insert_with(|| ComponentsBuilder::new().build())
        .parameters
        .insert(VERSION_HEADER.to_string(), RefOr::T(version_header()));
    if let (Some(components), RefOr::T(answer)) =
        (document.components.as_mut(), rate_limited_answer())
    {
        components
            .responses
            .insert(RATE_LIMITED.to_string(), RefOr::T(answer));
    }
    let version = Ref::new(format!("#/components/parameters/{VERSION_HEADER}"));
    let mut operation_ids = HashSet::new();
    for (path, item) in document.paths.paths.iter_mut() {
        for (method, operation) in operations(item) {
            let id = operation.operation_id.get_or_insert_with(|| path.clone());
            // A route that answers two methods alike (PUT and PATCH) has one handler, so one id.
            if !operation_ids.insert(id.clone()) {
                *id = format!("{id}_{method}");
                operation_ids.insert(id.clone());
            }
            operation
                .parameters
                .get_or_insert_with(Vec::new)
                .push(RefOr::Ref(version.clone()));
            operation.security.get_or_insert_with(Vec::new);
            let budget = has_budget(path, operation);
            let responses = &mut operation.responses.responses;
            for (status, response) in responses.iter_mut() {
                if let RefOr::T(response) = response
                    && response.description.is_empty()
                {
                    response.description = reason(status).to_string();
                }
            }
            if budget {
                responses.entry("429".to_string()).or_insert_with(|| {
                    RefOr::Ref(Ref::new(format!("#/components/responses/{RATE_LIMITED}")))
                });
            }
            for (range, description) in ERROR_ANSWERS {
                responses
                    .entry(range.to_string())
                    .or_insert_with(|| error_answer(description));
            }
        }
    }
    document
}

/// A success answer's description when its route gives none (OpenAPI 3.1 requires one).
fn reason(status: &str) -> &'static str {
    match status {
        "200" => "OK",
        "201" => "Created",
        "202" => "Accepted",
        "204" => "No content",
        "302" | "303" => "Redirect",
        _ => "Answer",
    }
}

/// The error answers every route may give, by status range.
const ERROR_ANSWERS: [(&str, &str); 2] = [
    (
        "4XX",
        "The request was refused: malformed (400), no or bad credentials (401), a token without \
         the scope (403), an unknown resource (404), a conflict (409), too large (413), not JSON \
         (415), invalid (422), or rate limited (429, with `Retry-After`).",
    ),
    (
        "5XX",
        "Mercer failed (500), a remote party answered wrongly (502), the database cannot do the \
         work now (503, with `Retry-After`), a remote party timed out (504), or the database is \
         out of space (507).",
    ),
];

/// Whether a request budget may apply to the operation: every route a token authenticates, and
/// the storefront and checkout routes (docs/rate-limits.md); never the operations routes.
fn has_budget(path: &str, operation: &Operation) -> bool {
    let tokened = operation.security.as_ref().is_some_and(|requirements| {
        serde_json::to_value(requirements)
            .map(|value| value.to_string().contains(API_TOKEN))
            .unwrap_or(false)
    });
    let storefront =
        path.starts_with("/checkout/storefront/") || path.starts_with("/checkout/orders/");
    tokened || storefront
}

/// The key of [`rate_limited_answer`] under `components/responses`.
const RATE_LIMITED: &str = "RateLimited";

/// The 429 of a request budget, with its headers (which every answer under a budget carries).
fn rate_limited_answer() -> RefOr<Response> {
    let whole = |description: &str| {
        HeaderBuilder::new()
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0)),
            ))
            .description(Some(description))
            .build()
    };
    ResponseBuilder::new()
        .description(
            "A request budget is spent (type `rate_limited`, sub_type the budget: `token`, \
             `connector_events` or `storefront`). Every answer under a budget carries the \
             `X-RateLimit-*` headers.",
        )
        .header(
            "Retry-After",
            whole("Seconds until a request may succeed (at least 1)."),
        )
        .header(
            "X-RateLimit-Limit",
            whole("The budget's burst: twice its rate per second."),
        )
        .header("X-RateLimit-Remaining", whole("Requests left at once."))
        .header(
            "X-RateLimit-Reset",
            whole("Seconds until the budget is whole again."),
        )
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .into()
}

fn error_answer(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .into()
}

/// The version header's name, also its key under `components/parameters`.
const VERSION_HEADER: &str = "Svc-API-Version-Date";

/// `Svc-API-Version-Date`: optional on every route. A string with the date's pattern rather than
/// `format: date`: client generators refuse a date-typed header.
fn version_header() -> Parameter {
    ParameterBuilder::new()
        .name(VERSION_HEADER)
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "The API version the client was written for, a date (`YYYY-MM-DD`) from 2022-05-01; \
             absent means the newest.",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(r"^\d{4}-\d{2}-\d{2}$")),
        ))
        .build()
}

/// A path's operations with their methods, lower case.
fn operations(item: &mut PathItem) -> Vec<(&'static str, &mut Operation)> {
    [
        ("get", &mut item.get),
        ("put", &mut item.put),
        ("post", &mut item.post),
        ("delete", &mut item.delete),
        ("patch", &mut item.patch),
        ("head", &mut item.head),
        ("options", &mut item.options),
    ]
    .into_iter()
    .filter_map(|(method, operation)| operation.as_mut().map(|operation| (method, operation)))
    .collect()
}

/// The document as served, with its links: built once, then the same bytes every time.
pub fn document_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let mut document =
            serde_json::to_value(document()).expect("the document is JSON: every key is a string");
        add_links(&mut document);
        add_webhooks(&mut document);
        drop_null_defaults(&mut document);
        serde_json::to_string_pretty(&document).expect("a JSON value is written as JSON")
    })
}

/// Drops every `"default": null`. utoipa writes one for each optional field of a type that fills
/// in what is missing (`#[serde(default)]`); it tells a client nothing (a field left out is
/// absent, not null), and reference pages build their example bodies from the defaults, so every
/// body's example came out `null`. Without it, the examples are built from the fields' types.
fn drop_null_defaults(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if object.get("default").is_some_and(Value::is_null) {
                object.remove("default");
            }
            object.values_mut().for_each(drop_null_defaults);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_defaults),
        _ => {}
    }
}

/// Links from each create (`POST …/things` answering 201) to the operations of the record it
/// made (`…/things/{id}`), the new id read from the answer: clients and the schema fuzzer
/// follow them from a create to its record.
fn add_links(document: &mut Value) {
    let schemas = document["components"]["schemas"].clone();
    let Some(paths) = document["paths"].as_object_mut() else {
        return;
    };
    let templates: Vec<String> = paths.keys().cloned().collect();
    for collection in &templates {
        let Some(answer) = paths[collection]
            .pointer("/post/responses/201/content/application~1json/schema/$ref")
            .and_then(Value::as_str)
            .and_then(|reference| reference.rsplit('/').next())
        else {
            continue;
        };
        let Some(id) = id_pointer(&schemas, answer) else {
            continue;
        };
        let mut links = Map::new();
        for record in &templates {
            let Some(parameter) = record
                .strip_prefix(collection.as_str())
                .and_then(|rest| rest.strip_prefix("/{"))
                .and_then(|rest| rest.strip_suffix('}'))
                .filter(|name| !name.contains('/'))
            else {
                continue;
            };
            let mut parameters = Map::new();
            for name in path_parameters(collection) {
                parameters.insert(name.clone(), json!(format!("$request.path.{name}")));
            }
            parameters.insert(parameter.to_string(), json!(format!("$response.body#{id}")));
            for operation in paths[record].as_object().into_iter().flat_map(Map::values) {
                if let Some(operation_id) = operation["operationId"].as_str() {
                    links.insert(
                        operation_id.to_string(),
                        json!({ "operationId": operation_id, "parameters": parameters }),
                    );
                }
            }
        }
        if !links.is_empty() {
            paths[collection]["post"]["responses"]["201"]["links"] = Value::Object(links);
        }
    }
}

/// Every webhook topic under `webhooks` (OpenAPI 3.1), keyed by its name: a `post` whose body
/// is the topic's schema, the one List Webhook Topics serves. The schema's `$defs` join
/// `components/schemas` (refs in a document resolve from its root); a name already there for
/// another shape gets a `Webhook` prefix.
fn add_webhooks(document: &mut Value) {
    use mercer_domain::checkout::payloads::{self as checkout, Topic as CheckoutTopic};
    use mercer_domain::subscriptions::topics::{self as subscription, Topic};

    let subscription = Topic::ALL.into_iter().map(|topic| {
        let summary = format!("Subscription webhook {}", topic.as_str());
        let description = format!(
            "{} Sent to the shop's webhook subscriptions to this topic (id {}), signed with \
             their shared secret; `X-Svc-Topic` names the topic.",
            topic.description(),
            topic.id()
        );
        (
            topic.as_str(),
            summary,
            description,
            subscription::payload_schema(topic),
        )
    });
    let checkout = CheckoutTopic::ALL.into_iter().map(|topic| {
        let summary = format!("Checkout webhook {}", topic.as_str());
        let description = format!(
            "{} Sent to the shop's checkout webhooks on this topic (id {}), signed with the \
             integration's shared secret. A test delivery adds `\"test\": true`.",
            topic.description(),
            topic.id()
        );
        (
            topic.as_str(),
            summary,
            description,
            checkout::payload_schema(topic),
        )
    });
    let mut webhooks = Map::new();
    for (name, summary, description, mut schema) in subscription.chain(checkout) {
        let Some(Value::Object(defs)) = schema.as_object_mut().and_then(|s| s.remove("$defs"))
        else {
            webhooks.insert(
                name.to_string(),
                webhook_item(name, summary, description, schema),
            );
            continue;
        };
        let mut renamed = Vec::new();
        let components = &mut document["components"]["schemas"];
        for (def, shape) in defs {
            match components.get(&def) {
                None => components[def.as_str()] = shape,
                Some(existing) if same_shape(existing, &shape) => {}
                Some(_) => {
                    let prefixed = format!("Webhook{def}");
                    components[prefixed.as_str()] = shape;
                    renamed.push((def, prefixed));
                }
            }
        }
        if let Some(fields) = schema.as_object_mut() {
            // The document says its dialect once (`jsonSchemaDialect` defaults to it).
            fields.remove("$schema");
        }
        point_at_components(&mut schema, &renamed);
        webhooks.insert(
            name.to_string(),
            webhook_item(name, summary, description, schema),
        );
    }
    // The components' own refs into renamed defs are pointed the same way.
    if let Some(Value::Object(schemas)) = document["components"].get_mut("schemas") {
        for shape in schemas.values_mut() {
            point_at_components(shape, &[]);
        }
    }
    document["webhooks"] = Value::Object(webhooks);
}

/// Whether a component schema is the def of a topic schema: the same once its refs and
/// alternatives are written as topic schemas write them.
fn same_shape(component: &Value, def: &Value) -> bool {
    let mut localized = component.clone();
    mercer_domain::webhooks::catalogue::localize(&mut localized);
    localized == *def
}

/// One entry of `webhooks`: the `post` Mercer makes to the receiver.
fn webhook_item(name: &str, summary: String, description: String, schema: Value) -> Value {
    let operation_id = format!(
        "webhook_{}",
        name.replace(['/', '-'], "_").to_ascii_lowercase()
    );
    json!({
        "post": {
            "operationId": operation_id,
            "summary": summary,
            "description": description,
            "tags": ["Webhook payloads"],
            "security": [],
            "requestBody": {
                "required": true,
                "content": {"application/json": {"schema": schema}},
            },
            "responses": {
                "2XX": {"description": "Received: any 2xx answer ends the message's deliveries."},
            },
        }
    })
}

/// Points a topic schema's `#/$defs/` refs at `#/components/schemas/`, under their new names
/// where `renamed` gives one.
fn point_at_components(value: &mut Value, renamed: &[(String, String)]) {
    match value {
        Value::Object(fields) => {
            if let Some(Value::String(reference)) = fields.get_mut("$ref")
                && let Some(def) = reference.strip_prefix("#/$defs/")
            {
                let name = renamed
                    .iter()
                    .find(|(old, _)| old == def)
                    .map_or(def, |(_, new)| new.as_str());
                *reference = format!("#/components/schemas/{name}");
            }
            fields
                .values_mut()
                .for_each(|value| point_at_components(value, renamed));
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|value| point_at_components(value, renamed)),
        _ => {}
    }
}

/// Where a create's answer holds the new id: `/id`, or `/<key>/id` for an answer that wraps
/// the record in one key (`{"subscription_group": {"id": …}}`).
fn id_pointer(schemas: &Value, name: &str) -> Option<String> {
    let properties = schemas[name]["properties"].as_object()?;
    if properties.contains_key("id") {
        return Some("/id".to_string());
    }
    properties.iter().find_map(|(key, property)| {
        let inner = property["$ref"].as_str()?.rsplit('/').next()?;
        schemas[inner]["properties"]
            .get("id")
            .map(|_| format!("/{key}/id"))
    })
}

/// The `{names}` of a path template, in order.
fn path_parameters(template: &str) -> Vec<String> {
    template
        .split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}'))
        .map(|(name, _)| name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_document_is_the_generated_one() {
        let committed = include_str!("../../../../docs/openapi.json");
        assert!(
            committed.trim_end() == document_json(),
            "docs/openapi.json differs from the code's document: run `cargo xtask openapi`"
        );
    }

    #[test]
    fn the_document_is_openapi_3_1_with_unique_operation_ids() {
        let document: serde_json::Value = serde_json::from_str(document_json()).unwrap();
        assert_eq!(document["openapi"], "3.1.0");
        let mut ids = HashSet::new();
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let id = operation["operationId"].as_str().unwrap().to_string();
                assert!(
                    ids.insert(id.clone()),
                    "{method} {path}: {id} is used twice"
                );
                assert!(
                    operation["responses"]["4XX"]["content"]["application/json"]["schema"]["$ref"]
                        == "#/components/schemas/ErrorBody",
                    "{method} {path} has no error answer"
                );
            }
        }
    }

    /// Reference pages list operations by their summaries: each is a short title in sentence case
    /// ("Create a subscription"), not a route, a body's shape or an answer's status; those belong
    /// to the description and the responses. No description draws arrows either.
    #[test]
    fn every_summary_is_a_short_title_and_no_description_draws_arrows() {
        let document: Value = serde_json::from_str(document_json()).unwrap();
        let has_status = |text: &str| {
            text.split(|c: char| !c.is_ascii_digit())
                .any(|digits| digits.len() == 3)
        };
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let summary = operation["summary"].as_str().unwrap_or_default();
                let at = format!("{method} {path}: {summary:?}");
                assert!(!summary.is_empty(), "{at} has no summary");
                assert!(summary.chars().count() <= 60, "{at} is too long");
                assert!(
                    summary.starts_with(|c: char| c.is_ascii_uppercase()),
                    "{at} does not start with a capital letter"
                );
                assert!(!summary.ends_with('.'), "{at} is a sentence, not a title");
                for mark in ['`', '→', '…', '\n'] {
                    assert!(!summary.contains(mark), "{at} holds {mark:?}");
                }
                assert!(!summary.contains("->"), "{at} holds an arrow");
                assert!(!has_status(summary), "{at} holds a status code");
                let description = operation["description"].as_str().unwrap_or_default();
                assert!(
                    !description.contains('→') && !description.contains("->"),
                    "{method} {path}: the description draws an arrow"
                );
            }
        }
    }

    /// Reference pages build a body's example from its schema's defaults first: a null default
    /// made the example of every body `null`.
    #[test]
    fn no_schema_has_a_null_default() {
        fn find(value: &Value, at: &str, found: &mut Vec<String>) {
            match value {
                Value::Object(object) => {
                    if object.get("default").is_some_and(Value::is_null) {
                        found.push(at.to_string());
                    }
                    for (key, value) in object {
                        find(value, &format!("{at}/{key}"), found);
                    }
                }
                Value::Array(items) => {
                    for (index, value) in items.iter().enumerate() {
                        find(value, &format!("{at}/{index}"), found);
                    }
                }
                _ => {}
            }
        }
        let document: Value = serde_json::from_str(document_json()).unwrap();
        let mut found = Vec::new();
        find(&document, "", &mut found);
        assert!(found.is_empty(), "null defaults at {found:?}");
    }

    /// What client generators and linters need: a server, the version header defined once as a
    /// patterned string (a date-typed header is refused) and referenced by every operation, and
    /// every operation stating its security (an empty list for the public ones).
    #[test]
    fn every_operation_references_the_shared_version_header_and_states_its_security() {
        let document: Value = serde_json::from_str(document_json()).unwrap();
        assert_eq!(document["servers"][0]["url"], "/");
        let header = &document["components"]["parameters"][VERSION_HEADER];
        assert_eq!(header["name"], VERSION_HEADER);
        assert_eq!(header["in"], "header");
        assert_eq!(
            header["schema"],
            json!({"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"})
        );
        let reference = json!({ "$ref": format!("#/components/parameters/{VERSION_HEADER}") });
        let mut public = 0;
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let parameters = operation["parameters"].as_array().unwrap();
                assert_eq!(
                    parameters
                        .iter()
                        .filter(|parameter| **parameter == reference)
                        .count(),
                    1,
                    "{method} {path}"
                );
                assert!(
                    !parameters
                        .iter()
                        .any(|parameter| parameter["name"] == VERSION_HEADER),
                    "{method} {path} defines the header inline"
                );
                let security = operation["security"].as_array();
                assert!(security.is_some(), "{method} {path} states no security");
                public += usize::from(security.is_some_and(Vec::is_empty));
                assert!(
                    operation["summary"].as_str().is_some_and(|s| !s.is_empty()),
                    "{method} {path} has no summary"
                );
            }
        }
        assert!(public > 0, "no public operation");
    }

    /// Bodies used by one create only list the fields whose absence is a 422.
    #[test]
    fn create_only_bodies_list_the_fields_they_cannot_do_without() {
        let document: Value = serde_json::from_str(document_json()).unwrap();
        let schemas = &document["components"]["schemas"];
        for (name, required) in [
            (
                "CheckoutWebhookInput",
                json!(["webhook_topic_id", "callback_url"]),
            ),
            ("RecoverBody", json!(["since"])),
            ("SubscriptionWebhookRecoverRequest", json!(["since"])),
            ("IntegrationConfig", json!(["shared_secret"])),
        ] {
            assert_eq!(schemas[name]["required"], required, "{name}");
            for field in required.as_array().unwrap() {
                let property = &schemas[name]["properties"][field.as_str().unwrap()];
                assert!(
                    !property["type"].is_array(),
                    "{name}.{field} is nullable: {property}"
                );
                assert!(property.get("default").is_none(), "{name}.{field}");
            }
        }
    }

    #[test]
    fn creates_link_to_the_operations_of_the_record_they_make() {
        let document: Value = serde_json::from_str(document_json()).unwrap();
        let links = &document["paths"]["/subscriptions/v1/shops/{shop}/subscription_groups"]["post"]
            ["responses"]["201"]["links"];
        let get = &links["get_subscription_group"];
        assert_eq!(get["operationId"], "get_subscription_group");
        assert_eq!(
            get["parameters"],
            json!({"shop": "$request.path.shop", "id": "$response.body#/subscription_group/id"})
        );
        assert!(links["delete_subscription_group"].is_object());
    }

    #[test]
    fn every_scope_is_an_oauth_scope_and_routes_name_theirs_for_both_schemes() {
        let document: serde_json::Value = serde_json::from_str(document_json()).unwrap();
        let schemes = &document["components"]["securitySchemes"];
        for name in [API_TOKEN, OAUTH2, CHECKOUT_JWT, CUSTOMER_TOKEN] {
            assert!(schemes[name].is_object(), "no security scheme {name}");
        }
        let oauth_scopes = schemes[OAUTH2]["flows"]["authorizationCode"]["scopes"]
            .as_object()
            .unwrap();
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let Some(security) = operation["security"].as_array() else {
                    continue;
                };
                let scopes_of = |scheme: &str| {
                    security
                        .iter()
                        .find_map(|requirement| requirement.get(scheme))
                        .cloned()
                };
                if let Some(token_scopes) = scopes_of(API_TOKEN) {
                    assert_eq!(
                        scopes_of(OAUTH2),
                        Some(token_scopes.clone()),
                        "{method} {path}: the OAuth token needs the API token's scopes"
                    );
                    for scope in token_scopes.as_array().unwrap() {
                        let scope = scope.as_str().unwrap();
                        assert!(oauth_scopes.contains_key(scope), "{method} {path}: {scope}");
                    }
                }
            }
        }
    }
}
