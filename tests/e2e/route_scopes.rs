//! Every authenticated route's scope, compared with the scopes docs/api-reference.md
//! and docs/api-conventions.md name: one table, checked against the real binary, and
//! checked to cover every route that the route folders of `crates/server/src/http/routes` register.

use std::collections::BTreeSet;

use mercer_tests::{Backend, MercerServer, backend_tests};

/// Every API scope, spelled as docs/api-conventions.md spells them (not taken from the code).
pub(crate) const SCOPES: [&str; 12] = [
    "read_customers",
    "write_customers",
    "read_orders",
    "write_orders",
    "read_products",
    "write_products",
    "read_shop_settings",
    "modify_shop_settings",
    "read_subscriptions",
    "write_subscriptions",
    "read_subscription_groups",
    "write_subscription_groups",
];

/// (method, path template as registered, the scope the documentation names).
pub(crate) const ROUTES: &[(&str, &str, &str)] = &[
    // Events and sync triggers; sync progress is docs/api-conventions.md's.
    (
        "POST",
        "/customers/v1/shops/{shop}/platforms/custom/webhooks/customers/saved",
        "write_customers",
    ),
    (
        "POST",
        "/customers/v1/shops/{shop}/platforms/custom/webhooks/customers/deleted",
        "write_customers",
    ),
    (
        "POST",
        "/orders/v1/shops/{shop}/platforms/custom/webhooks/orders/saved",
        "write_orders",
    ),
    (
        "POST",
        "/orders/v1/shops/{shop}/platforms/custom/webhooks/orders/deleted",
        "write_orders",
    ),
    (
        "POST",
        "/products/v1/shops/{shop}/platforms/custom/webhooks/products/saved",
        "write_products",
    ),
    (
        "POST",
        "/products/v1/shops/{shop}/platforms/custom/webhooks/products/deleted",
        "write_products",
    ),
    (
        "POST",
        "/products/v1/shops/{shop}/platforms/custom/webhooks/categories/saved",
        "write_products",
    ),
    (
        "POST",
        "/products/v1/shops/{shop}/platforms/custom/webhooks/categories/deleted",
        "write_products",
    ),
    ("POST", "/customers/v2/shops/{shop}/sync", "write_customers"),
    (
        "GET",
        "/customers/v2/shops/{shop}/sync/{id}",
        "read_customers",
    ),
    ("POST", "/orders/v2/shops/{shop}/sync", "write_orders"),
    ("GET", "/orders/v2/shops/{shop}/sync/{id}", "read_orders"),
    ("POST", "/products/v2/shops/{shop}/sync", "write_products"),
    (
        "GET",
        "/products/v2/shops/{shop}/sync/{id}",
        "read_products",
    ),
    // Headless checkout: Init Order; the shop's checkout settings (docs/checkout.md).
    ("POST", "/checkout/orders/{shop}/init", "write_orders"),
    (
        "GET",
        "/checkout/shop/{shop}/settings",
        "modify_shop_settings",
    ),
    (
        "PATCH",
        "/checkout/shop/{shop}/settings",
        "modify_shop_settings",
    ),
    // Overrides.
    (
        "POST",
        "/checkout/shop/{shop}/overrides",
        "modify_shop_settings",
    ),
    (
        "GET",
        "/checkout/shop/{shop}/overrides",
        "read_shop_settings",
    ),
    (
        "PATCH",
        "/checkout/shop/{shop}/overrides/{id}",
        "modify_shop_settings",
    ),
    (
        "DELETE",
        "/checkout/shop/{shop}/overrides/{id}",
        "modify_shop_settings",
    ),
    // Checkout webhooks, all modify_shop_settings; the delivery log and its actions are
    // docs/api-conventions.md's (reads read_shop_settings, actions modify_shop_settings).
    (
        "POST",
        "/checkout/shop/{shop}/integration/config",
        "modify_shop_settings",
    ),
    (
        "GET",
        "/checkout/shop/{shop}/webhooks/topics",
        "modify_shop_settings",
    ),
    (
        "POST",
        "/checkout/shop/{shop}/webhooks",
        "modify_shop_settings",
    ),
    (
        "GET",
        "/checkout/shop/{shop}/webhooks",
        "modify_shop_settings",
    ),
    (
        "PATCH",
        "/checkout/shop/{shop}/webhooks/{id}",
        "modify_shop_settings",
    ),
    (
        "DELETE",
        "/checkout/shop/{shop}/webhooks/{id}",
        "modify_shop_settings",
    ),
    (
        "POST",
        "/checkout/shop/{shop}/webhooks/{id}/test",
        "modify_shop_settings",
    ),
    (
        "GET",
        "/checkout/shop/{shop}/webhooks/{id}/deliveries",
        "read_shop_settings",
    ),
    (
        "GET",
        "/checkout/shop/{shop}/webhooks/{id}/deliveries/{message_id}",
        "read_shop_settings",
    ),
    (
        "POST",
        "/checkout/shop/{shop}/webhooks/{id}/deliveries/{message_id}/resend",
        "modify_shop_settings",
    ),
    (
        "POST",
        "/checkout/shop/{shop}/webhooks/{id}/recover",
        "modify_shop_settings",
    ),
    (
        "POST",
        "/checkout/shop/{shop}/webhooks/{id}/enable",
        "modify_shop_settings",
    ),
    // Reads of the subscription API.
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/shop",
        "read_subscriptions",
    ),
    // Webhook subscriptions: reads read_subscriptions, writes write_subscriptions.
    // Subscription webhooks' delivery log (docs/api-conventions.md).
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/deliveries",
        "read_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/deliveries/{message_id}",
        "read_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/deliveries/{message_id}/resend",
        "write_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/recover",
        "write_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}/enable",
        "write_subscriptions",
    ),
    // Subscription customers, subscriptions and actions.
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/customers",
        "read_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/customers/{customer_id}",
        "read_subscriptions",
    ),
    (
        "PUT",
        "/subscriptions/v1/shops/{shop}/customers/{customer_id}",
        "write_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/customers/{customer_id}/addresses",
        "read_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/customers/{customer_id}/addresses",
        "write_subscriptions",
    ),
    (
        "PUT",
        "/subscriptions/v1/shops/{shop}/customers/{customer_id}/addresses/{address_id}",
        "write_subscriptions",
    ),
    (
        "DELETE",
        "/subscriptions/v1/shops/{shop}/customers/{customer_id}/addresses/{address_id}",
        "write_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/customers/{customer_id}/subscriptions",
        "read_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/customers/{customer_id}/redact",
        "write_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/customers/{customer_id}/export",
        "read_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/subscriptions",
        "read_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/subscriptions",
        "write_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/subscriptions/{id}",
        "read_subscriptions",
    ),
    (
        "PUT",
        "/subscriptions/v1/shops/{shop}/subscriptions/{id}",
        "write_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/subscriptions/{id}/cancel",
        "write_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/settings/cancellation_reasons",
        "read_subscriptions",
    ),
    (
        "PUT",
        "/subscriptions/v1/shops/{shop}/settings/cancellation_reasons",
        "write_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/imports",
        "write_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/imports",
        "read_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/imports/{import_id}",
        "read_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/exports/subscriptions",
        "read_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/settings/dunning",
        "read_subscriptions",
    ),
    (
        "PUT",
        "/subscriptions/v1/shops/{shop}/settings/dunning",
        "write_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/analytics",
        "read_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/subscriptions/{id}/reactivate",
        "write_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/subscriptions/{id}/pause",
        "write_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/subscriptions/{id}/resume",
        "write_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/subscriptions/{id}/skip",
        "write_subscriptions",
    ),
    (
        "PUT",
        "/subscriptions/v1/shops/{shop}/subscriptions/{id}/line_items/{line_item_id}/quantity",
        "write_subscriptions",
    ),
    (
        "PUT",
        "/subscriptions/v1/shops/{shop}/subscriptions/{id}/frequency",
        "write_subscriptions",
    ),
    (
        "PUT",
        "/subscriptions/v1/shops/{shop}/subscriptions/{id}/shipping_address",
        "write_subscriptions",
    ),
    (
        "PUT",
        "/subscriptions/v1/shops/{shop}/subscriptions/{id}/payment_method",
        "write_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/subscription_groups",
        "read_subscription_groups",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/subscription_groups",
        "write_subscription_groups",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/subscription_groups/{id}",
        "read_subscription_groups",
    ),
    (
        "PUT",
        "/subscriptions/v1/shops/{shop}/subscription_groups/{id}",
        "write_subscription_groups",
    ),
    (
        "PATCH",
        "/subscriptions/v1/shops/{shop}/subscription_groups/{id}",
        "write_subscription_groups",
    ),
    (
        "DELETE",
        "/subscriptions/v1/shops/{shop}/subscription_groups/{id}",
        "write_subscription_groups",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/webhooks/topics",
        "read_subscriptions",
    ),
    // The box builder's admin routes, with the scopes docs/box-builder.md brackets.
    (
        "GET",
        "/box_builder/v1/shops/{shop}/boxes",
        "read_subscription_groups",
    ),
    (
        "POST",
        "/box_builder/v1/shops/{shop}/boxes",
        "write_subscription_groups",
    ),
    (
        "GET",
        "/box_builder/v1/shops/{shop}/boxes/{box_id}",
        "read_subscription_groups",
    ),
    (
        "PATCH",
        "/box_builder/v1/shops/{shop}/boxes/{box_id}",
        "write_subscription_groups",
    ),
    (
        "DELETE",
        "/box_builder/v1/shops/{shop}/boxes/{box_id}",
        "write_subscription_groups",
    ),
    (
        "GET",
        "/box_builder/v1/shops/{shop}/box_products",
        "read_subscription_groups",
    ),
    (
        "POST",
        "/box_builder/v1/shops/{shop}/box_products",
        "write_subscription_groups",
    ),
    (
        "GET",
        "/box_builder/v1/shops/{shop}/box_products/{box_product_id}",
        "read_subscription_groups",
    ),
    (
        "PATCH",
        "/box_builder/v1/shops/{shop}/box_products/{box_product_id}",
        "write_subscription_groups",
    ),
    (
        "DELETE",
        "/box_builder/v1/shops/{shop}/box_products/{box_product_id}",
        "write_subscription_groups",
    ),
    // Box sizes take the scopes of the other box builder admin resources.
    (
        "GET",
        "/box_builder/v1/shops/{shop}/boxes/{box_id}/box_sizes",
        "read_subscription_groups",
    ),
    (
        "POST",
        "/box_builder/v1/shops/{shop}/boxes/{box_id}/box_sizes",
        "write_subscription_groups",
    ),
    (
        "PUT",
        "/box_builder/v1/shops/{shop}/boxes/{box_id}/box_sizes",
        "write_subscription_groups",
    ),
    (
        "GET",
        "/box_builder/v1/shops/{shop}/box_sizes/{box_size_id}",
        "read_subscription_groups",
    ),
    (
        "PATCH",
        "/box_builder/v1/shops/{shop}/box_sizes/{box_size_id}",
        "write_subscription_groups",
    ),
    (
        "GET",
        "/box_builder/v1/shops/{shop}/boxes/{box_id}/time_slots",
        "read_subscription_groups",
    ),
    (
        "POST",
        "/box_builder/v1/shops/{shop}/boxes/{box_id}/time_slots",
        "write_subscription_groups",
    ),
    (
        "GET",
        "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}",
        "read_subscription_groups",
    ),
    (
        "PATCH",
        "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}",
        "write_subscription_groups",
    ),
    (
        "DELETE",
        "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}",
        "write_subscription_groups",
    ),
    (
        "GET",
        "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}/options",
        "read_subscription_groups",
    ),
    (
        "POST",
        "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}/options",
        "write_subscription_groups",
    ),
    (
        "DELETE",
        "/box_builder/v1/shops/{shop}/time_slots/{time_slot_id}/options/{box_product_id}",
        "write_subscription_groups",
    ),
    (
        "GET",
        "/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections",
        "read_subscriptions",
    ),
    (
        "POST",
        "/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections",
        "write_subscriptions",
    ),
    (
        "GET",
        "/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}",
        "read_subscriptions",
    ),
    (
        "PATCH",
        "/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}",
        "write_subscriptions",
    ),
    (
        "DELETE",
        "/box_builder/v1/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}",
        "write_subscriptions",
    ),
    (
        "GET",
        "/box_builder/v1/shops/{shop}/subscription_line_items",
        "read_subscriptions",
    ),
    (
        "GET",
        "/box_builder/v1/shops/{shop}/subscription_line_items/{line_item_id}",
        "read_subscriptions",
    ),
    (
        "POST",
        "/subscriptions/v1/shops/{shop}/webhooks/subscriptions",
        "write_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/webhooks/subscriptions",
        "read_subscriptions",
    ),
    (
        "GET",
        "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}",
        "read_subscriptions",
    ),
    (
        "PATCH",
        "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}",
        "write_subscriptions",
    ),
    (
        "DELETE",
        "/subscriptions/v1/shops/{shop}/webhooks/subscriptions/{id}",
        "write_subscriptions",
    ),
    // Secret rotation, destinations (writes modify, reads read).
    (
        "POST",
        "/integrations/v1/shops/{shop}/shared_secret/rotate",
        "modify_shop_settings",
    ),
    (
        "POST",
        "/integrations/v1/shops/{shop}/platform_connector_destinations",
        "modify_shop_settings",
    ),
    (
        "GET",
        "/integrations/v1/shops/{shop}/platform_connector_destinations",
        "read_shop_settings",
    ),
    (
        "GET",
        "/integrations/v1/shops/{shop}/platform_connector_destinations/{id}",
        "read_shop_settings",
    ),
    (
        "PATCH",
        "/integrations/v1/shops/{shop}/platform_connector_destinations/{id}",
        "modify_shop_settings",
    ),
    (
        "PUT",
        "/integrations/v1/shops/{shop}/platform_connector_destinations/{id}",
        "modify_shop_settings",
    ),
    (
        "DELETE",
        "/integrations/v1/shops/{shop}/platform_connector_destinations/{id}",
        "modify_shop_settings",
    ),
    // Customer directory: reads read_customers, labels write_customers.
    (
        "GET",
        "/customers/v2/shops/{shop}/customers",
        "read_customers",
    ),
    (
        "GET",
        "/customers/v2/shops/{shop}/customers/pid/{platform_id}",
        "read_customers",
    ),
    (
        "GET",
        "/customers/v2/shops/{shop}/customers/{id}",
        "read_customers",
    ),
    (
        "GET",
        "/customers/v2/shops/{shop}/customers/{id}/addresses",
        "read_customers",
    ),
    (
        "GET",
        "/customers/v2/shops/{shop}/customers/{id}/addresses/{address_id}",
        "read_customers",
    ),
    (
        "POST",
        "/customers/v2/shops/{shop}/customers/{id}/labels",
        "write_customers",
    ),
    (
        "DELETE",
        "/customers/v2/shops/{shop}/customers/{id}/labels/{label_id}",
        "write_customers",
    ),
];

/// Routes any valid token of the shop opens, whatever its scopes. None today: the box size
/// routes take the box builder's scopes (in `ROUTES`), so a token that may only read orders
/// cannot change what a box holds.
pub(crate) const ANY_TOKEN: &[(&str, &str)] = &[];

/// Routes without a shop token: probes, metrics, and OAuth (which authenticates otherwise).
pub(crate) const PUBLIC: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/accounts/dashboard/authorize"),
    ("POST", "/accounts/dashboard/authorize"),
    ("POST", "/auth/oauth2/token"),
];

/// The operator console's pages: HTML for a staff member's browser, signed in with a session
/// cookie (never a token), left out of the OpenAPI document on purpose.
pub(crate) const CONSOLE: &[(&str, &str)] = &[
    ("GET", "/console"),
    ("GET", "/console/sign-in"),
    ("POST", "/console/sign-in"),
    ("POST", "/console/sign-out"),
    ("GET", "/console/audit"),
    ("GET", "/console/webhooks"),
    ("GET", "/console/webhooks/messages/{message_id}"),
    ("POST", "/console/webhooks/messages/{message_id}/resend"),
    ("POST", "/console/webhooks/endpoints/{id}/recover"),
    ("GET", "/console/connector"),
    ("POST", "/console/connector/events/{id}/retry"),
    ("POST", "/console/connector/syncs/{topic}"),
    ("POST", "/console/secrets/{kind}/rotate"),
    ("GET", "/console/checkouts"),
    ("GET", "/console/checkouts/{public_order_id}"),
    ("GET", "/console/jobs"),
    ("POST", "/console/jobs/{id}/retry"),
    ("POST", "/console/jobs/{id}/cancel"),
    ("GET", "/console/subscriptions"),
    ("GET", "/console/subscriptions/{id}"),
    ("POST", "/console/subscriptions/{id}/cancel"),
    ("POST", "/console/subscriptions/{id}/pause"),
    ("POST", "/console/subscriptions/{id}/resume"),
    ("POST", "/console/subscriptions/{id}/skip"),
    ("GET", "/console/customers"),
    ("GET", "/console/customers/{id}"),
    ("GET", "/console/orders"),
    ("GET", "/console/boxes"),
    ("GET", "/console/boxes/{id}"),
    ("GET", "/console/settings"),
    ("POST", "/console/settings/dunning"),
    ("POST", "/console/settings/cancellation-reasons"),
];

/// The subscriber portal's pages: HTML for a shop's customer, entered with their platform's
/// token and then a session cookie (never an API token), left out of the OpenAPI document on
/// purpose.
pub(crate) const PORTAL: &[(&str, &str)] = &[
    ("GET", "/portal/shops/{shop}/enter"),
    ("POST", "/portal/shops/{shop}/sign-out"),
    ("GET", "/portal/shops/{shop}"),
    ("GET", "/portal/shops/{shop}/subscriptions/{id}"),
    ("POST", "/portal/shops/{shop}/subscriptions/{id}/{action}"),
];

/// The storefront's routes: the bearer is the JWT of the path's one order, never an API
/// token.
pub(crate) const STOREFRONT: &[(&str, &str)] = &[
    (
        "POST",
        "/checkout/storefront/{shop}/{public_order_id}/customer/guest",
    ),
    (
        "PUT",
        "/checkout/storefront/{shop}/{public_order_id}/customer",
    ),
    (
        "DELETE",
        "/checkout/storefront/{shop}/{public_order_id}/customer",
    ),
    (
        "GET",
        "/checkout/storefront/{shop}/{public_order_id}/validate_email_address",
    ),
    (
        "POST",
        "/checkout/storefront/{shop}/{public_order_id}/addresses/shipping",
    ),
    (
        "PUT",
        "/checkout/storefront/{shop}/{public_order_id}/addresses/shipping",
    ),
    (
        "DELETE",
        "/checkout/storefront/{shop}/{public_order_id}/addresses/shipping",
    ),
    (
        "POST",
        "/checkout/storefront/{shop}/{public_order_id}/addresses/billing",
    ),
    (
        "PUT",
        "/checkout/storefront/{shop}/{public_order_id}/addresses/billing",
    ),
    (
        "DELETE",
        "/checkout/storefront/{shop}/{public_order_id}/addresses/billing",
    ),
    (
        "GET",
        "/checkout/storefront/{shop}/{public_order_id}/validate_address",
    ),
    (
        "GET",
        "/checkout/storefront/{shop}/{public_order_id}/shipping_lines",
    ),
    (
        "POST",
        "/checkout/storefront/{shop}/{public_order_id}/shipping_lines",
    ),
    (
        "POST",
        "/checkout/storefront/{shop}/{public_order_id}/taxes",
    ),
    (
        "POST",
        "/checkout/storefront/{shop}/{public_order_id}/discounts",
    ),
    (
        "DELETE",
        "/checkout/storefront/{shop}/{public_order_id}/discounts",
    ),
    (
        "GET",
        "/checkout/storefront/{shop}/{public_order_id}/validate_discount_code",
    ),
    (
        "GET",
        "/checkout/storefront/{shop}/{public_order_id}/payments",
    ),
    (
        "POST",
        "/checkout/storefront/{shop}/{public_order_id}/payments",
    ),
    (
        "PUT",
        "/checkout/storefront/{shop}/{public_order_id}/payments",
    ),
    (
        "DELETE",
        "/checkout/storefront/{shop}/{public_order_id}/payments",
    ),
    (
        "DELETE",
        "/checkout/storefront/{shop}/{public_order_id}/payments/gift_card",
    ),
    (
        "POST",
        "/checkout/storefront/{shop}/{public_order_id}/items",
    ),
    ("PUT", "/checkout/storefront/{shop}/{public_order_id}/items"),
    (
        "DELETE",
        "/checkout/storefront/{shop}/{public_order_id}/items",
    ),
    (
        "GET",
        "/checkout/storefront/{shop}/{public_order_id}/check_inventory",
    ),
    (
        "PATCH",
        "/checkout/storefront/{shop}/{public_order_id}/meta_data",
    ),
    (
        "GET",
        "/checkout/storefront/{shop}/{public_order_id}/refresh",
    ),
    (
        "POST",
        "/checkout/storefront/{shop}/{public_order_id}/process_order",
    ),
    ("POST", "/checkout/storefront/{shop}/{public_order_id}/log"),
];

/// The box builder's storefront routes (no credentials) and its customer routes (the token the
/// platform issued the customer, checked by the connector): tests/e2e/box_builder.rs.
pub(crate) const BOX_SHOPPERS: &[(&str, &str)] = &[
    ("GET", "/box_builder/v1/storefront/shops/{shop}/boxes"),
    (
        "GET",
        "/box_builder/v1/storefront/shops/{shop}/boxes/{box_id}",
    ),
    (
        "GET",
        "/box_builder/v1/storefront/shops/{shop}/boxes/{box_id}/time_slots",
    ),
    (
        "GET",
        "/box_builder/v1/storefront/shops/{shop}/boxes/{box_id}/box_sizes",
    ),
    (
        "GET",
        "/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}/selections",
    ),
    (
        "POST",
        "/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}/selections",
    ),
    (
        "GET",
        "/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}",
    ),
    (
        "PATCH",
        "/box_builder/v1/customer/shops/{shop}/customers/{platform_customer_id}/selections/{selection_id}",
    ),
];

/// The string literals of `text`, in order (no escapes occur in route paths).
fn literals(text: &str) -> Vec<&str> {
    text.split('"').skip(1).step_by(2).collect()
}

/// (method, path) of every route the route folders register, read from the source of every
/// `configure()` (`routes/mod.rs` and each feature's `routes/<feature>/mod.rs`): each
/// `resource("…")` with the `web::<method>()` routes that follow it, and each `event_route!`
/// invocation, expanded as its `macro_rules!` does (POST
/// `/{service}/v1/shops/{shop}/platforms/custom/webhooks/{collection}/{action}`).
pub(crate) fn registered_routes() -> BTreeSet<(String, String)> {
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crates/server/src/http/routes"
    );
    let mut sources = vec![std::fs::read_to_string(format!("{root}/mod.rs")).unwrap()];
    for folder in std::fs::read_dir(root).unwrap() {
        let folder = folder.unwrap().path();
        if folder.is_dir() {
            sources.push(std::fs::read_to_string(folder.join("mod.rs")).unwrap());
        }
    }
    assert!(sources.len() > 5, "the route folders were not found");
    let mut routes = BTreeSet::new();
    for source in &sources {
        read_routes(source, &mut routes);
    }
    routes
}

/// The routes one `configure()` source registers.
fn read_routes(source: &str, routes: &mut BTreeSet<(String, String)>) {
    let compact: String = source.chars().filter(|c| !c.is_whitespace()).collect();
    for invocation in compact.split("event_route!(").skip(1) {
        // The macro's definition is `macro_rules! event_route {`, never `event_route!(`.
        let arguments = invocation.split(");").next().unwrap();
        let [service, collection, action] = literals(arguments)[..] else {
            panic!("an event_route! invocation of another shape: {arguments}");
        };
        routes.insert((
            "POST".to_string(),
            format!("/{service}/v1/shops/{{shop}}/platforms/custom/webhooks/{collection}/{action}"),
        ));
    }
    // The first piece is what comes before the first registration (in `routes/mod.rs`, the
    // definition of `fn resource(path: &str)`).
    for registration in compact.split("resource(\"").skip(1) {
        let (path, rest) = registration.split_once('"').unwrap();
        let rest = rest.split(".service(").next().unwrap();
        let mut methods = 0;
        for piece in rest.split("web::").skip(1) {
            if let Some((method, _)) = piece.split_once("()")
                && ["get", "post", "put", "patch", "delete"].contains(&method)
            {
                routes.insert((method.to_uppercase(), path.to_string()));
                methods += 1;
            }
        }
        assert!(methods > 0, "no method read for {path}");
    }
}

/// The template with concrete values: numeric ids (and 32-hex ids for webhooks and overrides)
/// that name nothing, so a handler reached answers 404 or 422 at worst.
pub(crate) fn concrete(template: &str, shop: &str) -> String {
    template
        .replace("{shop}", shop)
        .replace("{public_order_id}", "0123456789abcdef0123456789abcdef")
        .replace("{message_id}", "msg_0123456789abcdef0123456789abcdef")
        .replace("{platform_id}", "pid-1")
        .replace("{address_id}", "1")
        .replace("{label_id}", "1")
        .replace("{box_id}", "1")
        .replace("{box_product_id}", "1")
        .replace("{box_size_id}", "1")
        .replace("{time_slot_id}", "1")
        .replace("{platform_customer_id}", "cust-1")
        .replace("{selection_id}", "1")
        .replace("{line_item_id}", "1")
        .replace("{import_id}", "1")
        .replace(
            "{id}",
            if template.contains("/overrides/") || template.contains("/webhooks/{id}") {
                "0123456789abcdef0123456789abcdef"
            } else {
                "1"
            },
        )
}

/// docs/api-reference.md lists every route the server registers, each with the scope this
/// table names.
#[test]
fn the_api_reference_lists_every_route_with_its_scope() {
    let reference = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/api-reference.md"
    ))
    .unwrap();
    let line_of = |method: &str, path: &str| {
        let route = format!("`{method} {path}`");
        reference
            .lines()
            .find(|line| line.contains(&route))
            .map(str::to_string)
    };
    let missing: Vec<_> = registered_routes()
        .into_iter()
        .filter(|(method, path)| line_of(method, path).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "not in docs/api-reference.md: {missing:?}"
    );
    for (method, path, scope) in ROUTES {
        let line = line_of(method, path).unwrap_or_default();
        assert!(
            line.contains(&format!("`{scope}`")),
            "{method} {path} needs `{scope}`: {line}"
        );
    }
}

#[test]
fn the_table_covers_every_registered_route() {
    let registered = registered_routes();
    let listed: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(method, path, _)| (method.to_string(), path.to_string()))
        .chain(
            PUBLIC
                .iter()
                .chain(STOREFRONT)
                .chain(BOX_SHOPPERS)
                .chain(ANY_TOKEN)
                .chain(CONSOLE)
                .chain(PORTAL)
                .map(|(method, path)| (method.to_string(), path.to_string())),
        )
        .collect();
    assert_eq!(
        listed.len(),
        ROUTES.len()
            + PUBLIC.len()
            + STOREFRONT.len()
            + BOX_SHOPPERS.len()
            + ANY_TOKEN.len()
            + CONSOLE.len()
            + PORTAL.len(),
        "a route is listed twice"
    );
    let unlisted: Vec<_> = registered.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&registered).collect();
    assert!(
        unlisted.is_empty() && gone.is_empty(),
        "routes registered but not in the scope table: {unlisted:?}; in the table but not \
         registered: {gone:?}"
    );
    for (_, _, scope) in ROUTES {
        assert!(SCOPES.contains(scope), "{scope} is not an API scope");
    }
}

fn every_route_requires_its_documented_scope(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let shop = server
        .cli(&["shop", "create", "--domain", "scopes.shop.test"])
        .values()[0]
        .clone();
    let token = |scopes: &[&str]| -> String {
        server
            .cli(&[
                "token",
                "create",
                "--shop",
                &shop,
                "--scope",
                &scopes.join(","),
            ])
            .value()
    };
    let used: BTreeSet<&str> = ROUTES.iter().map(|(_, _, scope)| *scope).collect();
    let mut failures = Vec::new();
    for scope in used {
        let only = token(&[scope]);
        let others: Vec<&str> = SCOPES.iter().copied().filter(|s| *s != scope).collect();
        let all_but = token(&others);
        for (method, template, _) in ROUTES.iter().filter(|(_, _, s)| *s == scope) {
            let path = concrete(template, &shop);
            let refused = server.request(method, &path).bearer(&all_but).call();
            let entry = (refused.status == 403)
                .then(|| refused.errors().into_iter().next())
                .flatten();
            let forbidden = entry.as_ref().is_some_and(|entry| {
                entry["type"] == "auth.forbidden" && entry["sub_type"] == "missing_scope"
            });
            if !forbidden {
                failures.push(format!(
                    "{method} {template} without {scope}: {} {}",
                    refused.status, refused.text
                ));
            }
            let allowed = server.request(method, &path).bearer(&only).call();
            if allowed.status == 401 || allowed.status == 403 {
                failures.push(format!(
                    "{method} {template} with only {scope}: {} {}",
                    allowed.status, allowed.text
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A route of no scope opens with a token of the shop holding any one scope, and with no
/// other: none is 401, another shop's 403.
fn routes_of_no_scope_take_any_token_of_the_shop(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let shop = server
        .cli(&["shop", "create", "--domain", "any.shop.test"])
        .values()[0]
        .clone();
    let one_scope = server
        .cli(&[
            "token",
            "create",
            "--shop",
            &shop,
            "--scope",
            "read_customers",
        ])
        .value();
    let other_shop = server.demo().token.clone();
    let mut failures = Vec::new();
    for (method, template) in ANY_TOKEN {
        let path = concrete(template, &shop);
        let status = |bearer: Option<&str>| {
            let call = server.request(method, &path);
            match bearer {
                Some(token) => call.bearer(token).call().status,
                None => call.call().status,
            }
        };
        let (none, other, one) = (
            status(None),
            status(Some(&other_shop)),
            status(Some(&one_scope)),
        );
        if none != 401 || other != 403 || one == 401 || one == 403 {
            failures.push(format!(
                "{method} {template}: none {none}, another shop's {other}, one scope {one}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// No storefront route opens without the JWT of its order: none at all, or an API token with
/// every scope, is 401.
fn every_storefront_route_requires_its_orders_token(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let mut failures = Vec::new();
    for (method, template) in STOREFRONT {
        let path = concrete(template, &demo.shop);
        for bearer in [None, Some(demo.token.as_str())] {
            let mut call = server.request(method, &path);
            if let Some(token) = bearer {
                call = call.bearer(token);
            }
            let answer = call.call();
            let unauthenticated = answer.status == 401
                && answer
                    .errors()
                    .first()
                    .is_some_and(|entry| entry["type"] == "auth.unauthenticated");
            if !unauthenticated {
                failures.push(format!(
                    "{method} {template} with {bearer:?}: {} {}",
                    answer.status, answer.text
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The page a shop runs the library on: any origin but Mercer's (only a header here).
const SHOP_PAGE: &str = "https://shop.example.test";

/// The storefront's routes answer other origins (the library runs on the shop's pages, with
/// `credentials: 'include'`): a preflight names the page's origin, credentials, the method and
/// the headers asked for, and the answer itself (here a 401) names the origin so the page can
/// read its errors. No other route answers another origin: their preflights carry no CORS
/// header, nor do their answers.
fn only_storefront_routes_answer_other_origins(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let demo = server.demo().clone();
    let preflight = |method: &str, path: &str| {
        server
            .request("OPTIONS", path)
            .header("origin", SHOP_PAGE)
            .header("access-control-request-method", method)
            .header(
                "access-control-request-headers",
                "authorization,content-type",
            )
            .call()
    };
    let mut failures = Vec::new();
    for (method, template) in STOREFRONT {
        let path = concrete(template, &demo.shop);
        let asked = preflight(method, &path);
        let allowed_methods = asked
            .header("access-control-allow-methods")
            .unwrap_or_default()
            .to_string();
        let allowed_headers = asked
            .header("access-control-allow-headers")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let answered = asked.status == 204
            && asked.header("access-control-allow-origin") == Some(SHOP_PAGE)
            && asked.header("access-control-allow-credentials") == Some("true")
            && allowed_methods.split(',').any(|m| m.trim() == *method)
            && allowed_headers.contains("authorization")
            && allowed_headers.contains("content-type");
        if !answered {
            failures.push(format!(
                "preflight of {method} {template}: {} {:?}",
                asked.status, asked.headers
            ));
        }
        let refused = server
            .request(method, &path)
            .header("origin", SHOP_PAGE)
            .call();
        if refused.status != 401
            || refused.header("access-control-allow-origin") != Some(SHOP_PAGE)
            || refused.header("access-control-allow-credentials") != Some("true")
        {
            failures.push(format!(
                "{method} {template} without its token: {} {:?}",
                refused.status, refused.headers
            ));
        }
    }
    // The box builder's shopper routes answer any origin too, with no token or a customer's.
    for (method, template) in BOX_SHOPPERS {
        let path = concrete(template, &demo.shop);
        let asked = preflight(method, &path);
        let answered = server
            .request(method, &path)
            .header("origin", SHOP_PAGE)
            .call();
        for (what, answer) in [("preflight", &asked), ("answer", &answered)] {
            if answer.header("access-control-allow-origin") != Some(SHOP_PAGE) {
                failures.push(format!(
                    "{what} of {method} {template}: {} {:?}",
                    answer.status, answer.headers
                ));
            }
        }
        if asked.status != 204 {
            failures.push(format!(
                "preflight of {method} {template}: {}",
                asked.status
            ));
        }
    }
    let others = ROUTES
        .iter()
        .map(|(method, path, _)| (*method, *path))
        .chain(PUBLIC.iter().copied())
        .chain(CONSOLE.iter().copied())
        .chain(PORTAL.iter().copied());
    for (method, template) in others {
        let path = concrete(template, &demo.shop);
        let asked = preflight(method, &path);
        let answered = server
            .request(method, &path)
            .header("origin", SHOP_PAGE)
            .bearer(&demo.token)
            .call();
        for (what, answer) in [("preflight", &asked), ("answer", &answered)] {
            if answer.headers.iter().any(|(name, _)| {
                name.to_ascii_lowercase()
                    .starts_with("access-control-allow-")
            }) {
                failures.push(format!(
                    "{what} of {method} {template} allows another origin: {:?}",
                    answer.headers
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

backend_tests!(
    every_route_requires_its_documented_scope,
    routes_of_no_scope_take_any_token_of_the_shop,
    every_storefront_route_requires_its_orders_token,
    only_storefront_routes_answer_other_origins,
);
