//! Sending domain endpoints: the interface document, section "Endpoints", "Sending domains".

use serde_json::Value;

use super::paging::{LIST_ALL_PAGE_SIZE, collect_pages};
use crate::api::Client;
use crate::api::decode;
use crate::api::endpoint::{
    CREATE_SENDING_DOMAIN, DELETE_SENDING_DOMAIN, GET_SENDING_DOMAIN, LIST_SENDING_DOMAINS,
    LIST_UNVERIFIED_SPF, SHARE_SENDING_DOMAIN, SPF_SUGGESTION, VERIFY_TXT,
};
use crate::api::error::Result;
use crate::api::types::{
    CreateSendingDomain, ListSendingDomainsQuery, SendingDomainDetail, SendingDomainList,
    SendingDomainListItem, SpfSuggestion, UnverifiedSpfList,
};

impl Client {
    /// `GET /domain/sending`: one page of sending domains and the total `count`.
    ///
    /// The service answers an array of `{count, sendingDomain}` objects; this unwraps it (items
    /// of several elements are concatenated and their counts added; an empty array is an empty
    /// page). A bare object is accepted too.
    ///
    /// # Errors
    /// Any [`ApiError`](crate::api::ApiError); retried on transient failures.
    pub async fn list_sending_domains(
        &self,
        query: &ListSendingDomainsQuery,
    ) -> Result<SendingDomainList> {
        let endpoint = LIST_SENDING_DOMAINS;
        let builder = self.request(endpoint, &["domain", "sending"])?.query(query);
        let body = self.execute(endpoint, builder).await?;
        let value = decode::parse_json(endpoint.label, &body)?;
        if !value.is_array() {
            return decode::from_value(endpoint.label, &value);
        }
        let pages: Vec<SendingDomainList> = decode::from_value(endpoint.label, &value)?;
        Ok(merge_pages(pages))
    }

    /// Every sending domain matching `query` (its `page` and `size` are ignored): walks the
    /// pages with size 100 until `count` domains are read or a page is empty.
    ///
    /// # Errors
    /// The first failing page's error.
    pub async fn list_all_sending_domains(
        &self,
        query: &ListSendingDomainsQuery,
    ) -> Result<Vec<SendingDomainListItem>> {
        collect_pages(
            LIST_SENDING_DOMAINS.label,
            |i: &SendingDomainListItem| i.id,
            |page| {
                let query = ListSendingDomainsQuery {
                    page: Some(page),
                    size: Some(LIST_ALL_PAGE_SIZE),
                    ..query.clone()
                };
                async move {
                    let list = self.list_sending_domains(&query).await?;
                    Ok((list.sending_domain, list.count))
                }
            },
        )
        .await
    }

    /// `POST /domain/sending` (201): registers a sending domain; the answer holds the DNS
    /// records to publish. Never retried automatically.
    ///
    /// # Errors
    /// Any [`ApiError`](crate::api::ApiError); after a timeout or transport error the domain
    /// may exist: look it up by name before creating again.
    pub async fn create_sending_domain(
        &self,
        request: &CreateSendingDomain,
    ) -> Result<SendingDomainDetail> {
        let builder = self.request(CREATE_SENDING_DOMAIN, &["domain", "sending"])?;
        let builder = Self::with_json(CREATE_SENDING_DOMAIN, builder, request)?;
        self.call(CREATE_SENDING_DOMAIN, builder).await
    }

    /// `GET /domain/sending/unverified-spf`: domains whose SPF record is not verified.
    ///
    /// # Errors
    /// Any [`ApiError`](crate::api::ApiError).
    pub async fn list_unverified_spf(&self) -> Result<UnverifiedSpfList> {
        let builder = self.request(
            LIST_UNVERIFIED_SPF,
            &["domain", "sending", "unverified-spf"],
        )?;
        self.call(LIST_UNVERIFIED_SPF, builder).await
    }

    /// `GET /domain/sending/{id}`: one sending domain with its DNS records.
    ///
    /// # Errors
    /// [`ApiError::NotFound`](crate::api::ApiError::NotFound) for an unknown id, or any other
    /// [`ApiError`](crate::api::ApiError).
    pub async fn get_sending_domain(&self, id: i64) -> Result<SendingDomainDetail> {
        let builder = self.request(GET_SENDING_DOMAIN, &["domain", "sending", &id.to_string()])?;
        self.call(GET_SENDING_DOMAIN, builder).await
    }

    /// `DELETE /domain/sending/{id}`: the service answers a string (an empty 2xx body gives an
    /// empty string).
    ///
    /// # Errors
    /// [`ApiError::NotFound`](crate::api::ApiError::NotFound) for an unknown id (already gone),
    /// or any other [`ApiError`](crate::api::ApiError).
    pub async fn delete_sending_domain(&self, id: i64) -> Result<String> {
        let endpoint = DELETE_SENDING_DOMAIN;
        let builder = self.request(endpoint, &["domain", "sending", &id.to_string()])?;
        let body = self.execute(endpoint, builder).await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(String::new());
        }
        match decode::parse_json(endpoint.label, &body)? {
            Value::String(text) => Ok(text),
            // Tolerate a service that answers something other than the documented string.
            other => Ok(other.to_string()),
        }
    }

    /// `PUT /domain/sending/{id}/share`: shares the domain across sub accounts.
    ///
    /// # Errors
    /// [`ApiError::NotFound`](crate::api::ApiError::NotFound) for an unknown id, or any other
    /// [`ApiError`](crate::api::ApiError).
    pub async fn share_sending_domain(&self, id: i64) -> Result<SendingDomainDetail> {
        let builder = self.request(
            SHARE_SENDING_DOMAIN,
            &["domain", "sending", &id.to_string(), "share"],
        )?;
        self.call(SHARE_SENDING_DOMAIN, builder).await
    }

    /// `GET /domain/sending/{id}/spf-suggestion`: the SPF record to publish.
    ///
    /// # Errors
    /// [`ApiError::NotFound`](crate::api::ApiError::NotFound) for an unknown id, or any other
    /// [`ApiError`](crate::api::ApiError).
    pub async fn spf_suggestion(&self, id: i64) -> Result<SpfSuggestion> {
        let builder = self.request(
            SPF_SUGGESTION,
            &["domain", "sending", &id.to_string(), "spf-suggestion"],
        )?;
        self.call(SPF_SUGGESTION, builder).await
    }

    /// `PUT /domain/sending/{id}/verify-txt`: asks the service to check the DNS records; answers
    /// an array of domain details with the verification flags.
    ///
    /// # Errors
    /// [`ApiError::NotFound`](crate::api::ApiError::NotFound) for an unknown id, or any other
    /// [`ApiError`](crate::api::ApiError).
    pub async fn verify_txt(&self, id: i64) -> Result<Vec<SendingDomainDetail>> {
        let builder = self.request(
            VERIFY_TXT,
            &["domain", "sending", &id.to_string(), "verify-txt"],
        )?;
        self.call(VERIFY_TXT, builder).await
    }
}

/// Joins the elements of the array-wrapped list answer into one page.
fn merge_pages(pages: Vec<SendingDomainList>) -> SendingDomainList {
    pages
        .into_iter()
        .fold(SendingDomainList::default(), |mut merged, page| {
            merged.count = merged.count.saturating_add(page.count);
            merged.sending_domain.extend(page.sending_domain);
            merged
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented one-element array unwraps to its page; several elements are joined.
    #[test]
    fn merges_wrapped_pages() {
        let wire =
            r#"[{"count":3,"sendingDomain":[{"id":1,"domain":"a.example","subAccountID":9}]}]"#;
        let pages: Vec<SendingDomainList> = serde_json::from_str(wire).unwrap();
        let merged = merge_pages(pages);
        assert_eq!(merged.count, 3);
        assert_eq!(merged.sending_domain.len(), 1);
        assert_eq!(merged.sending_domain[0].sub_account_id, 9);
        assert_eq!(merge_pages(Vec::new()), SendingDomainList::default());
        let two = vec![
            SendingDomainList {
                count: 1,
                sending_domain: vec![SendingDomainListItem {
                    id: 1,
                    ..Default::default()
                }],
            },
            SendingDomainList {
                count: 1,
                sending_domain: vec![SendingDomainListItem {
                    id: 2,
                    ..Default::default()
                }],
            },
        ];
        let merged = merge_pages(two);
        assert_eq!(merged.count, 2);
        assert_eq!(merged.sending_domain.len(), 2);
    }
}
