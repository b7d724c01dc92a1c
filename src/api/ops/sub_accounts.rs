//! Sub account endpoints: the interface document, section "Endpoints", "Sub accounts". The
//! interface has no DELETE for sub accounts.

use super::paging::{LIST_ALL_PAGE_SIZE, collect_pages};
use crate::api::Client;
use crate::api::endpoint::{
    CREATE_SUB_ACCOUNT, GET_SUB_ACCOUNT, LIST_SUB_ACCOUNTS, UPDATE_SUB_ACCOUNT,
};
use crate::api::error::Result;
use crate::api::types::{
    CreateSubAccount, ListSubAccountsQuery, SubAccountDetail, SubAccountList, SubAccountListItem,
    UpdateSubAccount,
};

impl Client {
    /// `GET /sub-account`: one page of sub accounts and the total `count`.
    ///
    /// # Errors
    /// Any [`ApiError`](crate::api::ApiError); retried on transient failures.
    pub async fn list_sub_accounts(&self, query: &ListSubAccountsQuery) -> Result<SubAccountList> {
        let builder = self
            .request(LIST_SUB_ACCOUNTS, &["sub-account"])?
            .query(query);
        self.call(LIST_SUB_ACCOUNTS, builder).await
    }

    /// Every sub account matching `query` (its `page` and `size` are ignored): walks the pages
    /// with size 100 until `count` sub accounts are read or a page is empty.
    ///
    /// # Errors
    /// The first failing page's error.
    pub async fn list_all_sub_accounts(
        &self,
        query: &ListSubAccountsQuery,
    ) -> Result<Vec<SubAccountListItem>> {
        collect_pages(
            LIST_SUB_ACCOUNTS.label,
            |i: &SubAccountListItem| i.id,
            |page| {
                let query = ListSubAccountsQuery {
                    page: Some(page),
                    size: Some(LIST_ALL_PAGE_SIZE),
                    ..query.clone()
                };
                async move {
                    let list = self.list_sub_accounts(&query).await?;
                    Ok((list.sub_accounts, list.count))
                }
            },
        )
        .await
    }

    /// `POST /sub-account` (documented answer 200, not 201): creates a sub account, and a key in
    /// it when `create_api_key` is set. Never retried automatically.
    ///
    /// # Errors
    /// Any [`ApiError`](crate::api::ApiError); after a timeout or transport error the sub
    /// account may exist: look it up by name before creating again.
    pub async fn create_sub_account(&self, request: &CreateSubAccount) -> Result<SubAccountDetail> {
        let builder = self.request(CREATE_SUB_ACCOUNT, &["sub-account"])?;
        let builder = Self::with_json(CREATE_SUB_ACCOUNT, builder, request)?;
        self.call(CREATE_SUB_ACCOUNT, builder).await
    }

    /// `GET /sub-account/{id}`: one sub account with its keys and domains.
    ///
    /// # Errors
    /// [`ApiError::NotFound`](crate::api::ApiError::NotFound) for an unknown id, or any other
    /// [`ApiError`](crate::api::ApiError).
    pub async fn get_sub_account(&self, id: i64) -> Result<SubAccountDetail> {
        let builder = self.request(GET_SUB_ACCOUNT, &["sub-account", &id.to_string()])?;
        self.call(GET_SUB_ACCOUNT, builder).await
    }

    /// `PUT /sub-account/{id}`: changes the fields set in `request`.
    ///
    /// # Errors
    /// [`ApiError::NotFound`](crate::api::ApiError::NotFound) for an unknown id, or any other
    /// [`ApiError`](crate::api::ApiError).
    pub async fn update_sub_account(
        &self,
        id: i64,
        request: &UpdateSubAccount,
    ) -> Result<SubAccountDetail> {
        let builder = self.request(UPDATE_SUB_ACCOUNT, &["sub-account", &id.to_string()])?;
        let builder = Self::with_json(UPDATE_SUB_ACCOUNT, builder, request)?;
        self.call(UPDATE_SUB_ACCOUNT, builder).await
    }
}
