//! The server's TCP side: its listeners, what it admits (at most so many connections per client
//! address, and none that stays silent past the first-byte deadline), and the stream that gives
//! actix-http's own bodiless error answers the JSON error body.
//!
//! actix-http refuses a request head it cannot parse (a control byte in a header value, a
//! malformed request line…) with a hard-coded `400` without a body, a head too large for its
//! buffer with `431`, and a first head that does not arrive in time with `408`. It does so before
//! any app code runs and offers no hook to change the answer, so [`ContractStream`] wraps each
//! connection's socket and, when the bytes about to be written end with one of those bare
//! answers, writes the JSON error answer in their place.
//!
//! The simpler ways do not reach these answers: actix-web's error handlers, middleware and
//! `App::default_service` see only requests whose head parsed, and `HttpService`'s settings
//! change the limits and deadlines but not what is written when one is crossed. Each answer
//! rewritten here has an end-to-end test (a control byte in a header value: 400; too many header
//! fields: 431; a head that never ends: 408).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use actix_http::Protocol;
use actix_http::error::DispatchError;
use actix_web::dev::{ServiceFactory, fn_service};
use actix_web::rt::net::TcpStream;
use actix_web::rt::time::{Sleep, sleep};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::error::ErrorEntry;

/// Binds `address` as actix-web's `HttpServer::bind` does: every address it resolves to that can
/// be bound, with `SO_REUSEADDR` and a backlog of 1024.
pub fn listeners(address: &str) -> io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::new();
    let mut last_error = None;
    for address in address.to_socket_addrs()? {
        match listener(address) {
            Ok(listener) => listeners.push(listener),
            Err(error) => last_error = Some(error),
        }
    }
    match last_error {
        Some(error) if listeners.is_empty() => Err(error),
        None if listeners.is_empty() => Err(io::Error::other("the address resolves to nothing")),
        _ => Ok(listeners),
    }
}

fn listener(address: SocketAddr) -> io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&address.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// What a new connection must meet to be served, the same for every worker.
pub struct Admission {
    /// Connections open per client address.
    pub per_address: Arc<PerAddressCap>,
    /// How long a new connection may stay silent before it is closed.
    pub first_byte_timeout: Duration,
}

/// Turns an accepted connection into what `actix_http::HttpService` serves: the wrapped stream,
/// HTTP/1, and the peer's address (for the request log and the sign-in limiter). A connection
/// from an address that holds its cap of connections already is closed here, at once: it is
/// refused, with no answer, before it costs more than its accept.
pub fn accept(
    admission: Arc<Admission>,
) -> impl ServiceFactory<
    TcpStream,
    Config = (),
    Response = (ContractStream<TcpStream>, Protocol, Option<SocketAddr>),
    Error = DispatchError,
    InitError = (),
> {
    fn_service(move |io: TcpStream| {
        let admission = admission.clone();
        async move {
            let peer = io.peer_addr().ok();
            let slot = match peer {
                Some(peer) => match admission.per_address.take(peer.ip()) {
                    Some(slot) => Some(slot),
                    None => {
                        metrics::counter!("mercer_http_connections_refused_total").increment(1);
                        log::debug!(
                            target: "mercer::http",
                            "closed a connection from {}: it holds its cap of connections",
                            peer.ip()
                        );
                        // Dropping the stream closes the connection.
                        return Err(DispatchError::Io(io::Error::other(
                            "too many connections from this address",
                        )));
                    }
                },
                None => None,
            };
            let stream = ContractStream::new(io)
                .closing_when_silent(admission.first_byte_timeout)
                .holding(slot);
            Ok((stream, Protocol::Http1, peer))
        }
    })
}

/// How many connections each client address has open, against a cap shared by every worker.
/// An IPv6 client counts by its /64 network (one host gets a whole /64), an IPv4-mapped IPv6
/// address as the IPv4 address.
pub struct PerAddressCap {
    /// 0: no cap.
    cap: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerAddressCap {
    /// At most `cap` connections per client address; 0 for no cap.
    pub fn new(cap: usize) -> Arc<PerAddressCap> {
        Arc::new(PerAddressCap {
            cap,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A place for one more connection from `address`, given back when the [`Slot`] drops;
    /// `None` when the address holds its cap already.
    pub fn take(self: &Arc<Self>, address: IpAddr) -> Option<Slot> {
        if self.cap == 0 {
            return Some(Slot {
                cap: None,
                client: address,
            });
        }
        let client = client_of(address);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(client).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(Slot {
            cap: Some(self.clone()),
            client,
        })
    }

    /// Connections `address` holds now (for tests).
    #[cfg(test)]
    fn holding(&self, address: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&client_of(address)).copied().unwrap_or(0)
    }
}

/// The client a connection is counted against: its IPv4 address, or its IPv6 /64 network.
fn client_of(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u64::MAX as u128))),
        },
    }
}

/// One connection's place under its address's cap.
pub struct Slot {
    /// `None` when there is no cap.
    cap: Option<Arc<PerAddressCap>>,
    client: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(cap) = &self.cap else { return };
        let mut open = cap.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.client) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.client);
            }
        }
    }
}

/// A connection's stream that writes the JSON error answer in place of actix-http's bare
/// ones, and fails its reads (so actix-http drops the connection) when no byte has arrived by
/// the first-byte deadline; everything else passes through untouched.
pub struct ContractStream<Io> {
    io: Io,
    replacing: Option<Replacement>,
    /// Until the first byte arrives: when the connection is given up if none has.
    first_byte: Option<Pin<Box<Sleep>>>,
    /// The connection's place under its address's cap, given back when the connection closes.
    _slot: Option<Slot>,
}

/// The JSON error answer being written in place of a bare one.
struct Replacement {
    bytes: Vec<u8>,
    written: usize,
    /// How many of the caller's bytes (the bare answer) it stands for.
    stands_for: usize,
}

impl<Io> ContractStream<Io> {
    pub fn new(io: Io) -> Self {
        ContractStream {
            io,
            replacing: None,
            first_byte: None,
            _slot: None,
        }
    }

    /// Gives the connection up when no byte arrives within `timeout` from now.
    pub fn closing_when_silent(mut self, timeout: Duration) -> Self {
        self.first_byte = Some(Box::pin(sleep(timeout)));
        self
    }

    /// Keeps `slot` for as long as the connection is open.
    pub fn holding(mut self, slot: Option<Slot>) -> Self {
        self._slot = slot;
        self
    }
}

impl<Io: AsyncRead + Unpin> AsyncRead for ContractStream<Io> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Some(deadline) = &mut this.first_byte {
            match &read {
                Poll::Ready(Ok(())) if buf.filled().len() > before => this.first_byte = None,
                // End of stream or an error: actix-http closes the connection itself.
                Poll::Ready(_) => {}
                // The error makes actix-http drop the connection, answering nothing: no
                // request was begun.
                Poll::Pending if deadline.as_mut().poll(cx).is_ready() => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no byte arrived before the first-byte deadline",
                    )));
                }
                Poll::Pending => {}
            }
        }
        read
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for ContractStream<Io> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let replacement = match &mut this.replacing {
            Some(replacement) => replacement,
            None => match find_bare_answer(buf) {
                None => return Pin::new(&mut this.io).poll_write(cx, buf),
                // Earlier answers of a pipelined connection go out first, as they are.
                Some(found) if found.start > 0 => {
                    return Pin::new(&mut this.io).poll_write(cx, &buf[..found.start]);
                }
                Some(found) => this.replacing.insert(Replacement {
                    bytes: contract_answer(buf, &found),
                    written: 0,
                    stands_for: buf.len(),
                }),
            },
        };
        // The caller retries with the same bytes after `Pending`; they are reported written
        // only once the whole replacement is.
        while replacement.written < replacement.bytes.len() {
            let n = ready!(
                Pin::new(&mut this.io).poll_write(cx, &replacement.bytes[replacement.written..])
            )?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            replacement.written += n;
        }
        let stands_for = replacement.stands_for.min(buf.len());
        this.replacing = None;
        Poll::Ready(Ok(stands_for))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BareAnswer {
    Malformed,
    HeadTooLarge,
    HeadTimeout,
}

/// actix-http's bare answers, by their status line after the version.
const BARE_ANSWERS: &[(&[u8], BareAnswer)] = &[
    (b" 400 Bad Request", BareAnswer::Malformed),
    (
        b" 431 Request Header Fields Too Large",
        BareAnswer::HeadTooLarge,
    ),
    (b" 408 Request Timeout", BareAnswer::HeadTimeout),
];

impl BareAnswer {
    fn entry(self) -> ErrorEntry {
        let (kind, sub_type, severity, message) = match self {
            BareAnswer::Malformed => (
                "request.malformed",
                "header",
                "validation",
                "the request's head does not parse: a header value holds a control byte, or a \
                 header or the request line is otherwise malformed",
            ),
            BareAnswer::HeadTooLarge => (
                "request.too_large",
                "header_limit",
                "validation",
                "the request's headers are larger than the server accepts",
            ),
            BareAnswer::HeadTimeout => (
                "request.timeout",
                "head",
                "critical",
                "the request's head did not arrive in time",
            ),
        };
        ErrorEntry {
            message: message.to_string(),
            kind: kind.to_string(),
            field: None,
            severity,
            sub_type: sub_type.to_string(),
        }
    }
}

/// A bare answer at the end of the bytes to write.
#[derive(Debug, PartialEq, Eq)]
struct Found {
    /// Where it starts: bytes before it are earlier answers on a pipelined connection.
    start: usize,
    /// Where its status line (`HTTP/1.1 400 Bad Request`) ends.
    status_line_end: usize,
    /// Its `date: …\r\n` line.
    date_line: Range<usize>,
    kind: BareAnswer,
}

/// `date: `, an IMF-fixdate (always 29 bytes), CRLF.
const DATE_LINE_LEN: usize = 6 + 29 + 2;

/// Finds a bare answer ending `buf`. actix-http writes one as
/// `HTTP/1.x <status>\r\ncontent-length: 0\r\n[connection: close|keep-alive\r\n]date: …\r\n\r\n`
/// and closes the connection after it, so it is always the last thing written. Every answer of
/// the app carries at least `content-type` or the version header, so none matches.
fn find_bare_answer(buf: &[u8]) -> Option<Found> {
    // Answers with a body fail this first test, which is all the hot path pays.
    if !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let date_start = buf.len().checked_sub(DATE_LINE_LEN + 2)?;
    if !buf[date_start..].starts_with(b"date: ") {
        return None;
    }
    let before_date = &buf[..date_start];
    let before_connection = before_date
        .strip_suffix(b"connection: close\r\n")
        .or_else(|| before_date.strip_suffix(b"connection: keep-alive\r\n"))
        .unwrap_or(before_date);
    let status_line = before_connection.strip_suffix(b"\r\ncontent-length: 0\r\n")?;
    BARE_ANSWERS.iter().find_map(|&(status, kind)| {
        let version = status_line.strip_suffix(status)?;
        let start = version.len().checked_sub(b"HTTP/1.1".len())?;
        matches!(&version[start..], b"HTTP/1.1" | b"HTTP/1.0").then(|| Found {
            start,
            status_line_end: status_line.len(),
            date_line: date_start..buf.len() - 2,
            kind,
        })
    })
}

/// The JSON error answer for a bare one: same status line and date, the JSON error body, and
/// `connection: close` (actix-http closes the connection after a bare answer).
fn contract_answer(buf: &[u8], found: &Found) -> Vec<u8> {
    let body = serde_json::json!({ "errors": [found.kind.entry()] }).to_string();
    let mut answer = Vec::with_capacity(256 + body.len());
    answer.extend_from_slice(&buf[found.start..found.status_line_end]);
    answer.extend_from_slice(b"\r\ncontent-type: application/json\r\ncontent-length: ");
    answer.extend_from_slice(body.len().to_string().as_bytes());
    answer.extend_from_slice(b"\r\nconnection: close\r\n");
    // No request was read, so no client id to echo: a new one, like any other answer's.
    answer.extend_from_slice(b"x-request-id: ");
    answer.extend_from_slice(super::middleware::new_request_id().as_bytes());
    answer.extend_from_slice(b"\r\n");
    answer.extend_from_slice(&buf[found.date_line.clone()]);
    answer.extend_from_slice(b"\r\n");
    answer.extend_from_slice(body.as_bytes());
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::task::Waker;

    const DATE: &str = "date: Sun, 22 Nov 2026 16:04:04 GMT\r\n\r\n";

    fn bare(status_line: &str, connection: &str) -> String {
        format!("{status_line}\r\ncontent-length: 0\r\n{connection}{DATE}")
    }

    fn ok_answer() -> String {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: 15\r\ncontent-type: application/json\r\n\
             svc-api-version-date: 2022-05-01\r\n{DATE}{{\"status\":\"ok\"}}"
        )
    }

    #[test]
    fn finds_each_bare_answer_in_each_form_actix_writes() {
        for (status_line, kind) in [
            ("HTTP/1.1 400 Bad Request", BareAnswer::Malformed),
            ("HTTP/1.0 400 Bad Request", BareAnswer::Malformed),
            (
                "HTTP/1.1 431 Request Header Fields Too Large",
                BareAnswer::HeadTooLarge,
            ),
            ("HTTP/1.1 408 Request Timeout", BareAnswer::HeadTimeout),
        ] {
            for connection in ["connection: close\r\n", "connection: keep-alive\r\n", ""] {
                let alone = bare(status_line, connection);
                let found = find_bare_answer(alone.as_bytes()).expect(&alone);
                assert_eq!((found.start, found.kind), (0, kind), "{alone}");
                assert_eq!(&alone[..found.status_line_end], status_line);
                assert_eq!(&alone[found.date_line.clone()], &DATE[..DATE.len() - 2]);

                let pipelined = format!("{}{alone}", ok_answer());
                let found = find_bare_answer(pipelined.as_bytes()).expect(&pipelined);
                assert_eq!(found.start, ok_answer().len(), "{pipelined}");
            }
        }
    }

    #[test]
    fn answers_of_the_app_are_never_taken_for_bare_ones() {
        for answer in [
            ok_answer(),
            // The app's own 400s have a body and headers.
            format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\ncontent-type: \
                 application/json\r\n{DATE}{{}}"
            ),
            // A bodiless answer with the app's headers.
            format!("HTTP/1.1 204 No Content\r\nsvc-api-version-date: 2022-05-01\r\n{DATE}"),
            format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\
                 svc-api-version-date: 2022-05-01\r\n{DATE}"
            ),
            bare("HTTP/1.1 404 Not Found", ""),
            "HTTP/1.1 100 Continue\r\n\r\n".to_string(),
            String::new(),
            "\r\n\r\n".to_string(),
        ] {
            assert_eq!(find_bare_answer(answer.as_bytes()), None, "{answer}");
        }
    }

    /// A socket that takes at most `chunk` bytes per write, and is not ready every other time.
    struct Slow {
        written: Vec<u8>,
        chunk: usize,
        ready: bool,
    }

    impl AsyncWrite for Slow {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            this.ready = !this.ready;
            if !this.ready {
                return Poll::Pending;
            }
            let n = buf.len().min(this.chunk);
            this.written.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Writes `bytes` as actix-http's dispatcher does: retrying with what is left.
    fn write_all(stream: &mut ContractStream<Slow>, bytes: &[u8]) {
        let mut cx = Context::from_waker(Waker::noop());
        let mut written = 0;
        while written < bytes.len() {
            if let Poll::Ready(n) = Pin::new(&mut *stream).poll_write(&mut cx, &bytes[written..]) {
                let n = n.expect("the mock does not fail");
                assert!(n > 0);
                written += n;
            }
        }
    }

    #[test]
    fn the_bare_answer_is_replaced_across_partial_writes_and_earlier_answers_pass_through() {
        let bytes = format!("{}{}", ok_answer(), bare("HTTP/1.1 400 Bad Request", ""));
        let mut stream = ContractStream::new(Slow {
            written: Vec::new(),
            chunk: 7,
            ready: false,
        });
        write_all(&mut stream, bytes.as_bytes());
        let written = String::from_utf8(stream.io.written).expect("ASCII");
        let (earlier, replaced) = written.split_at(ok_answer().len());
        assert_eq!(earlier, ok_answer());
        let (head, body) = replaced.split_once("\r\n\r\n").expect("a head");
        // A fresh request id, like every answer's; then the rest as expected.
        let (before_id, after_id) = head.split_once("x-request-id: ").expect("a request id");
        let (id, after_id) = after_id.split_once("\r\n").expect("the id's line ends");
        assert!(
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        let head = format!("{before_id}{after_id}");
        assert_eq!(
            head,
            format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n{}",
                body.len(),
                &DATE[..DATE.len() - 4]
            )
        );
        let body: Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(body["errors"][0]["type"], "request.malformed");
        assert_eq!(body["errors"][0]["sub_type"], "header");
        assert_eq!(body["errors"][0]["severity"], "validation");
        assert_eq!(body["errors"][0]["field"], Value::Null);
    }

    #[test]
    fn an_address_holds_at_most_its_cap_and_gets_each_place_back_when_a_connection_closes() {
        let cap = PerAddressCap::new(2);
        let one: IpAddr = "127.0.0.1".parse().expect("an address");
        let other: IpAddr = "127.0.0.2".parse().expect("an address");
        let first = cap.take(one).expect("room for the first");
        let second = cap.take(one).expect("room for the second");
        assert!(cap.take(one).is_none(), "a third from the same address");
        // Another address has its own count.
        let _elsewhere = cap.take(other).expect("room for another address");
        drop(first);
        let third = cap.take(one).expect("room again once one closed");
        assert_eq!(cap.holding(one), 2);
        drop((second, third));
        assert_eq!(cap.holding(one), 0);
        assert!(
            cap.open.lock().expect("not poisoned").len() == 1,
            "emptied entries go"
        );
    }

    #[test]
    fn ipv6_clients_count_by_their_64_network_and_mapped_ipv4_as_ipv4() {
        let cap = PerAddressCap::new(1);
        let _held = cap.take("2001:db8:1:2::1".parse().expect("an address"));
        assert!(
            cap.take("2001:db8:1:2:ffff::9".parse().expect("an address"))
                .is_none(),
            "the same /64"
        );
        assert!(
            cap.take("2001:db8:1:3::1".parse().expect("an address"))
                .is_some()
        );
        let _v4 = cap.take("192.0.2.7".parse().expect("an address"));
        assert!(
            cap.take("::ffff:192.0.2.7".parse().expect("an address"))
                .is_none()
        );
    }

    #[test]
    fn no_cap_when_it_is_zero() {
        let cap = PerAddressCap::new(0);
        let address: IpAddr = "127.0.0.1".parse().expect("an address");
        let slots: Vec<_> = (0..1000).filter_map(|_| cap.take(address)).collect();
        assert_eq!(slots.len(), 1000);
    }

    #[test]
    fn other_answers_pass_through_untouched() {
        let mut stream = ContractStream::new(Slow {
            written: Vec::new(),
            chunk: 5,
            ready: false,
        });
        write_all(&mut stream, ok_answer().as_bytes());
        assert_eq!(stream.io.written, ok_answer().as_bytes());
    }
}
