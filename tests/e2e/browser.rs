//! The sign-in and consent page in a real browser (issue 5): headless Chromium, with
//! JavaScript off, opens the authorize URL, signs in, approves and follows the redirect to a
//! local client; the code it brings is exchanged for a token that then works on an API route.

use mercer_tests::browser::{browser, report_skip};
use mercer_tests::receiver::Receiver;
use mercer_tests::{Backend, MercerServer, backend_tests, form_encode};

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

backend_tests!(a_staff_member_approves_an_app_in_a_real_browser);
