//! The HTTP client for connector operations.

use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::platform::connector::{
    ConnectorError, ConnectorResult, ConnectorTarget, Page, PlatformConnector,
};
use mercer_domain::platform::connector::{VerificationAnswer, VerificationProof};
use mercer_domain::platform::resources::{
    Category, Customer, CustomerAddress, Order, Pagination, Payment, Product,
};
use mercer_outbound::PrivateAddressGuard;
use mercer_signing::message_signature::{self, SigningParams};
use mercer_signing::{verify_x_hmac, x_hmac};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::headers;

/// Calls connectors over HTTP, keeping connections alive between calls. Its agent is
/// `mercer-outbound`'s: connectors in private networks are refused (unless allowed) and
/// redirects are never followed, so the signed headers go nowhere but the destination.
#[derive(Clone)]
pub struct HttpConnector {
    agent: ureq::Agent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Post,
    Patch,
    Delete,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }
}

/// How a call is signed. Mercer always signs `Now`; the conformance checks also send calls
/// signed at another time, wrongly or not at all, to see the connector refuse them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Signing {
    /// `X-HMAC-Timestamp` now, `X-HMAC` and `X-Compatible-HMAC` over it, and the message
    /// signature (`created` now, a new nonce).
    Now,
    /// The same at another time (a stale or future timestamp and `created`).
    At(Timestamp),
    /// The same at this time with this nonce: sent twice, the second is a replay.
    Exact {
        /// The timestamp and `created`.
        at: Timestamp,
        /// The nonce.
        nonce: [u8; 16],
    },
    /// `X-HMAC-Timestamp` now, without `X-HMAC`, `X-Compatible-HMAC` or a message signature.
    Unsigned,
    /// Right `X-HMAC` headers; the message signature keyed with this other secret.
    MessageKey(&'static str),
    /// Right `X-HMAC` headers; the message signature made for the operation of these segments
    /// (another URI than the one called).
    MessageFor(&'static [&'static str]),
    /// Right `X-HMAC` headers, no message signature.
    NoMessageSignature,
}

/// One call to a connector operation.
pub(crate) struct Request<'a> {
    pub method: Method,
    pub segments: &'a [&'a str],
    pub query: &'a [(&'a str, &'a str)],
    pub body: Option<Vec<u8>>,
    pub idempotency_key: Option<&'a str>,
    pub signing: Signing,
}

/// What came back from a connector: its status, body, and the headers a caller looks at.
pub(crate) struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
    /// The `X-HMAC-Timestamp` that was sent (the verification answer signs it).
    pub sent_timestamp: String,
    /// The answer's `X-HMAC` (the verification echo).
    pub hmac: Option<String>,
    /// The nonce of the message signature that was sent, if one was.
    pub sent_nonce: Option<String>,
    /// The answer's `X-Verification-Proof`.
    pub proof: Option<String>,
    pub content_type: Option<String>,
    /// Where a redirect points (never followed).
    pub location: Option<String>,
}

/// What went wrong on the way, as the port's error. The details (an OS error, an address, the
/// guard's reason) stay in `Unreachable`'s payload and the debug log: the error's text reaches
/// API clients, and must not tell them about the network Mercer runs in.
fn transport_error(error: ureq::Error, timeout: Duration) -> ConnectorError {
    if let Some(refused) = mercer_outbound::refusal(&error) {
        let detail = format!("refused by the address guard: {refused}");
        log::debug!(target: "mercer::connector", "a connector call was refused: {detail}");
        return ConnectorError::Refused(detail);
    }
    match error {
        ureq::Error::Timeout(_) => ConnectorError::Timeout(timeout),
        ureq::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) =>
        {
            ConnectorError::Timeout(timeout)
        }
        ureq::Error::BodyExceedsLimit(limit) => {
            ConnectorError::Malformed(format!("the answer is larger than {limit} bytes"))
        }
        ureq::Error::Protocol(problem) => ConnectorError::Malformed(problem.to_string()),
        other => unreachable(other.to_string()),
    }
}

fn unreachable(detail: String) -> ConnectorError {
    log::debug!(target: "mercer::connector", "a connector could not be reached: {detail}");
    ConnectorError::Unreachable(detail)
}

/// The status, the headers callers look at, and the body (up to 32 MiB) of an answer.
fn read_answer(
    mut response: ureq::http::Response<ureq::Body>,
    sent: SignedCall,
    timeout: Duration,
) -> ConnectorResult<Answer> {
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string)
    };
    let (hmac, proof, content_type, location) = (
        header(headers::HMAC),
        header(headers::VERIFICATION_PROOF),
        header("Content-Type"),
        header("Location"),
    );
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(32 * 1024 * 1024)
        .read_to_vec()
        .map_err(|error| transport_error(error, timeout))?;
    Ok(Answer {
        status,
        body,
        sent_timestamp: sent.timestamp,
        hmac,
        sent_nonce: sent.nonce,
        proof,
        content_type,
        location,
    })
}

/// The signing headers of one call, as they are sent.
#[derive(Debug, Default)]
pub(crate) struct SignedCall {
    /// `X-HMAC-Timestamp`.
    pub timestamp: String,
    /// `X-HMAC` and `X-Compatible-HMAC`.
    pub hmac: Option<(String, String)>,
    /// `Content-Digest`, when there is a body.
    pub content_digest: Option<String>,
    /// `Signature-Input` and `Signature`.
    pub message_signature: Option<(String, String)>,
    /// The message signature's nonce.
    pub nonce: Option<String>,
}

/// A new random nonce: 16 bytes.
pub(crate) fn new_nonce() -> ConnectorResult<[u8; 16]> {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce)
        .map_err(|error| unreachable(format!("no randomness for a nonce: {error}")))?;
    Ok(nonce)
}

/// Signs one call: `X-HMAC` (and `X-Compatible-HMAC`) over the timestamp, and an HTTP Message
/// Signature over the method, the URI and the body's `Content-Digest`, `sig1` keyed with the
/// current secret and, during a rotation's grace, `sig2` with the previous one. `signing` says
/// how (Mercer: always `Now`).
pub(crate) fn sign_call(
    target: &ConnectorTarget,
    method: &str,
    uri: &str,
    body: Option<&[u8]>,
    signing: Signing,
) -> ConnectorResult<SignedCall> {
    let (at, nonce) = match signing {
        Signing::At(at) => (at, new_nonce()?),
        Signing::Exact { at, nonce } => (at, nonce),
        _ => (Timestamp::now(), new_nonce()?),
    };
    let timestamp = at.to_rfc3339_seconds();
    let mut call = SignedCall {
        timestamp,
        ..SignedCall::default()
    };
    if matches!(signing, Signing::Unsigned) {
        return Ok(call);
    }
    let (secret, compatible) = (target.secret.expose(), target.compatible_secret.expose());
    call.hmac = Some((
        x_hmac(secret, &call.timestamp),
        x_hmac(compatible, &call.timestamp),
    ));
    call.content_digest = body.map(message_signature::content_digest);
    if matches!(signing, Signing::NoMessageSignature) {
        return Ok(call);
    }
    let signed_uri = match signing {
        Signing::MessageFor(segments) => operation_url(target, segments)?.to_string(),
        _ => uri.to_string(),
    };
    let mut keys = vec![("sig1", secret)];
    if compatible != secret {
        keys.push(("sig2", compatible));
    }
    if let Signing::MessageKey(other) = signing {
        keys = vec![("sig1", other)];
    }
    let mut covered = vec!["@method", "@target-uri"];
    let digest_header;
    let mut fields: Vec<(&str, &str)> = Vec::new();
    if let Some(digest) = &call.content_digest {
        covered.push("content-digest");
        digest_header = digest.clone();
        fields.push(("Content-Digest", digest_header.as_str()));
    }
    let request = message_signature::Request {
        method,
        target_uri: &signed_uri,
        headers: &fields,
    };
    let nonce = hex::encode(nonce);
    let params = SigningParams::new(at.as_micros().div_euclid(1_000_000), &nonce);
    let (mut inputs, mut signatures) = (Vec::new(), Vec::new());
    for (label, key) in keys {
        let signed = message_signature::sign(key.as_bytes(), label, &request, &covered, &params)
            .map_err(|error| ConnectorError::Malformed(format!("cannot sign the call: {error}")))?;
        inputs.push(signed.input);
        signatures.push(signed.signature);
    }
    call.message_signature = Some((inputs.join(", "), signatures.join(", ")));
    call.nonce = Some(nonce);
    Ok(call)
}

/// `{base}/{version}/shops/{shop}/{segments…}`, each segment percent-encoded.
fn operation_url(target: &ConnectorTarget, segments: &[&str]) -> ConnectorResult<url::Url> {
    let mut url = url::Url::parse(&target.base_url)
        .map_err(|error| unreachable(format!("the destination URL is invalid: {error}")))?;
    {
        let mut path = url
            .path_segments_mut()
            .map_err(|()| unreachable("the destination URL cannot have a path".to_string()))?;
        path.pop_if_empty()
            .push(&target.version)
            .push("shops")
            .push(&target.shop_identifier);
        for segment in segments {
            path.push(segment);
        }
    }
    Ok(url)
}

/// `data.{key}` of a connector's answer, as `T`.
pub(crate) fn data<T: DeserializeOwned>(body: &[u8], key: &str) -> ConnectorResult<T> {
    let mut value: Value = serde_json::from_slice(body)
        .map_err(|error| ConnectorError::Malformed(format!("the answer is not JSON: {error}")))?;
    let entity = value
        .get_mut("data")
        .and_then(|data| data.get_mut(key))
        .map(Value::take)
        .ok_or_else(|| ConnectorError::Malformed(format!("the answer has no data.{key}")))?;
    serde_json::from_value(entity)
        .map_err(|error| ConnectorError::Malformed(format!("data.{key}: {error}")))
}

pub(crate) fn list<T: DeserializeOwned>(body: &[u8], key: &str) -> ConnectorResult<Page<T>> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| ConnectorError::Malformed(format!("the answer is not JSON: {error}")))?;
    let items = value
        .get("data")
        .and_then(|data| data.get(key))
        .cloned()
        .ok_or_else(|| ConnectorError::Malformed(format!("the answer has no data.{key}")))?;
    let items: Vec<T> = serde_json::from_value(items)
        .map_err(|error| ConnectorError::Malformed(format!("data.{key}: {error}")))?;
    // The seed puts `pagination` beside `data`; connectors that nest it in `data` work too.
    let pagination = value
        .get("pagination")
        .or_else(|| value.get("data").and_then(|data| data.get("pagination")))
        .cloned()
        .map(serde_json::from_value::<Pagination>)
        .transpose()
        .map_err(|error| ConnectorError::Malformed(format!("pagination: {error}")))?
        .unwrap_or_default();
    Ok(Page { items, pagination })
}

pub(crate) fn wrap<T: Serialize>(key: &str, entity: &T) -> Vec<u8> {
    json!({ "data": { key: entity } }).to_string().into_bytes()
}

impl HttpConnector {
    /// `guard` says whether connectors may live on loopback and private networks.
    pub fn new(guard: PrivateAddressGuard) -> Self {
        let agent = mercer_outbound::agent(
            guard,
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .user_agent(headers::USER_AGENT)
                .max_idle_connections_per_host(16),
        );
        HttpConnector { agent }
    }

    /// Makes one signed call. Statuses are answers here; only transport problems are errors.
    fn call(
        &self,
        target: &ConnectorTarget,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Option<Vec<u8>>,
        idempotency_key: Option<&str>,
    ) -> ConnectorResult<Answer> {
        let request = Request {
            method,
            segments,
            query,
            body,
            idempotency_key,
            signing: Signing::Now,
        };
        self.send(target, request)
    }

    /// Sends one call signed as `request.signing` says: the one place connector calls are
    /// signed and sent. In its span (`connector_call`: method, the resource called, the
    /// answer's status), for traces; at debug level, which the log's usual filter leaves out.
    pub(crate) fn send(
        &self,
        target: &ConnectorTarget,
        request: Request<'_>,
    ) -> ConnectorResult<Answer> {
        let span = tracing::debug_span!(
            target: "mercer::connector",
            "connector_call",
            method = request.method.as_str(),
            resource = request.segments.first().copied().unwrap_or(""),
            status = tracing::field::Empty,
        );
        let _entered = span.enter();
        let answer = self.send_in_span(target, request);
        if let Ok(answer) = &answer {
            span.record("status", answer.status);
        }
        answer
    }

    fn send_in_span(
        &self,
        target: &ConnectorTarget,
        request: Request<'_>,
    ) -> ConnectorResult<Answer> {
        let mut url = operation_url(target, request.segments)?;
        if !request.query.is_empty() {
            // The query is part of the signed URI: it is written here, once, as it is sent.
            let mut pairs = url.query_pairs_mut();
            for (key, value) in request.query {
                pairs.append_pair(key, value);
            }
        }
        let body = match request.method {
            Method::Get | Method::Delete => None,
            Method::Post | Method::Patch => Some(request.body.unwrap_or_else(|| b"{}".to_vec())),
        };
        let method = request.method.as_str();
        let signed = sign_call(
            target,
            method,
            url.as_str(),
            body.as_deref(),
            request.signing,
        )?;
        let timeout = target.timeout;
        macro_rules! prepare {
            ($builder:expr) => {{
                let mut builder = $builder
                    .config()
                    .timeout_global(Some(timeout))
                    .build()
                    .header(headers::TIMESTAMP, signed.timestamp.as_str())
                    .header("Accept", "application/json");
                if let Some((signature, compatible)) = &signed.hmac {
                    builder = builder
                        .header(headers::HMAC, signature.as_str())
                        .header(headers::COMPATIBLE_HMAC, compatible.as_str());
                }
                if let Some((input, signature)) = &signed.message_signature {
                    builder = builder
                        .header(headers::SIGNATURE_INPUT, input.as_str())
                        .header(headers::SIGNATURE, signature.as_str());
                }
                if let Some(digest) = &signed.content_digest {
                    builder = builder.header(headers::CONTENT_DIGEST, digest.as_str());
                }
                if let Some(key) = request.idempotency_key {
                    builder = builder.header(headers::IDEMPOTENCY_KEY, key);
                }
                builder
            }};
        }
        let url = url.as_str();
        let result = match (request.method, body) {
            (Method::Get, _) => prepare!(self.agent.get(url)).call(),
            (Method::Delete, _) => prepare!(self.agent.delete(url)).call(),
            (Method::Post, body) => prepare!(self.agent.post(url))
                .header("Content-Type", "application/json")
                .send(body.unwrap_or_default()),
            (Method::Patch, body) => prepare!(self.agent.patch(url))
                .header("Content-Type", "application/json")
                .send(body.unwrap_or_default()),
        };
        let response = result.map_err(|error| transport_error(error, timeout))?;
        read_answer(response, signed, timeout)
    }

    /// The answer's body when its status is `expected` (or any 2xx), else the matching error.
    fn expect(answer: Answer, expected: u16) -> ConnectorResult<Vec<u8>> {
        match answer.status {
            status if status == expected || (200..300).contains(&status) => Ok(answer.body),
            404 => Err(ConnectorError::NotFound),
            status => Err(ConnectorError::Failed { status }),
        }
    }

    /// One page of a list operation without filters (`orders`, `products`, `categories`): its
    /// items are under `data.{collection}`.
    fn list_page<T: DeserializeOwned>(
        &self,
        target: &ConnectorTarget,
        collection: &str,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> ConnectorResult<Page<T>> {
        let limit = limit.map(|limit| limit.to_string());
        let query = page_query(&limit, cursor);
        let answer = self.call(target, Method::Get, &[collection], &query, None, None)?;
        list(&Self::expect(answer, 200)?, collection)
    }

    /// Every page of List Customers, following `pagination.next` until it is empty.
    pub fn customer_pages<'a>(
        &'a self,
        target: &'a ConnectorTarget,
        limit: Option<u32>,
        email: Option<&'a str>,
    ) -> Pages<'a, Customer> {
        Pages::new(Box::new(move |cursor| {
            self.list_customers(target, limit, cursor, email)
        }))
    }

    /// Every page of List Orders, following `pagination.next` until it is empty.
    pub fn order_pages<'a>(
        &'a self,
        target: &'a ConnectorTarget,
        limit: Option<u32>,
    ) -> Pages<'a, Order> {
        Pages::new(Box::new(move |cursor| {
            self.list_orders(target, limit, cursor)
        }))
    }
}

type Fetch<'a, T> = Box<dyn FnMut(Option<&str>) -> ConnectorResult<Page<T>> + 'a>;

/// An iterator over the pages of a connector list. It stops after the last page, after an
/// error, or when the connector hands back the cursor it was given (which would loop forever).
pub struct Pages<'a, T> {
    fetch: Fetch<'a, T>,
    cursor: Option<String>,
    done: bool,
}

impl<'a, T> Pages<'a, T> {
    fn new(fetch: Fetch<'a, T>) -> Self {
        Pages {
            fetch,
            cursor: None,
            done: false,
        }
    }
}

impl<T> Iterator for Pages<'_, T> {
    type Item = ConnectorResult<Vec<T>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match (self.fetch)(self.cursor.as_deref()) {
            Ok(page) => {
                let next = page.pagination.next_cursor().map(str::to_string);
                if next.is_none() || next == self.cursor {
                    self.done = true;
                }
                self.cursor = next;
                Some(Ok(page.items))
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}

/// Whether a verification answer's `X-Verification-Proof` is the HMAC of the nonce sent.
pub(crate) fn verification_proof(answer: &Answer, secret: &str) -> VerificationProof {
    match (&answer.proof, &answer.sent_nonce) {
        (None, _) => VerificationProof::Missing,
        (Some(proof), Some(nonce))
            if message_signature::verify_verification_proof(secret, nonce, proof) =>
        {
            VerificationProof::Valid
        }
        (Some(_), _) => VerificationProof::Invalid,
    }
}

/// The query of a list operation: `limit` and `cursor` when given.
fn page_query<'a>(
    limit: &'a Option<String>,
    cursor: Option<&'a str>,
) -> Vec<(&'static str, &'a str)> {
    let mut query = Vec::new();
    if let Some(limit) = limit {
        query.push(("limit", limit.as_str()));
    }
    if let Some(cursor) = cursor {
        query.push(("cursor", cursor));
    }
    query
}

impl PlatformConnector for HttpConnector {
    fn verify(&self, target: &ConnectorTarget) -> ConnectorResult<VerificationAnswer> {
        let answer = self.call(target, Method::Get, &["verification"], &[], None, None)?;
        if answer.status != 200 {
            return Err(ConnectorError::Failed {
                status: answer.status,
            });
        }
        let echoed = answer.hmac.as_deref().ok_or(ConnectorError::BadSignature)?;
        // Only the current secret verifies: a destination is registered with the connector that
        // holds it. (Operations keep working through a rotation's grace by X-Compatible-HMAC.)
        if !verify_x_hmac(target.secret.expose(), &answer.sent_timestamp, echoed) {
            return Err(ConnectorError::BadSignature);
        }
        Ok(VerificationAnswer {
            proof: verification_proof(&answer, target.secret.expose()),
        })
    }

    fn list_customers(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
        email: Option<&str>,
    ) -> ConnectorResult<Page<Customer>> {
        let limit = limit.map(|limit| limit.to_string());
        let mut query = page_query(&limit, cursor);
        if let Some(email) = email {
            query.push(("email", email));
        }
        let answer = self.call(target, Method::Get, &["customers"], &query, None, None)?;
        list(&Self::expect(answer, 200)?, "customers")
    }

    fn create_customer(
        &self,
        target: &ConnectorTarget,
        customer: &Customer,
    ) -> ConnectorResult<Customer> {
        let answer = self.call(
            target,
            Method::Post,
            &["customers"],
            &[],
            Some(wrap("customer", customer)),
            None,
        )?;
        data(&Self::expect(answer, 201)?, "customer")
    }

    fn update_customer(
        &self,
        target: &ConnectorTarget,
        platform_id: &str,
        customer: &Customer,
    ) -> ConnectorResult<Customer> {
        let answer = self.call(
            target,
            Method::Patch,
            &["customers", platform_id],
            &[],
            Some(wrap("customer", customer)),
            None,
        )?;
        data(&Self::expect(answer, 200)?, "customer")
    }

    fn delete_customer(&self, target: &ConnectorTarget, platform_id: &str) -> ConnectorResult<()> {
        let answer = self.call(
            target,
            Method::Delete,
            &["customers", platform_id],
            &[],
            None,
            None,
        )?;
        Self::expect(answer, 204).map(drop)
    }

    fn validate_customer_jwt(
        &self,
        target: &ConnectorTarget,
        platform_id: &str,
        token: &str,
    ) -> ConnectorResult<bool> {
        let body = json!({ "data": { "token_info": { "token": token } } })
            .to_string()
            .into_bytes();
        let answer = self.call(
            target,
            Method::Post,
            &["customers", platform_id, "validate"],
            &[],
            Some(body),
            None,
        )?;
        let body = Self::expect(answer, 200)?;
        let value: Value = serde_json::from_slice(&body)
            .map_err(|error| ConnectorError::Malformed(error.to_string()))?;
        value
            .pointer("/data/token_status/active")
            .and_then(Value::as_bool)
            .ok_or_else(|| {
                ConnectorError::Malformed("the answer has no data.token_status.active".to_string())
            })
    }

    fn create_address(
        &self,
        target: &ConnectorTarget,
        platform_customer_id: &str,
        address: &CustomerAddress,
    ) -> ConnectorResult<CustomerAddress> {
        let answer = self.call(
            target,
            Method::Post,
            &["customers", platform_customer_id, "addresses"],
            &[],
            Some(wrap("address", address)),
            None,
        )?;
        data(&Self::expect(answer, 201)?, "address")
    }

    fn update_address(
        &self,
        target: &ConnectorTarget,
        platform_customer_id: &str,
        platform_id: &str,
        address: &CustomerAddress,
    ) -> ConnectorResult<CustomerAddress> {
        let segments = ["customers", platform_customer_id, "addresses", platform_id];
        let answer = self.call(
            target,
            Method::Patch,
            &segments,
            &[],
            Some(wrap("address", address)),
            None,
        )?;
        data(&Self::expect(answer, 200)?, "address")
    }

    fn delete_address(
        &self,
        target: &ConnectorTarget,
        platform_customer_id: &str,
        platform_id: &str,
    ) -> ConnectorResult<()> {
        let segments = ["customers", platform_customer_id, "addresses", platform_id];
        let answer = self.call(target, Method::Delete, &segments, &[], None, None)?;
        Self::expect(answer, 204).map(drop)
    }

    fn list_orders(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> ConnectorResult<Page<Order>> {
        self.list_page(target, "orders", limit, cursor)
    }

    fn list_products(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> ConnectorResult<Page<Product>> {
        self.list_page(target, "products", limit, cursor)
    }

    fn list_categories(
        &self,
        target: &ConnectorTarget,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> ConnectorResult<Page<Category>> {
        self.list_page(target, "categories", limit, cursor)
    }

    fn create_order(
        &self,
        target: &ConnectorTarget,
        order: &Order,
        idempotency_key: Option<&str>,
    ) -> ConnectorResult<Order> {
        let answer = self.call(
            target,
            Method::Post,
            &["orders"],
            &[],
            Some(wrap("order", order)),
            idempotency_key,
        )?;
        data(&Self::expect(answer, 201)?, "order")
    }

    fn get_order(&self, target: &ConnectorTarget, platform_id: &str) -> ConnectorResult<Order> {
        let answer = self.call(
            target,
            Method::Get,
            &["orders", platform_id],
            &[],
            None,
            None,
        )?;
        data(&Self::expect(answer, 200)?, "order")
    }

    fn update_order(
        &self,
        target: &ConnectorTarget,
        platform_id: &str,
        order: &Order,
    ) -> ConnectorResult<Order> {
        let answer = self.call(
            target,
            Method::Patch,
            &["orders", platform_id],
            &[],
            Some(wrap("order", order)),
            None,
        )?;
        data(&Self::expect(answer, 200)?, "order")
    }

    fn create_payment(
        &self,
        target: &ConnectorTarget,
        platform_order_id: &str,
        payment: &Payment,
    ) -> ConnectorResult<Payment> {
        let answer = self.call(
            target,
            Method::Post,
            &["orders", platform_order_id, "payments"],
            &[],
            Some(wrap("payment", payment)),
            None,
        )?;
        data(&Self::expect(answer, 201)?, "payment")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercer_domain::access::credentials::Secret;

    fn target(base: &str) -> ConnectorTarget {
        ConnectorTarget {
            base_url: base.to_string(),
            version: "v1".into(),
            shop_identifier: "0123456789abcdef0123456789abcdef".into(),
            timeout: Duration::from_millis(500),
            secret: Secret::new("s"),
            compatible_secret: Secret::new("s"),
        }
    }

    #[test]
    fn operation_urls_encode_their_segments() {
        let url = operation_url(
            &target("http://127.0.0.1:9/connector/"),
            &["customers", "a b/c", "addresses"],
        )
        .unwrap();
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:9/connector/v1/shops/0123456789abcdef0123456789abcdef/customers/a%20b%2Fc/addresses"
        );
        let bare = operation_url(&target("http://127.0.0.1:9"), &["verification"]).unwrap();
        assert_eq!(
            bare.as_str(),
            "http://127.0.0.1:9/v1/shops/0123456789abcdef0123456789abcdef/verification"
        );
    }

    #[test]
    fn lists_read_pagination_beside_or_inside_data() {
        let beside: Page<Customer> = list(br#"{"data":{"customers":[{"platform_id":"1"}]},"pagination":{"next":"abc","prev":""}}"#, "customers").unwrap();
        assert_eq!(beside.pagination.next_cursor(), Some("abc"));
        let inside: Page<Customer> = list(
            br#"{"data":{"customers":[],"pagination":{"next":""}}}"#,
            "customers",
        )
        .unwrap();
        assert_eq!(inside.pagination.next_cursor(), None);
        assert!(matches!(
            list::<Customer>(b"{}", "customers"),
            Err(ConnectorError::Malformed(_))
        ));
        assert!(matches!(
            list::<Customer>(b"<html>", "customers"),
            Err(ConnectorError::Malformed(_))
        ));
    }

    #[test]
    fn an_unreachable_connector_is_told_apart() {
        // Port 9 (discard) is closed on this machine's loopback.
        let error = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE)
            .verify(&target("http://127.0.0.1:9"))
            .unwrap_err();
        assert!(matches!(error, ConnectorError::Unreachable(_)), "{error:?}");
        // The OS's words stay out of the text API clients see.
        assert_eq!(error.to_string(), "the connector could not be reached");
    }

    /// Serves one request on loopback, answering `{}`; the request's head, lowercased.
    fn capture(send: impl FnOnce(&str) + Send + 'static) -> String {
        capture_raw(send).0.to_ascii_lowercase()
    }

    /// Serves one request on loopback, answering `{}`: the request's head as sent, its body,
    /// and the address it was served at.
    fn capture_raw(send: impl FnOnce(&str) + Send + 'static) -> (String, Vec<u8>, String) {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let client = std::thread::spawn(move || send(&base));
        let authority = listener.local_addr().unwrap().to_string();
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream);
        let mut head = String::new();
        while reader.read_line(&mut head).unwrap() > 2 && !head.ends_with("\r\n\r\n") {}
        let length = head
            .lines()
            .find_map(|line| {
                line.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(str::to_string)
            })
            .and_then(|value| value.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        std::io::Read::read_exact(&mut reader, &mut body).unwrap();
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        reader.get_mut().write_all(answer.as_bytes()).unwrap();
        client.join().unwrap();
        (head, body, authority)
    }

    fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
        head.lines()
            .find_map(|line| line.strip_prefix(&format!("{name}: ")))
            .map(str::trim)
    }

    #[test]
    fn every_call_carries_the_signed_headers() {
        let head = capture(|base| {
            let connector = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE);
            let target = target(base);
            let order = Order::default();
            let _ = connector.create_order(&target, &order, Some("key-1"));
        });
        assert!(head.starts_with("post /v1/shops/"), "{head}");
        let timestamp = header(&head, "x-hmac-timestamp").expect("a timestamp");
        assert!(Timestamp::parse_rfc3339(timestamp).is_some(), "{timestamp}");
        assert!(
            timestamp.ends_with('z') && timestamp.len() == 20,
            "{timestamp}"
        );
        // The head is lowercased: compare the signatures case-blind.
        let expected = x_hmac("s", &timestamp.to_ascii_uppercase()).to_ascii_lowercase();
        assert_eq!(header(&head, "x-hmac"), Some(expected.as_str()));
        assert_eq!(header(&head, "x-compatible-hmac"), Some(expected.as_str()));
        assert_eq!(header(&head, "user-agent"), Some("svc-api"));
        assert_eq!(header(&head, "content-type"), Some("application/json"));
        assert_eq!(header(&head, "accept"), Some("application/json"));
        assert_eq!(header(&head, "idempotency-key"), Some("key-1"));
    }

    fn raw_header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
        head.lines().find_map(|line| {
            let (field, value) = line.split_once(':')?;
            field.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }

    #[test]
    fn every_call_carries_a_message_signature_the_kit_verifies() {
        use crate::kit::{NonceCache, SignedHeaders, SignedMessage, target_uri, verify_call};
        let customer = Customer::default();
        let (head, body, authority) = capture_raw(move |base| {
            let connector = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE);
            let _ = connector.update_customer(&target(base), "a b", &customer);
        });
        let (method, path) = {
            let mut line = head.lines().next().unwrap().split(' ');
            (
                line.next().unwrap().to_string(),
                line.next().unwrap().to_string(),
            )
        };
        assert_eq!(method, "PATCH");
        let digest = raw_header(&head, "content-digest").expect("a Content-Digest");
        assert_eq!(
            digest,
            mercer_signing::message_signature::content_digest(&body)
        );
        let input = raw_header(&head, "signature-input").expect("a Signature-Input");
        assert!(
            input.starts_with(r#"sig1=("@method" "@target-uri" "content-digest");created="#),
            "{input}"
        );
        let headers = SignedHeaders {
            timestamp: raw_header(&head, "x-hmac-timestamp"),
            hmac: raw_header(&head, "x-hmac"),
            compatible_hmac: raw_header(&head, "x-compatible-hmac"),
        };
        let uri = target_uri("http", &authority, &path);
        let message = SignedMessage {
            method: &method,
            target_uri: &uri,
            signature_input: Some(input),
            signature: raw_header(&head, "signature"),
            content_digest: Some(digest),
            body: &body,
        };
        let nonces = NonceCache::default();
        let verified = verify_call(&headers, &message, "s", Timestamp::now(), 300, &nonces);
        assert_eq!(verified.map(|v| v.label), Ok("sig1".to_string()));
        // Its query is signed too: a list's URI as sent.
        let (head, _, authority) = capture_raw(|base| {
            let connector = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE);
            let _ =
                connector.list_customers(&target(base), Some(5), None, Some("a+b@example.test"));
        });
        let path = head
            .lines()
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .to_string();
        assert!(
            path.ends_with("/customers?limit=5&email=a%2Bb%40example.test"),
            "{path}"
        );
        let uri = target_uri("http", &authority, &path);
        let message = SignedMessage {
            method: "GET",
            target_uri: &uri,
            signature_input: raw_header(&head, "signature-input"),
            signature: raw_header(&head, "signature"),
            content_digest: None,
            body: b"",
        };
        let headers = SignedHeaders {
            timestamp: raw_header(&head, "x-hmac-timestamp"),
            hmac: raw_header(&head, "x-hmac"),
            compatible_hmac: raw_header(&head, "x-compatible-hmac"),
        };
        assert!(verify_call(&headers, &message, "s", Timestamp::now(), 300, &nonces).is_ok());
    }

    #[test]
    fn a_call_may_be_signed_at_another_time_or_not_at_all() {
        let at = Timestamp::parse_rfc3339("2024-03-01T10:30:00Z").unwrap();
        let request = |signing| {
            move |base: &str| {
                let request = Request {
                    method: Method::Get,
                    segments: &["verification"],
                    query: &[],
                    body: None,
                    idempotency_key: None,
                    signing,
                };
                let connector = HttpConnector::new(PrivateAddressGuard::ALLOW_PRIVATE);
                let answer = connector.send(&target(base), request).unwrap();
                assert_eq!(answer.status, 200);
            }
        };
        let stale = capture(request(Signing::At(at)));
        assert_eq!(
            header(&stale, "x-hmac-timestamp"),
            Some("2024-03-01t10:30:00z")
        );
        let expected = x_hmac("s", "2024-03-01T10:30:00Z").to_ascii_lowercase();
        assert_eq!(header(&stale, "x-hmac"), Some(expected.as_str()));
        let unsigned = capture(request(Signing::Unsigned));
        assert!(
            header(&unsigned, "x-hmac-timestamp").is_some(),
            "{unsigned}"
        );
        assert_eq!(header(&unsigned, "x-hmac"), None);
        assert_eq!(header(&unsigned, "x-compatible-hmac"), None);
        assert_eq!(header(&unsigned, "signature-input"), None);
        assert_eq!(header(&unsigned, "signature"), None);
    }

    #[test]
    fn a_loopback_connector_is_refused_unless_allowed() {
        let error = HttpConnector::new(PrivateAddressGuard::STRICT)
            .verify(&target("http://127.0.0.1:9"))
            .unwrap_err();
        assert_eq!(
            error,
            ConnectorError::Refused(
                "refused by the address guard: it leads to a loopback address".to_string()
            )
        );
        assert!(!error.is_transient(), "a refusal is not tried again");
        assert_eq!(error.to_string(), "the connector could not be reached");
    }
}
