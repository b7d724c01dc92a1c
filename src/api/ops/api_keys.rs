//! API key endpoints: the interface document, section "Endpoints", "API keys".

use super::paging::{LIST_ALL_PAGE_SIZE, collect_pages};
use crate::api::Client;
use crate::api::endpoint::{
    CREATE_API_KEY, DELETE_API_KEY, GET_API_KEY, LIST_API_KEYS, UPDATE_API_KEY,
};
use crate::api::error::Result;
use crate::api::types::{
    ApiKeyDetail, ApiKeyList, ApiKeyListItem, CreateApiKey, ListApiKeysQuery, UpdateApiKey,
};

impl Client {
    /// `GET /api-key`: one page of API keys and the total `count`.
    ///
    /// # Errors
    /// Any [`ApiError`](crate::api::ApiError); retried on transient failures.
    pub async fn list_api_keys(&self, query: &ListApiKeysQuery) -> Result<ApiKeyList> {
        let builder = self.request(LIST_API_KEYS, &["api-key"])?.query(query);
        self.call(LIST_API_KEYS, builder).await
    }

    /// Every API key matching `query` (its `page` and `size` are ignored): walks the pages with
    /// size 100 until `count` keys are read or a page is empty.
    ///
    /// # Errors
    /// The first failing page's error.
    pub async fn list_all_api_keys(&self, query: &ListApiKeysQuery) -> Result<Vec<ApiKeyListItem>> {
        collect_pages(
            LIST_API_KEYS.label,
            |i: &ApiKeyListItem| i.id,
            |page| {
                let query = ListApiKeysQuery {
                    page: Some(page),
                    size: Some(LIST_ALL_PAGE_SIZE),
                    ..query.clone()
                };
                async move {
                    let list = self.list_api_keys(&query).await?;
                    Ok((list.api_keys, list.count))
                }
            },
        )
        .await
    }

    /// `POST /api-key` (201): creates a company API key. Never retried automatically.
    ///
    /// # Errors
    /// Any [`ApiError`](crate::api::ApiError); after a timeout or transport error the key may
    /// exist: look it up by name before creating again.
    pub async fn create_api_key(&self, request: &CreateApiKey) -> Result<ApiKeyDetail> {
        let builder = self.request(CREATE_API_KEY, &["api-key"])?;
        let builder = Self::with_json(CREATE_API_KEY, builder, request)?;
        self.call(CREATE_API_KEY, builder).await
    }

    /// `GET /api-key/{id}`: one API key, value included.
    ///
    /// # Errors
    /// [`ApiError::NotFound`](crate::api::ApiError::NotFound) for an unknown id, or any other
    /// [`ApiError`](crate::api::ApiError).
    pub async fn get_api_key(&self, id: i64) -> Result<ApiKeyDetail> {
        let builder = self.request(GET_API_KEY, &["api-key", &id.to_string()])?;
        self.call(GET_API_KEY, builder).await
    }

    /// `PUT /api-key/{id}`: changes the fields set in `request`.
    ///
    /// # Errors
    /// [`ApiError::NotFound`](crate::api::ApiError::NotFound) for an unknown id, or any other
    /// [`ApiError`](crate::api::ApiError).
    pub async fn update_api_key(&self, id: i64, request: &UpdateApiKey) -> Result<ApiKeyDetail> {
        let builder = self.request(UPDATE_API_KEY, &["api-key", &id.to_string()])?;
        let builder = Self::with_json(UPDATE_API_KEY, builder, request)?;
        self.call(UPDATE_API_KEY, builder).await
    }

    /// `DELETE /api-key/{id}`: the service answers a boolean (an empty 2xx body counts as
    /// `true`).
    ///
    /// # Errors
    /// [`ApiError::NotFound`](crate::api::ApiError::NotFound) for an unknown id (already gone),
    /// or any other [`ApiError`](crate::api::ApiError).
    pub async fn delete_api_key(&self, id: i64) -> Result<bool> {
        let builder = self.request(DELETE_API_KEY, &["api-key", &id.to_string()])?;
        let body = self.execute(DELETE_API_KEY, builder).await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(true);
        }
        crate::api::decode::decode(DELETE_API_KEY.label, &body)
    }
}
