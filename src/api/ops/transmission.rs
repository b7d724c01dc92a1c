//! The transmission endpoint: the interface document, section "Endpoints", "Transmission".

use crate::api::Client;
use crate::api::endpoint::SEND_TRANSMISSION;
use crate::api::error::Result;
use crate::api::types::{Transmission, TransmissionAccepted};

impl Client {
    /// `POST {transmission_url}/layang/transmissions`: sends an email. Never retried
    /// automatically (a retry could send the email twice).
    ///
    /// # Errors
    /// [`ApiError::BadRequest`](crate::api::ApiError::BadRequest) for a missing subject, sender
    /// or recipients, or any other [`ApiError`](crate::api::ApiError).
    pub async fn send_transmission(
        &self,
        transmission: &Transmission,
    ) -> Result<TransmissionAccepted> {
        let builder = self.request(SEND_TRANSMISSION, &["layang", "transmissions"])?;
        let builder = Self::with_json(SEND_TRANSMISSION, builder, transmission)?;
        self.call(SEND_TRANSMISSION, builder).await
    }
}
