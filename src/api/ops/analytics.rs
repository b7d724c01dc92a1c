//! Analytics endpoints: the interface document, section "Endpoints", "Analytics".

use crate::api::Client;
use crate::api::endpoint::{
    ANALYTICS_BREAKDOWN, ANALYTICS_SUMMARY, Endpoint, TRANSMISSION_EVENTS, TRANSMISSION_STATUS,
};
use crate::api::error::{ApiError, Result};
use crate::api::types::{
    AnalyticsQuery, AnalyticsSummary, BreakdownQuery, TransmissionEvents, TransmissionStatus,
};

impl Client {
    /// `GET /analytic/summary`: delivery statistics for a period.
    ///
    /// # Errors
    /// Any [`ApiError`](crate::api::ApiError).
    pub async fn analytics_summary(&self, query: &AnalyticsQuery) -> Result<AnalyticsSummary> {
        let builder = self
            .request(ANALYTICS_SUMMARY, &["analytic", "summary"])?
            .query(query);
        self.call(ANALYTICS_SUMMARY, builder).await
    }

    /// `GET /analytic/summary/breakdown`: delivery statistics grouped by `group_by`.
    ///
    /// # Errors
    /// Any [`ApiError`](crate::api::ApiError).
    pub async fn analytics_breakdown(
        &self,
        query: &BreakdownQuery,
    ) -> Result<Vec<AnalyticsSummary>> {
        let builder = self
            .request(ANALYTICS_BREAKDOWN, &["analytic", "summary", "breakdown"])?
            .query(query);
        self.call(ANALYTICS_BREAKDOWN, builder).await
    }

    /// `GET /analytic/transmission/{id}`: status and counters of one transmission. The id is a
    /// string and is percent-encoded into the path.
    ///
    /// # Errors
    /// [`ApiError::InvalidRequest`] for an empty id, `.` or `..`; otherwise any
    /// [`ApiError`](crate::api::ApiError).
    pub async fn transmission_status(&self, id: &str) -> Result<TransmissionStatus> {
        let id = transmission_id(TRANSMISSION_STATUS, id)?;
        let builder = self.request(TRANSMISSION_STATUS, &["analytic", "transmission", id])?;
        self.call(TRANSMISSION_STATUS, builder).await
    }

    /// `GET /analytic/transmission/{id}/events`: events of one transmission.
    ///
    /// # Errors
    /// [`ApiError::InvalidRequest`] for an empty id, `.` or `..`; otherwise any
    /// [`ApiError`](crate::api::ApiError).
    pub async fn transmission_events(&self, id: &str) -> Result<TransmissionEvents> {
        let id = transmission_id(TRANSMISSION_EVENTS, id)?;
        let builder = self.request(
            TRANSMISSION_EVENTS,
            &["analytic", "transmission", id, "events"],
        )?;
        self.call(TRANSMISSION_EVENTS, builder).await
    }
}

/// Refuses transmission ids that would not stay one path segment (empty, `.`, `..`).
fn transmission_id(endpoint: Endpoint, id: &str) -> Result<&str> {
    if matches!(id, "" | "." | "..") {
        return Err(ApiError::InvalidRequest {
            endpoint: endpoint.label,
            message: "the transmission id must be a non-empty string other than `.` and `..`"
                .to_owned(),
        });
    }
    Ok(id)
}
