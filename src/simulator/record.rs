//! What the simulator keeps of an accepted transmission: what analytics and the interface's
//! reads need (subject, sender, recipients, the kind of each event), never the request. Bodies,
//! attachments, headers, metadata and substitution data are checked for type and dropped.
//!
//! Every kept text has a limit (refused with 400 above it, see [`transmission`](super::transmission)),
//! so a record never holds more than [`MAX_STORED_TRANSMISSION_BYTES`], whatever the size of
//! the request. Events are kept as a kind and a recipient index; their interface form
//! ([`Event`]) is built when they are read, by the rules of [`events`](super::events).

use std::mem::size_of;

use super::events;

/// Most recipients (`to`, `cc` and `bcc` entries with an `email`, together) of one
/// transmission; more is a 400. The interface document leaves the maximum "not shown".
pub const MAX_RECIPIENTS: usize = 1000;
/// Longest `subject`, in characters; longer is a 400 (the line length limit of RFC 5322,
/// section 2.1.1).
pub const MAX_SUBJECT_CHARS: usize = 998;
/// Longest `from.name`, in characters; longer is a 400 (the limit of every name in the
/// simulator).
pub const MAX_SENDER_NAME_CHARS: usize = super::validate::MAX_NAME_CHARS;
/// Longest email address (`from.email` and each recipient), in bytes; longer is a 400 (RFC 5321,
/// section 4.5.3.1.3: a path of 256 octets including the angle brackets).
pub const MAX_ADDRESS_BYTES: usize = 254;
/// Longest link recorded for clicks, in bytes: when the first `href` of `bodyHtml` is longer,
/// the transmission is accepted and no `clicked` event is recorded (the link is not tracked).
pub const MAX_TRACKED_URL_BYTES: usize = 2048;
/// Most events of one recipient: delivered, opened, clicked and unsubscribed.
const MAX_EVENTS_PER_RECIPIENT: usize = 4;
/// Longest transmission id: `tx-` and a `u64`.
const MAX_ID_BYTES: usize = 3 + 20;

/// The most bytes one transmission's record holds ([`Transmission::stored_bytes`]), from the
/// limits above: about 310 KiB for a transmission with 1000 recipients of the longest
/// addresses, and a few hundred bytes for a typical one, whatever the size of its body,
/// attachments or metadata.
pub const MAX_STORED_TRANSMISSION_BYTES: usize = size_of::<Transmission>()
    + MAX_ID_BYTES
    + 4 * MAX_SUBJECT_CHARS
    + MAX_ADDRESS_BYTES
    + 4 * MAX_SENDER_NAME_CHARS
    + MAX_TRACKED_URL_BYTES
    + MAX_RECIPIENTS
        * (size_of::<String>()
            + MAX_ADDRESS_BYTES
            + MAX_EVENTS_PER_RECIPIENT * size_of::<RecordedEvent>());

/// An accepted transmission as the simulator keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct Transmission {
    /// `transmissionId`: `tx-<n>`, n from a counter starting at 1.
    pub id: String,
    /// Sub account of the key that sent it, or
    /// [`COMPANY_SUB_ACCOUNT_ID`](super::COMPANY_SUB_ACCOUNT_ID).
    pub sub_account_id: i64,
    /// `subject` as sent (at most [`MAX_SUBJECT_CHARS`]).
    pub subject: String,
    /// `from.email` as sent (empty when not sent; at most [`MAX_ADDRESS_BYTES`]).
    pub from_email: String,
    /// `from.name` as sent (empty when not sent; at most [`MAX_SENDER_NAME_CHARS`]).
    pub from_name: String,
    /// Addresses of to, cc and bcc recipients (in that order) that had an email, trimmed (at
    /// most [`MAX_RECIPIENTS`]).
    pub recipients: Vec<String>,
    /// `optionsAttributes.transactional` as sent (`None` when not sent).
    pub transactional: Option<bool>,
    /// Unix milliseconds at acceptance; the analytics period filter uses it.
    pub created_at: i64,
    /// The link of `clicked` events: the first `href` of `bodyHtml` when click tracking is on
    /// and the link has at most [`MAX_TRACKED_URL_BYTES`].
    pub click_url: Option<String>,
    /// The events recorded by the rules of `docs/simulator.md`, recipient by recipient.
    pub events: Vec<RecordedEvent>,
}

/// One recorded event: its kind and the index of its recipient in
/// [`Transmission::recipients`]. Its other fields follow from the transmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordedEvent {
    /// What happened.
    pub kind: EventKind,
    /// Index into [`Transmission::recipients`].
    pub recipient: u32,
}

/// The `type` of a transmission event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// `suppressed`: the recipient is on the suppression list and suppression applied.
    Suppressed,
    /// `delivered`.
    Delivered,
    /// `bounced`.
    Bounced,
    /// `opened`.
    Opened,
    /// `clicked`.
    Clicked,
    /// `unsubscribed`.
    Unsubscribed,
}

impl EventKind {
    /// The `type` field: `delivered`, `bounced`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Suppressed => "suppressed",
            EventKind::Delivered => "delivered",
            EventKind::Bounced => "bounced",
            EventKind::Opened => "opened",
            EventKind::Clicked => "clicked",
            EventKind::Unsubscribed => "unsubscribed",
        }
    }
}

/// A transmission event in the interface's form (section "Transmission event"), as
/// `GET /analytic/transmission/{id}/events` answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// `type`: `delivered`, `bounced`, `opened`, `clicked`, `unsubscribed` or `suppressed`.
    pub kind: String,
    /// The recipient's address as sent.
    pub recipient: String,
    /// `Name <email>` of the sender, or the bare email when no name was sent.
    pub friendly_from: String,
    /// The transmission's subject.
    pub subject: String,
    /// Set for `bounced` and `suppressed`, else empty.
    pub reason: String,
    /// Unix milliseconds.
    pub timestamp: i64,
    /// Set for `clicked`, else empty.
    pub url: String,
    /// Set for `opened` and `clicked`, else empty.
    pub user_agent: String,
}

impl Transmission {
    /// The bytes this record holds: its own size plus the length of every text and list it
    /// owns (allocator overhead not counted). At most [`MAX_STORED_TRANSMISSION_BYTES`].
    pub fn stored_bytes(&self) -> usize {
        let texts = self.id.len()
            + self.subject.len()
            + self.from_email.len()
            + self.from_name.len()
            + self.click_url.as_ref().map_or(0, String::len);
        let recipients: usize = self
            .recipients
            .iter()
            .map(|r| size_of::<String>() + r.len())
            .sum();
        size_of::<Self>() + texts + recipients + self.events.len() * size_of::<RecordedEvent>()
    }

    /// `friendlyFrom`: `Name <email>`, or the bare email when the name is blank.
    pub fn friendly_from(&self) -> String {
        match self.from_name.trim() {
            "" => self.from_email.clone(),
            name => format!("{name} <{}>", self.from_email),
        }
    }

    /// The events in the interface's form, in recorded order.
    pub fn events(&self) -> Vec<Event> {
        let friendly_from = self.friendly_from();
        self.events
            .iter()
            .map(|e| Event {
                kind: e.kind.as_str().to_string(),
                recipient: self
                    .recipients
                    .get(e.recipient as usize)
                    .cloned()
                    .unwrap_or_default(),
                friendly_from: friendly_from.clone(),
                subject: self.subject.clone(),
                reason: events::reason(e.kind).to_string(),
                timestamp: self.created_at + events::offset_ms(e.kind),
                url: match e.kind {
                    EventKind::Clicked => self.click_url.clone().unwrap_or_default(),
                    _ => String::new(),
                },
                user_agent: events::user_agent(e.kind).to_string(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest record the limits allow stays within the documented bound, and the bound is
    /// not loose by more than the allocator-free slack.
    #[test]
    fn largest_record_is_within_the_bound() {
        let address = format!("{}@example.org", "a".repeat(MAX_ADDRESS_BYTES - 12));
        assert_eq!(address.len(), MAX_ADDRESS_BYTES);
        let record = Transmission {
            id: format!("tx-{}", u64::MAX),
            sub_account_id: 0,
            subject: "é".repeat(MAX_SUBJECT_CHARS),
            from_email: address.clone(),
            from_name: "é".repeat(MAX_SENDER_NAME_CHARS),
            recipients: vec![address; MAX_RECIPIENTS],
            transactional: Some(true),
            created_at: 0,
            click_url: Some("u".repeat(MAX_TRACKED_URL_BYTES)),
            events: (0..MAX_RECIPIENTS as u32)
                .flat_map(|recipient| {
                    [
                        EventKind::Delivered,
                        EventKind::Opened,
                        EventKind::Clicked,
                        EventKind::Unsubscribed,
                    ]
                    .map(|kind| RecordedEvent { kind, recipient })
                })
                .collect(),
        };
        let bytes = record.stored_bytes();
        assert!(bytes <= MAX_STORED_TRANSMISSION_BYTES, "{bytes}");
        // Two-byte characters: half of the 4-byte allowance of the two texts stays unused.
        let unused = 2 * (MAX_SUBJECT_CHARS + MAX_SENDER_NAME_CHARS);
        assert_eq!(bytes + unused, MAX_STORED_TRANSMISSION_BYTES);
        const { assert!(MAX_STORED_TRANSMISSION_BYTES < 320 << 10) };
    }

    /// Events in the interface's form follow from the record.
    #[test]
    fn events_are_built_from_the_record() {
        let record = Transmission {
            id: "tx-1".into(),
            sub_account_id: 0,
            subject: "Hi".into(),
            from_email: "shop@example.com".into(),
            from_name: "Shop".into(),
            recipients: vec!["a@b.co".into()],
            transactional: None,
            created_at: 10_000,
            click_url: Some("https://x/y".into()),
            events: vec![
                RecordedEvent {
                    kind: EventKind::Delivered,
                    recipient: 0,
                },
                RecordedEvent {
                    kind: EventKind::Clicked,
                    recipient: 0,
                },
            ],
        };
        let events = record.events();
        assert_eq!(events[0].url, "");
        assert_eq!(events[0].timestamp, 11_000);
        let clicked = &events[1];
        assert_eq!(clicked.kind, "clicked");
        assert_eq!(clicked.url, "https://x/y");
        assert_eq!(clicked.user_agent, events::USER_AGENT);
        assert_eq!(clicked.timestamp, 13_000);
        assert_eq!(clicked.friendly_from, "Shop <shop@example.com>");
        assert_eq!(clicked.recipient, "a@b.co");
    }
}
