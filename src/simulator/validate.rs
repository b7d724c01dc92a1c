//! Validation of request fields. The interface document leaves lengths and formats "not
//! shown"; these are the simulator's documented choices.

use std::net::IpAddr;

use super::errors::{ApiError, ApiResult};

/// Longest accepted name (sub account, API key), in characters.
pub const MAX_NAME_CHARS: usize = 255;

/// A name: not empty after trimming, at most [`MAX_NAME_CHARS`] characters. Returns it
/// trimmed.
pub(crate) fn name(field: &str, value: &str) -> ApiResult<String> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(ApiError::bad_request(format!("{field} must not be empty")));
    }
    if trimmed.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::bad_request(format!(
            "{field} must be at most {MAX_NAME_CHARS} characters"
        )));
    }
    Ok(trimmed.to_string())
}

/// A free-form enumeration value (`status`, `permissionType`, `assignment`): not empty,
/// at most 64 characters. Returns it trimmed.
pub(crate) fn word(field: &str, value: &str) -> ApiResult<String> {
    let trimmed = value.trim();
    if trimmed.is_empty() || trimmed.chars().count() > 64 {
        return Err(ApiError::bad_request(format!(
            "{field} must be between 1 and 64 characters"
        )));
    }
    Ok(trimmed.to_string())
}

/// A comma separated list of IP addresses (`allowedIp`, `allowedIps`); empty is allowed and
/// means "any address". Returns the entries trimmed and joined with `,`.
pub(crate) fn ip_list(field: &str, value: &str) -> ApiResult<String> {
    let mut entries = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        entry.parse::<IpAddr>().map_err(|_| {
            ApiError::bad_request(format!(
                "{field} contains {entry:?}, which is not an IP address"
            ))
        })?;
        entries.push(entry);
    }
    Ok(entries.join(","))
}

/// A sending domain name: a DNS host name with at least two labels, each 1 to 63 characters
/// of letters, digits and inner hyphens, 253 characters at most, top-level label not all
/// digits. Returns it lower-cased.
pub(crate) fn domain(value: &str) -> ApiResult<String> {
    let lowered = value.trim().to_ascii_lowercase();
    let invalid = || ApiError::bad_request(format!("domain {value:?} is not a valid host name"));
    if lowered.is_empty() || lowered.len() > 253 || !lowered.is_ascii() {
        return Err(invalid());
    }
    let labels: Vec<&str> = lowered.split('.').collect();
    if labels.len() < 2 {
        return Err(invalid());
    }
    for label in &labels {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return Err(invalid());
        }
    }
    if labels
        .last()
        .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(invalid());
    }
    Ok(lowered)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Domain validation table.
    #[test]
    fn domains() {
        for (input, expected) in [
            ("Example.COM", Some("example.com")),
            ("mail.example.co.id", Some("mail.example.co.id")),
            ("a-b.example.com", Some("a-b.example.com")),
            ("example", None),
            ("-bad.example.com", None),
            ("bad-.example.com", None),
            ("exa_mple.com", None),
            ("example..com", None),
            ("example.com.", None),
            ("1.2.3.4", None),
            ("", None),
            ("ex ample.com", None),
            ("bücher.de", None),
        ] {
            assert_eq!(domain(input).ok().as_deref(), expected, "{input}");
        }
        let long_label = format!("{}.com", "a".repeat(64));
        assert!(domain(&long_label).is_err());
    }

    /// IP lists accept IPv4/IPv6 with spaces and reject other text.
    #[test]
    fn ip_lists() {
        assert_eq!(
            ip_list("allowedIp", " 10.0.0.1 , ::1 ").unwrap(),
            "10.0.0.1,::1"
        );
        assert_eq!(ip_list("allowedIp", "").unwrap(), "");
        let err = ip_list("allowedIp", "10.0.0.1,nope").unwrap_err();
        assert!(err.message.contains("allowedIp"));
    }

    /// Names are trimmed, not empty and bounded.
    #[test]
    fn names() {
        assert_eq!(name("name", "  a ").unwrap(), "a");
        assert!(name("name", "   ").is_err());
        assert!(name("name", &"x".repeat(256)).is_err());
        assert!(word("status", "").is_err());
    }
}
