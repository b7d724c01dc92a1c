//! Transmission (sending email): the interface document, section "Endpoints", "Transmission".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::serde_helpers::nullable;

/// An email address with an optional display name (`from`, `to`, `replyTo`, `cc`, `bcc`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EmailAddress {
    /// Address, e.g. `user@example.com`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl EmailAddress {
    /// An address with a display name.
    pub fn new(email: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            email: Some(email.into()),
            name: Some(name.into()),
        }
    }

    /// An address without a display name.
    pub fn email(email: impl Into<String>) -> Self {
        Self {
            email: Some(email.into()),
            name: None,
        }
    }
}

/// A custom header of a transmission.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Header {
    /// Header name.
    pub name: String,
    /// Header value.
    pub value: String,
}

/// An attachment of a transmission; every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Attachment {
    /// Content id (for inline parts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_id: Option<String>,
    /// Content disposition, e.g. `attachment` or `inline`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disposition: Option<String>,
    /// File name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// MIME type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Content (its encoding is not given by the interface).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// Tracking and suppression options of a transmission.
///
/// `transactional: Some(false)` applies the suppression list; `None` leaves the field out, which
/// is not the same as `false` (the interface document, section "Transmission", rules 1 and 2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OptionsAttributes {
    /// Rewrite links to track clicks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub click_tracking: Option<bool>,
    /// Track opens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_tracking: Option<bool>,
    /// `Some(false)` applies the suppression list; `None` is left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transactional: Option<bool>,
}

/// Body of `POST /layang/transmissions` on the transmission address.
///
/// `subject`, `from` and `to` are required by the service (it answers 400 otherwise); every
/// optional field is left out when `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transmission {
    /// Subject line.
    #[serde(default)]
    pub subject: String,
    /// Sender.
    #[serde(default)]
    pub from: EmailAddress,
    /// Recipients.
    #[serde(default)]
    pub to: Vec<EmailAddress>,
    /// Reply-to addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<Vec<EmailAddress>>,
    /// Carbon copy recipients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<Vec<EmailAddress>>,
    /// Blind carbon copy recipients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bcc: Option<Vec<EmailAddress>>,
    /// Plain text body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_text: Option<String>,
    /// HTML body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_html: Option<String>,
    /// Custom headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<Header>>,
    /// Attachments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<Attachment>>,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Tracking and suppression options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options_attributes: Option<OptionsAttributes>,
    /// Template to render instead of the bodies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_id: Option<String>,
    /// Substitution data for the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub substitution_data: Option<BTreeMap<String, String>>,
    /// Envelope recipients (wire name `allRCPTto`).
    #[serde(rename = "allRCPTto", default, skip_serializing_if = "Option::is_none")]
    pub all_rcpt_to: Option<Vec<String>>,
}

/// Answer of `POST /layang/transmissions` (200): the identifier of the accepted transmission.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransmissionAccepted {
    /// Identifier to use with the analytics transmission endpoints.
    #[serde(deserialize_with = "nullable")]
    pub transmission_id: String,
}
