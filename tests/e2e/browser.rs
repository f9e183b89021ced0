//! Mercer in a real browser, headless Chromium:
//! - the sign-in and consent page (issue 5): with JavaScript off, the browser opens the
//!   authorize URL, signs in, approves and follows the redirect to a local client; the code it
//!   brings is exchanged for a token that then works on an API route;
//! - the headless checkout (issue 15) from a shop's own page on another origin: the vendor's
//!   frontend library, bundled for browsers, runs a whole checkout through CORS.

use mercer_platform_sim::RunningSimulator;
use mercer_tests::browser::{browser, report_skip};
use mercer_tests::receiver::Receiver;
use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, form_encode};
use serde_json::json;

use crate::checkout::{
    assert_all_answered, assert_verified, init, override_server, set_up, wait_for, whole_checkout,
};
use crate::oauth::{PASSWORD, oauth_world};

fn a_staff_member_approves_an_app_in_a_real_browser(backend: Backend) {
    let browser = match browser() {
        Ok(browser) => browser,
        Err(skipped) => {
            report_skip(&skipped);
            return;
        }
    };
    let server = MercerServer::start(backend);
    let client = Receiver::start();
    let redirect = format!("{}/callback", client.url);
    let world = oauth_world(&server, &redirect);
    let query = [
        ("client_id", world.client_id.as_str()),
        ("redirect_uri", redirect.as_str()),
        ("scope", "read_shop_settings modify_shop_settings"),
        ("state", "browser-state-42"),
        ("response_type", "code"),
        ("shop", world.shop.as_str()),
    ]
    .iter()
    .map(|(k, v)| format!("{k}={}", form_encode(v)))
    .collect::<Vec<_>>()
    .join("&");
    let authorize = server.url(&format!("/accounts/dashboard/authorize?{query}"));

    let seen = browser.sign_in_and_approve(&authorize, &world.email, PASSWORD);
    assert_eq!(seen.first_status, 200);
    assert!(seen.heading.contains("Box Builder"), "{}", seen.heading);
    assert!(seen.final_url.starts_with(&redirect), "{}", seen.final_url);

    // The local client got the browser's request with the code and the state.
    let arrived = client.received();
    let callback = arrived
        .iter()
        .find(|request| request.target.starts_with("/callback?"))
        .expect("the browser reached the client");
    let params: Vec<(&str, &str)> = callback.target["/callback?".len()..]
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .collect();
    let value = |name: &str| {
        params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    };
    assert_eq!(value("state").as_deref(), Some("browser-state-42"));
    let code = value("code").expect("a code");

    let issued = server.post("/auth/oauth2/token").form(&[
        ("grant_type", "authorization_code"),
        ("code", &code),
        ("redirect_uri", &redirect),
        ("client_id", &world.client_id),
        ("client_secret", &world.client_secret),
    ]);
    assert_eq!(issued.status, 200, "{}", issued.text);
    let token = issued.json()["access_token"].as_str().unwrap().to_string();
    let config = server
        .post(&format!("/checkout/shop/{}/integration/config", world.shop))
        .bearer(&token)
        .json(&serde_json::json!({ "shared_secret": "set-by-the-oauth-app" }));
    assert_eq!(config.status, 200, "{}", config.text);
}

/// A shopper checks out on the shop's own page, served from another origin than Mercer's: the
/// vendor's library makes every storefront call through Chromium's CORS checks (preflights for
/// its JSON bodies, bearer token and PUT/DELETE, `credentials: 'include'`) and the order is
/// processed and reaches the platform. The same page is refused an API-token route, which
/// answers no other origin.
fn a_shopper_checks_out_from_the_shops_own_page(backend: Backend) {
    let browser = match browser() {
        Ok(browser) => browser,
        Err(skipped) => {
            report_skip(&skipped);
            return;
        }
    };
    let sim = RunningSimulator::start().unwrap();
    let (hooks, overrides) = (Receiver::start(), override_server());
    let server =
        MercerServer::start_with(TestDatabase::create(backend), &["--allow-private-targets"]);
    let shop = set_up(&server, &sim, &hooks, &overrides);
    let data = init(
        &server,
        &shop,
        json!({"cart_items": [{"platform_id": "var-coffee", "quantity": 2, "line_item_key": "coffee"}]}),
    );
    let public_order_id = data["public_order_id"].as_str().unwrap().to_string();

    // One more coffee, added by its SKU alone, first.
    let mut steps = whole_checkout("tok_success", "1");
    steps.as_array_mut().unwrap().insert(
        0,
        json!(["addLineItem", {"sku": "COF-1KG", "quantity": 1, "line_item_key": "by-sku"}]),
    );
    let page = browser.checkout_from_a_shop_page(
        &server.base_url,
        &shop.id,
        &data,
        steps,
        (
            &server.url(&format!("/checkout/shop/{}/settings", shop.id)),
            &shop.token,
        ),
    );
    assert!(page.errors.is_empty(), "{:?}", page.errors);
    assert!(
        page.origin.starts_with("http://localhost:") && !server.base_url.starts_with(&page.origin),
        "the page ({}) is on another origin than Mercer ({})",
        page.origin,
        server.base_url
    );
    assert!(page.drive.step("initialize").success);
    assert_all_answered(&page.drive, &[]);
    let processed = &page.drive.step("processOrder").response["data"]["application_state"];
    assert_eq!(processed["is_processed"], true);
    assert_eq!(processed["order_balance"], 0);
    assert_eq!(
        processed["order_total"],
        3 * 1250 + 1500 + 300 - 1000,
        "three coffees, the second shipping line, the tax override's tax, less the discount"
    );
    assert_eq!(
        page.drive.step("addLineItem").response["data"]["line_item"]["product_data"]["variant_id"],
        "var-coffee"
    );
    assert_eq!(
        page.probe, "blocked: TypeError",
        "an API-token route must not answer the shop's page"
    );

    let created = wait_for(&hooks, "order/created", &public_order_id, &server);
    assert!(
        !created["platform_order_id"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    );
    assert_verified(&hooks);
}

backend_tests!(
    a_staff_member_approves_an_app_in_a_real_browser,
    a_shopper_checks_out_from_the_shops_own_page,
);
