//! Query string parsing, paging and path id parsing.
//!
//! Paging follows the interface document, section "Limits": `page` starts at 1 (default 1),
//! `size` defaults to 10; the simulator caps `size` at [`MAX_PAGE_SIZE`], so clients must
//! walk pages using `count`. Invalid values (`page=abc`, `page=0`, `size=-1`) are answered
//! with 400.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

use super::errors::{ApiError, ApiResult};

/// Default `size` (the interface document, section "Limits").
pub const DEFAULT_PAGE_SIZE: usize = 10;
/// Largest `size` served; larger requests get this many items.
pub const MAX_PAGE_SIZE: usize = 100;

/// Parsed query parameters; a repeated name takes its last value.
#[derive(Debug, Default)]
pub(crate) struct QueryParams {
    pairs: Vec<(String, String)>,
}

impl QueryParams {
    pub fn parse(raw: Option<&str>) -> Self {
        let pairs = raw
            .map(|raw| {
                url::form_urlencoded::parse(raw.as_bytes())
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        Self { pairs }
    }

    /// The raw value of a parameter.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A string filter: absent and empty both mean "no filter".
    pub fn filter(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.is_empty())
    }

    /// An integer parameter; present but not an integer is a 400.
    pub fn integer(&self, name: &str) -> ApiResult<Option<i64>> {
        self.get(name)
            .map(|v| {
                v.trim().parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!("query parameter {name} must be an integer"))
                })
            })
            .transpose()
    }

    /// A boolean parameter (`true`/`false`, any case); anything else is a 400.
    pub fn boolean(&self, name: &str) -> ApiResult<Option<bool>> {
        self.get(name)
            .map(|v| match v.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(ApiError::bad_request(format!(
                    "query parameter {name} must be true or false"
                ))),
            })
            .transpose()
    }

    /// `page` (>= 1, default 1) and `size` (>= 1, default 10, capped at 100).
    pub fn page(&self) -> ApiResult<Page> {
        let page = self.integer("page")?.unwrap_or(1);
        if page < 1 {
            return Err(ApiError::bad_request(
                "query parameter page must be at least 1",
            ));
        }
        let size = self.integer("size")?.unwrap_or(DEFAULT_PAGE_SIZE as i64);
        if size < 1 {
            return Err(ApiError::bad_request(
                "query parameter size must be at least 1",
            ));
        }
        Ok(Page {
            page: usize::try_from(page).unwrap_or(usize::MAX),
            size: usize::try_from(size)
                .unwrap_or(usize::MAX)
                .min(MAX_PAGE_SIZE),
        })
    }
}

/// One page of a list: 1-based page number and effective size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Page {
    pub page: usize,
    pub size: usize,
}

impl Page {
    /// The items of this page (empty past the end).
    pub fn slice<T: Clone>(&self, items: &[T]) -> Vec<T> {
        let start = (self.page - 1).saturating_mul(self.size);
        items.iter().skip(start).take(self.size).cloned().collect()
    }
}

/// Parses an integer path id (the interface document, section "Endpoints": `{id}` is an
/// integer unless stated); anything else is a 400.
pub(crate) fn path_id(raw: &str) -> ApiResult<i64> {
    raw.parse::<i64>().map_err(|_| {
        ApiError::bad_request(format!("path parameter id must be an integer, got {raw:?}"))
    })
}

/// Extractor for an integer `{id}` path parameter; any problem (not an integer, bad
/// percent-encoding) is a 400 in the interface's error shape.
pub(crate) struct PathId(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        let PathText(raw) = PathText::from_request_parts(parts, state).await?;
        path_id(&raw).map(PathId)
    }
}

/// Extractor for a string `{id}` path parameter (transmission ids); bad percent-encoding is a
/// 400 in the interface's error shape.
pub(crate) struct PathText(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathText {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(raw)| PathText(raw))
            .map_err(|_| ApiError::bad_request("the path parameter id is not valid"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(raw: &str) -> QueryParams {
        QueryParams::parse(Some(raw))
    }

    /// Defaults, caps and rejections of page and size.
    #[test]
    fn page_table() {
        for (raw, expected) in [
            ("", Some((1, 10))),
            ("page=2&size=5", Some((2, 5))),
            ("size=200", Some((1, 100))),
            ("page=0", None),
            ("page=abc", None),
            ("size=0", None),
            ("size=-3", None),
            ("page=", None),
        ] {
            let got = params(raw).page().ok().map(|p| (p.page, p.size));
            assert_eq!(got, expected, "{raw}");
        }
    }

    /// Slicing walks pages and is empty past the end.
    #[test]
    fn slicing() {
        let items: Vec<u32> = (1..=25).collect();
        assert_eq!(
            Page { page: 3, size: 10 }.slice(&items),
            vec![21, 22, 23, 24, 25]
        );
        assert!(Page { page: 4, size: 10 }.slice(&items).is_empty());
        assert!(
            Page {
                page: usize::MAX,
                size: 100
            }
            .slice(&items)
            .is_empty()
        );
    }

    /// Booleans, integers, decoding and last-value-wins.
    #[test]
    fn values() {
        let p = params("hasApiKey=TRUE&subAccountId=4&search=a%20b&search=c+d");
        assert_eq!(p.boolean("hasApiKey").unwrap(), Some(true));
        assert_eq!(p.integer("subAccountId").unwrap(), Some(4));
        assert_eq!(p.get("search"), Some("c d"));
        assert!(params("hasApiKey=yes").boolean("hasApiKey").is_err());
        assert_eq!(params("status=").filter("status"), None);
    }

    /// Path ids must be integers.
    #[test]
    fn path_ids() {
        assert_eq!(path_id("12").unwrap(), 12);
        assert!(path_id("abc").is_err());
        assert!(path_id("1.5").is_err());
    }
}
