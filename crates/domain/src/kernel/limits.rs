//! What text Mercer accepts from clients, the same on both databases: no U+0000 (PostgreSQL
//! cannot store it in text, SQLite would cut strings at it), and bounded lengths, so that no
//! input can be accepted by one database and refused by the other, or accepted at the door and
//! then fail where it is stored.

use serde_json::Value;

use crate::kernel::error::FieldError;

/// Ids and platform ids, in characters.
pub(crate) const MAX_ID_CHARS: usize = 255;
/// Email addresses, in characters (RFC 5321: 64 for the local part, 255 for the domain, and @).
pub(crate) const MAX_EMAIL_CHARS: usize = 320;
/// Any other text, in bytes of UTF-8 (64 KiB).
pub(crate) const MAX_TEXT_BYTES: usize = 64 * 1024;
/// Search terms and `like`/`eq` filter values, in characters.
pub(crate) const MAX_SEARCH_CHARS: usize = 256;

/// The kind of text a JSON field holds, told by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextKind {
    Id,
    Email,
    Other,
}

impl TextKind {
    fn of_field(name: &str) -> TextKind {
        if name == "email" || name.ends_with("_email") {
            TextKind::Email
        } else if name == "id" || name.ends_with("_id") || name.ends_with("_ids") {
            TextKind::Id
        } else {
            TextKind::Other
        }
    }
}

/// Checks one text value: no NUL, within the length of its kind.
fn check_text(field: &str, text: &str, kind: TextKind) -> Result<(), FieldError> {
    if text.contains('\0') {
        return Err(FieldError::new(
            field,
            "invalid_character",
            format!("{field} must not contain the character U+0000"),
        ));
    }
    let too_long = |limit: String| {
        FieldError::new(field, "length", format!("{field} must be at most {limit}"))
    };
    match kind {
        // Counting characters only when the bytes say it may matter.
        TextKind::Id if text.len() > MAX_ID_CHARS && text.chars().count() > MAX_ID_CHARS => {
            Err(too_long(format!("{MAX_ID_CHARS} characters")))
        }
        TextKind::Email
            if text.len() > MAX_EMAIL_CHARS && text.chars().count() > MAX_EMAIL_CHARS =>
        {
            Err(too_long(format!("{MAX_EMAIL_CHARS} characters")))
        }
        _ if text.len() > MAX_TEXT_BYTES => Err(too_long(format!("{MAX_TEXT_BYTES} bytes"))),
        _ => Ok(()),
    }
}

/// Checks a query parameter or path segment: no NUL, at most `max_chars` characters.
pub fn check_parameter(name: &str, value: &str, max_chars: usize) -> Result<(), FieldError> {
    if value.contains('\0') {
        return Err(FieldError::new(
            name,
            "invalid_value",
            format!("{name} must not contain the character U+0000"),
        ));
    }
    if value.len() > max_chars && value.chars().count() > max_chars {
        return Err(FieldError::new(
            name,
            "invalid_value",
            format!("{name} must be at most {max_chars} characters"),
        ));
    }
    Ok(())
}

/// Whether `c` shows nothing where it stands: a control character, a format character
/// (zero-width space and joiners, bidirectional marks, the byte order mark, soft hyphen…),
/// another of Unicode's default-ignorable code points (variation selectors, Hangul fillers,
/// tags), or white space other than the plain space. Two codes that differ only by such a
/// character look the same to a person and may be the same to whoever compares them.
pub(crate) fn is_invisible(c: char) -> bool {
    if c == ' ' {
        return false;
    }
    c.is_control()
        || c.is_whitespace()
        || matches!(
            u32::from(c),
            0x00AD
                | 0x034F
                | 0x061C
                | 0x115F..=0x1160
                | 0x17B4..=0x17B5
                | 0x180B..=0x180F
                | 0x200B..=0x200F
                | 0x202A..=0x202E
                | 0x2060..=0x206F
                | 0x2800
                | 0x3164
                | 0xFE00..=0xFE0F
                | 0xFEFF
                | 0xFFA0
                | 0xFFF0..=0xFFFB
                | 0x1BCA0..=0x1BCA3
                | 0x1D173..=0x1D17A
                | 0xE0000..=0xE0FFF
        )
}

/// Refuses text holding an [`is_invisible`] character, naming `field` and the character.
pub(crate) fn check_visible(field: &str, text: &str) -> Result<(), FieldError> {
    match text.chars().find(|c| is_invisible(*c)) {
        None => Ok(()),
        Some(c) => Err(FieldError::new(
            field,
            "invalid_character",
            format!(
                "{field} must not contain invisible characters (it holds U+{:04X})",
                u32::from(c)
            ),
        )),
    }
}

/// Checks every string (and every object key) of a JSON body by the rules above, naming the
/// first one that breaks them by its path (`data.customer.addresses[0].city`). A body that is
/// not JSON passes: its parser reports that.
///
/// Most bodies hold no NUL and no long string; one pass over the bytes tells, so only the
/// others are parsed here.
pub fn check_json_body(body: &[u8]) -> Result<(), FieldError> {
    match scan(body) {
        Scan::Plain => Ok(()),
        Scan::LoneSurrogate => Err(FieldError::new(
            "body",
            "invalid_character",
            "the body holds a lone UTF-16 surrogate (an unpaired \\uD800-\\uDFFF escape), which is not text",
        )),
        Scan::Suspect => match serde_json::from_slice::<Value>(body) {
            Ok(value) => check_value(&value, &mut String::new(), TextKind::Other),
            Err(_) => Ok(()),
        },
    }
}

/// What one pass over a JSON text found.
#[derive(Debug, PartialEq, Eq)]
enum Scan {
    /// No escaped NUL, no string longer than the shortest limit: nothing to check.
    Plain,
    /// An escaped NUL (`\u0000`; JSON cannot hold a raw one) or a long string: the parsed
    /// body must be walked. Bytes overcount characters, so this never misses one.
    Suspect,
    /// A surrogate escape without its pair. Parsers differ on it (serde skips one in a field
    /// it ignores and refuses one in a field it reads), so it is refused whatever the field.
    LoneSurrogate,
}

/// One pass over the bytes of a JSON text, string by string: from quote to quote and escape to
/// escape by `memchr` (SIMD), rather than a byte at a time, as this runs on every request body.
fn scan(body: &[u8]) -> Scan {
    let mut suspect = false;
    // Set after a high surrogate escape: the next character must be a low one.
    let mut awaiting_low = false;
    let mut index = 0;
    // Outside strings: to the next opening quote.
    while let Some(offset) = memchr::memchr(b'"', &body[index..]) {
        index += offset + 1;
        // Inside a string: its length, in bytes, an escape counting one.
        let mut length = 0usize;
        loop {
            // Anything but an escape after a high surrogate leaves it alone.
            if awaiting_low && body.get(index) != Some(&b'\\') {
                return Scan::LoneSurrogate;
            }
            let Some(offset) = memchr::memchr2(b'"', b'\\', &body[index..]) else {
                suspect |= length + (body.len() - index) > MAX_ID_CHARS;
                return if suspect { Scan::Suspect } else { Scan::Plain };
            };
            length += offset;
            index += offset;
            if body[index] == b'"' {
                suspect |= length > MAX_ID_CHARS;
                index += 1;
                break;
            }
            // An escape: the backslash, then the character it escapes.
            let Some(&escape) = body.get(index + 1) else {
                suspect |= length > MAX_ID_CHARS;
                return if awaiting_low {
                    Scan::LoneSurrogate
                } else if suspect {
                    Scan::Suspect
                } else {
                    Scan::Plain
                };
            };
            index += 2;
            let unit = (escape == b'u')
                .then(|| body.get(index..index + 4))
                .flatten()
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u16::from_str_radix(hex, 16).ok());
            let is_low = unit.is_some_and(|unit| (0xDC00..=0xDFFF).contains(&unit));
            if awaiting_low != is_low {
                return Scan::LoneSurrogate;
            }
            if let Some(unit) = unit {
                index += 4;
                suspect |= unit == 0;
                awaiting_low = (0xD800..=0xDBFF).contains(&unit);
            }
            length += 1;
        }
    }
    if suspect { Scan::Suspect } else { Scan::Plain }
}

fn check_value(value: &Value, path: &mut String, kind: TextKind) -> Result<(), FieldError> {
    match value {
        Value::String(text) => check_text(path_or_body(path), text, kind),
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let length = path.len();
                path.push_str(&format!("[{index}]"));
                check_value(item, path, kind)?;
                path.truncate(length);
            }
            Ok(())
        }
        Value::Object(fields) => {
            for (name, item) in fields {
                let length = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(name);
                check_text(path, name, TextKind::Id).map_err(|problem| FieldError {
                    message: format!("the field name at {}", problem.message),
                    ..problem
                })?;
                check_value(item, path, TextKind::of_field(name))?;
                path.truncate(length);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn path_or_body(path: &str) -> &str {
    if path.is_empty() { "body" } else { path }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(value: Value) -> Result<(), FieldError> {
        check_json_body(value.to_string().as_bytes())
    }

    #[test]
    fn invisible_characters_are_found_and_visible_text_passes() {
        for text in [
            "CA\u{200B}NON",
            "CANON\u{FEFF}",
            "\u{2060}CANON",
            "CA\u{00AD}NON",
            "CA\u{200D}NON",
            "CANON\u{FE0F}",
            "CA\u{00A0}NON",
            "CA\tNON",
            "CA\u{202E}NON",
            "CA\u{E0041}NON",
        ] {
            let problem = check_visible("code", text).unwrap_err();
            assert_eq!(
                (problem.field.as_str(), problem.code),
                ("code", "invalid_character")
            );
        }
        for text in ["CANON", "SUMMER SALE", "ÉTÉ-10", "夏10", "10%OFF"] {
            assert_eq!(check_visible("code", text), Ok(()), "{text}");
        }
    }

    #[test]
    fn a_nul_anywhere_is_refused_with_its_path() {
        let problem = check(json!({"data": {"customer": {"email": "a\u{0}b@x"}}})).unwrap_err();
        assert_eq!(problem.field, "data.customer.email");
        assert_eq!(problem.code, "invalid_character");
        let problem = check(json!({"data": {"customer": {"addresses": [{}, {"city": "\u{0}"}]}}}))
            .unwrap_err();
        assert_eq!(problem.field, "data.customer.addresses[1].city");
        let problem = check(json!({"tags": ["ok", "b\u{0}d"]})).unwrap_err();
        assert_eq!(problem.field, "tags[1]");
        let problem = check(json!({"attributes": {"k\u{0}": "v"}})).unwrap_err();
        assert_eq!(problem.field, "attributes.k\u{0}");
    }

    #[test]
    fn lengths_are_bounded_by_the_kind_of_field() {
        let id = "9".repeat(MAX_ID_CHARS);
        assert!(check(json!({"platform_id": id})).is_ok());
        let problem = check(json!({"data": {"platform_id": format!("{id}9")}})).unwrap_err();
        assert_eq!(
            (problem.field.as_str(), problem.code),
            ("data.platform_id", "length")
        );
        assert!(check(json!({"platform_customer_id": format!("{id}9")})).is_err());
        // Characters, not bytes: 255 two-byte characters are a valid id.
        assert!(check(json!({"platform_id": "é".repeat(MAX_ID_CHARS)})).is_ok());

        let email = format!("{}@x.test", "a".repeat(MAX_EMAIL_CHARS - 7));
        assert!(check(json!({"email": email})).is_ok());
        assert!(check(json!({"email": format!("a{email}")})).is_err());

        let note = "n".repeat(MAX_TEXT_BYTES);
        assert!(check(json!({"note": note})).is_ok());
        assert!(check(json!({"note": format!("{note}n")})).is_err());
        assert!(check(json!({"k".repeat(MAX_ID_CHARS + 1): 1})).is_err());
    }

    #[test]
    fn ordinary_bodies_are_not_parsed_again() {
        assert_eq!(
            scan(br#"{"data":{"customer":{"email":"a@b"}}}"#),
            Scan::Plain
        );
        assert_eq!(
            scan(br#"{"a":"\\u0000"}"#),
            Scan::Plain,
            "an escaped backslash"
        );
        assert_eq!(scan(br#"{"a":"x\u0000"}"#), Scan::Suspect);
        let long = format!(r#"{{"a":"{}"}}"#, r#"x\""#.repeat(200));
        assert_eq!(
            scan(long.as_bytes()),
            Scan::Suspect,
            "escaped quotes do not end a string"
        );
        assert_eq!(
            scan(br#"{"a":"\ud83d\ude00 \u00e9\n"}"#),
            Scan::Plain,
            "a pair"
        );
    }

    #[test]
    fn lone_surrogates_are_refused_wherever_they_are() {
        for body in [
            r#"{"ignored":"\ud800"}"#,
            r#"{"a":"\ud800x"}"#,
            r#"{"a":"\ud800\n"}"#,
            r#"{"a":"\ud800\ud800"}"#,
            r#"{"a":"\udc00"}"#,
            r#"{"a":"x\uDFFF"}"#,
            r#"{"\ud800":1}"#,
        ] {
            let problem = check_json_body(body.as_bytes()).unwrap_err();
            assert_eq!(
                (problem.field.as_str(), problem.code),
                ("body", "invalid_character"),
                "{body}"
            );
        }
    }

    /// The byte-at-a-time scan `scan` replaced, as the reference it must agree with.
    fn bytewise_scan(body: &[u8]) -> Scan {
        let mut in_string = false;
        let mut escaped = false;
        let mut length = 0usize;
        let mut suspect = false;
        // Set after a high surrogate escape: the next character must be a low one.
        let mut awaiting_low = false;
        let mut index = 0;
        while index < body.len() {
            let byte = body[index];
            index += 1;
            if !in_string {
                if byte == b'"' {
                    in_string = true;
                    length = 0;
                }
                continue;
            }
            if escaped {
                escaped = false;
                let unit = (byte == b'u')
                    .then(|| body.get(index..index + 4))
                    .flatten()
                    .and_then(|hex| std::str::from_utf8(hex).ok())
                    .and_then(|hex| u16::from_str_radix(hex, 16).ok());
                let is_low = unit.is_some_and(|unit| (0xDC00..=0xDFFF).contains(&unit));
                if awaiting_low != is_low {
                    return Scan::LoneSurrogate;
                }
                if let Some(unit) = unit {
                    index += 4;
                    suspect |= unit == 0;
                    awaiting_low = (0xD800..=0xDBFF).contains(&unit);
                }
            } else if awaiting_low {
                // Anything but an escape after a high surrogate leaves it alone.
                if byte != b'\\' {
                    return Scan::LoneSurrogate;
                }
                escaped = true;
                continue;
            } else if byte == b'\\' {
                escaped = true;
                continue;
            } else if byte == b'"' {
                in_string = false;
                continue;
            }
            length += 1;
            suspect |= length > MAX_ID_CHARS;
        }
        if awaiting_low {
            Scan::LoneSurrogate
        } else if suspect {
            Scan::Suspect
        } else {
            Scan::Plain
        }
    }

    proptest::proptest! {
        /// Texts made of the characters that steer the scan: quotes, escapes, surrogate and NUL
        /// escapes' hex digits, long runs.
        #[test]
        fn the_scan_agrees_with_the_bytewise_one(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "\"", "\\", "\\u", "\\\"", "u", "D800", "d83d", "DC00", "dfff", "0000",
                    "00e9", "x", "\\n", "12", "{", ":", ",", "é", LONG_RUN.as_str(),
                ]),
                0..40,
            )
        ) {
            let body = parts.concat();
            proptest::prop_assert_eq!(scan(body.as_bytes()), bytewise_scan(body.as_bytes()), "{}", body);
        }
    }

    static LONG_RUN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| "y".repeat(120));

    #[test]
    fn the_scan_agrees_with_the_bytewise_one_at_the_edges() {
        for body in [
            "",
            "\"",
            "\"\\",
            "\"\\u",
            "\"\\ud800",
            "\"\\ud800\\",
            "\"\\ud800\\u",
            "\"\\ud800\\udc00",
            "\"\\u12\"",
            "\\u0000",
            "\"\\u0000",
        ] {
            assert_eq!(
                scan(body.as_bytes()),
                bytewise_scan(body.as_bytes()),
                "{body}"
            );
        }
        for length in [MAX_ID_CHARS - 1, MAX_ID_CHARS, MAX_ID_CHARS + 1] {
            for body in [
                format!("{{\"a\":\"{}\"}}", "x".repeat(length)),
                format!("{{\"a\":\"{}", "x".repeat(length)),
                format!("{{\"a\":\"{}\\n\"}}", "x".repeat(length - 1)),
                format!("{{\"a\":\"{}\\", "x".repeat(length)),
            ] {
                assert_eq!(
                    scan(body.as_bytes()),
                    bytewise_scan(body.as_bytes()),
                    "{body}"
                );
            }
        }
    }

    #[test]
    fn bodies_that_are_not_json_are_left_to_their_parser() {
        assert!(check_json_body(b"{\"a\":\"\\u0000").is_ok());
    }

    #[test]
    fn parameters_are_checked_for_nul_and_length() {
        assert!(check_parameter("search", "ada", MAX_SEARCH_CHARS).is_ok());
        assert!(check_parameter("search", "\0", MAX_SEARCH_CHARS).is_err());
        assert!(check_parameter("search", &"a".repeat(257), MAX_SEARCH_CHARS).is_err());
        assert!(check_parameter("search", &"é".repeat(256), MAX_SEARCH_CHARS).is_ok());
    }
}
