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
//!    - `clicked` when `clickTracking` is not `false`, `bodyHtml` has an `href`, and `local`
//!      does not contain `noclick`; `url` is the first `href`;
//!    - `unsubscribed` when `local` contains `unsubscribe`.
//!
//! Timestamps are the transmission's creation time plus an offset per kind
//! ([`offset_ms`]), so event order is stable.

use super::state::Event;

/// `reason` of a `bounced` event.
pub const BOUNCE_REASON: &str = "550 5.1.1 mailbox unavailable (simulated)";
/// `reason` of a `suppressed` event.
pub const SUPPRESSED_REASON: &str = "recipient is on the suppression list";
/// `userAgent` of `opened` and `clicked` events.
pub const USER_AGENT: &str = "Mozilla/5.0 (compatible; MailtargetSimulator/1.0)";

/// Milliseconds after the transmission's creation at which an event of `kind` happens.
pub fn offset_ms(kind: &str) -> i64 {
    match kind {
        "suppressed" => 0,
        "delivered" | "bounced" => 1_000,
        "opened" => 2_000,
        "clicked" => 3_000,
        _ => 4_000,
    }
}

/// What the rules need to know about the transmission.
pub(crate) struct Message<'a> {
    pub friendly_from: &'a str,
    pub subject: &'a str,
    pub created_at: i64,
    pub open_tracking: bool,
    pub click_tracking: bool,
    pub first_href: Option<&'a str>,
}

/// The events of one recipient; `suppressed` says whether rule 1 applies.
pub(crate) fn events_for(message: &Message<'_>, recipient: &str, suppressed: bool) -> Vec<Event> {
    let local = local_part(recipient);
    let event = |kind: &str, reason: &str, url: &str, user_agent: &str| Event {
        kind: kind.to_string(),
        recipient: recipient.to_string(),
        friendly_from: message.friendly_from.to_string(),
        subject: message.subject.to_string(),
        reason: reason.to_string(),
        timestamp: message.created_at + offset_ms(kind),
        url: url.to_string(),
        user_agent: user_agent.to_string(),
    };
    if suppressed {
        return vec![event("suppressed", SUPPRESSED_REASON, "", "")];
    }
    if local.contains("bounce") {
        return vec![event("bounced", BOUNCE_REASON, "", "")];
    }
    let mut events = vec![event("delivered", "", "", "")];
    if message.open_tracking && !local.contains("noopen") {
        events.push(event("opened", "", "", USER_AGENT));
    }
    if let Some(url) = message.first_href.filter(|_| message.click_tracking)
        && !local.contains("noclick")
    {
        events.push(event("clicked", "", url, USER_AGENT));
    }
    if local.contains("unsubscribe") {
        events.push(event("unsubscribed", "", "", ""));
    }
    events
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

    fn message(open: bool, click: bool, href: Option<&str>) -> Message<'_> {
        Message {
            friendly_from: "Shop <shop@example.com>",
            subject: "Hi",
            created_at: 10_000,
            open_tracking: open,
            click_tracking: click,
            first_href: href,
        }
    }

    fn kinds(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.kind.as_str()).collect()
    }

    /// The rule table, recipient by recipient.
    #[test]
    fn rules_table() {
        let m = message(true, true, Some("https://example.com/a"));
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
                kinds(&events_for(&m, recipient, suppressed)),
                expected,
                "{recipient}"
            );
        }
    }

    /// Tracking switched off or no link removes opens and clicks.
    #[test]
    fn tracking_options() {
        let off = message(false, false, Some("https://x"));
        assert_eq!(kinds(&events_for(&off, "a@b.co", false)), vec!["delivered"]);
        let no_link = message(true, true, None);
        assert_eq!(
            kinds(&events_for(&no_link, "a@b.co", false)),
            vec!["delivered", "opened"]
        );
    }

    /// Fields of the generated events.
    #[test]
    fn event_fields() {
        let events = events_for(&message(true, true, Some("https://x/y")), "a@b.co", false);
        let clicked = &events[2];
        assert_eq!(clicked.url, "https://x/y");
        assert_eq!(clicked.user_agent, USER_AGENT);
        assert_eq!(clicked.timestamp, 13_000);
        assert_eq!(clicked.friendly_from, "Shop <shop@example.com>");
        let bounced = events_for(&message(true, true, None), "bounce@b.co", false);
        assert_eq!(bounced[0].reason, BOUNCE_REASON);
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
