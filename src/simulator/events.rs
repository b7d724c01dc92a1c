//! The deterministic rules that turn one recipient of a transmission into events.
//!
//! The interface document (section "Events") leaves the emission rules open; these are the
//! simulator's. `local` is the lower-cased part of the address before the last `@`.
//!
//! 1. Suppression applied (`optionsAttributes.transactional == false`) and the address on
//!    the suppression list: one `suppressed` event (reason set), nothing else.
//! 2. `local` contains `bounce`: one `bounced` event (reason set), nothing else.
//! 3. Otherwise `delivered`, then:
//!    - `opened` unless `openTracking` is `false` or `local` contains `noopen`;
//!    - `clicked` when `clickTracking` is not `false`, `bodyHtml` has an `href` of at most
//!      [`MAX_TRACKED_URL_BYTES`](super::record::MAX_TRACKED_URL_BYTES) bytes (the first
//!      `href`), and `local` does not contain `noclick`; `url` is that `href`;
//!    - `unsubscribed` when `local` contains `unsubscribe`.
//!
//! Timestamps are the transmission's creation time plus an offset per kind
//! ([`offset_ms`]), so event order is stable.

use super::record::EventKind;

/// `reason` of a `bounced` event.
pub const BOUNCE_REASON: &str = "550 5.1.1 mailbox unavailable (simulated)";
/// `reason` of a `suppressed` event.
pub const SUPPRESSED_REASON: &str = "recipient is on the suppression list";
/// `userAgent` of `opened` and `clicked` events.
pub const USER_AGENT: &str = "Mozilla/5.0 (compatible; MailtargetSimulator/1.0)";

/// Milliseconds after the transmission's creation at which an event of `kind` happens.
pub fn offset_ms(kind: EventKind) -> i64 {
    match kind {
        EventKind::Suppressed => 0,
        EventKind::Delivered | EventKind::Bounced => 1_000,
        EventKind::Opened => 2_000,
        EventKind::Clicked => 3_000,
        EventKind::Unsubscribed => 4_000,
    }
}

/// `reason` of an event of `kind`: set for bounced and suppressed, else empty.
pub fn reason(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Bounced => BOUNCE_REASON,
        EventKind::Suppressed => SUPPRESSED_REASON,
        _ => "",
    }
}

/// `userAgent` of an event of `kind`: set for opened and clicked, else empty.
pub fn user_agent(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Opened | EventKind::Clicked => USER_AGENT,
        _ => "",
    }
}

/// What the rules need to know about the transmission.
pub(crate) struct Tracking {
    /// `optionsAttributes.openTracking` is not `false`.
    pub open: bool,
    /// Clicks are recorded: click tracking is not off and the body has a trackable link.
    pub click: bool,
}

/// The kinds of the events of one recipient, in order; `suppressed` says whether rule 1
/// applies.
pub(crate) fn kinds_for(tracking: &Tracking, recipient: &str, suppressed: bool) -> Vec<EventKind> {
    let local = local_part(recipient);
    if suppressed {
        return vec![EventKind::Suppressed];
    }
    if local.contains("bounce") {
        return vec![EventKind::Bounced];
    }
    let mut kinds = vec![EventKind::Delivered];
    if tracking.open && !local.contains("noopen") {
        kinds.push(EventKind::Opened);
    }
    if tracking.click && !local.contains("noclick") {
        kinds.push(EventKind::Clicked);
    }
    if local.contains("unsubscribe") {
        kinds.push(EventKind::Unsubscribed);
    }
    kinds
}

/// The lower-cased part before the last `@` (the whole address when there is none).
fn local_part(address: &str) -> String {
    address
        .rsplit_once('@')
        .map_or(address, |(local, _)| local)
        .to_lowercase()
}

/// The value of the first `href` attribute in `html`, quoted or not; `None` when absent or
/// empty.
pub(crate) fn first_href(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find("href") {
        let start = from + found;
        from = start + 4;
        // Must be a whole attribute name: preceded by whitespace, `<` or a quote.
        let before_ok = start == 0
            || lower[..start]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_whitespace() || c == '<' || c == '"' || c == '\'');
        let rest = html[from..].trim_start();
        let Some(rest) = rest.strip_prefix('=').filter(|_| before_ok) else {
            continue;
        };
        let rest = rest.trim_start();
        let value = match rest.chars().next() {
            Some(quote @ ('"' | '\'')) => rest[1..].split(quote).next().unwrap_or(""),
            _ => rest
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()
                .unwrap_or(""),
        };
        if !value.is_empty() {
            return Some(value.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracking(open: bool, click: bool) -> Tracking {
        Tracking { open, click }
    }

    fn kinds(kinds: &[EventKind]) -> Vec<&str> {
        kinds.iter().map(|k| k.as_str()).collect()
    }

    /// The rule table, recipient by recipient.
    #[test]
    fn rules_table() {
        let t = tracking(true, true);
        for (recipient, suppressed, expected) in [
            (
                "ann@example.com",
                false,
                vec!["delivered", "opened", "clicked"],
            ),
            ("ann@example.com", true, vec!["suppressed"]),
            ("Bounce.Me@example.com", false, vec!["bounced"]),
            ("noopen@example.com", false, vec!["delivered", "clicked"]),
            ("noclick@example.com", false, vec!["delivered", "opened"]),
            (
                "unsubscribe@example.com",
                false,
                vec!["delivered", "opened", "clicked", "unsubscribed"],
            ),
        ] {
            assert_eq!(
                kinds(&kinds_for(&t, recipient, suppressed)),
                expected,
                "{recipient}"
            );
        }
    }

    /// Tracking switched off or no link removes opens and clicks.
    #[test]
    fn tracking_options() {
        let off = tracking(false, false);
        assert_eq!(kinds(&kinds_for(&off, "a@b.co", false)), vec!["delivered"]);
        let no_link = tracking(true, false);
        assert_eq!(
            kinds(&kinds_for(&no_link, "a@b.co", false)),
            vec!["delivered", "opened"]
        );
    }

    /// Reasons, user agents and offsets per kind.
    #[test]
    fn fields_per_kind() {
        assert_eq!(reason(EventKind::Bounced), BOUNCE_REASON);
        assert_eq!(reason(EventKind::Suppressed), SUPPRESSED_REASON);
        assert_eq!(reason(EventKind::Delivered), "");
        assert_eq!(user_agent(EventKind::Clicked), USER_AGENT);
        assert_eq!(user_agent(EventKind::Bounced), "");
        assert_eq!(offset_ms(EventKind::Clicked), 3_000);
    }

    /// href extraction handles quotes, case and look-alike attributes.
    #[test]
    fn href_table() {
        for (html, expected) in [
            (
                r#"<a href="https://a.example/x">x</a>"#,
                Some("https://a.example/x"),
            ),
            ("<A HREF='https://b.example'>", Some("https://b.example")),
            (
                "<a href = https://c.example>c</a>",
                Some("https://c.example"),
            ),
            (r#"<a data-href="no" href="yes">"#, Some("yes")),
            ("<p>no links</p>", None),
            (r#"<a href="">"#, None),
        ] {
            assert_eq!(first_href(html).as_deref(), expected, "{html}");
        }
    }
}
