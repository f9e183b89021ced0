//! Money: amounts in a currency's minor unit, and ISO 4217 currency codes.

use serde::{Deserialize, Deserializer, Serialize};

/// An amount of money in the currency's minor unit (cents), as every money field of the
/// subscription API is written (contract §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct Cents(pub i64);

impl Cents {
    pub const ZERO: Cents = Cents(0);

    pub fn times(self, quantity: i64) -> Option<Cents> {
        self.0.checked_mul(quantity).map(Cents)
    }
}

/// Only whole numbers are cents: `12.5` is refused rather than rounded.
impl<'de> Deserialize<'de> for Cents {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        i64::deserialize(deserializer).map(Cents)
    }
}

/// An ISO 4217 currency code (`USD`), one of [`CURRENCY_CODES`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct CurrencyCode(String);

impl CurrencyCode {
    /// The code, when it is one of the current ISO 4217 currencies; upper case only, as the
    /// standard writes them.
    pub fn parse(text: &str) -> Option<CurrencyCode> {
        CURRENCY_CODES
            .binary_search(&text)
            .ok()
            .map(|_| CurrencyCode(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for CurrencyCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        CurrencyCode::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not an ISO 4217 currency code"))
        })
    }
}

/// The current ISO 4217 currency codes that money can be charged in, sorted. Left out: the
/// precious metals (XAU, XAG, XPD, XPT), bond-market and special units (XBA–XBD, XDR, XSU,
/// XUA), funds codes (BOV, CHE, CHW, CLF, COU, MXV, USN, UYI, UYW), the testing code XTS and
/// "no currency" XXX, and withdrawn codes (HRK, SLL, ZWL, CUC, VEF…).
pub const CURRENCY_CODES: [&str; 157] = [
    "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT",
    "BGN", "BHD", "BIF", "BMD", "BND", "BOB", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD",
    "CDF", "CHF", "CLP", "CNY", "COP", "CRC", "CUP", "CVE", "CZK", "DJF", "DKK", "DOP", "DZD",
    "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL", "GHS", "GIP", "GMD", "GNF", "GTQ",
    "GYD", "HKD", "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IQD", "IRR", "ISK", "JMD", "JOD",
    "JPY", "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT", "LAK", "LBP", "LKR",
    "LRD", "LSL", "LYD", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR",
    "MWK", "MXN", "MYR", "MZN", "NAD", "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "PAB", "PEN",
    "PGK", "PHP", "PKR", "PLN", "PYG", "QAR", "RON", "RSD", "RUB", "RWF", "SAR", "SBD", "SCR",
    "SDG", "SEK", "SGD", "SHP", "SLE", "SOS", "SRD", "SSP", "STN", "SVC", "SYP", "SZL", "THB",
    "TJS", "TMT", "TND", "TOP", "TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD", "UYU", "UZS",
    "VED", "VES", "VND", "VUV", "WST", "XAF", "XCD", "XCG", "XOF", "XPF", "YER", "ZAR", "ZMW",
    "ZWG",
];
