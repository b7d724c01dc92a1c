//! The transmission endpoint (the interface document, section "Transmission"), served at
//! both `/layang/transmissions` and `/v1/layang/transmissions`.
//!
//! - 400 `{error, message}` (no `data`) when `subject` is missing or blank, `from` is
//!   missing, `to` is missing, empty or has no entry with an `email`, an address has no `@`,
//!   or a field has the wrong type. Authentication failures are 401 in the common shape.
//! - 200 `{"transmissionId": "tx-<n>"}` otherwise; events are recorded at once by the rules
//!   of [`events`](super::events).
//! - Suppression applies exactly when `optionsAttributes.transactional` is `false`.
//! - Entries without `email` are not recipients. `replyTo`, `headers`, `attachments`,
//!   `templateId`, `substitutionData`, `allRCPTto` and `metadata` are validated for type only.
//! - What is kept is bounded ([`record`](super::record)): more than
//!   [`MAX_RECIPIENTS`] recipients, a subject over [`MAX_SUBJECT_CHARS`] characters, a sender
//!   name over [`MAX_SENDER_NAME_CHARS`] characters or an address over [`MAX_ADDRESS_BYTES`]
//!   bytes is a 400; a first link over [`MAX_TRACKED_URL_BYTES`] bytes is not tracked.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::auth::Caller;
use super::body::read_json;
use super::errors::{ApiError, ApiResult};
use super::events::{self, Tracking};
use super::record::{
    MAX_ADDRESS_BYTES, MAX_RECIPIENTS, MAX_SENDER_NAME_CHARS, MAX_SUBJECT_CHARS,
    MAX_TRACKED_URL_BYTES, RecordedEvent, Transmission,
};
use super::server::Shared;
use super::state::now_ms;

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/layang/transmissions", post(send))
        .route("/v1/layang/transmissions", post(send))
}

#[derive(Deserialize, Default)]
struct Address {
    email: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize)]
#[allow(dead_code)] // Parsed to check the types; the simulator does not render messages.
struct Header {
    name: Option<String>,
    value: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // Parsed to check the types.
struct Attachment {
    content_id: Option<String>,
    disposition: Option<String>,
    filename: Option<String>,
    mime_type: Option<String>,
    value: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OptionsAttributes {
    click_tracking: Option<bool>,
    open_tracking: Option<bool>,
    transactional: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // Some fields are parsed only to check their types.
struct TransmissionBody {
    subject: Option<String>,
    from: Option<Address>,
    to: Option<Vec<Address>>,
    reply_to: Option<Vec<Address>>,
    cc: Option<Vec<Address>>,
    bcc: Option<Vec<Address>>,
    body_text: Option<String>,
    body_html: Option<String>,
    headers: Option<Vec<Header>>,
    attachments: Option<Vec<Attachment>>,
    metadata: Option<BTreeMap<String, String>>,
    options_attributes: Option<OptionsAttributes>,
    template_id: Option<String>,
    substitution_data: Option<BTreeMap<String, String>>,
    #[serde(rename = "allRCPTto")]
    all_rcpt_to: Option<Vec<String>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Accepted {
    transmission_id: String,
}

async fn send(
    State(shared): State<Arc<Shared>>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<Accepted>> {
    accept(&shared, caller, &headers, body)
        .await
        .map_err(ApiError::for_transmission)
}

async fn accept(
    shared: &Shared,
    caller: Caller,
    headers: &HeaderMap,
    body: Body,
) -> ApiResult<Json<Accepted>> {
    let request: TransmissionBody = read_json(headers, body).await?;
    let subject = request
        .subject
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request("subject is required"))?;
    if subject.chars().count() > MAX_SUBJECT_CHARS {
        return Err(ApiError::bad_request(format!(
            "subject is longer than {MAX_SUBJECT_CHARS} characters"
        )));
    }
    let from = request
        .from
        .ok_or_else(|| ApiError::bad_request("from is required"))?;
    let to = request.to.unwrap_or_default();
    let recipients = recipients(&to, &request.cc, &request.bcc)?;
    if !to.iter().any(|a| a.email.is_some()) {
        return Err(ApiError::bad_request(
            "to must contain at least one recipient with an email",
        ));
    }
    let from_email = from.email.unwrap_or_default();
    if !from_email.is_empty() && !is_address(&from_email) {
        return Err(ApiError::bad_request(format!(
            "from.email is not a valid email address (local@domain, at most {MAX_ADDRESS_BYTES} bytes)"
        )));
    }
    let from_name = from.name.unwrap_or_default();
    if from_name.chars().count() > MAX_SENDER_NAME_CHARS {
        return Err(ApiError::bad_request(format!(
            "from.name is longer than {MAX_SENDER_NAME_CHARS} characters"
        )));
    }
    let options = request.options_attributes;
    let transactional = options.as_ref().and_then(|o| o.transactional);
    let click_url = request
        .body_html
        .as_deref()
        .and_then(events::first_href)
        .filter(|url| url.len() <= MAX_TRACKED_URL_BYTES)
        .filter(|_| options.as_ref().and_then(|o| o.click_tracking) != Some(false));
    let tracking = Tracking {
        open: options.as_ref().and_then(|o| o.open_tracking) != Some(false),
        click: click_url.is_some(),
    };

    let mut store = shared.store();
    let apply_suppression = transactional == Some(false);
    let events = recipients
        .iter()
        .zip(0u32..)
        .flat_map(|(recipient, index)| {
            let suppressed =
                apply_suppression && store.suppress.contains(&recipient.to_lowercase());
            events::kinds_for(&tracking, recipient, suppressed)
                .into_iter()
                .map(move |kind| RecordedEvent {
                    kind,
                    recipient: index,
                })
        })
        .collect();
    let id = store.take_transmission_id();
    store.state.transmissions.push(Transmission {
        id: id.clone(),
        sub_account_id: caller.scope.owner_id(),
        subject,
        from_email,
        from_name,
        recipients,
        transactional,
        created_at: now_ms(),
        click_url,
        events,
    });
    Ok(Json(Accepted {
        transmission_id: id,
    }))
}

/// The email addresses of to, cc and bcc (in that order), skipping entries without one.
fn recipients(
    to: &[Address],
    cc: &Option<Vec<Address>>,
    bcc: &Option<Vec<Address>>,
) -> ApiResult<Vec<String>> {
    let mut out = Vec::new();
    let lists = [
        ("to", to),
        ("cc", cc.as_deref().unwrap_or_default()),
        ("bcc", bcc.as_deref().unwrap_or_default()),
    ];
    for (field, list) in lists {
        for (index, address) in list.iter().enumerate() {
            if let Some(email) = &address.email {
                let email = email.trim();
                if !is_address(email) {
                    return Err(ApiError::bad_request(format!(
                        "{field}[{index}].email is not a valid email address (local@domain, at most {MAX_ADDRESS_BYTES} bytes)"
                    )));
                }
                if out.len() == MAX_RECIPIENTS {
                    return Err(ApiError::bad_request(format!(
                        "more than {MAX_RECIPIENTS} recipients (to, cc and bcc together)"
                    )));
                }
                out.push(email.to_string());
            }
        }
    }
    Ok(out)
}

/// `local@domain` with both parts non-empty, no spaces, and at most [`MAX_ADDRESS_BYTES`].
fn is_address(value: &str) -> bool {
    if value.len() > MAX_ADDRESS_BYTES {
        return false;
    }
    match value.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty() && !domain.is_empty() && !value.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(email: Option<&str>) -> Address {
        Address {
            email: email.map(str::to_string),
            name: None,
        }
    }

    /// Recipients come from to, cc and bcc in order; entries without email are skipped.
    #[test]
    fn recipient_order() {
        let got = recipients(
            &[addr(Some("a@x.co")), addr(None)],
            &Some(vec![addr(Some("b@x.co"))]),
            &Some(vec![addr(Some("c@x.co"))]),
        )
        .unwrap();
        assert_eq!(got, vec!["a@x.co", "b@x.co", "c@x.co"]);
        let err = recipients(&[], &Some(vec![addr(Some("nope"))]), &None).unwrap_err();
        assert!(err.message.contains("cc[0].email"));
    }

    /// Address shape and length check.
    #[test]
    fn email_shape() {
        assert!(is_address("a@b.co"));
        assert!(!is_address("a@"));
        assert!(!is_address("@b.co"));
        assert!(!is_address("a b@c.co"));
        let longest = format!("{}@b.co", "a".repeat(MAX_ADDRESS_BYTES - 5));
        assert!(is_address(&longest));
        assert!(!is_address(&format!("a{longest}")));
    }

    /// More than the maximum number of recipients is refused, counting to, cc and bcc.
    #[test]
    fn recipient_count_is_capped() {
        let many: Vec<Address> = (0..MAX_RECIPIENTS)
            .map(|i| Address {
                email: Some(format!("r{i}@x.co")),
                name: None,
            })
            .collect();
        assert_eq!(
            recipients(&many, &None, &None).unwrap().len(),
            MAX_RECIPIENTS
        );
        let err = recipients(&many, &Some(vec![addr(Some("one@x.co"))]), &None).unwrap_err();
        assert!(err.message.contains("more than"), "{}", err.message);
    }
}
