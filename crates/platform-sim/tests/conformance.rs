//! The conformance checks (`mercer_connector::conformance`) against the simulator, in process:
//! the simulator passes every one and keeps no test customer; each of its faults fails a named
//! check. (tests/e2e/conformance.rs runs the same through the `mercer` and simulator binaries.)

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

use std::time::Duration;

use mercer_connector::conformance::{Config, CustomerToken, Report, TEST_EMAIL_DOMAIN, run};
use mercer_domain::access::credentials::Secret;
use mercer_outbound::PrivateAddressGuard;
use mercer_platform_sim::{Faults, RunningSimulator};
use serde_json::{Value, json};

const SHOP: &str = "0123456789abcdef0123456789abcdef";
const SECRET: &str = "the-connector-secret";

fn seeded() -> RunningSimulator {
    let sim = RunningSimulator::start().unwrap();
    sim.simulator.add_shop(SHOP, SECRET, None);
    // More than 250 customers, so that limit=251 can be told from the fallback to 250.
    let seed = json!({"customers": 260, "orders": 3, "products": 12});
    let answer = ureq::post(format!("{}/admin/shops/{SHOP}/seed", sim.base_url))
        .send_json(seed)
        .unwrap();
    assert_eq!(answer.status(), 200);
    sim
}

fn config(sim: &RunningSimulator, timeout: Duration) -> Config {
    Config {
        connector_url: sim.base_url.clone(),
        shop_identifier: SHOP.to_string(),
        secret: Secret::new(SECRET),
        timeout,
        guard: PrivateAddressGuard::ALLOW_PRIVATE,
        customer_token: None,
    }
}

fn table(report: &Report) -> String {
    let rows = report.results.iter().map(|r| {
        let verdict = if r.passed { "PASS" } else { "FAIL" };
        format!("{} {} {verdict} {}", r.name, r.section, r.detail)
    });
    rows.collect::<Vec<_>>().join("\n")
}

fn state(sim: &RunningSimulator) -> Value {
    let url = format!("{}/admin/shops/{SHOP}/state", sim.base_url);
    ureq::get(url)
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap()
}

fn test_emails(customers: &Value) -> Vec<String> {
    let emails = customers.as_array().unwrap().iter();
    emails
        .filter_map(|c| c["email"].as_str())
        .filter(|email| email.ends_with(TEST_EMAIL_DOMAIN))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_simulator_passes_every_check_and_keeps_no_test_customer() {
    let sim = seeded();
    let owner = state(&sim)["customers"][0]["platform_id"]
        .as_str()
        .unwrap()
        .to_string();
    let token = sim
        .simulator
        .lock()
        .issue_customer_token(SHOP, &owner)
        .unwrap();
    let mut config = config(&sim, Duration::from_secs(5));
    config.customer_token = Some(CustomerToken {
        platform_customer_id: owner,
        token,
    });
    let report = run(&config).unwrap();
    assert!(report.passed(), "{}", table(&report));
    // The fallback could be told apart: no note on it.
    let fallback = report
        .results
        .iter()
        .find(|r| r.name == "customers-limit-fallback");
    assert_eq!(fallback.unwrap().detail, "", "{}", table(&report));
    // Its verification answer proves the secret: no note of a missing proof.
    let proof = report
        .results
        .iter()
        .find(|r| r.name == "verification-proof");
    assert_eq!(proof.unwrap().detail, "", "{}", table(&report));

    let after = state(&sim);
    assert_eq!(test_emails(&after["customers"]), Vec::<String>::new());
    assert_eq!(after["deleted_customers"].as_array().unwrap().len(), 3);
    assert_eq!(after["deleted_addresses"].as_array().unwrap().len(), 1);
    let orders = after["orders"].as_array().unwrap();
    let test_orders: Vec<&Value> = orders.iter().filter(|o| o["test"] == true).collect();
    assert_eq!(
        test_orders.len(),
        1,
        "one test order, made once despite two creates"
    );
    let left = &report.left_on_platform;
    assert_eq!(left.len(), 1);
    assert!(left[0].contains(test_orders[0]["platform_id"].as_str().unwrap()));
}

/// Runs the checks with `faults` on, and answers the failed checks' names and the table.
fn failing_with(sim: &RunningSimulator, faults: Faults) -> (Vec<&'static str>, String) {
    sim.simulator.lock().faults = faults;
    let report = run(&config(sim, Duration::from_millis(300))).unwrap();
    sim.simulator.lock().faults = Faults::default();
    let failed = report.results.iter().filter(|r| !r.passed);
    (failed.map(|r| r.name).collect(), table(&report))
}

#[test]
fn each_fault_of_the_simulator_fails_a_named_check() {
    let sim = seeded();
    let cases = [
        (
            Faults {
                status: Some(500),
                ..Faults::default()
            },
            &[
                "verification-echo",
                "customers-paging",
                "customer-not-found",
            ][..],
        ),
        (
            Faults {
                status: Some(307),
                location: Some("http://127.0.0.1:9/elsewhere".to_string()),
                ..Faults::default()
            },
            &["verification-echo", "orders-paging"][..],
        ),
        (
            Faults {
                delay_ms: Some(1000),
                ..Faults::default()
            },
            &["verification-echo", "products-paging"][..],
        ),
        (
            Faults {
                wrong_hmac: true,
                ..Faults::default()
            },
            &["verification-echo"][..],
        ),
        (
            Faults {
                malformed_json: true,
                ..Faults::default()
            },
            &["verification-echo", "json-answers", "categories-paging"][..],
        ),
    ];
    for (faults, expected) in cases {
        let (failed, table) = failing_with(&sim, faults.clone());
        for name in expected {
            assert!(
                failed.contains(name),
                "{faults:?}: {name} should fail:\n{table}"
            );
        }
        // Refusals happen before faults: a connector that refuses forgeries still does.
        assert!(
            !failed.contains(&"refuses-bad-hmac"),
            "{faults:?}:\n{table}"
        );
        // Nothing was written to a connector that failed its verification.
        assert!(failed.contains(&"create-customer"), "{faults:?}:\n{table}");
        assert!(
            !failed.contains(&"test-data-removed"),
            "{faults:?}:\n{table}"
        );
    }
    // A wrong proof fails its own check alone: Mercer registers such a connector unless the
    // shop requires message signatures, so the checks that write still run.
    let wrong_proof = Faults {
        wrong_proof: true,
        ..Faults::default()
    };
    let (failed, table) = failing_with(&sim, wrong_proof);
    assert_eq!(failed, ["verification-proof"], "{table}");
    assert_eq!(test_emails(&state(&sim)["customers"]), Vec::<String>::new());
}
