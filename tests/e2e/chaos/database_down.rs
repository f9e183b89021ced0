//! PostgreSQL stopped (as a crash stops it: `pg_ctl stop -m immediate`) and started again
//! under a load of connector events. While it is down Mercer answers 503 with `Retry-After`;
//! when it is back Mercer recovers by itself, and every event it answered 202 is applied.

use std::thread;
use std::time::{Duration, Instant};

use mercer_store::DatabaseUrl;
use mercer_tests::chaos::{EventLoad, Figures, PrivatePostgres, scaled, tally};
use mercer_tests::{Backend, MercerServer, TestDatabase, wait_until};

use super::kills::check_events_applied;

#[test]
fn postgres_restarted_under_ingest_loses_no_accepted_event() {
    let outages = scaled(1, 3);
    let cluster = PrivatePostgres::start();
    let server = MercerServer::start_with(
        TestDatabase::at(DatabaseUrl::Postgres { url: cluster.url() }),
        &[],
    );
    let demo = server.demo().clone();
    let load = EventLoad::start(&server.base_url, &demo.shop, &demo.token, 4);
    let mut recovery = Duration::ZERO;
    for _ in 0..outages {
        thread::sleep(Duration::from_millis(800));
        cluster.stop_immediately();
        // Long enough for every pooled connection to be found broken and for new ones to be
        // refused, so requests meet the outage itself.
        thread::sleep(Duration::from_secs(scaled(4, 8)));
        cluster.start_again();
        let back = Instant::now();
        let ready = wait_until(Duration::from_secs(60), || {
            server.get("/readyz").call().status == 200
        });
        assert!(ready, "Mercer did not recover: {}", server.log());
        recovery = recovery.max(back.elapsed());
    }
    thread::sleep(Duration::from_millis(800));
    let sent = load.finish();
    let counts = tally(&sent);
    let mut figures = Figures::new("postgresql restarted under ingest", Backend::Postgres);
    figures
        .set("outages", outages)
        .set("slowest_recovery_ms", recovery.as_millis());
    assert!(
        counts.get("503").copied().unwrap_or(0) > 0,
        "the outage was met with 503s: {counts:?}"
    );
    check_events_applied(&sent, server.database(), &mut figures);
}
