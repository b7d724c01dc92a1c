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
//!   `templateId`, `substitutionData` and `allRCPTto` are validated for type only.

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
use super::events::{self, Message};
use super::server::Shared;
use super::state::{Transmission, now_ms};

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
    if !from_email.is_empty() && !looks_like_email(&from_email) {
        return Err(ApiError::bad_request(
            "from.email is not a valid email address",
        ));
    }
    let from_name = from.name.unwrap_or_default();
    let options = request.options_attributes;
    let transactional = options.as_ref().and_then(|o| o.transactional);
    let href = request.body_html.as_deref().and_then(events::first_href);
    let friendly_from = match (from_name.trim(), from_email.as_str()) {
        ("", email) => email.to_string(),
        (name, email) => format!("{name} <{email}>"),
    };
    let created_at = now_ms();
    let message = Message {
        friendly_from: &friendly_from,
        subject: &subject,
        created_at,
        open_tracking: options.as_ref().and_then(|o| o.open_tracking) != Some(false),
        click_tracking: options.as_ref().and_then(|o| o.click_tracking) != Some(false),
        first_href: href.as_deref(),
    };

    let mut store = shared.store();
    let apply_suppression = transactional == Some(false);
    let events = recipients
        .iter()
        .flat_map(|recipient| {
            let suppressed =
                apply_suppression && store.suppress.contains(&recipient.to_lowercase());
            events::events_for(&message, recipient, suppressed)
        })
        .collect();
    let id = store.take_transmission_id();
    store.state.transmissions.push(Transmission {
        id: id.clone(),
        sub_account_id: caller.scope.owner_id(),
        subject: subject.clone(),
        from_email,
        from_name,
        recipients,
        transactional,
        metadata: request.metadata.unwrap_or_default(),
        created_at,
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
                if !looks_like_email(email) {
                    return Err(ApiError::bad_request(format!(
                        "{field}[{index}].email is not a valid email address"
                    )));
                }
                out.push(email.to_string());
            }
        }
    }
    Ok(out)
}

/// `local@domain` with both parts non-empty and no spaces.
fn looks_like_email(value: &str) -> bool {
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

    /// Address shape check.
    #[test]
    fn email_shape() {
        assert!(looks_like_email("a@b.co"));
        assert!(!looks_like_email("a@"));
        assert!(!looks_like_email("@b.co"));
        assert!(!looks_like_email("a b@c.co"));
    }
}
