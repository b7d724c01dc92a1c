//! Analytics: the interface document, sections "Resources and their fields" (Analytics
//! summary, Transmission status, Transmission event) and "Endpoints", "Analytics".

use serde::{Deserialize, Serialize};

use super::serde_helpers::nullable;

/// Query of `GET /analytic/summary`. `from` and `to` are required (their format is not given by
/// the interface and is passed through); `None` fields are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnalyticsQuery {
    /// Start of the period.
    pub from: String,
    /// End of the period.
    pub to: String,
    /// Report on the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    /// Sub account of the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_sub_account_id: Option<i64>,
}

/// Query of `GET /analytic/summary/breakdown`: [`AnalyticsQuery`] plus `groupBy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BreakdownQuery {
    /// Start of the period.
    pub from: String,
    /// End of the period.
    pub to: String,
    /// Grouping (allowed values are not given by the interface).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_by: Option<String>,
    /// Report on the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    /// Sub account of the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_sub_account_id: Option<i64>,
}

/// The period an analytics summary covers, as given in the query.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnalyticsPeriod {
    /// Start of the period.
    #[serde(default, deserialize_with = "nullable")]
    pub from: String,
    /// End of the period.
    #[serde(default, deserialize_with = "nullable")]
    pub to: String,
}

/// Aggregate delivery statistics (`GET /analytic/summary`, and each element of
/// `GET /analytic/summary/breakdown`). Rates are numbers as sent by the service.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnalyticsSummary {
    /// Name of the group (or of the summary).
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Covered period.
    #[serde(default, deserialize_with = "nullable")]
    pub period: AnalyticsPeriod,
    /// Messages sent.
    #[serde(default, deserialize_with = "nullable")]
    pub sent: i64,
    /// Messages delivered.
    #[serde(default, deserialize_with = "nullable")]
    pub delivered: i64,
    /// Messages opened.
    #[serde(default, deserialize_with = "nullable")]
    pub opened: i64,
    /// Messages with a clicked link.
    #[serde(default, deserialize_with = "nullable")]
    pub clicked: i64,
    /// Messages bounced.
    #[serde(default, deserialize_with = "nullable")]
    pub bounced: i64,
    /// Recipients that unsubscribed.
    #[serde(default, deserialize_with = "nullable")]
    pub unsubscribed: i64,
    /// Delivery rate.
    #[serde(default, deserialize_with = "nullable")]
    pub delivery_rate: f64,
    /// Open rate.
    #[serde(default, deserialize_with = "nullable")]
    pub open_rate: f64,
    /// Click rate.
    #[serde(default, deserialize_with = "nullable")]
    pub click_rate: f64,
    /// Bounce rate.
    #[serde(default, deserialize_with = "nullable")]
    pub bounce_rate: f64,
    /// Unsubscribe rate.
    #[serde(default, deserialize_with = "nullable")]
    pub unsubscribe_rate: f64,
}

/// Sender of a transmission as reported by `GET /analytic/transmission/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransmissionSender {
    /// Sender address.
    #[serde(default, deserialize_with = "nullable")]
    pub email: String,
    /// Sender display name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
}

/// Per-transmission counters of `GET /analytic/transmission/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransmissionStats {
    /// Messages delivered.
    #[serde(default, deserialize_with = "nullable")]
    pub delivered: i64,
    /// Messages opened.
    #[serde(default, deserialize_with = "nullable")]
    pub opened: i64,
    /// Messages with a clicked link.
    #[serde(default, deserialize_with = "nullable")]
    pub clicked: i64,
    /// Messages bounced.
    #[serde(default, deserialize_with = "nullable")]
    pub bounced: i64,
    /// Recipients that unsubscribed.
    #[serde(default, deserialize_with = "nullable")]
    pub unsubscribed: i64,
}

/// Answer of `GET /analytic/transmission/{id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransmissionStatus {
    /// Identifier of the transmission.
    #[serde(default, deserialize_with = "nullable")]
    pub transmission_id: String,
    /// Subject line.
    #[serde(default, deserialize_with = "nullable")]
    pub subject: String,
    /// Status (free string).
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
    /// Creation time (opaque integer).
    #[serde(default, deserialize_with = "nullable")]
    pub created_at: i64,
    /// Number of recipients.
    #[serde(default, deserialize_with = "nullable")]
    pub recipient_count: i64,
    /// Sender.
    #[serde(default, deserialize_with = "nullable")]
    pub from: TransmissionSender,
    /// Counters.
    #[serde(default, deserialize_with = "nullable")]
    pub stats: TransmissionStats,
}

/// One event of a transmission (`GET /analytic/transmission/{id}/events`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransmissionEvent {
    /// Kind of event (wire name `type`; allowed values are not given by the interface).
    #[serde(rename = "type", default, deserialize_with = "nullable")]
    pub event_type: String,
    /// Recipient address.
    #[serde(default, deserialize_with = "nullable")]
    pub recipient: String,
    /// Sender as shown to the recipient.
    #[serde(default, deserialize_with = "nullable")]
    pub friendly_from: String,
    /// Subject line.
    #[serde(default, deserialize_with = "nullable")]
    pub subject: String,
    /// Reason (for bounces and the like).
    #[serde(default, deserialize_with = "nullable")]
    pub reason: String,
    /// Time of the event (opaque integer).
    #[serde(default, deserialize_with = "nullable")]
    pub timestamp: i64,
    /// Clicked URL (click events).
    #[serde(default, deserialize_with = "nullable")]
    pub url: String,
    /// User agent of the reader (open and click events).
    #[serde(default, deserialize_with = "nullable")]
    pub user_agent: String,
}

/// Answer of `GET /analytic/transmission/{id}/events`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransmissionEvents {
    /// Events in the order the service gives them.
    #[serde(default, deserialize_with = "nullable")]
    pub events: Vec<TransmissionEvent>,
}
