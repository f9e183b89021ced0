//! The signing checks (docs/connector.md, "How Mercer signs its calls"): the verification echo
//! and proof, and refusing calls that are not Mercer's (wrong or missing HMACs or message
//! signatures, stale or replayed ones). They only read: Verify, and List Customers with `limit=1`.

use mercer_domain::Timestamp;
use mercer_domain::platform::connector::VerificationProof;
use mercer_signing::verify_x_hmac;

use super::checks::{
    ACCEPTS_COMPATIBLE_HMAC, REFUSES_BAD_HMAC, REFUSES_BAD_MESSAGE_SIGNATURE,
    REFUSES_REPLAYED_NONCE, REFUSES_STALE_TIMESTAMP, REFUSES_UNSIGNED, VERIFICATION_ECHO,
    VERIFICATION_PROOF,
};
use super::session::{Call, Session, json, status};
use super::{Outcome, Record};
use crate::client::{Answer, Method, Signing, new_nonce, verification_proof};

/// A secret no connector holds: what a forger signs with.
const WRONG_SECRET: &str = "mercer-conformance-not-the-secret";

/// More than the 5 minutes a connector allows, either way.
const SKEW_SECONDS: i64 = 10 * 60;

pub(crate) fn run(session: &mut Session, record: &mut Record<'_>) {
    let (echo, answer) = verification_echo(session);
    session.verified = echo.is_ok();
    record(&VERIFICATION_ECHO, echo);
    let proof = match &answer {
        Some(answer) => proof(answer, session.target.secret.expose()),
        None => Err("not run: Verify did not answer 200".to_string()),
    };
    record(&VERIFICATION_PROOF, proof);
    let forged = session.target_signed_with(WRONG_SECRET, WRONG_SECRET);
    record(
        &REFUSES_BAD_HMAC,
        refuses(session, &forged, Signing::Now, "a wrong HMAC"),
    );
    let target = session.target.clone();
    let stale = [-SKEW_SECONDS, SKEW_SECONDS].map(|skew| {
        let at = Timestamp::now().plus_seconds(skew);
        refuses(
            session,
            &target,
            Signing::At(at),
            &format!("a timestamp {skew} s off"),
        )
    });
    record(&REFUSES_STALE_TIMESTAMP, both(stale));
    record(
        &REFUSES_UNSIGNED,
        refuses(session, &target, Signing::Unsigned, "no HMAC"),
    );
    record(&ACCEPTS_COMPATIBLE_HMAC, accepts_compatible(session));
    let wrong = [
        (
            Signing::MessageKey(WRONG_SECRET),
            "a message signature under a wrong secret",
        ),
        (
            Signing::MessageFor(&["orders"]),
            "the message signature of another operation",
        ),
        (Signing::NoMessageSignature, "no message signature"),
    ]
    .map(|(signing, how)| refuses(session, &target, signing, how));
    record(&REFUSES_BAD_MESSAGE_SIGNATURE, all(wrong));
    record(&REFUSES_REPLAYED_NONCE, refuses_replay(session));
}

/// Verify's `X-Verification-Proof`: right, wrong, or absent (a connector on the original
/// scheme, which passes with a note: only shops that require message signatures refuse it).
fn proof(answer: &Answer, secret: &str) -> Outcome {
    match verification_proof(answer, secret) {
        VerificationProof::Valid => Ok(String::new()),
        VerificationProof::Missing => {
            Ok("Verify's answer has no X-Verification-Proof: shops with \
             --require-message-signatures on cannot register this connector"
                .to_string())
        }
        VerificationProof::Invalid => Err(
            "Verify's X-Verification-Proof is not the HMAC of the request's nonce under the \
             shop's secret"
                .to_string(),
        ),
    }
}

/// List Customers signed with a fresh nonce is accepted; the very same call again is refused.
fn refuses_replay(session: &mut Session) -> Outcome {
    let target = session.target.clone();
    let signing = Signing::Exact {
        at: Timestamp::now(),
        nonce: new_nonce().map_err(|error| error.to_string())?,
    };
    let query = [("limit", "1")];
    let what = "List Customers with a fresh nonce";
    let call = Call::new(what, Method::Get, &["customers"]).query(&query);
    let first = session.send_to(&target, call, signing)?;
    status(&first, what, &[200])?;
    let what = "the same List Customers again (a replay)";
    let call = Call::new(what, Method::Get, &["customers"]).query(&query);
    let again = session.send_to(&target, call, signing)?;
    Ok(refused(&again, what)?.unwrap_or_default())
}

fn verification_echo(session: &mut Session) -> (Outcome, Option<Answer>) {
    let what = "Verify";
    let answer = match session.send(Call::new(what, Method::Get, &["verification"])) {
        Ok(answer) => answer,
        Err(reason) => return (Err(reason), None),
    };
    let outcome = echo(session, &answer);
    let answered = (answer.status == 200).then_some(answer);
    (outcome, answered)
}

fn echo(session: &Session, answer: &Answer) -> Outcome {
    let what = "Verify";
    if answer.status == 404 {
        return Err(format!(
            "Verify answered 404: does the connector know shop {}?",
            session.target.shop_identifier
        ));
    }
    status(answer, what, &[200])?;
    if !json(answer, what)?.is_object() {
        return Err("Verify's body is not a JSON object ({} expected)".to_string());
    }
    let echoed = answer
        .hmac
        .as_deref()
        .ok_or("Verify's answer has no X-HMAC header")?;
    if verify_x_hmac(
        session.target.secret.expose(),
        &answer.sent_timestamp,
        echoed,
    ) {
        Ok(String::new())
    } else {
        Err(
            "Verify's X-HMAC is not the HMAC of the X-HMAC-Timestamp sent, under the shop's \
             secret (is --secret the connector's?)"
                .to_string(),
        )
    }
}

/// Sends Verify and List Customers signed as `signing` says with `target`'s secrets: both must
/// be refused.
fn refuses(
    session: &mut Session,
    target: &mercer_domain::platform::connector::ConnectorTarget,
    signing: Signing,
    how: &str,
) -> Outcome {
    let mut notes = Vec::new();
    let calls = [
        ("Verify", &["verification"][..], &[][..]),
        ("List Customers", &["customers"][..], &[("limit", "1")][..]),
    ];
    for (operation, segments, query) in calls {
        let what = format!("{operation} with {how}");
        let call = Call::new(&what, Method::Get, segments).query(query);
        let answer = session.send_to(target, call, signing)?;
        notes.extend(refused(&answer, &what)?);
    }
    Ok(notes.join("; "))
}

/// A refusal is a 4xx (401 expected; another 4xx passes with a note). A 5xx is a crash, not a
/// refusal; a 2xx or 3xx let the call through.
fn refused(answer: &Answer, what: &str) -> Result<Option<String>, String> {
    match answer.status {
        401 | 403 => Ok(None),
        code @ 400..=499 => Ok(Some(format!("{what} answered {code}; 401 is expected"))),
        code @ 200..=299 => Err(format!(
            "{what} was accepted ({code}); it must be refused (401)"
        )),
        code => Err(format!("{what} answered {code}, not a refusal (401)")),
    }
}

fn both(outcomes: [Outcome; 2]) -> Outcome {
    all(outcomes)
}

/// Passes when every outcome passed, with their notes; else the first failure.
fn all<const N: usize>(outcomes: [Outcome; N]) -> Outcome {
    let mut notes = Vec::new();
    for outcome in outcomes {
        let note = outcome?;
        if !note.is_empty() {
            notes.push(note);
        }
    }
    Ok(notes.join("; "))
}

/// X-HMAC under a secret the connector does not hold (Mercer's new one, right after a
/// rotation), X-Compatible-HMAC under the one it holds: accepted.
fn accepts_compatible(session: &mut Session) -> Outcome {
    let secret = session.target.secret.expose().to_string();
    let rotated = session.target_signed_with(WRONG_SECRET, &secret);
    let what = "List Customers signed only by X-Compatible-HMAC";
    let query = [("limit", "1")];
    let call = Call::new(what, Method::Get, &["customers"]).query(&query);
    let answer = session.send_to(&rotated, call, Signing::Now)?;
    status(&answer, what, &[200])?;
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16) -> Answer {
        Answer {
            status,
            body: Vec::new(),
            sent_timestamp: String::new(),
            hmac: None,
            sent_nonce: None,
            proof: None,
            content_type: None,
            location: None,
        }
    }

    #[test]
    fn a_refusal_is_a_client_error_and_401_is_expected() {
        assert_eq!(refused(&answer(401), "Verify"), Ok(None));
        assert_eq!(refused(&answer(403), "Verify"), Ok(None));
        assert_eq!(
            refused(&answer(400), "Verify"),
            Ok(Some("Verify answered 400; 401 is expected".to_string()))
        );
        for code in [200, 204, 302, 500, 503] {
            assert!(refused(&answer(code), "Verify").is_err(), "{code}");
        }
    }
}
