//! Walking every page of a list endpoint.
//!
//! Pages start at 1 (the interface document, section "Limits"); the simulator caps the page
//! size at 100, so the walk relies on the `count` each page reports rather than on the size.

use std::future::Future;

use crate::api::error::{ApiError, Result};

/// Page size used by the `list_all_*` methods.
pub const LIST_ALL_PAGE_SIZE: u32 = 100;

/// Most pages read by one walk (10 000 pages of 100 = one million objects), whatever the
/// server's `count` says.
const MAX_PAGES: u64 = 10_000;

/// Fetches pages 1, 2, ... with `fetch(page)` (which returns the page's items and the total
/// `count`) until `count` distinct items are read or a page comes back empty. Items are told
/// apart by `id_of`: an item repeated on a later page (offset paging while objects are deleted
/// or created) is kept once.
///
/// A hostile or broken server cannot keep the walk going: it stops with an error at the first
/// page that adds no new id, and once the walk passes the pages the first page's `count` allows
/// (its size taken from the first page, plus one page for objects created meanwhile).
///
/// # Errors
/// The first error of `fetch`, or [`ApiError::Decode`] naming why the walk was stopped.
pub(crate) async fn collect_pages<T, F, Fut>(
    endpoint: &'static str,
    id_of: impl Fn(&T) -> i64,
    mut fetch: F,
) -> Result<Vec<T>>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, i64)>>,
{
    let mut items = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut allowed: Option<u64> = None;
    let stopped = |message: String| ApiError::Decode { endpoint, message };
    for page in 1u32.. {
        let (batch, count) = fetch(page).await?;
        if batch.is_empty() {
            return Ok(items);
        }
        let allowed = *allowed.get_or_insert_with(|| {
            let size = batch.len() as u64;
            let count = u64::try_from(count).unwrap_or(0);
            count.div_ceil(size).saturating_add(1).min(MAX_PAGES)
        });
        let before = items.len();
        items.extend(batch.into_iter().filter(|i| seen.insert(id_of(i))));
        if items.len() == before {
            return Err(stopped(format!(
                "page {page} added no new id to the {before} read so far: the server repeats its pages; the list was not read"
            )));
        }
        if i64::try_from(items.len()).unwrap_or(i64::MAX) >= count {
            return Ok(items);
        }
        if u64::from(page) >= allowed {
            return Err(stopped(format!(
                "the list did not end within the {allowed} pages its count allows ({} items read); the list was not read",
                items.len()
            )));
        }
    }
    Err(stopped("paging did not end".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Walks until `count` items are read, asking for consecutive pages.
    #[tokio::test]
    async fn stops_at_count() {
        let asked = Mutex::new(Vec::new());
        let all = collect_pages(
            "GET /x",
            |i| i64::from(*i),
            |page| {
                asked.lock().unwrap().push(page);
                async move {
                    let start = (page - 1) * 2;
                    let batch: Vec<u32> = (start..(start + 2).min(5)).collect();
                    Ok((batch, 5))
                }
            },
        )
        .await
        .unwrap();
        assert_eq!(all, vec![0, 1, 2, 3, 4]);
        assert_eq!(*asked.lock().unwrap(), vec![1, 2, 3]);
    }

    /// A server whose `count` overstates the items stops at the first empty page.
    #[tokio::test]
    async fn stops_at_empty_page() {
        let all = collect_pages(
            "GET /x",
            |i| i64::from(*i),
            |page| async move { Ok((if page < 3 { vec![page] } else { vec![] }, 1_000)) },
        )
        .await
        .unwrap();
        assert_eq!(all, vec![1, 2]);
    }

    /// A server that never ends is cut off with an error instead of looping forever.
    #[tokio::test]
    async fn endless_server_is_cut_off() {
        let err = collect_pages(
            "GET /x",
            |i| i64::from(*i),
            |page| async move { Ok((vec![page], i64::MAX)) },
        )
        .await
        .unwrap_err();
        assert_eq!(err.category(), "decode");
    }

    /// A page repeating what was read stops the walk at once; a repeated item among new ones is
    /// kept once (offset paging while objects change).
    #[tokio::test]
    async fn repeated_pages_stop_the_walk() {
        let asked = Mutex::new(0);
        let err = collect_pages(
            "GET /x",
            |i| i64::from(*i),
            |_| {
                *asked.lock().unwrap() += 1;
                async { Ok((vec![1u32, 2], 1_000_000_000)) }
            },
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("added no new id"), "{err}");
        assert_eq!(*asked.lock().unwrap(), 2);
        let all = collect_pages(
            "GET /x",
            |i| i64::from(*i),
            |page| async move { Ok((if page == 1 { vec![1u32, 2] } else { vec![2, 3] }, 3)) },
        )
        .await
        .unwrap();
        assert_eq!(all, vec![1, 2, 3]);
    }

    /// Errors of a page are returned as they are.
    #[tokio::test]
    async fn errors_propagate() {
        let err = collect_pages::<u32, _, _>(
            "GET /x",
            |i| i64::from(*i),
            |_| async {
                Err(ApiError::Timeout {
                    endpoint: "GET /x",
                    after: std::time::Duration::from_secs(1),
                })
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.category(), "timeout");
    }
}
