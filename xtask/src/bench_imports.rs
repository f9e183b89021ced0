//! `cargo xtask bench imports`: the subscription CSV import benchmark of docs/benchmarks.md.
//!
//! On each database: a release `mercer serve` on an empty database, its demo shop given a
//! catalogue of 20 products of 3 variants each (Product Saved events) and a subscription group
//! with two billing rules. A CSV of 100,000 rows is generated: 80,000 distinct customers (every
//! fifth row a customer seen before, under another subscription), each with an address, one to
//! three line items, a third of the rows on the group's billing rule and the rest with an
//! `order_rrule`, some with a next order date, a status or payment columns. It is sent in one
//! `POST /imports`; the time to the answer, rows per second and the answer's counts are printed;
//! then the same file again, every row `skipped_existing`. Target: each import of 100,000 rows
//! in under 2 minutes on both databases; a target missed is reported, never a failure.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::bench::{
    cpu_seconds, on_both_databases, peak_memory_kib, postgres_cpu_seconds, start_mercer,
};

const ROWS: usize = 100_000;

/// The rows to import: [`ROWS`], or `MERCER_BENCH_IMPORT_ROWS` for a short look (statement
/// counts, a profile); the target is judged on [`ROWS`] only.
fn rows() -> usize {
    std::env::var("MERCER_BENCH_IMPORT_ROWS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(ROWS)
}

/// Distinct customers: the rows after these reuse one of them (four rows in five are new).
fn customers() -> usize {
    (rows() * 4 / 5).max(1)
}
const PRODUCTS: usize = 20;
const VARIANTS_PER_PRODUCT: usize = 3;
const TARGET: Duration = Duration::from_secs(120);

const HEADER: &str = "external_id,email,first_name,last_name,phone,shipping_street1,shipping_city,\
shipping_province_code,shipping_country_code,shipping_zip,subscription_group_id,interval_id,\
order_rrule,line_items,next_order_datetime,subscription_status,base_currency,charged_currency,\
gateway_name,gateway_customer_id";

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(1800)))
        .build()
        .into()
}

/// Sends `body` with `content_type` and the bearer `token`; the JSON answer, failing unless 2xx.
fn send(
    method: &str,
    url: &str,
    token: &str,
    content_type: &str,
    body: Option<Vec<u8>>,
) -> Result<Value, String> {
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(url)
        .header("Authorization", format!("Bearer {token}"))
        .header("Content-Type", content_type);
    let result = match body {
        Some(body) => agent().run(request.body(body).map_err(|e| e.to_string())?),
        None => agent().run(request.body(()).map_err(|e| e.to_string())?),
    };
    let mut answer = result.map_err(|e| format!("{method} {url}: {e}"))?;
    let status = answer.status().as_u16();
    let text = answer
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_string()
        .map_err(|e| format!("{method} {url}: {e}"))?;
    if !(200..300).contains(&status) {
        return Err(format!("{method} {url} answered {status}: {text}"));
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn post_json(url: &str, token: &str, body: &Value) -> Result<Value, String> {
    send(
        "POST",
        url,
        token,
        "application/json",
        Some(body.to_string().into_bytes()),
    )
}

fn variant_id(product: usize, variant: usize) -> String {
    format!("bench-var-{product}-{variant}")
}

/// The catalogue (Product Saved events) and a subscription group with two billing rules; the
/// group's id and its rules' ids.
fn prepare_shop(base: &str, shop: &str, token: &str) -> Result<(i64, Vec<i64>), String> {
    let saved = format!("{base}/products/v1/shops/{shop}/platforms/custom/webhooks/products/saved");
    for product in 0..PRODUCTS {
        let variants: Vec<Value> = (0..VARIANTS_PER_PRODUCT)
            .map(|v| {
                json!({"platform_id": variant_id(product, v), "name": format!("Size {v}"),
                       "price": format!("{}.{:02}", 5 + product, v * 25)})
            })
            .collect();
        let event = json!({"data": {"product": {"platform_id": format!("bench-prd-{product}"),
            "platform_updated_at": "2026-11-01T00:00:00Z",
            "name": format!("Product {product}"), "variants": variants}}});
        post_json(&saved, token, &event)?;
    }
    let groups = format!("{base}/subscriptions/v1/shops/{shop}/subscription_groups");
    let group = post_json(
        &groups,
        token,
        &json!({"subscription_group": {"name": "Bench club", "percent_discount": 10,
            "billing_rules": [{"interval_number": 2, "interval_type": "week"},
                              {"interval_number": 1, "interval_type": "month"}]}}),
    )?;
    let group = &group["subscription_group"];
    let id = group["id"].as_i64().ok_or("no group id")?;
    let rules: Vec<i64> = group["billing_rules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|rule| rule["id"].as_i64())
        .collect();
    if rules.len() != 2 {
        return Err(format!("the group has rules {rules:?}"));
    }
    wait_for_catalogue(base, shop, token)?;
    Ok((id, rules))
}

/// Waits until the applier has put the last product's variants in the catalogue: a probe row
/// with a bad email fails on its email only once its variant is known (it creates nothing).
fn wait_for_catalogue(base: &str, shop: &str, token: &str) -> Result<(), String> {
    let last = variant_id(PRODUCTS - 1, VARIANTS_PER_PRODUCT - 1);
    let probe = format!(
        "{HEADER}\nprobe,not-an-email,,,,1 Main St,Springfield,,US,,,,\
\"DTSTART:20270104T090000Z\nRRULE:FREQ=WEEKLY\",{last}:1:100,,,USD,USD,,\n"
    );
    let url = format!("{base}/subscriptions/v1/shops/{shop}/imports");
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let answer = send(
            "POST",
            &url,
            token,
            "text/csv",
            Some(probe.clone().into_bytes()),
        )?;
        if answer["import"]["failed"][0]["field"] == "email" {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err("the catalogue never had the bench's products".to_string())
}

const FIRST_NAMES: [&str; 8] = ["Ada", "Bob", "Cy", "Dee", "Eve", "Fay", "Gus", "Hal"];
const LAST_NAMES: [&str; 6] = ["Lovelace", "Hopper", "Turing", "Noether", "Curie", "Knuth"];
const CITIES: [(&str, &str, &str, &str); 4] = [
    ("Springfield", "IL", "US", "62701"),
    ("Montréal", "QC", "CA", "H2X 1Y4"),
    ("London", "", "GB", "N1 9GU"),
    ("Portland", "OR", "US", "97201"),
];

/// One CSV row of subscription `n` (its customer is `n % customers()`).
fn row(n: usize, group: i64, rules: &[i64]) -> String {
    let customer = n % customers();
    let first = FIRST_NAMES[customer % FIRST_NAMES.len()];
    let last = LAST_NAMES[customer % LAST_NAMES.len()];
    let (city, province, country, zip) = CITIES[customer % CITIES.len()];
    let phone = if customer.is_multiple_of(3) {
        format!("+1 514 555 {:04}", customer % 10_000)
    } else {
        String::new()
    };
    let items: Vec<String> = (0..1 + n % 3)
        .map(|i| {
            let (product, variant) = ((n + i * 7) % PRODUCTS, (n / 3 + i) % VARIANTS_PER_PRODUCT);
            format!(
                "{}:{}:{}",
                variant_id(product, variant),
                1 + (n + i) % 4,
                500 + product * 100 + variant * 25
            )
        })
        .collect();
    let day = 1 + n % 28;
    let (group_id, interval_id, rule, next) = if n.is_multiple_of(3) {
        let next = format!("2027-01-{day:02}T09:00:00Z");
        (
            group.to_string(),
            rules[n % 2].to_string(),
            String::new(),
            next,
        )
    } else {
        let freq = if n.is_multiple_of(2) {
            "WEEKLY;INTERVAL=2"
        } else {
            "MONTHLY"
        };
        let rule = format!("\"DTSTART:202701{day:02}T090000Z\nRRULE:FREQ={freq}\"");
        let next = if n.is_multiple_of(5) {
            format!("2027-01-{day:02}T09:00:00Z")
        } else {
            String::new()
        };
        (String::new(), String::new(), rule, next)
    };
    let status = match n % 10 {
        0 => "paused",
        1..=7 => "active",
        _ => "",
    };
    let (gateway, gateway_customer) = if n.is_multiple_of(2) {
        ("stripe".to_string(), format!("cus_bench{customer}"))
    } else {
        (String::new(), String::new())
    };
    format!(
        "legacy-{n:06},customer{customer}@bench.example.test,{first},{last},{phone},\
\"{} Main St, Unit {}\",{city},{province},{country},{zip},{group_id},{interval_id},{rule},{},\
{next},{status},USD,USD,{gateway},{gateway_customer}",
        1 + customer % 9_999,
        1 + n % 40,
        items.join("|")
    )
}

/// The whole file: the header, then [`rows()`] rows.
fn csv(group: i64, rules: &[i64]) -> Vec<u8> {
    let mut text = String::with_capacity(rows() * 260);
    text.push_str(HEADER);
    text.push('\n');
    for n in 0..rows() {
        text.push_str(&row(n, group, rules));
        text.push('\n');
    }
    text.into_bytes()
}

/// One import of `body`: its answer and how long it took.
fn import(base: &str, shop: &str, token: &str, body: &[u8]) -> Result<(Value, Duration), String> {
    let url = format!("{base}/subscriptions/v1/shops/{shop}/imports");
    let started = Instant::now();
    let answer = send("POST", &url, token, "text/csv", Some(body.to_vec()))?;
    Ok((answer["import"].clone(), started.elapsed()))
}

fn verdict(met: bool) -> &'static str {
    if met { "MET" } else { "NOT MET" }
}

fn report(label: &str, answer: &Value, took: Duration) -> Result<bool, String> {
    let failed = answer["failed"].as_array().map_or(0, Vec::len);
    println!(
        "  {label:<10} {} rows in {:.1} s: {:.0} rows/s (created {}, skipped_existing {}, failures {failed})",
        rows(),
        took.as_secs_f64(),
        rows() as f64 / took.as_secs_f64().max(1e-9),
        answer["created"],
        answer["skipped_existing"],
    );
    if failed > 0 {
        return Err(format!(
            "{failed} failures, the first: {}",
            answer["failed"][0]
        ));
    }
    Ok(took <= TARGET)
}

fn run_backend(binary: &str, label: &str, database_url: &str) -> Result<(), String> {
    let mercer = start_mercer(binary, database_url, &[])?;
    let (base, shop, token) = (&mercer.base_url, &mercer.shop, &mercer.token);
    if shop.is_empty() || token.is_empty() {
        return Err("the first start printed no demo shop and token".to_string());
    }
    let (group, rules) = prepare_shop(base, shop, token)?;
    let body = csv(group, &rules);
    println!(
        "{label}: {} rows ({:.1} MiB), {} distinct customers",
        rows(),
        body.len() as f64 / (1 << 20) as f64,
        customers()
    );
    let cpu_before = (
        cpu_seconds(mercer.child.id()),
        postgres_cpu_seconds(database_url),
    );
    let (first, took_first) = import(base, shop, token, &body)?;
    let first_met = report("import", &first, took_first)?;
    let cpu_after = (
        cpu_seconds(mercer.child.id()),
        postgres_cpu_seconds(database_url),
    );
    let per_row = |before: Option<f64>, after: Option<f64>| match (before, after) {
        (Some(before), Some(after)) => format!("{:.2} ms", (after - before) * 1e3 / rows() as f64),
        _ => "?".to_string(),
    };
    println!(
        "  CPU a row: mercer {}, PostgreSQL's backends {}",
        per_row(cpu_before.0, cpu_after.0),
        if database_url.starts_with("postgres") {
            per_row(cpu_before.1, cpu_after.1)
        } else {
            "(none)".to_string()
        }
    );
    if first["created"] != json!(rows()) {
        return Err(format!("created {} of {}", first["created"], rows()));
    }
    let (again, took_again) = import(base, shop, token, &body)?;
    let again_met = report("re-run", &again, took_again)?;
    if again["skipped_existing"] != json!(rows()) {
        return Err(format!(
            "the re-run skipped {} of {}",
            again["skipped_existing"],
            rows()
        ));
    }
    println!(
        "  peak memory {}",
        peak_memory_kib(mercer.child.id()).map_or("?".to_string(), |kib| format!(
            "{:.0} MiB (VmHWM)",
            kib as f64 / 1024.0
        ))
    );
    if rows() == ROWS {
        println!(
            "  target: each import of {ROWS} rows within {} s: {}",
            TARGET.as_secs(),
            verdict(first_met && again_met)
        );
    } else {
        println!("  target: not judged (it is set for {ROWS} rows)");
    }
    Ok(())
}

/// The release half of `cargo xtask bench imports`.
pub fn imports(binary: &str) -> Result<(), String> {
    println!(
        "import benchmark: POST /imports of {} CSV rows into an empty shop, then the same file again",
        rows()
    );
    on_both_databases("imports", |label, url| run_backend(binary, label, url))
}
