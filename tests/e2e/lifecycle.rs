//! The server's life: first start, restart, graceful stop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use mercer_tests::{Backend, MercerServer, backend_tests};

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
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        TcpStream::connect(&address).is_err() || server.wait_for_exit(Duration::ZERO).is_none(),
        "after the signal the server takes no new connections (or is still finishing)"
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

backend_tests!(
    the_demo_is_made_once_and_data_survives_a_restart,
    sigterm_is_graceful,
    sigint_is_graceful
);
