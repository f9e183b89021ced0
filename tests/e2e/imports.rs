//! Subscription import and export as CSV (docs/subscriptions.md, "Import and export"), end to
//! end on both databases: valid rows created and read back through the API, invalid ones
//! reported with their line and column, a re-run creating nothing, the export giving the same
//! rows back and importing into another shop, a quoted field with a comma and a newline, 415
//! on another content type, and an import's progress (List Imports, Get Import) moving while
//! it runs, ending with its answer's figures, seen by no other shop.

use std::time::Duration;

use mercer_tests::{Answer, Backend, MercerServer, backend_tests, wait_until};
use serde_json::{Value, json};

use crate::subscriptions::{Api, biweekly_from, monday, ok};

const HEADER: &str = "external_id,email,first_name,last_name,phone,shipping_street1,shipping_city,\
shipping_province_code,shipping_country_code,shipping_zip,subscription_group_id,interval_id,\
order_rrule,line_items,next_order_datetime,subscription_status,base_currency,charged_currency,\
gateway_name,gateway_customer_id";

/// A Product Saved event of the coffee (two variants) for the shop of `api`.
fn save_coffee(api: &Api<'_>) {
    let product = json!({"platform_id": "prd-coffee", "platform_updated_at": "2026-11-01T00:00:00Z",
        "name": "Coffee", "variants": [
            {"platform_id": "var-250g", "name": "Coffee 250g", "price": "6.50"},
            {"platform_id": "var-1kg", "name": "Coffee 1kg", "price": "19.99"}]});
    let saved = api
        .server
        .post(&format!(
            "/products/v1/shops/{}/platforms/custom/webhooks/products/saved",
            api.shop
        ))
        .bearer(&api.token)
        .json(&json!({ "data": { "product": product } }));
    assert_eq!(saved.status, 202, "{}", saved.text);
    // A row whose email is wrong fails on its line items until the catalogue has the variant,
    // and on its email after: a probe that creates nothing.
    let probe = format!(
        "{HEADER}\nprobe,not-an-email,,,,1 Main St,Springfield,,US,,,,\"{}\",var-1kg:1:100,,,USD,USD,,\n",
        biweekly_from(monday(0))
    );
    assert!(
        wait_until(Duration::from_secs(10), || {
            let answer = import(api, &probe, "text/csv");
            answer.status == 200 && answer.json()["import"]["failed"][0]["field"] == "email"
        }),
        "the catalogue never had the coffee"
    );
}

fn import(api: &Api<'_>, body: &str, content_type: &str) -> Answer {
    api.server
        .post(&api.path("/imports"))
        .bearer(&api.token)
        .header("Content-Type", content_type)
        .send_bytes(Some(body.as_bytes().to_vec()))
}

fn export(api: &Api<'_>) -> Answer {
    let answer = api.get("/exports/subscriptions");
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert!(
        answer
            .header("content-type")
            .is_some_and(|value| value.starts_with("text/csv")),
        "{:?}",
        answer.headers
    );
    answer
}

/// The export's records, header first.
fn records(text: &str) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text.as_bytes())
        .records()
        .map(|record| record.unwrap().iter().map(str::to_string).collect())
        .collect()
}

/// `(line, field)` of each failure.
fn failures(report: &Value) -> Vec<(i64, String)> {
    report["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert!(f["message"].as_str().is_some_and(|m| !m.is_empty()), "{f}");
            (
                f["line"].as_i64().unwrap(),
                f["field"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Six rows: lines 2 and 4 valid (line 2's street holds a comma and a newline), the others
/// each wrong in one column.
fn mixed_csv() -> String {
    let rule = biweekly_from(monday(0));
    let next = monday(0).to_rfc3339();
    [
        HEADER.to_string(),
        format!(
            "ext-a,ada@example.test,Ada,Lovelace,+1 514 555 0100,\"1 Main St, Unit 2\nBack door\",\
Springfield,IL,US,62701,,,\"{rule}\",var-1kg:2:1999|var-250g:1:650,{next},active,USD,USD,stripe,cus_1"
        ),
        format!(
            "ext-b,bob@example.test,Bob,,,2 Elm St,Springfield,,US,,,,\"{rule}\",var-1kg:two:1999,,,USD,USD,,"
        ),
        format!(
            "ext-c,cy@example.test,Cy,Young,,3 Oak St,Toronto,ON,CA,M5V 2T6,,,\"{rule}\",var-250g:3:650,,paused,USD,USD,,"
        ),
        format!(
            "ext-d,not-an-email,Dee,,,4 Ash St,Springfield,,US,,,,\"{rule}\",var-1kg:1:1999,,,USD,USD,,"
        ),
        format!(
            "ext-e,eve@example.test,Eve,,,5 Fir St,Springfield,,US,,,,\"{rule}\",var-unknown:1:1999,,,USD,USD,,"
        ),
        format!(
            ",fay@example.test,Fay,,,6 Yew St,Springfield,,US,,,,\"{rule}\",var-1kg:1:1999,,sleeping,USD,USD,,"
        ),
        // A NUL, which no database keeps: refused like any bad field, not a failed import.
        format!(
            "ext-g,gus@example.test,Gu\u{0}s,,,7 Elm St,Springfield,,US,,,,\"{rule}\",var-1kg:1:1999,,,USD,USD,,"
        ),
    ]
    .join("\n")
        + "\n"
}

fn expected_failures() -> Vec<(i64, String)> {
    [
        (3, "line_items"),
        (5, "email"),
        (6, "line_items"),
        (7, "external_id"),
        (8, "first_name"),
    ]
    .into_iter()
    .map(|(line, field)| (line, field.to_string()))
    .collect()
}

/// The subscriptions of the shop by external id.
fn by_external_id(api: &Api<'_>, external_id: &str) -> Value {
    let list = api.list("limit=250&expand=customer");
    list["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["external_id"] == external_id)
        .cloned()
        .unwrap_or_else(|| panic!("no subscription {external_id} in {list}"))
}

fn import_creates_valid_rows_reports_the_others_and_a_rerun_creates_nothing(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let api = Api::demo(&server);
    save_coffee(&api);
    let csv = mixed_csv();

    let first = ok(import(&api, &csv, "text/csv; charset=utf-8"))["import"].clone();
    assert_eq!(
        (
            &first["rows"],
            &first["created"],
            &first["skipped_existing"]
        ),
        (&json!(7), &json!(2), &json!(0)),
        "{first}"
    );
    assert_eq!(failures(&first), expected_failures(), "{first}");

    // The created subscriptions read back through the API.
    let a = by_external_id(&api, "ext-a");
    assert_eq!(a["customer"]["email"], "ada@example.test");
    assert_eq!(a["customer"]["phone"], "+1 514 555 0100");
    assert_eq!(
        a["shipping_address"]["street1"],
        "1 Main St, Unit 2\nBack door"
    );
    assert_eq!(a["shipping_address"]["province_code"], "IL");
    assert_eq!(a["shipping_address"]["zip"], "62701");
    assert_eq!(a["subscription_status"], "active");
    assert_eq!(a["payment_gateway_public_id"], "stripe");
    assert_eq!(a["idempotency_key"], "import:ext-a");
    let items: Vec<(String, String, i64, i64)> = a["line_items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["platform_product_id"].as_str().unwrap().to_string(),
                item["platform_variant_id"].as_str().unwrap().to_string(),
                item["quantity"].as_i64().unwrap(),
                item["price"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        items,
        [
            ("prd-coffee".into(), "var-1kg".into(), 2, 1999),
            ("prd-coffee".into(), "var-250g".into(), 1, 650),
        ]
    );
    let c = by_external_id(&api, "ext-c");
    assert_eq!(c["subscription_status"], "paused");
    assert_eq!(c["shipping_address"]["country_code"], "CA");
    let total = api.list("limit=1")["pagination"]["total"].clone();
    assert_eq!(total, 2);

    // Again: nothing twice.
    let second = ok(import(&api, &csv, "text/csv"))["import"].clone();
    assert_eq!(
        (
            &second["rows"],
            &second["created"],
            &second["skipped_existing"]
        ),
        (&json!(7), &json!(0), &json!(2)),
        "{second}"
    );
    assert_eq!(failures(&second), expected_failures());
    assert_eq!(api.list("limit=1")["pagination"]["total"], 2);
}

fn the_export_gives_the_rows_back_and_imports_into_another_shop(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let api = Api::demo(&server);
    save_coffee(&api);
    ok(import(&api, &mixed_csv(), "text/csv"));

    let exported = export(&api).text;
    let rows = records(&exported);
    assert_eq!(rows[0].join(","), HEADER);
    assert_eq!(rows.len(), 3, "{exported}");
    let (a, c) = (by_external_id(&api, "ext-a"), by_external_id(&api, "ext-c"));
    assert!(a["id"].as_i64() < c["id"].as_i64(), "ascending id");
    let column = |row: &[String], name: &str| {
        let at = rows[0].iter().position(|c| c == name).unwrap();
        row[at].clone()
    };
    assert_eq!(column(&rows[1], "external_id"), "ext-a");
    assert_eq!(
        column(&rows[1], "shipping_street1"),
        "1 Main St, Unit 2\nBack door"
    );
    assert_eq!(
        column(&rows[1], "line_items"),
        "var-1kg:2:1999|var-250g:1:650"
    );
    assert_eq!(column(&rows[1], "email"), "ada@example.test");
    assert_eq!(column(&rows[1], "order_rrule"), a["order_rrule"]);
    assert_eq!(
        column(&rows[1], "next_order_datetime"),
        a["next_order_datetime"]
    );
    assert_eq!(column(&rows[1], "gateway_name"), "stripe");
    assert_eq!(column(&rows[1], "gateway_customer_id"), "", "never shown");
    assert_eq!(column(&rows[2], "external_id"), "ext-c");
    assert_eq!(column(&rows[2], "subscription_status"), "paused");

    // Into another shop: the same rows come back out of it.
    let shop = server
        .cli(&["shop", "create", "--domain", "imported.shop.test"])
        .values()[0]
        .clone();
    let token = server
        .cli(&["token", "create", "--shop", &shop, "--scope", "all"])
        .value();
    let other = Api {
        server: &server,
        shop,
        token,
    };
    save_coffee(&other);
    let moved = ok(import(&other, &exported, "text/csv"))["import"].clone();
    assert_eq!(
        (&moved["rows"], &moved["created"], &moved["failed"]),
        (&json!(2), &json!(2), &json!([])),
        "{moved}"
    );
    assert_eq!(export(&other).text, exported);
}

fn import_takes_only_csv_with_the_documented_header(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let api = Api::demo(&server);
    for content_type in ["application/json", "text/plain"] {
        let refused = import(&api, &format!("{HEADER}\n"), content_type);
        let entries = refused.assert_error(415, "request.unsupported_media_type");
        assert_eq!(entries[0]["sub_type"], "content_type", "{}", refused.text);
        assert!(entries[0]["message"].as_str().unwrap().contains("text/csv"));
    }
    let missing = HEADER.replace("line_items,", "");
    let refused = import(&api, &format!("{missing}\n"), "text/csv");
    let entries = refused.assert_error(422, "validation.failed");
    assert_eq!(entries[0]["field"], "header", "{}", refused.text);
    let empty = ok(import(&api, &format!("{HEADER}\n"), "text/csv"));
    let id = empty["import"]["id"].clone();
    assert!(id.as_i64().is_some_and(|id| id > 0), "{empty}");
    assert_eq!(
        empty,
        json!({"import": {"id": id, "rows": 0, "created": 0, "skipped_existing": 0, "failed": []}})
    );
}

/// More subscriptions than one page of the export's reads: every one comes out, once, in
/// ascending id.
fn an_export_of_several_pages_has_every_subscription_once_in_ascending_id(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let api = Api::demo(&server);
    save_coffee(&api);
    let rule = biweekly_from(monday(0));
    let mut csv = format!("{HEADER}\n");
    for n in 0..530 {
        csv.push_str(&format!(
            "bulk-{n:04},bulk{}@example.test,,,,{n} Main St,Springfield,,US,,,,\"{rule}\",var-1kg:1:1999,,,USD,USD,,\n",
            n % 7
        ));
    }
    let report = ok(import(&api, &csv, "text/csv"))["import"].clone();
    assert_eq!(
        (&report["created"], &report["failed"]),
        (&json!(530), &json!([])),
        "{report}"
    );
    let rows = records(&export(&api).text);
    let ids: Vec<String> = rows[1..].iter().map(|row| row[0].clone()).collect();
    let expected: Vec<String> = (0..530).map(|n| format!("bulk-{n:04}")).collect();
    // Imported in this order, so created in ascending id.
    assert_eq!(ids, expected);
}

/// Rows of `bulk-{n}` for n in `range`; every 50th has an email that is not one.
fn bulk_csv(range: std::ops::Range<usize>) -> String {
    let rule = biweekly_from(monday(0));
    let mut csv = format!("{HEADER}\n");
    for n in range {
        let email = if n % 50 == 7 {
            format!("not-an-email-{n}")
        } else {
            format!("bulk{}@example.test", n % 300)
        };
        csv.push_str(&format!(
            "bulk-{n:05},{email},,,,{n} Main St,Springfield,,US,,,,\"{rule}\",var-1kg:1:1999|var-250g:2:650,,,USD,USD,,\n"
        ));
    }
    csv
}

/// The figures of an import as List Imports or Get Import shows it.
fn figures(progress: &Value) -> (i64, i64, i64, i64, i64) {
    let number = |name: &str| {
        progress[name]
            .as_i64()
            .unwrap_or_else(|| panic!("no {name} in {progress}"))
    };
    (
        number("rows"),
        number("rows_done"),
        number("created"),
        number("skipped_existing"),
        number("failed_rows"),
    )
}

/// While a large import runs (the POST on a thread of its own), List Imports shows it running
/// with `rows_done` growing; once it answers, Get Import shows it done with the answer's figures.
/// Another shop sees none of it.
fn a_running_import_shows_its_progress_and_ends_with_its_answer(backend: Backend) {
    let server = MercerServer::in_process(backend);
    let api = Api::demo(&server);
    save_coffee(&api);
    // An earlier import, so that the running one is listed first, before it.
    let earlier = ok(import(&api, &bulk_csv(0..10), "text/csv"))["import"].clone();
    let csv = bulk_csv(10..1_010);

    let (answer, seen) = std::thread::scope(|scope| {
        let post = scope.spawn(|| import(&api, &csv, "text/csv"));
        let mut seen: Vec<Value> = Vec::new();
        while !post.is_finished() {
            let listed = ok(api.get("/imports"));
            let newest = listed["imports"][0].clone();
            if newest["id"] != earlier["id"] {
                seen.push(newest);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (post.join().unwrap(), seen)
    });
    let answer = ok(answer)["import"].clone();
    let id = answer["id"].as_i64().unwrap();
    let running: Vec<&Value> = seen.iter().filter(|p| p["status"] == "running").collect();
    assert!(
        running
            .iter()
            .all(|p| p["id"] == id && p["finished_at"].is_null()),
        "{running:?}"
    );
    let done: Vec<i64> = running.iter().map(|p| figures(p).1).collect();
    assert!(
        done.windows(2).all(|pair| pair[0] <= pair[1]),
        "rows_done never goes back: {done:?}"
    );
    let distinct: std::collections::BTreeSet<i64> = done.iter().copied().collect();
    assert!(
        distinct.len() >= 2 && done.iter().all(|n| *n < 1_000),
        "seen running with rows_done growing: {done:?}"
    );
    for progress in &running {
        let (rows, rows_done, created, skipped, failed) = figures(progress);
        assert_eq!(rows, 1_000, "{progress}");
        assert_eq!(rows_done, created + skipped + failed, "{progress}");
    }

    let failed_lines: std::collections::BTreeSet<i64> = failures(&answer)
        .into_iter()
        .map(|(line, _)| line)
        .collect();
    let got = ok(api.get(&format!("/imports/{id}")))["import"].clone();
    assert_eq!(got["status"], "done", "{got}");
    assert!(got["finished_at"].is_string(), "{got}");
    assert_eq!(
        figures(&got),
        (
            answer["rows"].as_i64().unwrap(),
            answer["rows"].as_i64().unwrap(),
            answer["created"].as_i64().unwrap(),
            answer["skipped_existing"].as_i64().unwrap(),
            failed_lines.len() as i64,
        ),
        "{got} vs {answer}"
    );
    assert_eq!((&answer["rows"], failed_lines.len()), (&json!(1_000), 20));
    let listed = ok(api.get("/imports"))["imports"].clone();
    let ids: Vec<&Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["id"])
        .collect();
    // Newest first (the catalogue's probe imports before them).
    assert_eq!(ids[..2], [&json!(id), &earlier["id"]], "{listed}");
    assert_eq!(listed[0], got);

    // Another shop sees none of the demo shop's imports.
    let shop = server
        .cli(&["shop", "create", "--domain", "other-importer.shop.test"])
        .values()[0]
        .clone();
    let token = server
        .cli(&["token", "create", "--shop", &shop, "--scope", "all"])
        .value();
    let other = Api {
        server: &server,
        shop,
        token,
    };
    assert_eq!(ok(other.get("/imports")), json!({"imports": []}));
    other
        .get(&format!("/imports/{id}"))
        .assert_error(404, "resource.not_found");
    api.get("/imports/not-a-number")
        .assert_error(404, "resource.not_found");
}

backend_tests!(
    a_running_import_shows_its_progress_and_ends_with_its_answer,
    import_creates_valid_rows_reports_the_others_and_a_rerun_creates_nothing,
    the_export_gives_the_rows_back_and_imports_into_another_shop,
    import_takes_only_csv_with_the_documented_header,
    an_export_of_several_pages_has_every_subscription_once_in_ascending_id,
);
