//! Walking every page of a list endpoint.
//!
//! Pages start at 1 (the interface document, section "Limits"); the simulator caps the page
//! size at 100, so the walk relies on the `count` each page reports rather than on the size.

use std::future::Future;

use crate::api::error::{ApiError, Result};

/// Page size used by the `list_all_*` methods.
pub const LIST_ALL_PAGE_SIZE: u32 = 100;

/// Most pages read by one walk (10 000 pages of 100 = one million objects): a server that
/// keeps answering with full pages and a growing `count` cannot keep the walk going forever.
const MAX_PAGES: u32 = 10_000;

/// Fetches pages 1, 2, ... with `fetch(page)` (which returns the page's items and the total
/// `count`) until `count` items are read or a page comes back empty.
///
/// # Errors
/// The first error of `fetch`, or [`ApiError::Decode`] when the walk exceeds its page limit.
pub(crate) async fn collect_pages<T, F, Fut>(endpoint: &'static str, mut fetch: F) -> Result<Vec<T>>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, i64)>>,
{
    let mut items = Vec::new();
    for page in 1..=MAX_PAGES {
        let (batch, count) = fetch(page).await?;
        if batch.is_empty() {
            return Ok(items);
        }
        items.extend(batch);
        if i64::try_from(items.len()).unwrap_or(i64::MAX) >= count {
            return Ok(items);
        }
    }
    Err(ApiError::Decode {
        endpoint,
        message: format!("paging did not end within {MAX_PAGES} pages"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Walks until `count` items are read, asking for consecutive pages.
    #[tokio::test]
    async fn stops_at_count() {
        let asked = Mutex::new(Vec::new());
        let all = collect_pages("GET /x", |page| {
            asked.lock().unwrap().push(page);
            async move {
                let start = (page - 1) * 2;
                let batch: Vec<u32> = (start..(start + 2).min(5)).collect();
                Ok((batch, 5))
            }
        })
        .await
        .unwrap();
        assert_eq!(all, vec![0, 1, 2, 3, 4]);
        assert_eq!(*asked.lock().unwrap(), vec![1, 2, 3]);
    }

    /// A server whose `count` overstates the items stops at the first empty page.
    #[tokio::test]
    async fn stops_at_empty_page() {
        let all = collect_pages("GET /x", |page| async move {
            Ok((if page < 3 { vec![page] } else { vec![] }, 1_000))
        })
        .await
        .unwrap();
        assert_eq!(all, vec![1, 2]);
    }

    /// A server that never ends is cut off with an error instead of looping forever.
    #[tokio::test]
    async fn endless_server_is_cut_off() {
        let err = collect_pages("GET /x", |page| async move { Ok((vec![page], i64::MAX)) })
            .await
            .unwrap_err();
        assert_eq!(err.category(), "decode");
    }

    /// Errors of a page are returned as they are.
    #[tokio::test]
    async fn errors_propagate() {
        let err = collect_pages::<u32, _, _>("GET /x", |_| async {
            Err(ApiError::Timeout {
                endpoint: "GET /x",
                after: std::time::Duration::from_secs(1),
            })
        })
        .await
        .unwrap_err();
        assert_eq!(err.category(), "timeout");
    }
}
