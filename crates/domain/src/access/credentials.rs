//! API access tokens and their scopes.
//!
//! A token is shown to its owner once; Mercer keeps only its SHA-256 hash and a short prefix
//! by which people can tell their tokens apart in listings.

use crate::kernel::ids::{ShopId, TokenId};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::fmt;

use crate::access::AccessRepositories;
use crate::access::shop::{Shop, find_shop};
use crate::kernel::error::{DomainError, FieldError};
use crate::kernel::time::Timestamp;

/// Every scope, in the documented order.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[strum(serialize_all = "snake_case")]
pub enum Scope {
    /// `read_customers`: read the shop's customers.
    ReadCustomers,
    /// `write_customers`: change the shop's customers.
    WriteCustomers,
    /// `read_orders`: read the shop's orders.
    ReadOrders,
    /// `write_orders`: change the shop's orders.
    WriteOrders,
    /// `read_products`: read the shop's products.
    ReadProducts,
    /// `write_products`: change the shop's products and categories.
    WriteProducts,
    /// `read_shop_settings`: read the shop's destinations, overrides and webhooks.
    ReadShopSettings,
    /// `modify_shop_settings`: change those, the shared secrets and the checkout settings.
    ModifyShopSettings,
    /// `read_subscriptions`: read the shop's subscriptions.
    ReadSubscriptions,
    /// `write_subscriptions`: change the shop's subscriptions.
    WriteSubscriptions,
    /// `read_subscription_groups`: read the shop's subscription groups.
    ReadSubscriptionGroups,
    /// `write_subscription_groups`: change the shop's subscription groups.
    WriteSubscriptionGroups,
}

impl Scope {
    /// Every scope, in the documented order.
    pub const ALL: [Scope; 12] = [
        Scope::ReadCustomers,
        Scope::WriteCustomers,
        Scope::ReadOrders,
        Scope::WriteOrders,
        Scope::ReadProducts,
        Scope::WriteProducts,
        Scope::ReadShopSettings,
        Scope::ModifyShopSettings,
        Scope::ReadSubscriptions,
        Scope::WriteSubscriptions,
        Scope::ReadSubscriptionGroups,
        Scope::WriteSubscriptionGroups,
    ];

    /// The scope's name, as tokens and the API reference write it (`read_customers`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The scope named `text`; None for an unknown name.
    pub fn parse(text: &str) -> Option<Scope> {
        text.parse().ok()
    }
}

/// A set of scopes, written as tokens carry them: names separated by spaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeSet(BTreeSet<Scope>);

impl ScopeSet {
    /// Every scope there is.
    pub fn all() -> Self {
        ScopeSet(Scope::ALL.into_iter().collect())
    }

    /// Parses names separated by spaces or commas; the unknown names are returned as the error.
    pub fn parse(text: &str) -> Result<Self, Vec<String>> {
        let mut scopes = BTreeSet::new();
        let mut unknown = Vec::new();
        for name in text.split([' ', ',']).filter(|name| !name.is_empty()) {
            match Scope::parse(name) {
                Some(scope) => {
                    scopes.insert(scope);
                }
                None => unknown.push(name.to_string()),
            }
        }
        if unknown.is_empty() {
            Ok(ScopeSet(scopes))
        } else {
            Err(unknown)
        }
    }

    /// Whether the set holds `scope`.
    pub fn contains(&self, scope: Scope) -> bool {
        self.0.contains(&scope)
    }

    /// Whether the set holds no scope at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The scopes, in the documented order.
    pub fn iter(&self) -> impl Iterator<Item = Scope> + '_ {
        self.0.iter().copied()
    }
}

impl FromIterator<Scope> for ScopeSet {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        ScopeSet(iter.into_iter().collect())
    }
}

impl fmt::Display for ScopeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Scope::as_str).collect();
        f.write_str(&names.join(" "))
    }
}

/// A value that must not be printed: its `Debug` is redacted and it has no `Display`.
/// Call [`Secret::expose`] at the one place that really needs the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value that must not be printed.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The text itself, for the one place that really needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The prefix every Mercer API token starts with, so secret scanners and people recognise one.
pub(crate) const TOKEN_PREFIX: &str = "mct_";
/// How many characters of a token are kept in clear to tell tokens apart.
const SHOWN_PREFIX_LEN: usize = TOKEN_PREFIX.len() + 8;

/// Where a token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum TokenSource {
    /// `mercer token create`.
    Cli,
    /// Made for the demo shop on the first `mercer serve`.
    Demo,
    /// Issued by the OAuth token endpoint.
    #[strum(serialize = "oauth")]
    OAuth,
}

impl TokenSource {
    /// The source as stored: `cli`, `demo` or `oauth`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The source stored as `text`; None for an unknown one.
    pub fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

/// A stored API token: everything but the token itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    /// The token's row id (the service's integer).
    pub id: TokenId,
    /// The shop the token is bound to (the service's integer).
    pub shop_id: ShopId,
    /// A name its owner gave it, to tell it apart.
    pub name: String,
    /// The token's first characters (`mct_` and 8 more), kept in clear for listings.
    pub token_prefix: String,
    /// What the token may do.
    pub scopes: ScopeSet,
    /// Where the token came from.
    pub source: TokenSource,
    /// When the token was made.
    pub created_at: Timestamp,
    /// When it was revoked; a revoked token is refused with 401.
    pub revoked_at: Option<Timestamp>,
    /// When a request last used it, to the minute ([`TOKEN_USE_PRECISION_SECONDS`]); None when
    /// none has since this was first kept.
    pub last_used_at: Option<Timestamp>,
}

/// A token's last use is written at most this often: requests in between do not write.
pub const TOKEN_USE_PRECISION_SECONDS: i64 = 60;

/// Notes that a request used the token at `now`, unless a use was noted less than
/// [`TOKEN_USE_PRECISION_SECONDS`] ago (by this process or another): one cheap conditional
/// update, at most once a minute per token. Answers whether it wrote.
pub fn note_token_use(
    tx: &mut dyn AccessRepositories,
    token_id: TokenId,
    now: Timestamp,
) -> Result<bool, DomainError> {
    let recent = now.plus_seconds(-TOKEN_USE_PRECISION_SECONDS);
    Ok(tx.note_token_use(token_id, now, recent)?)
}

/// A token to store: its hash and prefix, never the token itself.
#[derive(Debug, Clone)]
pub struct NewApiToken {
    /// The shop the token is bound to (the service's integer).
    pub shop_id: ShopId,
    /// A name its owner gave it.
    pub name: String,
    /// The token's lowercase hex SHA-256 ([`hash_token`]), by which requests find it.
    pub token_hash: String,
    /// The token's first characters (`mct_` and 8 more), kept in clear for listings.
    pub token_prefix: String,
    /// What the token may do.
    pub scopes: ScopeSet,
    /// Where the token came from.
    pub source: TokenSource,
    /// When the token is made.
    pub created_at: Timestamp,
}

/// `bytes` random bytes from the operating system, as lowercase hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    // A service cannot go on without the operating system's random source.
    getrandom::fill(&mut buffer).expect("the operating system's random source failed");
    hex::encode(buffer)
}

/// Lowercase hex SHA-256 of a token: the only form in which tokens are stored.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A fresh token and the record to store for it.
pub fn mint_token(
    shop_id: ShopId,
    name: &str,
    scopes: ScopeSet,
    source: TokenSource,
    now: Timestamp,
) -> (Secret, NewApiToken) {
    let token = format!("{TOKEN_PREFIX}{}", random_hex(32));
    let record = NewApiToken {
        shop_id,
        name: name.to_string(),
        token_hash: hash_token(&token),
        token_prefix: token[..SHOWN_PREFIX_LEN].to_string(),
        scopes,
        source,
        created_at: now,
    };
    (Secret::new(token), record)
}

/// What creating a token gives back: the stored record and the token, shown this once.
#[derive(Debug)]
pub struct CreatedToken {
    /// The stored record.
    pub token: ApiToken,
    /// The token itself: shown to its owner this once, never stored.
    pub secret: Secret,
}

/// Creates a token for the shop with the scopes named in `scopes` (spaces or commas).
pub fn create_token(
    tx: &mut dyn AccessRepositories,
    shop_identifier: &str,
    name: &str,
    scopes: &str,
    source: TokenSource,
    now: Timestamp,
) -> Result<CreatedToken, DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    let scopes = ScopeSet::parse(scopes).map_err(|unknown| {
        DomainError::invalid(
            "scope",
            "unknown_scope",
            format!("unknown scope(s): {}", unknown.join(", ")),
        )
    })?;
    if scopes.is_empty() {
        return Err(DomainError::Invalid(vec![FieldError::required("scope")]));
    }
    let (secret, record) = mint_token(shop.id, name, scopes, source, now);
    let token = tx.insert_token(&record)?;
    Ok(CreatedToken { token, secret })
}

/// The shop and all its tokens (revoked ones too), oldest first.
pub fn list_tokens(
    tx: &mut dyn AccessRepositories,
    shop_identifier: &str,
) -> Result<(Shop, Vec<ApiToken>), DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    let tokens = tx.tokens_of_shop(shop.id)?;
    Ok((shop, tokens))
}

/// Revokes one of the shop's tokens; from then on it is refused with 401. `which` is the
/// token's id, or the prefix `token list` shows (the whole token is read as its prefix too).
/// Answers the id revoked.
pub fn revoke_token(
    tx: &mut dyn AccessRepositories,
    shop_identifier: &str,
    which: &str,
    now: Timestamp,
) -> Result<TokenId, DomainError> {
    let shop = find_shop(tx, shop_identifier)?;
    let which = which.trim();
    let token_id = match which.parse::<i64>() {
        Ok(id) => TokenId(id),
        Err(_) => {
            let matching: Vec<TokenId> = tx
                .tokens_of_shop(shop.id)?
                .into_iter()
                .filter(|token| token.revoked_at.is_none())
                .filter(|token| which.starts_with(&token.token_prefix))
                .map(|token| token.id)
                .collect();
            match matching[..] {
                [id] => id,
                [] => return Err(DomainError::not_found("token")),
                _ => {
                    return Err(DomainError::Conflict {
                        code: "token.ambiguous",
                        message: format!(
                            "{} tokens begin with {which}: revoke by id (token list)",
                            matching.len()
                        ),
                    });
                }
            }
        }
    };
    if tx.revoke_token(shop.id, token_id, now)? {
        Ok(token_id)
    } else {
        Err(DomainError::not_found("token"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_names_round_trip() {
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
        }
        assert_eq!(Scope::parse("read_everything"), None);
    }

    #[test]
    fn scope_set_parses_spaces_and_commas_and_reports_unknown_names() {
        let set = ScopeSet::parse("read_customers,write_orders  read_customers").unwrap();
        assert_eq!(set.to_string(), "read_customers write_orders");
        assert_eq!(
            ScopeSet::parse("read_customers nope also_not"),
            Err(vec!["nope".to_string(), "also_not".to_string()])
        );
        assert_eq!(ScopeSet::all().iter().count(), 12);
    }

    #[test]
    fn minted_tokens_are_unique_and_stored_only_as_hash() {
        let now = Timestamp::from_micros(0);
        let (a, record_a) = mint_token(ShopId(1), "a", ScopeSet::all(), TokenSource::Cli, now);
        let (b, _) = mint_token(ShopId(1), "b", ScopeSet::all(), TokenSource::Cli, now);
        assert_ne!(a, b);
        assert!(a.expose().starts_with(TOKEN_PREFIX));
        assert_eq!(a.expose().len(), TOKEN_PREFIX.len() + 64);
        assert_eq!(record_a.token_hash, hash_token(a.expose()));
        assert_ne!(record_a.token_hash, a.expose());
        assert!(a.expose().starts_with(&record_a.token_prefix));
    }

    #[test]
    fn hash_token_is_sha256_hex() {
        // SHA-256("abc"), FIPS 180-2 appendix B.1.
        assert_eq!(
            hash_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn create_list_and_revoke_tokens_of_a_shop() {
        use crate::access::shop::{ShopInput, create_shop};
        use crate::ports::Database;
        use crate::testing::MemoryDatabase;

        let db = MemoryDatabase::default();
        let now = Timestamp::from_micros(0);
        let shop = db
            .write(|tx| {
                let input = ShopInput {
                    shop_domain: "a.shop.test".into(),
                    ..ShopInput::default()
                };
                create_shop(tx, input, now)
            })
            .unwrap();
        let id = shop.identifier.as_str();
        let created = db
            .write(|tx| {
                create_token(
                    tx,
                    id,
                    "ci",
                    "read_orders write_orders",
                    TokenSource::Cli,
                    now,
                )
            })
            .unwrap();
        assert_eq!(created.token.scopes.to_string(), "read_orders write_orders");

        let unknown =
            db.write(|tx| create_token(tx, id, "x", "read_orders nope", TokenSource::Cli, now));
        let Err(DomainError::Invalid(problems)) = unknown else {
            panic!("expected 422")
        };
        assert_eq!(problems[0].field, "scope");
        assert!(problems[0].message.contains("nope"));
        let empty = db.write(|tx| create_token(tx, id, "x", " ", TokenSource::Cli, now));
        assert!(matches!(empty, Err(DomainError::Invalid(_))));

        let by_id = created.token.id.to_string();
        db.write(|tx| revoke_token(tx, id, &by_id, now)).unwrap();
        let again = db.write(|tx| revoke_token(tx, id, &by_id, now));
        assert!(matches!(
            again,
            Err(DomainError::NotFound { resource: "token" })
        ));
        let (_, tokens) = db.read(|tx| list_tokens(tx, id)).unwrap();
        assert_eq!(tokens.len(), 1);
        assert_eq!(tokens[0].revoked_at, Some(now));
        // By the prefix `token list` shows, or the whole token.
        for which in [Some(SHOWN_PREFIX_LEN), None] {
            let made = db
                .write(|tx| create_token(tx, id, "x", "read_orders", TokenSource::Cli, now))
                .unwrap();
            let token = made.secret.expose();
            let given = which.map_or(token, |len| &token[..len]);
            let revoked = db.write(|tx| revoke_token(tx, id, given, now)).unwrap();
            assert_eq!(revoked, made.token.id);
        }
        assert!(matches!(
            db.write(|tx| revoke_token(tx, id, "mct_nothing", now)),
            Err(DomainError::NotFound { resource: "token" })
        ));
    }

    #[test]
    fn secrets_do_not_print() {
        let secret = Secret::new("hunter2hunter2");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
    }

    #[test]
    fn a_scope_set_collected_from_scopes_holds_exactly_those() {
        let set: ScopeSet = [Scope::WriteOrders, Scope::ReadOrders, Scope::WriteOrders]
            .into_iter()
            .collect();
        assert!(set.contains(Scope::ReadOrders));
        assert!(set.contains(Scope::WriteOrders));
        assert!(!set.contains(Scope::ReadCustomers));
        assert_eq!(set.to_string(), "read_orders write_orders");
    }
}
