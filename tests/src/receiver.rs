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
    /// Extra headers of the answer (e.g. `Retry-After`).
    pub headers: &'static [(&'static str, &'static str)],
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            delay: Duration::ZERO,
            headers: &[],
        }
    }
}

/// Computes an answer's status and JSON body from the request (an override server).
pub type Responder = Arc<dyn Fn(&Received) -> (u16, String) + Send + Sync>;

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
        Self::listen(None)
    }

    /// Starts a server whose answers `responder` computes; a scripted reply's delay still
    /// applies first, and its status only when the responder is not asked.
    pub fn answering(
        responder: impl Fn(&Received) -> (u16, String) + Send + Sync + 'static,
    ) -> Receiver {
        Self::listen(Some(Arc::new(responder)))
    }

    fn listen(responder: Option<Responder>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a receiver");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let state = shared.clone();
                let responder = responder.clone();
                thread::spawn(move || {
                    let Ok(writer) = stream.try_clone() else {
                        return;
                    };
                    let mut writer = writer;
                    let mut reader = BufReader::new(stream);
                    while let Some(request) = read_request(&mut reader) {
                        let answered = responder.as_ref().map(|respond| respond(&request));
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
                        let (status, kind, body) = match answered {
                            Some((status, body)) => (status, "application/json", body),
                            None => (reply.status, "text/plain", "ok".to_string()),
                        };
                        let extra: String = reply
                            .headers
                            .iter()
                            .map(|(name, value)| format!("{name}: {value}\r\n"))
                            .collect();
                        let answer = format!(
                            "HTTP/1.1 {status} Status\r\nContent-Length: {}\r\nContent-Type: {kind}\r\n{extra}\r\n{body}",
                            body.len()
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
