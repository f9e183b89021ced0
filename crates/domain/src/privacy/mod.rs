//! Privacy requests: erase a customer's personal data everywhere Mercer keeps it (the customer
//! record, their addresses, the checkouts, webhook payloads and queued work that mention them),
//! export everything held about a customer, and erase a whole shop's customers.
//!
//! Redaction keeps ids, amounts and statuses, so the books still add up; it writes only text.
//! A customer is redacted in one transaction, so a crash leaves them either untouched or
//! redacted, and a customer whose `pii_redacted_at` is set is not touched again.

pub mod redaction;
pub mod repository;
pub mod scrub;

pub use redaction::{CustomerExport, Redaction, export_customer, redact_customer, redact_shop};
pub use repository::{
    CellKind, PersonalRecord, PrivacyDatabase, PrivacyRepositories, PrivacyRepository, TextCell,
};
