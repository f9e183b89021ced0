//! Money: amounts in a currency's minor unit, and ISO 4217 currency codes.

use serde::{Deserialize, Deserializer, Serialize};

/// An amount of money in the currency's minor unit (cents), as every money field of the
/// subscription API is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct Cents(pub i64);

impl Cents {
    /// No money.
    pub const ZERO: Cents = Cents(0);

    /// An amount a remote party gave unsigned; beyond `i64` (no real amount), the largest.
    pub fn from_unsigned(amount: u64) -> Cents {
        Cents(i64::try_from(amount).unwrap_or(i64::MAX))
    }

    /// The amount `quantity` times over; `None` when it overflows `i64`.
    pub fn times(self, quantity: i64) -> Option<Cents> {
        self.0.checked_mul(quantity).map(Cents)
    }

    /// The amount as a decimal string in `currency`'s major unit, as the connector interface
    /// writes money: 1250 cents of USD is `"12.50"`, 500 of JPY `"500"`, 1250 of
    /// KWD `"1.250"`.
    pub fn to_decimal(self, currency: &CurrencyCode) -> String {
        let digits = currency.minor_units();
        let sign = if self.0 < 0 { "-" } else { "" };
        let magnitude = self.0.unsigned_abs();
        if digits == 0 {
            return format!("{sign}{magnitude}");
        }
        let scale = 10u64.pow(digits);
        format!(
            "{sign}{}.{:0width$}",
            magnitude / scale,
            magnitude % scale,
            width = digits as usize
        )
    }
}

impl Cents {
    /// A decimal string in `currency`'s major unit, as the connector interface writes money
    /// (`"12.50"` USD is 1250; `"12.5"` and `"12"` too). None for text that is not such a
    /// number, or that has more decimals than the currency's minor unit (`"12.505"` USD).
    pub fn from_decimal(text: &str, currency: &CurrencyCode) -> Option<Cents> {
        let text = text.trim();
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let scale = currency.minor_units() as usize;
        let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !all_digits(whole) || !all_digits(fraction) {
            return None;
        }
        // Trailing zeros beyond the minor unit say nothing: "12.500" USD is 1250.
        let fraction = fraction.trim_end_matches('0');
        if fraction.len() > scale {
            return None;
        }
        let minor: i64 = format!("{fraction:0<scale$}").parse().unwrap_or(0);
        let amount = whole
            .parse::<i64>()
            .ok()?
            .checked_mul(10i64.pow(scale as u32))?
            .checked_add(minor)?;
        Some(Cents(if negative { -amount } else { amount }))
    }
}

/// The highest price of one unit, in minor units (a million dollars of a two-decimal
/// currency): a line item priced above it is refused.
pub const MAX_PRICE: Cents = Cents(100_000_000);
/// A line item's quantity is 1 to this.
pub const MAX_QUANTITY: i64 = 10_000;
/// The lowest exchange rate between two currencies.
pub const MIN_EXCHANGE_RATE: f64 = 0.000_001;
/// The highest exchange rate between two currencies.
pub const MAX_EXCHANGE_RATE: f64 = 1_000_000.0;

/// Whether `rate` is an exchange rate: from [`MIN_EXCHANGE_RATE`] to [`MAX_EXCHANGE_RATE`].
pub fn is_exchange_rate(rate: f64) -> bool {
    rate.is_finite() && (MIN_EXCHANGE_RATE..=MAX_EXCHANGE_RATE).contains(&rate)
}

/// A rate as the exact decimal it is written as: `(numerator, denominator)` with the
/// denominator a power of ten. The number's shortest text that reads back as the same number is
/// taken (`1.35`, not the binary fraction 1.350000000000000088…), so a rate given as `1.35`
/// converts as 1.35. None for a rate that is not a finite number of at least 0.
fn exact_rate(rate: f64) -> Option<(i128, i128)> {
    if !rate.is_finite() || rate < 0.0 {
        return None;
    }
    // `Display` of a float never uses an exponent: `1e-7` is written `0.0000001`.
    let text = rate.to_string();
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let digits: i128 = format!("{whole}{fraction}").parse().ok()?;
    let denominator = 10i128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
    Some((digits, denominator))
}

impl Cents {
    /// The sum; `None` when it overflows `i64`.
    pub fn checked_add(self, other: Cents) -> Option<Cents> {
        self.0.checked_add(other.0).map(Cents)
    }

    /// The difference; `None` when it overflows `i64`.
    pub fn checked_sub(self, other: Cents) -> Option<Cents> {
        self.0.checked_sub(other.0).map(Cents)
    }

    /// The sum of `amounts`; `None` when it overflows `i64`.
    pub fn checked_sum(amounts: impl IntoIterator<Item = Cents>) -> Option<Cents> {
        amounts
            .into_iter()
            .try_fold(Cents::ZERO, |total, amount| total.checked_add(amount))
    }

    /// The amount at exchange rate `rate`, worked out exactly on the rate's decimal (see
    /// [`exact_rate`]) and rounded half away from zero; `None` when it overflows `i64` or the
    /// rate is not a number of at least 0.
    pub fn at_rate(self, rate: f64) -> Option<Cents> {
        let (numerator, denominator) = exact_rate(rate)?;
        self.times_fraction(numerator, denominator)
    }

    /// `percent` per cent of the amount (a discount of 12.5 % of 1,000 is 125), worked out
    /// exactly on the percentage's decimal and rounded half away from zero, as
    /// [`Cents::at_rate`]; `None` when it overflows `i64` or `percent` is not a number of at
    /// least 0.
    pub fn percent(self, percent: f64) -> Option<Cents> {
        let (numerator, denominator) = exact_rate(percent)?;
        self.times_fraction(numerator, denominator.checked_mul(100)?)
    }

    /// The amount times `numerator / denominator`, rounded half away from zero.
    fn times_fraction(self, numerator: i128, denominator: i128) -> Option<Cents> {
        let product = i128::from(self.0).checked_mul(numerator)?;
        let (quotient, remainder) = (product / denominator, product % denominator);
        let rounded = if remainder.abs() * 2 >= denominator {
            quotient + product.signum()
        } else {
            quotient
        };
        i64::try_from(rounded).ok().map(Cents)
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

    /// The three-letter code (`USD`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Digits after the decimal point of the currency's minor unit (ISO 4217): 2 for most,
    /// 0 for the yen, the won and others without one, 3 for the dinars of Bahrain, Iraq,
    /// Jordan, Kuwait, Libya, Tunisia and the rial of Oman.
    pub fn minor_units(&self) -> u32 {
        match self.0.as_str() {
            "BIF" | "CLP" | "DJF" | "GNF" | "ISK" | "JPY" | "KMF" | "KRW" | "PYG" | "RWF"
            | "UGX" | "VND" | "VUV" | "XAF" | "XOF" | "XPF" => 0,
            "BHD" | "IQD" | "JOD" | "KWD" | "LYD" | "OMR" | "TND" => 3,
            _ => 2,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_convert_at_the_rate_as_written_and_overflow_is_none() {
        // 100 × 1.005 = 100.5 exactly, rounded up; in binary floats it is 100.49999999999999,
        // which would round down.
        assert_eq!(Cents(100).at_rate(1.005), Some(Cents(101)));
        assert_eq!(Cents(250).at_rate(1.35), Some(Cents(338)));
        assert_eq!(Cents(-250).at_rate(1.35), Some(Cents(-338)));
        assert_eq!(Cents(1).at_rate(0.000_001), Some(Cents(0)));
        assert_eq!(Cents(500_000).at_rate(0.000_001), Some(Cents(1)));
        assert_eq!(Cents(7).at_rate(1.0), Some(Cents(7)));
        assert_eq!(Cents(i64::MAX).at_rate(2.0), None);
        assert_eq!(Cents(1).at_rate(f64::NAN), None);
        assert_eq!(Cents(i64::MAX).checked_add(Cents(1)), None);
        assert_eq!(Cents::checked_sum([Cents(1), Cents(2)]), Some(Cents(3)));
        assert_eq!(Cents::checked_sum([Cents(i64::MAX), Cents(1)]), None);
        assert!(is_exchange_rate(0.000_001) && is_exchange_rate(1_000_000.0));
        assert!(!is_exchange_rate(0.000_000_99) && !is_exchange_rate(1_000_000.01));
        assert!(!is_exchange_rate(0.0) && !is_exchange_rate(f64::INFINITY));
    }

    #[test]
    fn percentages_are_taken_exactly_as_written() {
        // 1,005 × 10 % = 100.5, rounded up; 0.1 is not exact in binary floats.
        assert_eq!(Cents(1005).percent(10.0), Some(Cents(101)));
        assert_eq!(Cents(1000).percent(12.5), Some(Cents(125)));
        // 33.3 % of 1,500 = 499.5: rounded up, where 1500.0 * 33.3 / 100.0 gives 499.49999….
        assert_eq!(Cents(1500).percent(33.3), Some(Cents(500)));
        assert_eq!(Cents(999).percent(0.0), Some(Cents(0)));
        assert_eq!(Cents(999).percent(100.0), Some(Cents(999)));
        assert_eq!(Cents(i64::MAX).percent(100.0), Some(Cents(i64::MAX)));
        assert_eq!(Cents(1).percent(f64::NAN), None);
        assert_eq!(Cents(1).percent(-1.0), None);
    }

    #[test]
    fn decimals_read_as_cents_of_their_currency() {
        let usd = code("USD");
        assert_eq!(Cents::from_decimal("12.50", &usd), Some(Cents(1250)));
        assert_eq!(Cents::from_decimal("12.5", &usd), Some(Cents(1250)));
        assert_eq!(Cents::from_decimal("12", &usd), Some(Cents(1200)));
        assert_eq!(Cents::from_decimal("12.500", &usd), Some(Cents(1250)));
        assert_eq!(Cents::from_decimal("-0.05", &usd), Some(Cents(-5)));
        assert_eq!(Cents::from_decimal("12.505", &usd), None);
        assert_eq!(Cents::from_decimal("", &usd), None);
        assert_eq!(Cents::from_decimal(".5", &usd), None);
        assert_eq!(Cents::from_decimal("1e3", &usd), None);
        assert_eq!(Cents::from_decimal("99999999999999999999", &usd), None);
        assert_eq!(Cents::from_decimal("500", &code("JPY")), Some(Cents(500)));
        assert_eq!(Cents::from_decimal("500.5", &code("JPY")), None);
        assert_eq!(
            Cents::from_decimal("1.250", &code("KWD")),
            Some(Cents(1250))
        );
        for cents in [0, 5, 1250, -1250] {
            assert_eq!(
                Cents::from_decimal(&Cents(cents).to_decimal(&usd), &usd),
                Some(Cents(cents))
            );
        }
    }

    fn code(text: &str) -> CurrencyCode {
        CurrencyCode::parse(text).unwrap()
    }

    #[test]
    fn cents_are_written_in_the_currencys_major_unit() {
        assert_eq!(Cents(1250).to_decimal(&code("USD")), "12.50");
        assert_eq!(Cents(5).to_decimal(&code("EUR")), "0.05");
        assert_eq!(Cents(0).to_decimal(&code("USD")), "0.00");
        assert_eq!(Cents(-1999).to_decimal(&code("CAD")), "-19.99");
        assert_eq!(Cents(500).to_decimal(&code("JPY")), "500");
        assert_eq!(Cents(1250).to_decimal(&code("KWD")), "1.250");
        assert_eq!(
            Cents(i64::MIN).to_decimal(&code("USD")),
            "-92233720368547758.08"
        );
    }
}
