//! The webhook topic catalogue's schemas: a payload type's JSON Schema (2020-12), generated
//! from its `utoipa::ToSchema` derive and made self-contained, so that a receiver can validate
//! a delivery with nothing but the topic's entry.

use serde_json::{Map, Value};
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;

/// The JSON Schema dialect of every topic schema.
pub const JSON_SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Where OpenAPI documents keep named schemas; a topic schema keeps them in its own `$defs`.
const COMPONENTS_PREFIX: &str = "#/components/schemas/";
const DEFS_PREFIX: &str = "#/$defs/";

/// `T`'s schema as a self-contained 2020-12 JSON Schema: every schema it refers to, directly
/// or not, is under its own `$defs`, and every `$ref` points there.
pub fn self_contained_schema<T: ToSchema>() -> Value {
    self_contained_schema_with::<T>(Vec::new())
}

/// The schemas a generic type's parameters name: a derive on a generic type refers to its
/// parameter by name without collecting it, so the caller adds each with [`named_schema`].
pub type NamedSchemas = Vec<(String, RefOr<Schema>)>;

/// Adds `P`'s schema under its name, and the schemas it refers to.
pub fn named_schema<P: ToSchema>(named: &mut NamedSchemas) {
    named.push((P::name().into_owned(), P::schema()));
    P::schemas(named);
}

/// [`self_contained_schema`] of a generic `T`, with its parameters' schemas in `named`.
pub fn self_contained_schema_with<T: ToSchema>(mut named: NamedSchemas) -> Value {
    T::schemas(&mut named);
    let mut defs = Map::new();
    for (name, schema) in named {
        let schema = serde_json::to_value(schema).unwrap_or(Value::Null);
        defs.entry(name).or_insert(schema);
    }
    let root = serde_json::to_value(T::schema()).unwrap_or(Value::Null);
    let mut schema = Map::new();
    schema.insert(
        "$schema".to_string(),
        Value::String(JSON_SCHEMA_DIALECT.to_string()),
    );
    match root {
        Value::Object(fields) => schema.extend(fields),
        // A root that is not an object (never for a derived type): keep it as the one subschema.
        other => {
            schema.insert("allOf".to_string(), Value::Array(vec![other]));
        }
    }
    let mut schema = Value::Object(schema);
    localize(&mut schema);
    let defs = reachable_defs(&schema, defs);
    if !defs.is_empty() {
        schema["$defs"] = Value::Object(defs);
    }
    schema
}

/// The defs `root` refers to, directly or through other defs: a type inlined in the root (a
/// generic's parameter) leaves its named schemas unused.
fn reachable_defs(root: &Value, mut defs: Map<String, Value>) -> Map<String, Value> {
    defs.values_mut().for_each(localize);
    let mut kept = Map::new();
    let mut pending = Vec::new();
    references_into(root, &mut pending);
    while let Some(name) = pending.pop() {
        if kept.contains_key(&name) {
            continue;
        }
        if let Some(def) = defs.remove(&name) {
            references_into(&def, &mut pending);
            kept.insert(name, def);
        }
    }
    // By name, for a stable document.
    let mut ordered: Vec<(String, Value)> = kept.into_iter().collect();
    ordered.sort_by(|(a, _), (b, _)| a.cmp(b));
    ordered.into_iter().collect()
}

/// The names of the defs `value` refers to.
fn references_into(value: &Value, names: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            if let Some(Value::String(reference)) = fields.get("$ref")
                && let Some(name) = reference.strip_prefix(DEFS_PREFIX)
            {
                names.push(name.to_string());
            }
            fields
                .values()
                .for_each(|value| references_into(value, names));
        }
        Value::Array(items) => items.iter().for_each(|value| references_into(value, names)),
        _ => {}
    }
}

/// Points every `$ref` at `$defs`, and makes every `oneOf` an `anyOf`: the payloads' untagged
/// variants can fit more than one alternative (a receiver reads the first that fits), which
/// `oneOf` would refuse. Public so that an OpenAPI document can tell a component schema from a
/// topic schema's def of the same type.
pub fn localize(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            if let Some(Value::String(reference)) = fields.get_mut("$ref")
                && let Some(name) = reference.strip_prefix(COMPONENTS_PREFIX)
            {
                *reference = format!("{DEFS_PREFIX}{name}");
            }
            if let Some(alternatives) = fields.remove("oneOf") {
                fields.insert("anyOf".to_string(), alternatives);
            }
            fields.values_mut().for_each(localize);
        }
        Value::Array(items) => items.iter_mut().for_each(localize),
        _ => {}
    }
}

/// Sets the root's `properties.<property>` to the one string `value` (a topic's name, fixed
/// for its schema).
pub fn fix_property(schema: &mut Value, property: &str, value: &str) {
    if let Some(Value::Object(properties)) = schema.get_mut("properties")
        && let Some(Value::Object(field)) = properties.get_mut(property)
    {
        field.insert("const".to_string(), Value::String(value.to_string()));
    }
}

/// Checks a delivered body against its topic's schema, for tests: every violation, each with
/// the path of the value at fault.
#[cfg(test)]
pub(crate) fn violations(schema: &Value, body: &Value) -> Vec<String> {
    let validator = match jsonschema::draft202012::new(schema) {
        Ok(validator) => validator,
        Err(error) => return vec![format!("the schema does not compile: {error}")],
    };
    validator
        .iter_errors(body)
        .map(|error| format!("at {}: {error}", error.instance_path()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkout::payloads::{Topic as CheckoutTopic, payload_schema as checkout_schema};
    use crate::subscriptions::topics::{Topic, payload_schema};
    use crate::webhooks::operational::EndpointDisabled;

    /// Every topic's schema, by name.
    fn every_schema() -> Vec<(&'static str, Value)> {
        let subscription = Topic::ALL
            .into_iter()
            .map(|topic| (topic.as_str(), payload_schema(topic)));
        let checkout = CheckoutTopic::ALL
            .into_iter()
            .map(|topic| (topic.as_str(), checkout_schema(topic)));
        subscription.chain(checkout).collect()
    }

    /// Every `$ref` of `value`.
    fn references(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(fields) => {
                if let Some(Value::String(reference)) = fields.get("$ref") {
                    found.push(reference.clone());
                }
                fields.values().for_each(|value| references(value, found));
            }
            Value::Array(items) => items.iter().for_each(|value| references(value, found)),
            _ => {}
        }
    }

    #[test]
    fn every_topic_has_a_valid_self_contained_2020_12_schema() {
        let schemas = every_schema();
        assert_eq!(schemas.len(), 21 + 7);
        for (name, schema) in schemas {
            assert_eq!(schema["$schema"], JSON_SCHEMA_DIALECT, "{name}");
            // An object, or (a checkout payload with its optional `test`) all of two.
            assert!(
                schema["type"] == "object" || schema["allOf"].is_array(),
                "{name}: {schema}"
            );
            if let Err(error) = jsonschema::meta::validate(&schema) {
                panic!("{name}: not a valid 2020-12 schema: {error}");
            }
            if let Err(error) = jsonschema::draft202012::new(&schema) {
                panic!("{name}: the schema does not compile: {error}");
            }
            let text = schema.to_string();
            assert!(!text.contains("#/components"), "{name}: {text}");
            assert!(!text.contains(r#""additionalProperties":false"#), "{name}");
            let mut found = Vec::new();
            references(&schema, &mut found);
            for reference in found {
                let name_of = reference.strip_prefix(DEFS_PREFIX);
                let defined = name_of.is_some_and(|def| schema["$defs"].get(def).is_some());
                assert!(defined, "{name}: {reference} is not in its $defs");
            }
        }
    }

    #[test]
    fn a_schema_is_self_contained_in_its_defs() {
        let mut named = NamedSchemas::new();
        named_schema::<EndpointDisabled>(&mut named);
        let schema = self_contained_schema_with::<
            crate::subscriptions::webhooks::Envelope<EndpointDisabled>,
        >(named);
        assert_eq!(schema["$schema"], JSON_SCHEMA_DIALECT);
        assert!(!schema.to_string().contains("#/components"), "{schema}");
        assert!(schema["$defs"]["EndpointDisabled"].is_object(), "{schema}");
        assert_eq!(
            schema["properties"]["data"]["$ref"],
            "#/$defs/EndpointDisabled"
        );
    }

    #[test]
    fn a_subscription_schema_fixes_its_topic_and_refuses_a_wrong_body() {
        let schema = payload_schema(Topic::EndpointDisabled);
        assert_eq!(schema["properties"]["topic"]["const"], "endpoint_disabled");
        let good = crate::webhooks::operational::endpoint_disabled_payload(
            crate::webhooks::WebhookKind::Subscription,
            "shop-1",
            &EndpointDisabled {
                endpoint_id: "e".repeat(32),
                topic: "subscription_created".to_string(),
                url: "http://127.0.0.1:9/".to_string(),
                failures_since: crate::kernel::time::Timestamp::from_micros(0),
                last_error: "HTTP 500".to_string(),
            },
            crate::kernel::time::Timestamp::from_micros(0),
        );
        assert_eq!(violations(&schema, &good), Vec::<String>::new());
        let mut wrong = good.clone();
        wrong["topic"] = Value::String("subscription_created".to_string());
        wrong["data"]["failures_since"] = Value::Null;
        assert_eq!(violations(&schema, &wrong).len(), 2, "{wrong}");
        // New fields are tolerated.
        let mut extended = good;
        extended["data"]["new_field"] = Value::Bool(true);
        assert_eq!(violations(&schema, &extended), Vec::<String>::new());
    }
}
