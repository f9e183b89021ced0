//! The server's life: first start, restart, graceful stop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use mercer_tests::{Backend, MercerServer, TestDatabase, backend_tests, run_cli};

fn the_demo_is_made_once_and_data_survives_a_restart(backend: Backend) {
    let first = MercerServer::start(backend);
    let demo = first.demo().clone();
    let token = first
        .cli(&["token", "create", "--shop", &demo.shop, "--scope", "all"])
        .value();
    assert!(
        first
            .output()
            .contains(&format!("curl -H \"Authorization: Bearer {}\"", demo.token))
    );

    let database = first.into_database();
    let second = MercerServer::start_with(database, &[]);
    assert!(
        second.demo.is_none(),
        "no demo on a database that has shops: {}",
        second.output()
    );
    let path = format!("/subscriptions/v1/shops/{}/shop", demo.shop);
    assert_eq!(second.get(&path).bearer(&demo.token).call().status, 200);
    assert_eq!(second.get(&path).bearer(&token).call().status, 200);
}

/// A first start whose port is taken fails before it makes anything, naming the address: the
/// one-time demo credentials are printed by the first start that can serve.
fn a_first_start_on_a_taken_port_leaves_no_credentials_behind(backend: Backend) {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let database = TestDatabase::create(backend);
    let refused = run_cli(&database, &["serve", "--bind", &address]);
    assert!(!refused.success, "{}", refused.stdout);
    assert!(
        refused
            .stderr
            .contains(&format!("error: cannot listen on {address}: ")),
        "{}",
        refused.stderr
    );
    assert!(!refused.stdout.contains("API token"), "{}", refused.stdout);
    drop(taken);
    let server = MercerServer::start_with(database, &[]);
    assert!(
        server.demo.is_some(),
        "the next start is the first: {}",
        server.output()
    );
}

/// Reads one HTTP/1.1 answer with a `Content-Length` body from a kept-alive connection.
fn read_one_answer(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        answer.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map_or(0, |value| value.trim().parse().unwrap());
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    String::from_utf8_lossy(&body).into_owned()
}

/// Starts a POST whose body is still on its way, stops the server with `signal`, then sends the
/// rest: the request in flight must still be answered, and the process must exit cleanly.
fn a_stop_signal_lets_requests_in_flight_finish(backend: Backend, signal: &str) {
    let mut server = MercerServer::start(backend);
    let demo = server.demo().clone();
    let body = br#"{"shared_secret":"graceful-secret"}"#;
    let address = server.base_url.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // First a whole request on the same connection, answered: the server has accepted the
    // connection, so the POST below is in flight (a connection still in the kernel's backlog
    // when the listener closes is reset, by any server).
    stream
        .write_all(format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n\r\n").as_bytes())
        .unwrap();
    read_one_answer(&mut stream);
    let head = format!(
        "POST /checkout/shop/{}/integration/config HTTP/1.1\r\nHost: {address}\r\n\
         Authorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        demo.shop,
        demo.token,
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&body[..10]).unwrap();
    std::thread::sleep(Duration::from_millis(300));

    server.signal(signal);
    // The listener must close at once, while the request in flight still holds the process:
    // a connection attempt is refused soon after the signal, and the process has not exited
    // (it cannot have: that request is unanswered until the rest of its body comes).
    let refused = mercer_tests::wait_until(Duration::from_secs(2), || {
        TcpStream::connect(&address).is_err()
    });
    assert!(
        refused,
        "2 s after the signal the server still takes new connections:\n{}",
        server.log()
    );
    assert!(
        server.wait_for_exit(Duration::from_millis(50)).is_none(),
        "the server waits for the request in flight: {}",
        server.output()
    );
    stream.write_all(&body[10..]).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the request in flight was answered: {answer}"
    );
    assert!(answer.contains("\"configured\":true"), "{answer}");

    let status = server
        .wait_for_exit(Duration::from_secs(20))
        .expect("the server exits after the signal");
    assert!(
        status.success(),
        "a graceful stop exits 0: {status:?}\n{}",
        server.output()
    );
    let logged = mercer_tests::wait_until(Duration::from_secs(5), || {
        server.log().contains(&format!("SIG{signal} received"))
    });
    assert!(logged, "{}", server.log());
}

fn sigterm_is_graceful(backend: Backend) {
    a_stop_signal_lets_requests_in_flight_finish(backend, "TERM");
}

fn sigint_is_graceful(backend: Backend) {
    a_stop_signal_lets_requests_in_flight_finish(backend, "INT");
}

/// A stop signal that comes as Mercer starts (the moment it says it listens, its job workers
/// have just claimed the recurring jobs) stops it gracefully: it exits 0 and leaves no job
/// leased to it, so the next process runs the scheduler at once rather than after the lease.
fn a_stop_signal_during_start_up_leaves_no_job_leased(backend: Backend) {
    for _ in 0..3 {
        let mut server = MercerServer::start(backend);
        server.signal("INT");
        let status = server
            .wait_for_exit(Duration::from_secs(20))
            .expect("the server exits after the signal");
        assert!(
            status.success(),
            "a signal during start-up is a graceful stop: {status:?}\n{}",
            server.output()
        );
        let database = server.into_database();
        assert_eq!(
            database.count("SELECT count(*) AS n FROM jobs WHERE state = 'running'"),
            0,
            "no job is left leased to the stopped process"
        );
    }
}

backend_tests!(
    the_demo_is_made_once_and_data_survives_a_restart,
    a_stop_signal_during_start_up_leaves_no_job_leased,
    a_first_start_on_a_taken_port_leaves_no_credentials_behind,
    sigterm_is_graceful,
    sigint_is_graceful
);

/// Processes starting together on an empty PostgreSQL database migrate it under an advisory
/// lock: every one succeeds, one applies the migrations, the others find them applied. Without
/// the lock they would all run the first migration and all but one fail on its tables.
#[test]
fn migrations_started_together_on_an_empty_postgres_apply_once() {
    const PROCESSES: usize = 4;
    // A few rounds, each on a new database: one may by chance not overlap.
    for round in 0..3 {
        let database = TestDatabase::create(Backend::Postgres);
        let start = std::sync::Barrier::new(PROCESSES);
        let outputs: Vec<_> = std::thread::scope(|scope| {
            let runs: Vec<_> = (0..PROCESSES)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        run_cli(&database, &["migrate"])
                    })
                })
                .collect();
            runs.into_iter().map(|run| run.join().unwrap()).collect()
        });
        for output in &outputs {
            assert!(
                output.success,
                "round {round}: a migrate failed: {}",
                output.stderr
            );
        }
        let applied: Vec<&str> = outputs
            .iter()
            .filter(|output| !output.stdout.contains("already up to date"))
            .map(|output| output.stdout.as_str())
            .collect();
        assert_eq!(
            applied.len(),
            1,
            "round {round}: exactly one process applies the migrations: {outputs:?}"
        );
        assert!(applied[0].contains(": applied "), "{}", applied[0]);
        assert!(
            database.open_store().migrate().unwrap().is_empty(),
            "round {round}: the schema is complete"
        );
    }
}
