//! Natural keys compared as the service compares them (design decision "Names"): the service
//! stores names trimmed, keeps sub account names and domains unique regardless of ASCII case,
//! and allows several API keys with one name (compared exactly). A lookup, a claim check or a
//! create recovery that compared differently would miss the service's object and create a
//! second one (a trailing space) or plan a create the service rejects (`Team` and `team`).

/// A sub account name as the service compares it: trimmed, ASCII lowercase.
pub fn sub_account(name: &str) -> String {
    name.trim().to_ascii_lowercase()
}

/// A sending domain as the service compares it: trimmed, ASCII lowercase.
pub fn domain(domain: &str) -> String {
    domain.trim().to_ascii_lowercase()
}

/// An API key name as the service compares it: trimmed, case kept.
pub fn api_key(name: &str) -> &str {
    name.trim()
}

/// True when two sub account names (or two domains) name the same object at the service.
pub fn same_ignoring_case(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// True when two API key names are the same name at the service.
pub fn same_key_name(a: &str, b: &str) -> bool {
    api_key(a) == api_key(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Surrounding spaces never count; case counts for key names only.
    #[test]
    fn compares_as_the_service() {
        assert!(same_ignoring_case(" Team", "team "));
        assert_eq!(sub_account(" Team-A "), "team-a");
        assert_eq!(domain("Mail.Example.COM"), "mail.example.com");
        assert!(same_key_name("ci ", "ci"));
        assert!(!same_key_name("CI", "ci"));
        assert!(!same_ignoring_case("team-a", "team-b"));
    }
}
