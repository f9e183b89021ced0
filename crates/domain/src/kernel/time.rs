//! Time as Mercer stores it: integer microseconds since the Unix epoch, UTC.

use chrono::{DateTime, SecondsFormat, Utc};
use std::fmt;

/// An instant in UTC, as integer microseconds since the Unix epoch. It is written as an RFC 3339
/// string in JSON.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The first instant RFC 3339 can write (`0000-01-01T00:00:00Z`).
    pub const EARLIEST: Timestamp = Timestamp(-62_167_219_200_000_000);
    /// The last instant RFC 3339 can write (`9999-12-31T23:59:59.999999Z`): its years have four
    /// digits, so a later one would come out as `+10000-…`, which no client reads.
    pub const LATEST: Timestamp = Timestamp(253_402_300_799_999_999);

    /// Whether RFC 3339 can write this instant in UTC ([`Self::EARLIEST`]..=[`Self::LATEST`]).
    pub fn is_writable(self) -> bool {
        (Self::EARLIEST..=Self::LATEST).contains(&self)
    }

    /// The instant `micros` microseconds after the Unix epoch.
    pub const fn from_micros(micros: i64) -> Self {
        Timestamp(micros)
    }

    /// Microseconds since the Unix epoch, as the instant is stored.
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// The system clock's time now, whatever [`Clock`] Mercer runs under.
    pub fn now() -> Self {
        Timestamp::from(Utc::now())
    }

    /// `seconds` later (earlier when negative), saturating at the ends of `i64`.
    pub fn plus_seconds(self, seconds: i64) -> Self {
        Timestamp(self.0.saturating_add(seconds.saturating_mul(1_000_000)))
    }

    /// `duration` later.
    pub fn plus(self, duration: std::time::Duration) -> Self {
        let micros = i64::try_from(duration.as_micros()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(micros))
    }

    /// The instant as a `chrono` date-time in UTC; the Unix epoch when chrono cannot hold it.
    pub fn to_datetime(self) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(self.0).unwrap_or_default()
    }

    /// RFC 3339 in UTC with `Z`; fractional seconds only when there are any.
    pub fn to_rfc3339(self) -> String {
        self.to_datetime()
            .to_rfc3339_opts(SecondsFormat::AutoSi, true)
    }

    /// RFC 3339 in UTC with `Z` and whole seconds, as `X-HMAC-Timestamp` is written.
    pub fn to_rfc3339_seconds(self) -> String {
        self.to_datetime()
            .to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    /// `YYYY-MM-DD HH:MM:SS` in UTC, the form API override times take.
    pub fn to_date_time_seconds(self) -> String {
        self.to_datetime().format("%Y-%m-%d %H:%M:%S").to_string()
    }

    /// Parses an RFC 3339 date-time with any offset, kept as the same instant in UTC. An
    /// instant that UTC puts outside the years 0000..=9999 (`9999-12-31T23:59:59-05:00`) is
    /// refused: it could not be written back in RFC 3339.
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|time| Timestamp::from(time.with_timezone(&Utc)))
            .filter(|time| time.is_writable())
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(time: DateTime<Utc>) -> Self {
        Timestamp(time.timestamp_micros())
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({})", self.to_rfc3339())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

/// An RFC 3339 date-time string in UTC (`2024-03-01T10:30:00Z`).
impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

/// Accepts an RFC 3339 date-time string (any offset), kept as the same instant in UTC.
impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Timestamp::parse_rfc3339(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{text:?} is not an RFC 3339 date-time of the years 0000 to 9999 (in UTC) such as \
                 2024-03-01T10:30:00Z"
            ))
        })
    }
}

/// The time of day, as a port so rules about time are testable.
pub trait Clock: Send + Sync + 'static {
    /// The time now.
    fn now(&self) -> Timestamp;
}

/// The system's clock, as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// The system's clock moved by a fixed offset: Mercer's clock when an operator starts it at
/// another instant (`mercer serve --clock-start`, for tests and demos of what Mercer does on a
/// later date). Only Mercer's own times follow it; times on the wire (signature timestamps,
/// `Date` headers) stay the system's, since the other side checks them against its clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffsetClock {
    offset_micros: i64,
}

impl OffsetClock {
    /// The system's clock as it is.
    pub const SYSTEM: OffsetClock = OffsetClock { offset_micros: 0 };

    /// A clock that reads `start` now and runs at the system clock's rate from here.
    pub fn starting_at(start: Timestamp) -> OffsetClock {
        OffsetClock {
            offset_micros: start
                .as_micros()
                .saturating_sub(Timestamp::now().as_micros()),
        }
    }

    /// How far the clock is ahead of the system's, in microseconds (negative when behind).
    pub fn offset_micros(self) -> i64 {
        self.offset_micros
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_micros(
            Timestamp::now()
                .as_micros()
                .saturating_add(self.offset_micros),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339_utc_with_z() {
        let t = Timestamp::parse_rfc3339("2024-03-01T12:30:00+02:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2024-03-01T10:30:00Z");
        let with_fraction = Timestamp::from_micros(t.as_micros() + 250_000);
        assert_eq!(with_fraction.to_rfc3339(), "2024-03-01T10:30:00.250Z");
    }

    #[test]
    fn rejects_text_that_is_not_rfc3339() {
        assert_eq!(Timestamp::parse_rfc3339("2024-03-01 10:30:00"), None);
        assert_eq!(Timestamp::parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn instants_past_the_year_9999_in_utc_are_refused() {
        let last = Timestamp::parse_rfc3339("9999-12-31T23:59:59.999999Z").unwrap();
        assert_eq!(last, Timestamp::LATEST);
        assert_eq!(last.to_rfc3339(), "9999-12-31T23:59:59.999999Z");
        let first = Timestamp::parse_rfc3339("0000-01-01T00:00:00Z").unwrap();
        assert_eq!(first, Timestamp::EARLIEST);
        assert_eq!(first.to_rfc3339(), "0000-01-01T00:00:00Z");
        assert_eq!(Timestamp::parse_rfc3339("9999-12-31T23:59:59-05:00"), None);
        assert_eq!(Timestamp::parse_rfc3339("0000-01-01T00:00:00+01:00"), None);
    }

    #[test]
    fn deserializes_rfc3339_and_names_the_bad_value() {
        let t: Timestamp = serde_json::from_str("\"2024-03-01T10:30:00Z\"").unwrap();
        assert_eq!(t.to_rfc3339(), "2024-03-01T10:30:00Z");
        let error = serde_json::from_str::<Timestamp>("\"last tuesday\"").unwrap_err();
        assert!(error.to_string().contains("last tuesday"), "{error}");
        assert!(serde_json::from_str::<Timestamp>("1700000000").is_err());
    }

    #[test]
    fn an_offset_clock_reads_its_start_and_then_runs() {
        let start = Timestamp::parse_rfc3339("2030-03-10T06:59:58Z").unwrap();
        let clock = OffsetClock::starting_at(start);
        let read = clock.now();
        assert!(read >= start && read < start.plus_seconds(5), "{read}");
        assert!(clock.now() >= read);
        let system = OffsetClock::SYSTEM.now();
        assert!((system.as_micros() - Timestamp::now().as_micros()).abs() < 5_000_000);
    }

    #[test]
    fn adds_seconds() {
        let t = Timestamp::from_micros(0).plus_seconds(86_400);
        assert_eq!(t.to_rfc3339(), "1970-01-02T00:00:00Z");
    }
}
