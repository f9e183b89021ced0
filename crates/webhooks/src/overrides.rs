//! The override caller (contract §4.1, §4.3): Mercer's side of an API override. A request is a
//! JSON `POST` with `Date` and a draft-cavage `Signature` made with the override's secret; the
//! override has 5 seconds to answer with a 2xx and a body of its type's shape.

use std::io::Read;
use std::time::Duration;

use mercer_domain::Timestamp;
use mercer_domain::overrides::{
    OverrideAnswer, OverrideCaller, OverrideFailure, OverrideRequest, OverrideTarget,
};
use mercer_domain::webhooks::AddressGuard;
use mercer_signing::cavage;

use crate::dispatcher::{http_date, request_target};
use crate::guard::PrivateAddressGuard;

/// How long an override has to answer (contract §4.1).
pub const OVERRIDE_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of an answer that is read; a bigger one is a wrong answer.
const MAX_ANSWER_BYTES: u64 = 1024 * 1024;

/// Calls overrides over HTTP. Cheap to share: one agent keeps connections alive.
pub struct HttpOverrideCaller {
    agent: ureq::Agent,
    guard: PrivateAddressGuard,
}

impl HttpOverrideCaller {
    /// `allow_private` lets overrides live on loopback and private networks (development,
    /// tests), as `--webhook-allow-private` does for webhooks.
    pub fn new(allow_private: bool) -> Self {
        Self::with_timeout(allow_private, OVERRIDE_TIMEOUT)
    }

    pub fn with_timeout(allow_private: bool, timeout: Duration) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .max_redirects(0)
            .user_agent("Svc-API")
            .build()
            .into();
        HttpOverrideCaller {
            agent,
            guard: PrivateAddressGuard { allow_private },
        }
    }
}

impl OverrideCaller for HttpOverrideCaller {
    fn call(
        &self,
        target: &OverrideTarget,
        request: &OverrideRequest,
    ) -> Result<OverrideAnswer, OverrideFailure> {
        self.guard
            .check(&target.url)
            .map_err(|reason| OverrideFailure::Failed(format!("refused: {reason}")))?;
        let date = http_date(Timestamp::now());
        let signature = cavage::signature_header(
            target.shared_secret.expose(),
            "POST",
            &request_target(&target.url),
            &date,
        );
        let sent = self
            .agent
            .post(&target.url)
            .header("Content-Type", "application/json")
            .header("Date", &date)
            .header("Signature", &signature)
            .send(&request.body()[..]);
        let mut response = match sent {
            Ok(response) => response,
            Err(ureq::Error::Timeout(_)) => return Err(OverrideFailure::TimedOut),
            Err(error) => return Err(OverrideFailure::Failed(error.to_string())),
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
        OverrideAnswer::parse(request.override_type, &body)
            .map_err(|why| OverrideFailure::Failed(format!("wrong answer: {why}")))
    }
}
