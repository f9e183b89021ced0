//! SQLite on a file system that fills up under a load of connector events: Mercer answers 507
//! (never a 500, never a 202 for an event it could not keep), the database stays intact
//! (`PRAGMA integrity_check`), and once space is freed events are taken and applied again with
//! no restart.

use std::thread;
use std::time::Duration;

use mercer_store::DatabaseUrl;
use mercer_tests::chaos::{EventLoad, Figures, SmallFileSystem, scaled, tally};
use mercer_tests::{Backend, MercerServer, TestDatabase, wait_until};

use super::kills::check_events_applied;

fn integrity(database: &TestDatabase) -> Vec<String> {
    database.texts("SELECT integrity_check AS t FROM pragma_integrity_check()")
}

#[test]
fn sqlite_out_of_space_answers_507_stays_intact_and_recovers() {
    let disk = SmallFileSystem::mount(24);
    let template = TestDatabase::create_migrated(Backend::Sqlite);
    let path = disk.path().join("mercer.db");
    let DatabaseUrl::Sqlite {
        path: template_path,
    } = template.url()
    else {
        unreachable!("a SQLite database")
    };
    std::fs::copy(template_path, &path).expect("the database copied onto the small disk");
    let database = TestDatabase::at(DatabaseUrl::Sqlite {
        path: path.to_string_lossy().into_owned(),
    });
    let server = MercerServer::start_with(database, &[]);
    let demo = server.demo().clone();
    // Leave about a megabyte: a few thousand events.
    let left_kib = scaled(1024, 2048);
    let ballast = disk.fill_leaving(left_kib);

    let load = EventLoad::start(&server.base_url, &demo.shop, &demo.token, 4);
    // The write-ahead log reuses its space once it stops growing, so the disk can look full
    // some time before a write needs a page it cannot have: run until one is refused.
    let refused = wait_until(Duration::from_secs(120), || load.answered(507) > 0);
    let free_kib = disk.free_kib();
    // Some more requests meet the full disk.
    thread::sleep(Duration::from_secs(1));
    let mut sent = load.finish();
    let while_full = tally(&sent);
    assert!(
        refused,
        "a full disk is answered 507: {while_full:?}, {free_kib} KiB free\n{}",
        server.log()
    );
    // A refused commit may have wanted more than what is left, but the load used the space.
    assert!(
        free_kib < left_kib / 2,
        "refused with {free_kib} KiB of {left_kib} still free"
    );
    let intact = integrity(server.database());
    assert_eq!(intact, ["ok"], "integrity_check while full");

    std::fs::remove_file(&ballast).expect("the ballast removed");
    let load = EventLoad::start(&server.base_url, &demo.shop, &demo.token, 4);
    let taken_again = wait_until(Duration::from_secs(60), || load.answered(202) > 0);
    thread::sleep(Duration::from_secs(1));
    let after = load.finish();
    let recovered = tally(&after);
    assert!(
        taken_again,
        "events are taken again once space is freed: {recovered:?}"
    );
    sent.extend(after);

    let mut figures = Figures::new("sqlite out of space", Backend::Sqlite);
    figures
        .set("answered_507", while_full.get("507").copied().unwrap_or(0))
        .set(
            "answered_202_after_space_returned",
            recovered.get("202").copied().unwrap_or(0),
        );
    check_events_applied(&sent, server.database(), &mut figures);
    assert_eq!(
        integrity(server.database()),
        ["ok"],
        "integrity_check at the end"
    );
}
