//! A webhook receiver for tests: a real HTTP server on loopback that answers as told (statuses,
//! delays, in order) and keeps every request it got.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// How to answer one request.
#[derive(Debug, Clone, Copy)]
pub struct Reply {
    pub status: u16,
    pub delay: Duration,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            delay: Duration::ZERO,
        }
    }
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    script: VecDeque<Reply>,
    otherwise: Option<Reply>,
}

/// The receiver; it runs until the test process ends.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    state: Arc<Mutex<State>>,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Received> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = Vec::new();
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        if name.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse().ok()?;
        }
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Received {
        method,
        target,
        headers,
        body,
    })
}

impl Receiver {
    /// Starts a receiver that answers 200 unless told otherwise.
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a receiver");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let state = shared.clone();
                thread::spawn(move || {
                    let Ok(writer) = stream.try_clone() else {
                        return;
                    };
                    let mut writer = writer;
                    let mut reader = BufReader::new(stream);
                    while let Some(request) = read_request(&mut reader) {
                        let reply = {
                            let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
                            state.received.push(request);
                            state
                                .script
                                .pop_front()
                                .or(state.otherwise)
                                .unwrap_or(Reply::status(200))
                        };
                        thread::sleep(reply.delay);
                        let answer = format!(
                            "HTTP/1.1 {} Status\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok",
                            reply.status
                        );
                        if writer.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Receiver { url, state }
    }

    /// The next requests get these answers, in order.
    pub fn script(&self, replies: &[Reply]) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .script
            .extend(replies.iter().copied());
    }

    /// Once the script is used up, every request gets this answer.
    pub fn otherwise(&self, reply: Reply) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .otherwise = Some(reply);
    }

    pub fn received(&self) -> Vec<Received> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .received
            .clone()
    }
}
