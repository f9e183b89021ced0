//! The operator console's staff sessions and its audit log.
//!
//! A staff member signs in with the password of their staff account (the one the OAuth consent
//! page signs in, under the same lock per account and client). The session's token lives only in
//! the browser's cookie; the database keeps its SHA-256. Every form carries a CSRF token derived
//! from the session's token, so another site's form cannot act in a staff member's name. What
//! staff do in the console is written to the audit log in the action's own transaction.

use crate::kernel::ids::{AuditEntryId, ShopId, StaffId, StaffSessionId};
use serde::Serialize;

use crate::access::credentials::{Secret, hash_token, random_hex};
use crate::access::oauth::{PasswordCheck, SignInAttempt, check_password, record_sign_in};
use crate::access::secrets::{SecretKind, SharedSecret, rotate_secret};
use crate::access::shop::Shop;
use crate::access::{AccessDatabase, AccessRepositories};
use crate::kernel::error::DomainError;
use crate::kernel::time::Timestamp;

/// What a session's token starts with, so a leaked one is recognisable.
pub const SESSION_PREFIX: &str = "mss_";
/// A session ends this long after sign-in, however busy.
pub const SESSION_LIFETIME_SECONDS: i64 = 12 * 60 * 60;
/// A session unseen for this long has ended.
pub const SESSION_IDLE_SECONDS: i64 = 60 * 60;
/// A session's last sighting is written at most this often (not on every page).
const TOUCH_EVERY_SECONDS: i64 = 5 * 60;

/// A session to store: the token's hash, never the token.
#[derive(Debug, Clone)]
pub struct NewStaffSession {
    /// SHA-256 (hex) of the session's token.
    pub token_hash: String,
    /// The shop of the staff account.
    pub shop_id: ShopId,
    /// The staff account signed in.
    pub staff_id: StaffId,
    /// When the staff member signed in.
    pub created_at: Timestamp,
    /// When the session ends, however busy.
    pub expires_at: Timestamp,
}

/// A stored session, with the email of its staff account.
#[derive(Debug, Clone, PartialEq)]
pub struct StaffSession {
    /// The session's row id.
    pub id: StaffSessionId,
    /// The shop of the staff account.
    pub shop_id: ShopId,
    /// The staff account signed in.
    pub staff_id: StaffId,
    /// The staff account's email.
    pub staff_email: String,
    /// When the staff member signed in.
    pub created_at: Timestamp,
    /// When the session was last seen (written at most every few minutes).
    pub last_seen_at: Timestamp,
    /// When the session ends, however busy.
    pub expires_at: Timestamp,
}

/// The signed-in staff member a console page is for.
#[derive(Debug, Clone)]
pub struct ConsoleStaff {
    /// The session's row id.
    pub session_id: StaffSessionId,
    /// Their shop: the only one they see.
    pub shop: Shop,
    /// Their staff account's id.
    pub staff_id: StaffId,
    /// Their staff account's email.
    pub email: String,
    /// The token every form of this session carries.
    pub csrf_token: String,
    /// Whether the session's last sighting is old enough to write again ([`touch`]).
    pub stale: bool,
}

/// How a console sign-in ended.
#[derive(Debug)]
pub enum ConsoleSignIn {
    /// The account and client pair is locked: seconds to wait, rounded up.
    Locked {
        /// Seconds before the pair may try again.
        retry_after_seconds: i64,
    },
    /// No such account, or a wrong password: answered alike.
    WrongCredentials,
    /// Signed in.
    SignedIn {
        /// The session's token, for the cookie only.
        token: Secret,
    },
}

/// Signs a staff member in ([`check_password`], the consent page's lock); a success clears the
/// key's failures and opens a session, in one transaction.
pub fn sign_in<D: AccessDatabase>(
    db: &D,
    attempt: SignInAttempt,
    password: &str,
    now: Timestamp,
) -> Result<ConsoleSignIn, DomainError> {
    let key = attempt.key.clone();
    Ok(match check_password(db, attempt, password, now)? {
        PasswordCheck::Locked {
            retry_after_seconds,
        } => ConsoleSignIn::Locked {
            retry_after_seconds,
        },
        PasswordCheck::Wrong => ConsoleSignIn::WrongCredentials,
        PasswordCheck::Right { staff } => {
            let token = Secret::new(format!("{SESSION_PREFIX}{}", random_hex(32)));
            db.write_tx(|tx| {
                record_sign_in(tx, &key, true, now)?;
                tx.note_staff_sign_in(staff.id, now)?;
                tx.insert_staff_session(&NewStaffSession {
                    token_hash: hash_token(token.expose()),
                    shop_id: staff.shop_id,
                    staff_id: staff.id,
                    created_at: now,
                    expires_at: now.plus_seconds(SESSION_LIFETIME_SECONDS),
                })?;
                Ok(tx.forget_staff_sessions(now.plus_seconds(-SESSION_IDLE_SECONDS), now)?)
            })?;
            ConsoleSignIn::SignedIn { token }
        }
    })
}

/// The staff member whose session `token` is, while it lasts; None for an unknown, ended or
/// idle session. It only reads: [`touch`] notes the sighting when [`ConsoleStaff::stale`] says.
pub fn session(
    tx: &mut dyn AccessRepositories,
    token: &str,
    now: Timestamp,
) -> Result<Option<ConsoleStaff>, DomainError> {
    if !token.starts_with(SESSION_PREFIX) {
        return Ok(None);
    }
    let Some(session) = tx.staff_session_by_hash(&hash_token(token))? else {
        return Ok(None);
    };
    let idle_since = now.plus_seconds(-SESSION_IDLE_SECONDS);
    if session.expires_at <= now || session.last_seen_at <= idle_since {
        return Ok(None);
    }
    // A deleted shop's staff are signed out with it.
    let Some(shop) = tx
        .shop_by_id(session.shop_id)?
        .filter(|shop| shop.deleted_at.is_none())
    else {
        return Ok(None);
    };
    Ok(Some(ConsoleStaff {
        session_id: session.id,
        shop,
        staff_id: session.staff_id,
        email: session.staff_email,
        csrf_token: csrf_token(token),
        stale: session.last_seen_at <= now.plus_seconds(-TOUCH_EVERY_SECONDS),
    }))
}

/// Notes that the staff member's session was seen at `now` (it stays alive another idle hour).
pub fn touch(
    tx: &mut dyn AccessRepositories,
    staff: &ConsoleStaff,
    now: Timestamp,
) -> Result<(), DomainError> {
    Ok(tx.touch_staff_session(staff.session_id, now)?)
}

/// Ends the session `token` is, if it is one.
pub fn sign_out(tx: &mut dyn AccessRepositories, token: &str) -> Result<(), DomainError> {
    Ok(tx.delete_staff_session(&hash_token(token))?)
}

/// The CSRF token of a session: derived from its token, so it needs no storage, and tells
/// nothing of the token.
pub fn csrf_token(session_token: &str) -> String {
    hash_token(&format!("mercer-console-csrf\n{session_token}"))
}

/// Whether a form's CSRF token is the session's. Both sides are hashed first, so the comparison's
/// time tells nothing about the expected value.
pub fn csrf_matches(staff: &ConsoleStaff, given: &str) -> bool {
    hash_token(given) == hash_token(&staff.csrf_token)
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    /// The line's row id (a page's cursor).
    pub id: AuditEntryId,
    /// The shop acted in.
    pub shop_id: ShopId,
    /// Who acted: their staff account's id.
    pub staff_id: StaffId,
    /// Who acted: their email, kept as it was then.
    pub staff_email: String,
    /// What was done (`webhook_message.resend`…).
    pub action: String,
    /// What it was done to (a message's id…); never a secret.
    pub subject: String,
    /// When.
    pub at: Timestamp,
}

/// An action's line of the audit log, before it is stored.
#[derive(Debug, Clone)]
pub struct NewAuditEntry {
    /// The shop acted in.
    pub shop_id: ShopId,
    /// Who acted.
    pub staff_id: StaffId,
    /// Who acted: their email.
    pub staff_email: String,
    /// What was done.
    pub action: String,
    /// What it was done to.
    pub subject: String,
    /// When.
    pub at: Timestamp,
}

/// Records that `staff` did `action` to `subject`, in the caller's transaction: call it in the
/// action's own, so the line is there exactly when the action happened.
pub fn record_action(
    tx: &mut dyn AccessRepositories,
    staff: &ConsoleStaff,
    action: &str,
    subject: &str,
    now: Timestamp,
) -> Result<(), DomainError> {
    Ok(tx.insert_audit_entry(&NewAuditEntry {
        shop_id: staff.shop.id,
        staff_id: staff.staff_id,
        staff_email: staff.email.clone(),
        action: action.to_string(),
        subject: subject.to_string(),
        at: now,
    })?)
}

/// Who the audit log names for an action of the operator's command line: no staff account.
pub const COMMAND_LINE_ACTOR: &str = "cli";

/// Records that the operator's command line did `action` to `subject` in the shop, in the
/// caller's transaction. The line's staff id is 0, which no account has.
pub fn record_command(
    tx: &mut dyn AccessRepositories,
    shop_id: ShopId,
    action: &str,
    subject: &str,
    now: Timestamp,
) -> Result<(), DomainError> {
    Ok(tx.insert_audit_entry(&NewAuditEntry {
        shop_id,
        staff_id: StaffId(0),
        staff_email: COMMAND_LINE_ACTOR.to_string(),
        action: action.to_string(),
        subject: subject.to_string(),
        at: now,
    })?)
}

/// The secrets the console rotates: those a party outside Mercer holds (the checkout's token
/// secret never leaves Mercer).
pub const ROTATABLE_SECRETS: [SecretKind; 2] =
    [SecretKind::Connector, SecretKind::CheckoutIntegration];

/// A shop's secret as the console lists it: its kind and when it was last set, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretLine {
    /// Which secret.
    pub kind: SecretKind,
    /// When it was last set or rotated; None when the shop has none yet.
    pub updated_at: Option<Timestamp>,
    /// Until when the secret a rotation replaced still verifies, while it does.
    pub previous_valid_until: Option<Timestamp>,
}

/// The shop's rotatable secrets, without their values.
pub fn secret_lines(
    tx: &mut dyn AccessRepositories,
    shop_id: ShopId,
    now: Timestamp,
) -> Result<Vec<SecretLine>, DomainError> {
    ROTATABLE_SECRETS
        .into_iter()
        .map(|kind| {
            let stored = tx.shared_secret(shop_id, kind)?;
            Ok(SecretLine {
                kind,
                updated_at: stored.as_ref().map(|s| s.updated_at),
                previous_valid_until: stored
                    .and_then(|s| s.previous_valid_until)
                    .filter(|until| *until > now),
            })
        })
        .collect()
}

/// Rotates the shop's secret of `kind` (as `mercer secret rotate` does) and records who did it;
/// the audit line names the kind, never the value. The answer holds the new secret, to be
/// shown this one time.
pub fn rotate_shop_secret(
    db: &impl AccessDatabase,
    staff: &ConsoleStaff,
    kind: SecretKind,
    now: Timestamp,
) -> Result<SharedSecret, DomainError> {
    if !ROTATABLE_SECRETS.contains(&kind) {
        return Err(DomainError::not_found("secret"));
    }
    db.write_tx(|tx| {
        let rotated = rotate_secret(tx, staff.shop.id, kind, now)?;
        record_action(tx, staff, "secret.rotate", kind.as_str(), now)?;
        Ok(rotated)
    })
}

/// The shop's audit log, newest first, from before the entry `before` (a page's cursor).
pub fn audit_log(
    tx: &mut dyn AccessRepositories,
    shop_id: ShopId,
    before: Option<AuditEntryId>,
    limit: usize,
) -> Result<Vec<AuditEntry>, DomainError> {
    Ok(tx.audit_entries(shop_id, before, limit)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::oauth::{FREE_SIGN_IN_FAILURES, begin_sign_in, create_staff};
    use crate::access::shop::{ShopInput, create_shop};
    use crate::ports::Database;
    use crate::testing::MemoryDatabase;

    fn world() -> (MemoryDatabase, Shop) {
        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(0);
        let shop = db
            .write(|tx| {
                let shop = create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "console.shop.test".into(),
                        ..ShopInput::default()
                    },
                    now,
                )?;
                create_staff(
                    tx,
                    shop.identifier.as_str(),
                    "ops@example.test",
                    "correct horse battery",
                    now,
                )?;
                Ok(shop)
            })
            .unwrap();
        (db, shop)
    }

    fn signed_in(
        db: &MemoryDatabase,
        shop: &Shop,
        password: &str,
        now: Timestamp,
    ) -> ConsoleSignIn {
        let attempt = db
            .read(|tx| {
                begin_sign_in(
                    tx,
                    shop.identifier.as_str(),
                    "Ops@example.test",
                    "127.0.0.1",
                )
            })
            .unwrap();
        sign_in(db, attempt, password, now).unwrap()
    }

    #[test]
    fn a_session_lasts_while_used_and_ends_idle_expired_or_signed_out() {
        let (db, shop) = world();
        let start = Timestamp::from_micros(1_000_000_000_000);
        let ConsoleSignIn::SignedIn { token } =
            signed_in(&db, &shop, "correct horse battery", start)
        else {
            panic!("not signed in");
        };
        let token = token.expose().to_string();
        assert!(token.starts_with(SESSION_PREFIX));
        let at = |seconds| start.plus_seconds(seconds);
        let find = |now| {
            let staff = db.read(|tx| session(tx, &token, now)).unwrap();
            if let Some(staff) = staff.as_ref().filter(|staff| staff.stale) {
                db.write(|tx| touch(tx, staff, now)).unwrap();
            }
            staff
        };
        let staff = find(at(10)).expect("a session");
        assert_eq!(staff.shop.id, shop.id);
        assert_eq!(staff.email, "ops@example.test");
        assert!(csrf_matches(&staff, &csrf_token(&token)));
        assert!(!csrf_matches(&staff, ""));
        // Used every 50 minutes, it outlives the idle hour, up to its 12 hours.
        for minutes in (50..12 * 60).step_by(50) {
            assert!(find(at(minutes * 60)).is_some(), "at {minutes} min");
        }
        assert!(find(at(SESSION_LIFETIME_SECONDS)).is_none(), "ended");
        // Idle for an hour: ended.
        let ConsoleSignIn::SignedIn { token: idle } =
            signed_in(&db, &shop, "correct horse battery", start)
        else {
            panic!("not signed in");
        };
        let idle = idle.expose().to_string();
        let lookup = |now| db.read(|tx| session(tx, &idle, now)).unwrap();
        assert!(lookup(at(SESSION_IDLE_SECONDS - 1)).is_some());
        assert!(lookup(at(2 * SESSION_IDLE_SECONDS)).is_none());
        // Signed out: ended, and an unknown token is no session.
        db.write(|tx| sign_out(tx, &token)).unwrap();
        assert!(find(at(20)).is_none());
        assert!(
            db.write(|tx| session(tx, "mss_nope", at(1)))
                .unwrap()
                .is_none()
        );
        assert!(db.write(|tx| session(tx, "", at(1))).unwrap().is_none());
    }

    #[test]
    fn a_wrong_password_opens_no_session_and_counts_towards_the_lock() {
        let (db, shop) = world();
        let now = Timestamp::from_micros(1_000_000_000_000);
        for _ in 0..FREE_SIGN_IN_FAILURES - 1 {
            assert!(matches!(
                signed_in(&db, &shop, "wrong", now),
                ConsoleSignIn::WrongCredentials
            ));
        }
        assert!(matches!(
            signed_in(&db, &shop, "wrong", now),
            ConsoleSignIn::Locked { .. }
        ));
        assert!(matches!(
            signed_in(&db, &shop, "correct horse battery", now),
            ConsoleSignIn::Locked { .. }
        ));
    }

    #[test]
    fn the_audit_log_pages_newest_first_per_shop() {
        let (db, shop) = world();
        let now = Timestamp::from_micros(1_000_000_000_000);
        let ConsoleSignIn::SignedIn { token } = signed_in(&db, &shop, "correct horse battery", now)
        else {
            panic!("not signed in");
        };
        let staff = db
            .write(|tx| session(tx, token.expose(), now))
            .unwrap()
            .unwrap();
        db.write(|tx| {
            for n in 0..5 {
                record_action(
                    tx,
                    &staff,
                    "webhook_message.resend",
                    &format!("msg_{n}"),
                    now,
                )?;
            }
            Ok(())
        })
        .unwrap();
        let first = db.read(|tx| audit_log(tx, shop.id, None, 3)).unwrap();
        let subjects: Vec<&str> = first.iter().map(|e| e.subject.as_str()).collect();
        assert_eq!(subjects, ["msg_4", "msg_3", "msg_2"]);
        assert_eq!(first[0].staff_email, "ops@example.test");
        let rest = db
            .read(|tx| audit_log(tx, shop.id, Some(first[2].id), 3))
            .unwrap();
        let subjects: Vec<&str> = rest.iter().map(|e| e.subject.as_str()).collect();
        assert_eq!(subjects, ["msg_1", "msg_0"]);
        assert!(
            db.read(|tx| audit_log(tx, ShopId(shop.id.0 + 1), None, 3))
                .unwrap()
                .is_empty()
        );
    }
}
