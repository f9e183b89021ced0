//! OAuth 2.0 authorization code flow for public integrations (RFC 6749 with PKCE,
//! RFC 7636): apps and staff accounts made by the operator, staff sign-in with lockout, codes
//! that are single-use and live 10 minutes, and their exchange for an ordinary API token.
//!
//! The HTML page and the HTTP shapes are the server's; the rules are here.

use crate::kernel::ids::{AuthorizationCodeId, OAuthAppId, ShopId, StaffId, TokenId};
use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::access::credentials::{
    ScopeSet, Secret, TokenSource, hash_token, mint_token, random_hex,
};
use crate::access::shop::{Shop, ShopIdentifier, find_shop};
use crate::access::{AccessDatabase, AccessRepositories};
use crate::kernel::error::{DomainError, FieldError, Problems};
use crate::kernel::time::Timestamp;

/// How long an authorization code may be exchanged.
pub(crate) const CODE_LIFETIME_SECONDS: i64 = 10 * 60;
/// Consecutive sign-in failures of one account from one client address before that pair is
/// locked for a while.
pub(crate) const FREE_SIGN_IN_FAILURES: i32 = 5;
/// Failures of a pair left alone this long are forgotten.
pub(crate) const SIGN_IN_MEMORY_SECONDS: i64 = 24 * 60 * 60;
/// The first lock lasts this long; each further failure doubles it, up to [`MAX_LOCK_SECONDS`].
pub(crate) const FIRST_LOCK_SECONDS: i64 = 30;
pub(crate) const MAX_LOCK_SECONDS: i64 = 15 * 60;
/// The shortest staff password accepted.
pub(crate) const MIN_PASSWORD_CHARS: usize = 10;

/// The prefix of client ids and secrets, so people and secret scanners recognise them.
const CLIENT_ID_PREFIX: &str = "mci_";
const CLIENT_SECRET_PREFIX: &str = "mcs_";

/// An app registered by the operator for the authorization code flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthApp {
    /// The app's row id (the service's integer).
    pub id: OAuthAppId,
    /// The id the app sends as `client_id`: `mci_` and 32 hex characters.
    pub client_id: String,
    /// SHA-256 of the client secret, hex.
    pub client_secret_hash: String,
    /// The app's name, shown on the consent page and in the names of the tokens it gets.
    pub name: String,
    /// The redirect URIs the app may send browsers back to, exactly as registered.
    pub redirect_uris: Vec<String>,
    /// When the app was registered.
    pub created_at: Timestamp,
    /// When the app was revoked; a revoked app can neither ask for codes nor exchange them.
    pub revoked_at: Option<Timestamp>,
}

/// An app to store; its client secret is kept only as a hash.
#[derive(Debug, Clone)]
pub struct NewOAuthApp {
    /// The id the app sends as `client_id`: `mci_` and 32 hex characters.
    pub client_id: String,
    /// SHA-256 of the client secret, hex.
    pub client_secret_hash: String,
    /// The app's name.
    pub name: String,
    /// The redirect URIs the app may use, already checked.
    pub redirect_uris: Vec<String>,
    /// When the app is registered.
    pub created_at: Timestamp,
}

/// A shop's staff member, who may sign in on the consent page and approve an app's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaffAccount {
    /// The account's row id (the service's integer).
    pub id: StaffId,
    /// The shop the account belongs to (the service's integer).
    pub shop_id: ShopId,
    /// The email address signed in with, trimmed and lowercase; one account per shop and email.
    pub email: String,
    /// Argon2id, PHC string form.
    pub password_hash: String,
    /// When the account was created.
    pub created_at: Timestamp,
    /// When its staff member last signed in (the console or the consent page); None when they
    /// have not since this was first kept.
    pub last_sign_in_at: Option<Timestamp>,
}

/// A staff account to store; its password is kept only as a hash.
#[derive(Debug, Clone)]
pub struct NewStaffAccount {
    /// The shop the account belongs to (the service's integer).
    pub shop_id: ShopId,
    /// The email address, trimmed and lowercase.
    pub email: String,
    /// Argon2id, PHC string form.
    pub password_hash: String,
    /// When the account is created.
    pub created_at: Timestamp,
}

/// An authorization code as stored: what it was issued for, never the code itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationCode {
    /// The code's row id (the service's integer).
    pub id: AuthorizationCodeId,
    /// The app it was issued to (the app's row id).
    pub app_id: OAuthAppId,
    /// The shop whose staff approved it (the service's integer).
    pub shop_id: ShopId,
    /// The staff account that approved it (the account's row id).
    pub staff_id: StaffId,
    /// The redirect URI the request named; empty when it named none.
    pub redirect_uri: String,
    /// The scopes approved: the token gets these.
    pub scopes: ScopeSet,
    /// The PKCE S256 challenge the code was asked with.
    pub code_challenge: Option<String>,
    /// When the code can no longer be exchanged: 10 minutes after it was issued.
    pub expires_at: Timestamp,
    /// When it was exchanged; a code is good for one exchange only.
    pub used_at: Option<Timestamp>,
    /// The token the code was exchanged for.
    pub token_id: Option<TokenId>,
}

/// A code to store, with its SHA-256 hash in place of the code.
#[derive(Debug, Clone)]
pub struct NewAuthorizationCode {
    /// SHA-256 of the code, hex.
    pub code_hash: String,
    /// The app it is issued to (the app's row id).
    pub app_id: OAuthAppId,
    /// The shop whose staff approved it (the service's integer).
    pub shop_id: ShopId,
    /// The staff account that approved it (the account's row id).
    pub staff_id: StaffId,
    /// The redirect URI the request named; empty when it named none.
    pub redirect_uri: String,
    /// The scopes approved.
    pub scopes: ScopeSet,
    /// The PKCE S256 challenge the request gave, if any.
    pub code_challenge: Option<String>,
    /// When the code can no longer be exchanged.
    pub expires_at: Timestamp,
    /// When it is issued.
    pub created_at: Timestamp,
}

// ---------------------------------------------------------------------------------------------
// Apps and staff accounts (the operator's CLI).

/// A redirect URI an app may register: absolute, no fragment, https — or http on a loopback
/// host, for native and local clients (RFC 8252 section 7.3).
pub(crate) fn check_redirect_uri(uri: &str) -> Result<String, FieldError> {
    let invalid = |why: &str| FieldError::new("redirect_uri", "invalid_url", why.to_string());
    let parsed =
        url::Url::parse(uri).map_err(|_| invalid("redirect_uri must be an absolute URL"))?;
    if parsed.fragment().is_some() {
        return Err(invalid("redirect_uri must not have a fragment"));
    }
    let loopback = matches!(
        parsed.host(),
        Some(url::Host::Domain("localhost"))
            | Some(url::Host::Ipv4(std::net::Ipv4Addr::LOCALHOST))
            | Some(url::Host::Ipv6(std::net::Ipv6Addr::LOCALHOST))
    );
    match parsed.scheme() {
        "https" => Ok(uri.to_string()),
        "http" if loopback => Ok(uri.to_string()),
        _ => Err(invalid(
            "redirect_uri must be https (or http on localhost or a loopback address)",
        )),
    }
}

/// What creating an app gives back: the app and its client secret, shown this once.
#[derive(Debug)]
pub struct CreatedApp {
    /// The app as stored.
    pub app: OAuthApp,
    /// The client secret (`mcs_` and 64 hex characters), shown this once, never stored.
    pub client_secret: Secret,
}

/// Registers an app (`mercer app create`).
pub fn create_app(
    tx: &mut dyn AccessRepositories,
    name: &str,
    redirect_uris: &[String],
    now: Timestamp,
) -> Result<CreatedApp, DomainError> {
    let mut problems = Problems::new();
    let name = name.trim();
    if name.is_empty() {
        problems.push(FieldError::required("name"));
    }
    if redirect_uris.is_empty() {
        problems.push(FieldError::required("redirect_uri"));
    }
    let uris: Vec<String> = redirect_uris
        .iter()
        .filter_map(|uri| problems.check(check_redirect_uri(uri)))
        .collect();
    problems.into_result()?;
    let client_secret = Secret::new(format!("{CLIENT_SECRET_PREFIX}{}", random_hex(32)));
    let app = tx.insert_oauth_app(&NewOAuthApp {
        client_id: format!("{CLIENT_ID_PREFIX}{}", random_hex(16)),
        client_secret_hash: hash_token(client_secret.expose()),
        name: name.to_string(),
        redirect_uris: uris,
        created_at: now,
    })?;
    Ok(CreatedApp { app, client_secret })
}

/// An Argon2id hash of a password, in PHC string form.
pub(crate) fn hash_password(password: &str) -> Result<String, DomainError> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|_| {
        DomainError::Storage(crate::kernel::error::StorageError::other(
            "the operating system's random source failed",
        ))
    })?;
    let salt = SaltString::encode_b64(&salt).map_err(|error| {
        DomainError::Storage(crate::kernel::error::StorageError::other(error.to_string()))
    })?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| {
            DomainError::Storage(crate::kernel::error::StorageError::other(error.to_string()))
        })
}

/// Whether the password matches the stored hash. Slow on purpose; call it off async threads.
pub(crate) fn verify_password(password: &str, stored_hash: &str) -> bool {
    PasswordHash::new(stored_hash)
        .map(|hash| {
            Argon2::default()
                .verify_password(password.as_bytes(), &hash)
                .is_ok()
        })
        .unwrap_or(false)
}

/// A hash that matches no password: verified against when the account does not exist, so an
/// unknown email takes as long as a wrong password.
pub(crate) fn decoy_password_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password(&random_hex(16)).unwrap_or_default())
}

/// A password a staff account may be given: at least [`MIN_PASSWORD_CHARS`] characters.
pub(crate) fn check_new_password(password: &str) -> Result<(), FieldError> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(FieldError::new(
            "password",
            "length",
            format!("the password must be at least {MIN_PASSWORD_CHARS} characters"),
        ));
    }
    Ok(())
}

pub(crate) fn normalize_email(email: &str) -> String {
    email.trim().to_ascii_lowercase()
}

/// Creates a staff account for a shop (`mercer staff create`).
pub fn create_staff(
    tx: &mut dyn AccessRepositories,
    shop_identifier: &str,
    email: &str,
    password: &str,
    now: Timestamp,
) -> Result<StaffAccount, DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    let email = normalize_email(email);
    let mut problems = Problems::new();
    let parts: Vec<&str> = email.split('@').collect();
    if parts.len() != 2 || parts.iter().any(|part| part.is_empty()) || email.contains(' ') {
        problems.push(FieldError::new(
            "email",
            "invalid_value",
            "email must be an email address",
        ));
    }
    problems.check(check_new_password(password));
    problems.into_result()?;
    if tx.staff_account(shop.id, &email)?.is_some() {
        return Err(DomainError::Conflict {
            code: "staff.email_taken",
            message: format!("the shop already has a staff account for {email}"),
        });
    }
    Ok(tx.insert_staff_account(&NewStaffAccount {
        shop_id: shop.id,
        email,
        password_hash: hash_password(password)?,
        created_at: now,
    })?)
}

// ---------------------------------------------------------------------------------------------
// The authorize request.

/// The query of `GET /accounts/dashboard/authorize` (and the hidden fields of its form).
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub struct AuthorizeParams {
    /// The app's client id; required.
    pub client_id: Option<String>,
    /// Where to send the browser back; may be left out when the app registered only one.
    pub redirect_uri: Option<String>,
    /// The scopes asked for, separated by spaces; required.
    pub scope: Option<String>,
    /// An opaque value sent back unchanged with the code or the error.
    pub state: Option<String>,
    /// Must be `code`.
    pub response_type: Option<String>,
    /// The PKCE challenge (43 to 128 characters of base64url), if the client uses PKCE.
    pub code_challenge: Option<String>,
    /// Must be `S256` when a challenge is given.
    pub code_challenge_method: Option<String>,
    /// The shop, by its domain or its identifier, as typed in the form.
    pub shop: Option<String>,
}

/// The form of `POST /accounts/dashboard/authorize`, as the sign-in and consent page sends it:
/// the authorize request's fields (hidden in the page), the shop, the staff member's credentials
/// and the decision. A doc-only type: the route reads it as [`AuthorizeParams`] and its own
/// fields.
#[derive(utoipa::ToSchema)]
#[schema(as = OAuthAuthorizeForm)]
pub struct AuthorizeForm {
    /// The app's client id.
    pub client_id: Option<String>,
    /// Where to send the browser back; may be left out when the app registered only one.
    pub redirect_uri: Option<String>,
    /// The scopes asked for, separated by spaces.
    pub scope: Option<String>,
    /// An opaque value sent back unchanged with the code or the error.
    pub state: Option<String>,
    /// Must be `code`.
    pub response_type: Option<String>,
    /// The PKCE challenge (43 to 128 characters of base64url), if the client uses PKCE.
    pub code_challenge: Option<String>,
    /// Must be `S256` when a challenge is given.
    pub code_challenge_method: Option<String>,
    /// The shop, by its domain or its identifier.
    pub shop: Option<String>,
    /// The staff member's email address.
    pub email: Option<String>,
    /// The staff member's password.
    #[schema(format = Password)]
    pub password: Option<String>,
    /// `approve` signs in and approves; anything else denies (back to the app with
    /// `access_denied`).
    pub decision: Option<String>,
}

/// An authorize request that passed its checks.
#[derive(Debug, Clone)]
pub struct ValidAuthorize {
    /// The app that asks.
    pub app: OAuthApp,
    /// Where to send the browser back: the one given, or the app's only one.
    pub redirect_uri: String,
    /// Whether the request named it; then the token request must name the same (RFC 6749 section 4.1.3).
    pub redirect_uri_given: bool,
    /// The scopes asked for; not empty.
    pub scopes: ScopeSet,
    /// The client's `state`, to send back with the code or the error.
    pub state: Option<String>,
    /// The PKCE S256 challenge, if the request gave one.
    pub code_challenge: Option<String>,
}

/// Why an authorize request cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorizeError {
    /// The client or its redirect URI cannot be trusted: show the error, never redirect
    /// (RFC 6749 section 4.1.2.1).
    NoRedirect(String),
    /// Tell the client, by redirecting with `error`, `error_description` and `state`.
    Redirect {
        /// The app's redirect URI the browser goes back to.
        redirect_uri: String,
        /// The OAuth error code (`invalid_scope`, `unsupported_response_type`, `invalid_request`).
        error: &'static str,
        /// What went wrong, for a developer.
        description: String,
        /// The request's `state`, sent back unchanged.
        state: Option<String>,
    },
}

fn is_pkce_value(text: &str) -> bool {
    (43..=128).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// Checks an authorize request in the order RFC 6749 section 4.1.2.1 asks: client and redirect URI
/// first (errors shown), then the rest (errors redirected).
pub fn check_authorize(
    tx: &mut dyn AccessRepositories,
    params: &AuthorizeParams,
) -> Result<ValidAuthorize, AuthorizeError> {
    let no_redirect = |why: &str| AuthorizeError::NoRedirect(why.to_string());
    let client_id = params
        .client_id
        .as_deref()
        .filter(|id| !id.is_empty())
        .ok_or_else(|| no_redirect("The request names no client_id."))?;
    let app = tx
        .oauth_app_by_client_id(client_id)
        .map_err(|_| no_redirect("The request cannot be checked right now; try again."))?
        .filter(|app| app.revoked_at.is_none())
        .ok_or_else(|| no_redirect("The client_id is not a registered app."))?;
    let redirect_uri = match params.redirect_uri.as_deref() {
        Some(uri) if app.redirect_uris.iter().any(|known| known == uri) => uri.to_string(),
        Some(_) => {
            return Err(no_redirect(
                "The redirect_uri is not one registered for this app.",
            ));
        }
        None if app.redirect_uris.len() == 1 => app.redirect_uris[0].clone(),
        None => return Err(no_redirect("The request names no redirect_uri.")),
    };
    let redirect = |error: &'static str, description: &str| AuthorizeError::Redirect {
        redirect_uri: redirect_uri.clone(),
        error,
        description: description.to_string(),
        state: params.state.clone(),
    };
    match params.response_type.as_deref() {
        Some("code") => {}
        None => return Err(redirect("invalid_request", "response_type is required")),
        Some(_) => {
            return Err(redirect(
                "unsupported_response_type",
                "only response_type=code is supported",
            ));
        }
    }
    let scopes = match params.scope.as_deref().map(ScopeSet::parse) {
        Some(Ok(scopes)) if !scopes.is_empty() => scopes,
        Some(Err(unknown)) => {
            return Err(redirect(
                "invalid_scope",
                &format!("unknown scope(s): {}", unknown.join(", ")),
            ));
        }
        _ => return Err(redirect("invalid_scope", "scope is required")),
    };
    let code_challenge = match (
        params.code_challenge.as_deref(),
        params.code_challenge_method.as_deref(),
    ) {
        (None, None) => None,
        (Some(challenge), Some("S256")) if is_pkce_value(challenge) => Some(challenge.to_string()),
        (Some(_), Some("S256")) => {
            return Err(redirect(
                "invalid_request",
                "code_challenge must be 43 to 128 characters of base64url",
            ));
        }
        (Some(_), None | Some(_)) => {
            return Err(redirect(
                "invalid_request",
                "code_challenge_method must be S256",
            ));
        }
        (None, Some(_)) => {
            return Err(redirect(
                "invalid_request",
                "code_challenge_method was given without code_challenge",
            ));
        }
    };
    Ok(ValidAuthorize {
        app,
        redirect_uri,
        redirect_uri_given: params.redirect_uri.is_some(),
        scopes,
        state: params.state.clone(),
        code_challenge,
    })
}

// ---------------------------------------------------------------------------------------------
// Sign-in.

/// The shop a sign-in names: its identifier or its domain.
pub(crate) fn find_shop_by_reference(
    tx: &mut dyn AccessRepositories,
    reference: &str,
) -> Result<Option<Shop>, DomainError> {
    let reference = reference.trim();
    let shop = match ShopIdentifier::parse(reference) {
        Some(identifier) => tx.shop_by_identifier(&identifier)?,
        None => tx.shop_by_domain(&reference.to_ascii_lowercase())?,
    };
    Ok(shop.filter(|shop| shop.deleted_at.is_none()))
}

/// Whose sign-in failures count together: the account a sign-in names, and the client's
/// address. The account is its shop and email as typed (normalized), whether or not such an
/// account exists, so an unknown one is answered as a known one is: locks never tell which
/// accounts exist. The address is what the caller counts clients by (an IPv6 client's /64).
/// A lock holds that pair only: guesses from elsewhere never lock an account for its owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SignInKey {
    /// SHA-256 (hex) of the account's shop and email: bounded, and no email kept in clear.
    pub account: String,
    /// What the caller counts clients by (the address, an IPv6 client's /64).
    pub client: String,
}

/// What a sign-in attempt starts from: the account it names (if there is one), and the key
/// its failures count under (`sign_in_locked_for` tells whether it may try).
#[derive(Debug, Clone)]
pub struct SignInAttempt {
    /// The shop and the staff account the sign-in names, if both exist.
    pub staff: Option<(Shop, StaffAccount)>,
    /// The key the attempt's failures count under.
    pub key: SignInKey,
}

/// Looks up the account a sign-in names, and the key of its pair with `client`.
pub fn begin_sign_in(
    tx: &mut dyn AccessRepositories,
    shop_reference: &str,
    email: &str,
    client: &str,
) -> Result<SignInAttempt, DomainError> {
    let shop = find_shop_by_reference(tx, shop_reference)?;
    let email = normalize_email(email);
    // A shop known by its identifier or its domain is one shop; an unknown one is its text.
    let shop_part = match &shop {
        Some(shop) => format!("shop:{}", shop.id),
        None => format!("reference:{}", shop_reference.trim().to_lowercase()),
    };
    let key = SignInKey {
        account: hash_token(&format!("{shop_part}\n{email}")),
        client: client.to_string(),
    };
    let staff = match shop {
        Some(shop) => tx
            .staff_account(shop.id, &email)?
            .map(|staff| (shop, staff)),
        None => None,
    };
    Ok(SignInAttempt { staff, key })
}

/// Seconds the key must still wait before it may try again, if it is locked.
pub(crate) fn sign_in_locked_for(
    tx: &mut dyn AccessRepositories,
    key: &SignInKey,
    now: Timestamp,
) -> Result<Option<i64>, DomainError> {
    Ok(tx.sign_in_locked_until(key)?.and_then(|until| {
        let wait = until.as_micros() - now.as_micros();
        (wait > 0).then(|| (wait + 999_999) / 1_000_000)
    }))
}

/// Records a sign-in's outcome for its key. A success clears the failures; a failure counts
/// (atomically, so failures at the same moment all count), and from the fifth in a row locks
/// the key (30 s, doubling with each further failure, at most 15 min). Returns how long it is
/// locked for, if it is. Keys left alone for a day are forgotten on the way.
pub(crate) fn record_sign_in(
    tx: &mut dyn AccessRepositories,
    key: &SignInKey,
    succeeded: bool,
    now: Timestamp,
) -> Result<Option<i64>, DomainError> {
    if succeeded {
        tx.clear_sign_in_failures(key)?;
        return Ok(None);
    }
    tx.forget_sign_in_failures(now.plus_seconds(-SIGN_IN_MEMORY_SECONDS))?;
    let failures = tx.count_sign_in_failure(key, now)?;
    let locked = (failures >= FREE_SIGN_IN_FAILURES).then(|| {
        let doublings = u32::try_from(failures - FREE_SIGN_IN_FAILURES).unwrap_or(u32::MAX);
        FIRST_LOCK_SECONDS
            .saturating_mul(2_i64.saturating_pow(doublings.min(20)))
            .min(MAX_LOCK_SECONDS)
    });
    if let Some(seconds) = locked {
        tx.lock_sign_in(key, now.plus_seconds(seconds), now)?;
    }
    Ok(locked)
}

/// Issues a code for an approved request; the code itself is returned this once.
pub(crate) fn issue_code(
    tx: &mut dyn AccessRepositories,
    request: &ValidAuthorize,
    staff: &StaffAccount,
    now: Timestamp,
) -> Result<Secret, DomainError> {
    let code = Secret::new(random_hex(32));
    tx.insert_authorization_code(&NewAuthorizationCode {
        code_hash: hash_token(code.expose()),
        app_id: request.app.id,
        shop_id: staff.shop_id,
        staff_id: staff.id,
        // Empty when the request named none: the token request need not name one either.
        redirect_uri: if request.redirect_uri_given {
            request.redirect_uri.clone()
        } else {
            String::new()
        },
        scopes: request.scopes.clone(),
        code_challenge: request.code_challenge.clone(),
        expires_at: now.plus_seconds(CODE_LIFETIME_SECONDS),
        created_at: now,
    })?;
    Ok(code)
}

/// How a sign-in on the consent page ended.
#[derive(Debug)]
pub enum SignIn {
    /// The account and client pair is locked: it may try again after this many seconds.
    Locked {
        /// Seconds before the pair may try again, rounded up.
        retry_after_seconds: i64,
    },
    /// No such account, or a wrong password: answered alike, so neither tells which.
    WrongCredentials,
    /// The staff member approved the request: the code, shown this once.
    Approved {
        /// The authorization code (64 hex characters), to send back to the app.
        code: Secret,
    },
}

/// How the password check of a sign-in ended (the consent page's, and any other page staff sign
/// in to, so they share one lock per account and client).
#[derive(Debug)]
pub(crate) enum PasswordCheck {
    /// The pair is locked, before this attempt or by its failure: seconds to wait, rounded up.
    Locked { retry_after_seconds: i64 },
    /// No such account, or a wrong password: answered alike, so neither tells which.
    Wrong,
    /// The password is the account's. The caller records the success (clearing the failures)
    /// in the same transaction as what the sign-in grants.
    Right { staff: StaffAccount },
}

/// The lock of the attempt's key is checked, then the password (against a decoy hash for an
/// unknown account, so its absence takes as long as a wrong password); a failure counts
/// towards a lock. The caller runs one attempt per key at a time (the lock is read after the
/// attempt before it ended) and bounds the password checks running at once.
pub(crate) fn check_password<D: AccessDatabase>(
    db: &D,
    attempt: SignInAttempt,
    password: &str,
    now: Timestamp,
) -> Result<PasswordCheck, DomainError> {
    let key = &attempt.key;
    if let Some(wait) = db.read_tx(|tx| sign_in_locked_for(tx, key, now))? {
        return Ok(PasswordCheck::Locked {
            retry_after_seconds: wait,
        });
    }
    let hash = attempt
        .staff
        .as_ref()
        .map_or(decoy_password_hash(), |(_, staff)| {
            staff.password_hash.as_str()
        });
    let matches = verify_password(password, hash);
    match attempt.staff {
        Some((_, staff)) if matches => Ok(PasswordCheck::Right { staff }),
        _ => Ok(
            match db.write_tx(|tx| record_sign_in(tx, key, false, now))? {
                Some(seconds) => PasswordCheck::Locked {
                    retry_after_seconds: seconds,
                },
                None => PasswordCheck::Wrong,
            },
        ),
    }
}

/// A sign-in that approves `request` ([`check_password`]): a success clears the key's
/// failures and issues a code, in one transaction.
pub fn sign_in<D: AccessDatabase>(
    db: &D,
    request: &ValidAuthorize,
    attempt: SignInAttempt,
    password: &str,
    now: Timestamp,
) -> Result<SignIn, DomainError> {
    let key = attempt.key.clone();
    Ok(match check_password(db, attempt, password, now)? {
        PasswordCheck::Locked {
            retry_after_seconds,
        } => SignIn::Locked {
            retry_after_seconds,
        },
        PasswordCheck::Wrong => SignIn::WrongCredentials,
        PasswordCheck::Right { staff } => {
            let code = db.write_tx(|tx| {
                record_sign_in(tx, &key, true, now)?;
                tx.note_staff_sign_in(staff.id, now)?;
                issue_code(tx, request, &staff, now)
            })?;
            SignIn::Approved { code }
        }
    })
}

// ---------------------------------------------------------------------------------------------
// The token endpoint.

/// The body of `POST /auth/oauth2/token`, as form fields or JSON.
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(default)]
#[schema(as = OAuthTokenRequest)]
pub struct TokenParams {
    /// Must be `authorization_code`.
    #[schema(pattern = "^authorization_code$")]
    pub grant_type: Option<String>,
    /// The code the authorize request gave; required.
    pub code: Option<String>,
    /// The redirect URI; required, and the same, when the authorize request named one.
    pub redirect_uri: Option<String>,
    /// The app's client id; required.
    pub client_id: Option<String>,
    /// The app's client secret; without it the code must have been asked for with PKCE.
    pub client_secret: Option<String>,
    /// The PKCE verifier of the code's challenge, when the code was asked for with one.
    pub code_verifier: Option<String>,
}

/// An RFC 6749 section 5.2 error: `invalid_client` is 401, the others 400.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError {
    /// The RFC 6749 error code (`invalid_request`, `invalid_client`, `invalid_grant`, ...).
    pub error: &'static str,
    /// What went wrong, for a developer.
    pub description: String,
}

impl OAuthError {
    fn new(error: &'static str, description: impl Into<String>) -> Self {
        OAuthError {
            error,
            description: description.into(),
        }
    }
}

/// What a successful exchange gives: the token (shown this once) and what it is for.
#[derive(Debug)]
pub struct IssuedToken {
    /// The new API token, shown this once.
    pub access_token: Secret,
    /// The scopes the token has: those the staff member approved.
    pub scopes: ScopeSet,
    /// The shop the token is bound to.
    pub shop: Shop,
}

fn pkce_s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// How an exchange of a code ended, when storage did not fail.
#[derive(Debug)]
pub enum Exchange {
    /// The code was good: the token, bound to the code's shop.
    Issued(Box<IssuedToken>),
    /// The client's error (RFC 6749 section 5.2). It is an outcome, not an `Err`, so that what the
    /// exchange changed (revoking the token of a code presented twice) is committed.
    Refused(OAuthError),
}

/// Why an exchange stopped: the client's error, or storage failing.
enum Stop {
    Client(OAuthError),
    Storage(DomainError),
}

impl From<OAuthError> for Stop {
    fn from(error: OAuthError) -> Self {
        Stop::Client(error)
    }
}

impl From<DomainError> for Stop {
    fn from(error: DomainError) -> Self {
        Stop::Storage(error)
    }
}

impl From<crate::kernel::error::StorageError> for Stop {
    fn from(error: crate::kernel::error::StorageError) -> Self {
        Stop::Storage(error.into())
    }
}

/// Exchanges a code for a token. `Err` is a storage failure only.
pub fn exchange_code(
    tx: &mut dyn AccessRepositories,
    params: &TokenParams,
    now: Timestamp,
) -> Result<Exchange, DomainError> {
    match exchange(tx, params, now) {
        Ok(issued) => Ok(Exchange::Issued(Box::new(issued))),
        Err(Stop::Client(error)) => Ok(Exchange::Refused(error)),
        Err(Stop::Storage(error)) => Err(error),
    }
}

/// The exchange's steps: the request's form, the client, the code, the redirect URI and PKCE
/// checked against what the code was asked with, then the token.
fn exchange(
    tx: &mut dyn AccessRepositories,
    params: &TokenParams,
    now: Timestamp,
) -> Result<IssuedToken, Stop> {
    let (code, client_id) = check_form(params)?;
    let secret_given = params.client_secret.as_deref().filter(|s| !s.is_empty());
    let app = authenticate_client(tx, &client_id, secret_given)?;
    let stored = usable_code(tx, &app, &code, now)?;
    check_code_redirect_uri(&stored, &app, params.redirect_uri.as_deref())?;
    check_pkce(
        &stored,
        params.code_verifier.as_deref(),
        secret_given.is_some(),
    )?;
    issue_token(tx, &app, stored, &code, now)
}

fn unknown_client() -> OAuthError {
    OAuthError::new("invalid_client", "client authentication failed")
}

fn invalid_grant(why: &str) -> OAuthError {
    OAuthError::new("invalid_grant", why)
}

/// The grant type is `authorization_code`; the code and client id are given.
fn check_form(params: &TokenParams) -> Result<(String, String), OAuthError> {
    match params.grant_type.as_deref() {
        Some("authorization_code") => {}
        None | Some("") => {
            return Err(OAuthError::new("invalid_request", "grant_type is required"));
        }
        Some(_) => {
            return Err(OAuthError::new(
                "unsupported_grant_type",
                "only grant_type=authorization_code is supported",
            ));
        }
    }
    let required = |value: &Option<String>, name: &str| {
        value
            .as_deref()
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .ok_or_else(|| OAuthError::new("invalid_request", format!("{name} is required")))
    };
    Ok((
        required(&params.code, "code")?,
        required(&params.client_id, "client_id")?,
    ))
}

/// The live app of `client_id`, whose secret is the one given, if one is.
fn authenticate_client(
    tx: &mut dyn AccessRepositories,
    client_id: &str,
    secret_given: Option<&str>,
) -> Result<OAuthApp, Stop> {
    let Some(app) = tx
        .oauth_app_by_client_id(client_id)?
        .filter(|app| app.revoked_at.is_none())
    else {
        return Err(unknown_client().into());
    };
    if let Some(secret) = secret_given
        && hash_token(secret) != app.client_secret_hash
    {
        return Err(unknown_client().into());
    }
    Ok(app)
}

/// The code, issued to this app, not used and not expired. A code presented twice may have
/// been stolen: the token it gave is revoked too.
fn usable_code(
    tx: &mut dyn AccessRepositories,
    app: &OAuthApp,
    code: &str,
    now: Timestamp,
) -> Result<AuthorizationCode, Stop> {
    let Some(stored) = tx.authorization_code_by_hash(&hash_token(code))? else {
        return Err(invalid_grant("the code is not valid").into());
    };
    if stored.app_id != app.id {
        return Err(invalid_grant("the code was issued to another client").into());
    }
    if stored.used_at.is_some() {
        if let Some(token_id) = stored.token_id {
            tx.revoke_token(stored.shop_id, token_id, now)?;
        }
        return Err(invalid_grant("the code was already used").into());
    }
    if now >= stored.expires_at {
        return Err(invalid_grant("the code has expired").into());
    }
    Ok(stored)
}

/// The redirect URI is the one the authorization request named (then it is required), else
/// one of the app's, if given.
fn check_code_redirect_uri(
    stored: &AuthorizationCode,
    app: &OAuthApp,
    given: Option<&str>,
) -> Result<(), OAuthError> {
    let redirect_uri = given.filter(|v| !v.is_empty());
    let matches = match redirect_uri {
        // Named in the authorization request: the same one is required.
        _ if !stored.redirect_uri.is_empty() => redirect_uri == Some(stored.redirect_uri.as_str()),
        Some(uri) => app.redirect_uris.iter().any(|known| known == uri),
        None => true,
    };
    match (matches, redirect_uri) {
        (true, _) => Ok(()),
        (false, None) => Err(OAuthError::new(
            "invalid_request",
            "redirect_uri is required: the authorization request named one",
        )),
        (false, Some(_)) => Err(invalid_grant(
            "redirect_uri does not match the authorization request",
        )),
    }
}

/// PKCE (RFC 7636): a code asked with a challenge needs its verifier; a verifier for a code
/// asked without one is a downgrade attempt (RFC 9700); without PKCE the client must have
/// proved itself with its secret.
fn check_pkce(
    stored: &AuthorizationCode,
    verifier: Option<&str>,
    secret_given: bool,
) -> Result<(), OAuthError> {
    match (&stored.code_challenge, verifier) {
        (Some(challenge), Some(verifier)) => {
            if !is_pkce_value(verifier) || pkce_s256(verifier) != *challenge {
                return Err(invalid_grant("the code_verifier does not match"));
            }
            Ok(())
        }
        (Some(_), None) => Err(OAuthError::new(
            "invalid_request",
            "code_verifier is required: the code was asked for with a code_challenge",
        )),
        (None, Some(_)) => Err(invalid_grant(
            "code_verifier was sent, but the code was asked for without code_challenge",
        )),
        (None, None) if !secret_given => Err(unknown_client()),
        (None, None) => Ok(()),
    }
}

/// The token of a checked code, for its shop (if it still exists). The code is redeemed with
/// the token; when another exchange of the same code won at the same moment, neither token
/// may stand.
fn issue_token(
    tx: &mut dyn AccessRepositories,
    app: &OAuthApp,
    stored: AuthorizationCode,
    code: &str,
    now: Timestamp,
) -> Result<IssuedToken, Stop> {
    let Some(shop) = tx
        .shop_by_id(stored.shop_id)?
        .filter(|s| s.deleted_at.is_none())
    else {
        return Err(invalid_grant("the shop no longer exists").into());
    };
    let (access_token, record) = mint_token(
        shop.id,
        &format!("oauth: {}", app.name),
        stored.scopes.clone(),
        TokenSource::OAuth,
        now,
    );
    let token = tx.insert_token(&record)?;
    if !tx.redeem_authorization_code(stored.id, token.id, now)? {
        tx.revoke_token(shop.id, token.id, now)?;
        if let Some(winner) = tx
            .authorization_code_by_hash(&hash_token(code))?
            .and_then(|used| used.token_id)
        {
            tx.revoke_token(shop.id, winner, now)?;
        }
        return Err(invalid_grant("the code was already used").into());
    }
    Ok(IssuedToken {
        access_token,
        scopes: stored.scopes,
        shop,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::shop::{ShopInput, create_shop};
    use crate::ports::Database;
    use crate::testing::MemoryDatabase;

    struct World {
        db: MemoryDatabase,
        shop: Shop,
        app: OAuthApp,
        client_secret: String,
        staff: StaffAccount,
    }

    const REDIRECT: &str = "https://client.example.test/callback";

    fn world() -> World {
        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(0);
        let (shop, created, staff) = db
            .write(|tx| {
                let shop = create_shop(
                    tx,
                    ShopInput {
                        shop_domain: "oauth.shop.test".into(),
                        ..ShopInput::default()
                    },
                    now,
                )?;
                let created = create_app(tx, "Client", &[REDIRECT.to_string()], now)?;
                let staff = create_staff(
                    tx,
                    shop.identifier.as_str(),
                    " Owner@Shop.Test ",
                    "correct horse battery",
                    now,
                )?;
                Ok((shop, created, staff))
            })
            .unwrap();
        World {
            db,
            shop,
            client_secret: created.client_secret.expose().to_string(),
            app: created.app,
            staff,
        }
    }

    fn params(world: &World) -> AuthorizeParams {
        AuthorizeParams {
            client_id: Some(world.app.client_id.clone()),
            redirect_uri: Some(REDIRECT.to_string()),
            scope: Some("read_orders read_shop_settings".to_string()),
            state: Some("xyz".to_string()),
            response_type: Some("code".to_string()),
            ..AuthorizeParams::default()
        }
    }

    fn code_for(world: &World, params: &AuthorizeParams, now: Timestamp) -> String {
        world
            .db
            .write(|tx| {
                let valid = check_authorize(tx, params)
                    .map_err(|e| DomainError::invalid("authorize", "invalid", format!("{e:?}")))?;
                issue_code(tx, &valid, &world.staff, now)
            })
            .unwrap()
            .expose()
            .to_string()
    }

    fn exchange(
        world: &World,
        body: TokenParams,
        now: Timestamp,
    ) -> Result<IssuedToken, OAuthError> {
        match world.db.write(|tx| exchange_code(tx, &body, now)).unwrap() {
            Exchange::Issued(issued) => Ok(*issued),
            Exchange::Refused(error) => Err(error),
        }
    }

    fn token_body(world: &World, code: &str) -> TokenParams {
        TokenParams {
            grant_type: Some("authorization_code".to_string()),
            code: Some(code.to_string()),
            redirect_uri: Some(REDIRECT.to_string()),
            client_id: Some(world.app.client_id.clone()),
            client_secret: Some(world.client_secret.clone()),
            code_verifier: None,
        }
    }

    #[test]
    fn passwords_are_hashed_with_argon2id_and_emails_normalised() {
        let world = world();
        assert_eq!(world.staff.email, "owner@shop.test");
        assert!(world.staff.password_hash.starts_with("$argon2id$"));
        assert!(verify_password(
            "correct horse battery",
            &world.staff.password_hash
        ));
        assert!(!verify_password(
            "wrong horse battery",
            &world.staff.password_hash
        ));
        assert!(!verify_password("anything", decoy_password_hash()));
    }

    #[test]
    fn untrusted_clients_are_never_redirected_to() {
        let world = world();
        let check = |params: AuthorizeParams| {
            world
                .db
                .write(|tx| Ok(check_authorize(tx, &params)))
                .unwrap()
        };
        let mut unknown = params(&world);
        unknown.client_id = Some("mci_nope".to_string());
        assert!(matches!(check(unknown), Err(AuthorizeError::NoRedirect(_))));
        let mut elsewhere = params(&world);
        elsewhere.redirect_uri = Some("https://client.example.test/callback/".to_string());
        assert!(matches!(
            check(elsewhere),
            Err(AuthorizeError::NoRedirect(_))
        ));
        let mut token_flow = params(&world);
        token_flow.response_type = Some("token".to_string());
        assert!(matches!(
            check(token_flow),
            Err(AuthorizeError::Redirect { error: "unsupported_response_type", state: Some(ref s), .. }) if s == "xyz"
        ));
        let mut bad_scope = params(&world);
        bad_scope.scope = Some("read_orders admin".to_string());
        assert!(matches!(
            check(bad_scope),
            Err(AuthorizeError::Redirect {
                error: "invalid_scope",
                ..
            })
        ));
        let mut plain = params(&world);
        plain.code_challenge = Some("a".repeat(43));
        plain.code_challenge_method = Some("plain".to_string());
        assert!(matches!(
            check(plain),
            Err(AuthorizeError::Redirect {
                error: "invalid_request",
                ..
            })
        ));
    }

    #[test]
    fn a_code_is_exchanged_once_for_a_token_of_its_scopes() {
        let world = world();
        let now = Timestamp::from_micros(1_000_000);
        let code = code_for(&world, &params(&world), now);
        let issued = exchange(&world, token_body(&world, &code), now).unwrap();
        assert_eq!(issued.scopes.to_string(), "read_orders read_shop_settings");
        assert_eq!(issued.shop.id, world.shop.id);
        let token_hash = hash_token(issued.access_token.expose());
        let live = |db: &MemoryDatabase| {
            db.read(|tx| Ok(tx.active_token_by_hash(&token_hash)?))
                .unwrap()
        };
        assert!(live(&world.db).is_some());
        // The second time is refused, and the token the code gave is revoked.
        let again = exchange(&world, token_body(&world, &code), now).unwrap_err();
        assert_eq!(again.error, "invalid_grant");
        assert!(live(&world.db).is_none());
    }

    #[test]
    fn the_exchange_checks_client_code_and_redirect() {
        let world = world();
        let now = Timestamp::from_micros(0);
        let error =
            |body: TokenParams, at: Timestamp| exchange(&world, body, at).unwrap_err().error;
        let code = code_for(&world, &params(&world), now);
        let mut wrong_secret = token_body(&world, &code);
        wrong_secret.client_secret = Some("mcs_wrong".to_string());
        assert_eq!(error(wrong_secret, now), "invalid_client");
        let mut no_secret = token_body(&world, &code);
        no_secret.client_secret = None;
        assert_eq!(error(no_secret, now), "invalid_client");
        let mut other_redirect = token_body(&world, &code);
        other_redirect.redirect_uri = Some("https://client.example.test/other".to_string());
        assert_eq!(error(other_redirect, now), "invalid_grant");
        let mut grant = token_body(&world, &code);
        grant.grant_type = Some("password".to_string());
        assert_eq!(error(grant, now), "unsupported_grant_type");
        let mut missing = token_body(&world, &code);
        missing.code = None;
        assert_eq!(error(missing, now), "invalid_request");
        assert_eq!(error(token_body(&world, "0000"), now), "invalid_grant");
        // Ten minutes later the code has expired.
        let late = now.plus_seconds(CODE_LIFETIME_SECONDS);
        assert_eq!(error(token_body(&world, &code), late), "invalid_grant");
    }

    #[test]
    fn redirect_uri_is_required_at_the_token_endpoint_only_if_it_was_named() {
        let world = world();
        let now = Timestamp::from_micros(0);
        let mut unnamed = params(&world);
        unnamed.redirect_uri = None;
        let code = code_for(&world, &unnamed, now);
        let mut body = token_body(&world, &code);
        body.redirect_uri = None;
        assert!(exchange(&world, body, now).is_ok());

        let code = code_for(&world, &params(&world), now);
        let mut body = token_body(&world, &code);
        body.redirect_uri = None;
        assert_eq!(
            exchange(&world, body, now).unwrap_err().error,
            "invalid_request"
        );
        // A verifier for a code asked without a challenge is refused, secret or not.
        let mut downgrade = token_body(&world, &code);
        downgrade.code_verifier = Some("v".repeat(43));
        assert_eq!(
            exchange(&world, downgrade, now).unwrap_err().error,
            "invalid_grant"
        );
        assert!(exchange(&world, token_body(&world, &code), now).is_ok());
    }

    #[test]
    fn pkce_replaces_the_client_secret() {
        let world = world();
        let now = Timestamp::from_micros(0);
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        // RFC 7636 appendix B.
        assert_eq!(
            pkce_s256(verifier),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let mut with_pkce = params(&world);
        with_pkce.code_challenge = Some(pkce_s256(verifier));
        with_pkce.code_challenge_method = Some("S256".to_string());
        let code = code_for(&world, &with_pkce, now);
        let public = |verifier: Option<&str>| TokenParams {
            client_secret: None,
            code_verifier: verifier.map(str::to_string),
            ..token_body(&world, &code)
        };
        assert_eq!(
            exchange(&world, public(None), now).unwrap_err().error,
            "invalid_request"
        );
        let wrong = "x".repeat(43);
        assert_eq!(
            exchange(&world, public(Some(&wrong)), now)
                .unwrap_err()
                .error,
            "invalid_grant"
        );
        assert!(exchange(&world, public(Some(verifier)), now).is_ok());
    }

    /// The attempt's key, and how long it is locked for at `now`.
    struct Tried {
        key: SignInKey,
        known: bool,
        locked_for: Option<i64>,
    }

    fn attempt(world: &World, shop: &str, email: &str, client: &str, now: Timestamp) -> Tried {
        world
            .db
            .read(|tx| {
                let attempt = begin_sign_in(tx, shop, email, client)?;
                Ok(Tried {
                    locked_for: sign_in_locked_for(tx, &attempt.key, now)?,
                    known: attempt.staff.is_some(),
                    key: attempt.key,
                })
            })
            .unwrap()
    }

    #[test]
    fn failures_lock_the_account_and_address_together_with_growing_waits() {
        let world = world();
        let now = Timestamp::from_micros(0);
        let shop = world.shop.identifier.as_str().to_string();
        let key = attempt(&world, &shop, "owner@shop.test", "192.0.2.1", now).key;
        let mut locks = Vec::new();
        for _ in 0..9 {
            locks.push(
                world
                    .db
                    .write(|tx| record_sign_in(tx, &key, false, now))
                    .unwrap(),
            );
        }
        assert_eq!(
            locks,
            [
                None,
                None,
                None,
                None,
                Some(30),
                Some(60),
                Some(120),
                Some(240),
                Some(480)
            ]
        );
        let locked = attempt(&world, &shop, "owner@shop.test", "192.0.2.1", now);
        assert_eq!(locked.locked_for, Some(480));
        assert!(locked.known);
        // The same account by its domain and another spelling of its email: the same lock.
        let by_domain = attempt(
            &world,
            "OAuth.Shop.Test",
            " OWNER@shop.test",
            "192.0.2.1",
            now,
        );
        assert_eq!(
            (by_domain.key.clone(), by_domain.locked_for),
            (key.clone(), Some(480))
        );
        assert_eq!(
            attempt(
                &world,
                &shop,
                "owner@shop.test",
                "192.0.2.1",
                now.plus_seconds(480)
            )
            .locked_for,
            None
        );
        // The owner, from another address, is not locked out by these guesses.
        assert_eq!(
            attempt(&world, &shop, "owner@shop.test", "198.51.100.7", now).locked_for,
            None
        );
        world
            .db
            .write(|tx| record_sign_in(tx, &key, true, now))
            .unwrap();
        assert_eq!(
            attempt(&world, &shop, "owner@shop.test", "192.0.2.1", now).locked_for,
            None
        );
    }

    #[test]
    fn an_unknown_account_is_locked_as_a_known_one_is() {
        let world = world();
        let now = Timestamp::from_micros(0);
        let shop = world.shop.identifier.as_str().to_string();
        for (shop, email) in [
            (shop.as_str(), "nobody@shop.test"),
            ("unknown.shop.test", "owner@shop.test"),
        ] {
            let unknown = attempt(&world, shop, email, "192.0.2.1", now);
            assert!(!unknown.known);
            let locks: Vec<_> = (0..5)
                .map(|_| {
                    world
                        .db
                        .write(|tx| record_sign_in(tx, &unknown.key, false, now))
                        .unwrap()
                })
                .collect();
            assert_eq!(locks, [None, None, None, None, Some(30)]);
            assert_eq!(
                attempt(&world, shop, email, "192.0.2.1", now).locked_for,
                Some(30)
            );
        }
    }

    #[test]
    fn failures_left_alone_for_a_day_are_forgotten() {
        let world = world();
        let now = Timestamp::from_micros(0);
        let shop = world.shop.identifier.as_str().to_string();
        let key = attempt(&world, &shop, "owner@shop.test", "192.0.2.1", now).key;
        for _ in 0..5 {
            world
                .db
                .write(|tx| record_sign_in(tx, &key, false, now))
                .unwrap();
        }
        let later = now.plus_seconds(SIGN_IN_MEMORY_SECONDS + 1);
        let other = attempt(&world, &shop, "owner@shop.test", "198.51.100.7", later).key;
        let first = world
            .db
            .write(|tx| record_sign_in(tx, &other, false, later))
            .unwrap();
        assert_eq!(first, None);
        // The old pair's five failures were forgotten: one more does not lock it.
        let again = world
            .db
            .write(|tx| record_sign_in(tx, &key, false, later))
            .unwrap();
        assert_eq!(again, None);
    }

    #[test]
    fn redirect_uris_must_be_https_or_loopback_http() {
        assert!(check_redirect_uri("https://app.example.test/cb").is_ok());
        assert!(check_redirect_uri("http://127.0.0.1:8123/cb").is_ok());
        assert!(check_redirect_uri("http://localhost/cb").is_ok());
        assert!(check_redirect_uri("http://app.example.test/cb").is_err());
        assert!(check_redirect_uri("https://app.example.test/cb#frag").is_err());
        assert!(check_redirect_uri("/cb").is_err());
    }
}
