//! Parsing of the `Retry-After` header (RFC 9110, section 10.2.3): either a number of seconds
//! or an HTTP date.

use std::time::{Duration, SystemTime};

/// Parses a `Retry-After` value relative to `now`.
///
/// Accepts delay-seconds (`"120"`, and leniently `"1.5"`) and an HTTP date
/// (`"Wed, 21 Oct 2015 07:28:00 GMT"`); a date in the past gives zero. Anything else (negative,
/// not finite, garbage) gives `None`.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Parses the `Retry-After` header of an answer, if present and valid.
pub(crate) fn from_headers(headers: &http::HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(value, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds, fractional seconds, dates in the future and past, and garbage.
    #[test]
    fn parses_both_forms() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        let cases: [(&str, Option<Duration>); 9] = [
            ("0", Some(Duration::ZERO)),
            ("3", Some(Duration::from_secs(3))),
            (" 120 ", Some(Duration::from_secs(120))),
            ("1.5", Some(Duration::from_millis(1500))),
            (
                "Wed, 21 Oct 2015 07:28:10 GMT",
                Some(Duration::from_secs(10)),
            ),
            ("Wed, 21 Oct 2015 07:27:00 GMT", Some(Duration::ZERO)),
            ("-1", None),
            ("NaN", None),
            ("soon", None),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_retry_after(value, now), expected, "{value:?}");
        }
    }

    /// A missing or non-ASCII header gives no delay.
    #[test]
    fn header_lookup() {
        let now = SystemTime::UNIX_EPOCH;
        let mut headers = http::HeaderMap::new();
        assert_eq!(from_headers(&headers, now), None);
        headers.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("7"),
        );
        assert_eq!(from_headers(&headers, now), Some(Duration::from_secs(7)));
        headers.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_bytes(b"\xff").unwrap(),
        );
        assert_eq!(from_headers(&headers, now), None);
    }
}
