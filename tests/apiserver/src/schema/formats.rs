//! String `format`s, checked as kube-apiserver checks them for custom resources (kube-openapi's
//! default `strfmt` registry). A string failing its format gives kube-openapi's type error
//! `<path> in body must be of type <format>: "<value>"`. Unknown formats are ignored, as there.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use base64::Engine as _;
use regex::Regex;

/// Whether `value` satisfies `format`. Formats the registry does not know are accepted.
///
/// Checked: `ipv4`, `ipv6` (the address must contain `.` or `:` respectively, like Go's
/// `IsIPv4`/`IsIPv6` on top of `net.ParseIP`), `cidr`, `hostname` (RFC 1123), `email`, `uri`
/// (absolute URI or absolute path, like `url.ParseRequestURI`), `uuid`, `uuid3`, `uuid4`, `uuid5`,
/// `byte` (standard base64), `date` (`2006-01-02`), `date-time`/`datetime` (RFC 3339), `duration`
/// (Go durations such as `1h30m`, or `3 days`), `mac`, `bsonobjectid`, `hexcolor`, `rgbcolor`,
/// `ssn`. `password` and others always pass.
pub(crate) fn check_format(format: &str, value: &str) -> bool {
    match format {
        "ipv4" => value.contains('.') && value.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => value.contains(':') && value.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(value),
        "hostname" => is_hostname(value),
        "email" => EMAIL.is_match(value),
        "uri" => is_request_uri(value),
        "uuid" => UUID.is_match(value),
        "uuid3" => UUID3.is_match(value),
        "uuid4" => UUID4.is_match(value),
        "uuid5" => UUID5.is_match(value),
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(value)
            .is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d").is_ok() && value.len() == 10,
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(value).is_ok(),
        "duration" => DURATION.is_match(value),
        "mac" => MAC.is_match(value),
        "bsonobjectid" => BSON_OBJECT_ID.is_match(value),
        "hexcolor" => HEX_COLOR.is_match(value),
        "rgbcolor" => RGB_COLOR.is_match(value),
        "ssn" => SSN.is_match(value),
        _ => true,
    }
}

/// `net.ParseCIDR`: an IP address, `/`, a prefix length that fits the address family.
pub(crate) fn is_cidr(value: &str) -> bool {
    let Some((addr, prefix)) = value.split_once('/') else {
        return false;
    };
    let Ok(addr) = addr.parse::<IpAddr>() else {
        return false;
    };
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) || prefix.len() > 3 {
        return false;
    }
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    match addr {
        IpAddr::V4(_) => prefix <= 32,
        IpAddr::V6(_) => prefix <= 128,
    }
}

/// A hostname per RFC 1123: dot-separated labels of letters, digits and inner hyphens, each at most
/// 63 characters, at most 255 in all.
fn is_hostname(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 255
        && value
            .trim_end_matches('.')
            .split('.')
            .all(|label| HOSTNAME_LABEL.is_match(label))
}

/// `url.ParseRequestURI`: an absolute URI (`scheme:...`) or an absolute path, without spaces.
pub(crate) fn is_request_uri(value: &str) -> bool {
    if value.is_empty() || value.chars().any(char::is_whitespace) {
        return false;
    }
    value.starts_with('/') || url::Url::parse(value).is_ok()
}

/// Compiles one of this module's constant patterns (each is exercised by the tests below).
fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("constant format pattern compiles")
}

static HOSTNAME_LABEL: LazyLock<Regex> =
    LazyLock::new(|| regex(r"^[\p{L}\p{N}]([\p{L}\p{N}-]{0,61}[\p{L}\p{N}])?$"));
static EMAIL: LazyLock<Regex> = LazyLock::new(|| regex(r"^[^@\s<>]+@[^@\s<>]+$"));
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID3: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static DURATION: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+$|^\d+\s*(ns|us|µs|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?)$|^0$",
    )
});
static MAC: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$|^([0-9a-f]{2}[:-]){7}[0-9a-f]{2}$|^([0-9a-f]{4}\.){2}[0-9a-f]{4}$",
    )
});
static BSON_OBJECT_ID: LazyLock<Regex> = LazyLock::new(|| regex(r"^[0-9a-fA-F]{24}$"));
static HEX_COLOR: LazyLock<Regex> = LazyLock::new(|| regex(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGB_COLOR: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
    )
});
static SSN: LazyLock<Regex> = LazyLock::new(|| regex(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_accept_and_reject() {
        let cases: &[(&str, &str, bool)] = &[
            ("ipv4", "10.0.0.1", true),
            ("ipv4", "10.0.0", false),
            ("ipv4", "::1", false),
            ("ipv4", "010.0.0.1", false),
            ("ipv6", "2001:db8::1", true),
            ("ipv6", "10.0.0.1", false),
            ("cidr", "10.0.0.0/8", true),
            ("cidr", "10.0.0.0/33", false),
            ("cidr", "2001:db8::/32", true),
            ("hostname", "mail.example.com", true),
            ("hostname", "-bad.example.com", false),
            ("hostname", "under_score.com", false),
            ("email", "a@b.co", true),
            ("email", "ab.co", false),
            ("uri", "https://example.com/x", true),
            ("uri", "/path", true),
            ("uri", "not a uri", false),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", true),
            ("uuid", "xyz", false),
            ("byte", "aGVsbG8=", true),
            ("byte", "***", false),
            ("date", "2024-02-29", true),
            ("date", "2023-02-29", false),
            ("date-time", "2024-01-01T10:00:00Z", true),
            ("date-time", "yesterday", false),
            ("duration", "1h30m", true),
            ("duration", "3 days", true),
            ("duration", "soon", false),
            ("mac", "00:1a:2b:3c:4d:5e", true),
            ("mac", "00:1a", false),
            ("password", "anything", true),
            ("made-up", "anything", true),
        ];
        for (format, value, ok) in cases {
            assert_eq!(check_format(format, value), *ok, "{format} {value}");
        }
    }
}
