//! The override caller: Mercer's side of an API override. A request is a
//! JSON `POST` with `Date`, `Digest` and a draft-cavage `Signature` made with the override's secret; the
//! override has 5 seconds to answer with a 2xx and a body of its type's shape.

use std::io::Read;
use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::overrides::{
    OverrideAnswer, OverrideCaller, OverrideFailure, OverrideRequest, OverrideTarget,
};
use mercer_outbound::PrivateAddressGuard;
use mercer_signing::cavage;

use crate::dispatcher::{http_date, request_target};

/// How long an override has to answer.
pub const OVERRIDE_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of an answer that is read; a bigger one is a wrong answer.
const MAX_ANSWER_BYTES: u64 = 1024 * 1024;

/// Calls overrides over HTTP. Cheap to share: one agent keeps connections alive.
pub struct HttpOverrideCaller {
    agent: ureq::Agent,
}

impl HttpOverrideCaller {
    /// `guard` says whether overrides may live on loopback and private networks (development,
    /// tests: `--allow-private-targets`).
    pub fn new(guard: PrivateAddressGuard) -> Self {
        Self::with_timeout(guard, OVERRIDE_TIMEOUT)
    }

    pub fn with_timeout(guard: PrivateAddressGuard, timeout: Duration) -> Self {
        let agent = mercer_outbound::agent(
            guard,
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(timeout))
                .user_agent("Svc-API"),
        );
        HttpOverrideCaller { agent }
    }
}

impl OverrideCaller for HttpOverrideCaller {
    fn call(
        &self,
        target: &OverrideTarget,
        request: &OverrideRequest,
    ) -> Result<OverrideAnswer, OverrideFailure> {
        let date = http_date(Timestamp::now());
        let body = request.body();
        let digest = cavage::digest(&body);
        let signature = cavage::signature_header(
            target.shared_secret.expose(),
            "POST",
            &request_target(&target.url),
            &date,
            &digest,
        );
        let sent = self
            .agent
            .post(&target.url)
            .header("Content-Type", "application/json")
            .header("Date", &date)
            .header("Digest", &digest)
            .header("Signature", &signature)
            .send(&body[..]);
        let mut response = match sent {
            Ok(response) => response,
            Err(ureq::Error::Timeout(_)) => return Err(OverrideFailure::TimedOut),
            Err(error) => match mercer_outbound::refusal(&error) {
                Some(refused) => {
                    return Err(OverrideFailure::Failed(format!("refused: {refused}")));
                }
                None if mercer_outbound::is_unreachable(&error) => {
                    log::debug!(target: "mercer::overrides", "an override could not be reached: {error}");
                    return Err(OverrideFailure::Failed(
                        "the override could not be reached".to_string(),
                    ));
                }
                None => return Err(OverrideFailure::Failed(error.to_string())),
            },
        };
        let status = response.status().as_u16();
        let mut body = Vec::new();
        response
            .body_mut()
            .as_reader()
            .take(MAX_ANSWER_BYTES + 1)
            .read_to_end(&mut body)
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::TimedOut => OverrideFailure::TimedOut,
                _ => OverrideFailure::Failed(format!("reading the answer: {error}")),
            })?;
        if !(200..300).contains(&status) {
            return Err(OverrideFailure::Failed(format!("answered HTTP {status}")));
        }
        if body.len() as u64 > MAX_ANSWER_BYTES {
            return Err(OverrideFailure::Failed(
                "the answer is larger than 1 MiB".to_string(),
            ));
        }
        OverrideAnswer::parse(request.override_type, &body).map_err(OverrideFailure::WrongAnswer)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use mercer_domain::access::credentials::Secret;
    use mercer_domain::overrides::OverrideType;

    use super::*;
    use crate::dispatcher::tests::{local_server, redirecting_to};

    fn call(caller: &HttpOverrideCaller, url: String) -> Result<OverrideAnswer, OverrideFailure> {
        caller.call(
            &OverrideTarget {
                url,
                shared_secret: Secret::new("override-secret"),
            },
            &OverrideRequest {
                override_type: OverrideType::Tax,
                shop_identifier: "0".repeat(32),
                public_order_id: "order-1".to_string(),
                data: serde_json::json!({}),
            },
        )
    }

    #[test]
    fn redirects_are_not_followed() {
        let (target, reached) = local_server(
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n[]"
                .to_string(),
        );
        let (redirecting, asked) = redirecting_to(&format!("{target}/tax"));
        let caller = HttpOverrideCaller::new(PrivateAddressGuard::ALLOW_PRIVATE);
        assert_eq!(
            call(&caller, format!("{redirecting}/tax")),
            Err(OverrideFailure::Failed("answered HTTP 307".to_string()))
        );
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            reached.load(Ordering::SeqCst),
            0,
            "the redirect was followed"
        );
    }

    #[test]
    fn loopback_overrides_are_refused_before_connecting() {
        let (url, reached) =
            local_server("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_string());
        let caller = HttpOverrideCaller::new(PrivateAddressGuard::STRICT);
        assert_eq!(
            call(&caller, format!("{url}/tax")),
            Err(OverrideFailure::Failed(
                "refused: it leads to a loopback address".to_string()
            ))
        );
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(reached.load(Ordering::SeqCst), 0);
    }
}
