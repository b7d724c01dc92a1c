//! Analytics endpoints (the interface document, section "Analytics").
//!
//! Decisions where the interface is silent:
//! - `from` and `to` are required (400 when missing or unparseable) and accept `YYYY-MM-DD`
//!   (a whole UTC day: `from` at its start, `to` at its end, both inclusive) or RFC 3339
//!   timestamps. `from` after `to` is a 400. The `period` echoes the strings as sent.
//! - A transmission counts when it was created within the period; its recorded events are
//!   aggregated. `sent` = recipients not suppressed; the rates are fractions of `sent`
//!   (`delivered / sent`, ...; 0 when nothing was sent).
//! - `sandbox` must be a boolean and is otherwise ignored (the simulator has no sandbox);
//!   `sandboxSubAccountId` (integer) limits the data to that sub account.
//! - `groupBy`: `day` (default; `name` is the UTC date `YYYY-MM-DD`, only days with
//!   transmissions, ascending) or `subAccount` (`name` is the sub account name, the company's
//!   own traffic under the company name; ordered by sub account id).
//! - Summary `name` is `summary`.
//! - Unknown transmission id on `GET /analytic/transmission/{id}` and `.../events`: the
//!   interface lists only 401 and 500 there, so the answer is 500 with `error` `NOT_FOUND`.
//! - A sub account's key sees only its own transmissions.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, NaiveDate, NaiveTime, TimeZone, Utc};
use serde::Serialize;

use super::auth::Caller;
use super::errors::{self, ApiError, ApiResult};
use super::paging::{PathText, QueryParams};
use super::record::{EventKind, RecordedEvent, Transmission};
use super::server::Shared;
use super::state::{COMPANY_NAME, COMPANY_SUB_ACCOUNT_ID, Store};

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/analytic/summary", get(summary))
        .route("/analytic/summary/breakdown", get(breakdown))
        .route("/analytic/transmission/{id}", get(transmission_status))
        .route(
            "/analytic/transmission/{id}/events",
            get(transmission_events),
        )
}

#[derive(Serialize, Clone, Debug, PartialEq)]
struct Period {
    from: String,
    to: String,
}

#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Summary {
    name: String,
    period: Period,
    sent: u64,
    delivered: u64,
    opened: u64,
    clicked: u64,
    bounced: u64,
    unsubscribed: u64,
    delivery_rate: f64,
    open_rate: f64,
    click_rate: f64,
    bounce_rate: f64,
    unsubscribe_rate: f64,
}

#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
struct Counts {
    sent: u64,
    delivered: u64,
    opened: u64,
    clicked: u64,
    bounced: u64,
    unsubscribed: u64,
}

impl Counts {
    fn add_events(&mut self, events: &[RecordedEvent]) {
        for event in events {
            match event.kind {
                EventKind::Delivered => {
                    self.delivered += 1;
                    self.sent += 1;
                }
                EventKind::Bounced => {
                    self.bounced += 1;
                    self.sent += 1;
                }
                EventKind::Opened => self.opened += 1,
                EventKind::Clicked => self.clicked += 1,
                EventKind::Unsubscribed => self.unsubscribed += 1,
                EventKind::Suppressed => {}
            }
        }
    }

    fn summary(self, name: String, period: Period) -> Summary {
        let rate = |n: u64| {
            if self.sent == 0 {
                0.0
            } else {
                n as f64 / self.sent as f64
            }
        };
        Summary {
            name,
            period,
            sent: self.sent,
            delivered: self.delivered,
            opened: self.opened,
            clicked: self.clicked,
            bounced: self.bounced,
            unsubscribed: self.unsubscribed,
            delivery_rate: rate(self.delivered),
            open_rate: rate(self.opened),
            click_rate: rate(self.clicked),
            bounce_rate: rate(self.bounced),
            unsubscribe_rate: rate(self.unsubscribed),
        }
    }
}

/// Which end of the period a date belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    From,
    To,
}

/// Parses a period bound into Unix milliseconds: `YYYY-MM-DD` (start or end of that UTC day)
/// or RFC 3339.
fn parse_bound(name: &str, raw: &str, end: End) -> ApiResult<i64> {
    let raw = raw.trim();
    if let Ok(date) = NaiveDate::parse_from_str(raw, "%Y-%m-%d") {
        let time = match end {
            End::From => NaiveTime::MIN,
            End::To => NaiveTime::from_hms_milli_opt(23, 59, 59, 999).unwrap_or(NaiveTime::MIN),
        };
        return Ok(Utc
            .from_utc_datetime(&date.and_time(time))
            .timestamp_millis());
    }
    DateTime::parse_from_rfc3339(raw)
        .map(|t| t.timestamp_millis())
        .map_err(|_| {
            ApiError::bad_request(format!(
                "query parameter {name} must be a date (YYYY-MM-DD) or an RFC 3339 timestamp"
            ))
        })
}

/// The validated filter of a summary or breakdown request.
struct Filter {
    period: Period,
    from_ms: i64,
    to_ms: i64,
    sub_account_id: Option<i64>,
}

fn parse_filter(query: &QueryParams) -> ApiResult<Filter> {
    let required = |name: &str| {
        query
            .filter(name)
            .map(str::to_string)
            .ok_or_else(|| ApiError::bad_request(format!("query parameter {name} is required")))
    };
    let from = required("from")?;
    let to = required("to")?;
    let from_ms = parse_bound("from", &from, End::From)?;
    let to_ms = parse_bound("to", &to, End::To)?;
    if from_ms > to_ms {
        return Err(ApiError::bad_request("from must not be after to"));
    }
    query.boolean("sandbox")?;
    let sub_account_id = query.integer("sandboxSubAccountId")?;
    Ok(Filter {
        period: Period { from, to },
        from_ms,
        to_ms,
        sub_account_id,
    })
}

fn selected<'a>(
    store: &'a Store,
    caller: Caller,
    filter: &'a Filter,
) -> impl Iterator<Item = &'a Transmission> {
    store.state.transmissions.iter().filter(move |t| {
        caller.scope.sees(t.sub_account_id)
            && filter
                .sub_account_id
                .is_none_or(|id| t.sub_account_id == id)
            && (filter.from_ms..=filter.to_ms).contains(&t.created_at)
    })
}

async fn summary(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Summary>> {
    let filter = parse_filter(&QueryParams::parse(raw.as_deref()))?;
    let store = shared.store();
    let mut counts = Counts::default();
    for transmission in selected(&store, caller, &filter) {
        counts.add_events(&transmission.events);
    }
    Ok(Json(
        counts.summary("summary".into(), filter.period.clone()),
    ))
}

async fn breakdown(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<Vec<Summary>>> {
    let query = QueryParams::parse(raw.as_deref());
    let filter = parse_filter(&query)?;
    let by_sub_account = match query.filter("groupBy") {
        None | Some("day") => false,
        Some("subAccount") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "groupBy {other:?} is not supported; use day or subAccount"
            )));
        }
    };
    let store = shared.store();
    let mut groups: BTreeMap<(i64, String), Counts> = BTreeMap::new();
    for transmission in selected(&store, caller, &filter) {
        let key = if by_sub_account {
            (transmission.sub_account_id, String::new())
        } else {
            (0, day_of(transmission.created_at))
        };
        groups
            .entry(key)
            .or_default()
            .add_events(&transmission.events);
    }
    let summaries = groups
        .into_iter()
        .map(|((sub_account_id, day), counts)| {
            if by_sub_account {
                let name = if sub_account_id == COMPANY_SUB_ACCOUNT_ID {
                    COMPANY_NAME.to_string()
                } else {
                    store.sub_account_name(sub_account_id)
                };
                counts.summary(name, filter.period.clone())
            } else {
                let period = Period {
                    from: day.clone(),
                    to: day.clone(),
                };
                counts.summary(day, period)
            }
        })
        .collect();
    Ok(Json(summaries))
}

fn day_of(unix_ms: i64) -> String {
    DateTime::from_timestamp_millis(unix_ms)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TransmissionStatus {
    transmission_id: String,
    subject: String,
    status: &'static str,
    created_at: i64,
    recipient_count: usize,
    from: FromView,
    stats: Stats,
}

#[derive(Serialize)]
struct FromView {
    email: String,
    name: String,
}

#[derive(Serialize)]
struct Stats {
    delivered: u64,
    opened: u64,
    clicked: u64,
    bounced: u64,
    unsubscribed: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventView {
    #[serde(rename = "type")]
    kind: String,
    recipient: String,
    friendly_from: String,
    subject: String,
    reason: String,
    timestamp: i64,
    url: String,
    user_agent: String,
}

#[derive(Serialize)]
struct EventList {
    events: Vec<EventView>,
}

fn find_transmission(store: &Store, caller: Caller, id: &str) -> ApiResult<Transmission> {
    store
        .state
        .transmissions
        .iter()
        .find(|t| t.id == id && caller.scope.sees(t.sub_account_id))
        .cloned()
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                errors::NOT_FOUND,
                format!("transmission {id} not found"),
            )
        })
}

async fn transmission_status(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathText(id): PathText,
) -> ApiResult<Json<TransmissionStatus>> {
    let transmission = find_transmission(&shared.store(), caller, &id)?;
    let mut counts = Counts::default();
    counts.add_events(&transmission.events);
    Ok(Json(TransmissionStatus {
        transmission_id: transmission.id,
        subject: transmission.subject,
        status: "completed",
        created_at: transmission.created_at,
        recipient_count: transmission.recipients.len(),
        from: FromView {
            email: transmission.from_email,
            name: transmission.from_name,
        },
        stats: Stats {
            delivered: counts.delivered,
            opened: counts.opened,
            clicked: counts.clicked,
            bounced: counts.bounced,
            unsubscribed: counts.unsubscribed,
        },
    }))
}

async fn transmission_events(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    PathText(id): PathText,
) -> ApiResult<Json<EventList>> {
    let transmission = find_transmission(&shared.store(), caller, &id)?;
    let events = transmission
        .events()
        .into_iter()
        .map(|e| EventView {
            kind: e.kind,
            recipient: e.recipient,
            friendly_from: e.friendly_from,
            subject: e.subject,
            reason: e.reason,
            timestamp: e.timestamp,
            url: e.url,
            user_agent: e.user_agent,
        })
        .collect();
    Ok(Json(EventList { events }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dates cover whole UTC days; RFC 3339 is exact; garbage is a 400.
    #[test]
    fn bounds() {
        assert_eq!(
            parse_bound("from", "2024-01-02", End::From).unwrap(),
            1_704_153_600_000
        );
        assert_eq!(
            parse_bound("to", "2024-01-02", End::To).unwrap(),
            1_704_239_999_999
        );
        assert_eq!(
            parse_bound("from", "2024-01-02T07:00:00+07:00", End::From).unwrap(),
            1_704_153_600_000
        );
        for bad in ["yesterday", "2024-13-01", "2024/01/02", "1704153600000"] {
            assert!(parse_bound("from", bad, End::From).is_err(), "{bad}");
        }
    }

    /// Rates are fractions of sent and 0 when nothing was sent.
    #[test]
    fn rates() {
        let counts = Counts {
            sent: 4,
            delivered: 3,
            opened: 2,
            clicked: 1,
            bounced: 1,
            unsubscribed: 0,
        };
        let period = Period {
            from: "a".into(),
            to: "b".into(),
        };
        let s = counts.summary("x".into(), period.clone());
        assert_eq!(
            (s.delivery_rate, s.open_rate, s.bounce_rate),
            (0.75, 0.5, 0.25)
        );
        let empty = Counts::default().summary("x".into(), period);
        assert_eq!(empty.delivery_rate, 0.0);
    }

    /// Day names are UTC dates.
    #[test]
    fn days() {
        assert_eq!(day_of(1_704_239_999_999), "2024-01-02");
    }
}
