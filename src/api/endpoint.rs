//! The endpoints of the interface (the interface document, section "Endpoints"): method, which
//! base address, path template used as a label, and the documented success status.

/// HTTP method of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Get,
    Post,
    Put,
    Delete,
}

impl Verb {
    /// The reqwest method.
    pub(crate) fn method(self) -> reqwest::Method {
        match self {
            Self::Get => reqwest::Method::GET,
            Self::Post => reqwest::Method::POST,
            Self::Put => reqwest::Method::PUT,
            Self::Delete => reqwest::Method::DELETE,
        }
    }

    /// GET, PUT and DELETE may be repeated safely; POST may create a second object, so it is
    /// never retried automatically.
    pub(crate) fn is_idempotent(self) -> bool {
        !matches!(self, Self::Post)
    }
}

/// Which configured base address an endpoint lives under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Host {
    /// The management API (`api_url`).
    Api,
    /// The transmission API (`transmission_url`).
    Transmission,
}

/// One endpoint of the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) verb: Verb,
    pub(crate) host: Host,
    /// Method and path template, e.g. `"GET /api-key/{id}"`; used in errors, logs and metrics.
    pub(crate) label: &'static str,
    /// The documented success status (any 2xx is accepted).
    pub(crate) success: u16,
}

const fn api(verb: Verb, label: &'static str, success: u16) -> Endpoint {
    Endpoint {
        verb,
        host: Host::Api,
        label,
        success,
    }
}

pub(crate) const LIST_API_KEYS: Endpoint = api(Verb::Get, "GET /api-key", 200);
pub(crate) const CREATE_API_KEY: Endpoint = api(Verb::Post, "POST /api-key", 201);
pub(crate) const GET_API_KEY: Endpoint = api(Verb::Get, "GET /api-key/{id}", 200);
pub(crate) const UPDATE_API_KEY: Endpoint = api(Verb::Put, "PUT /api-key/{id}", 200);
pub(crate) const DELETE_API_KEY: Endpoint = api(Verb::Delete, "DELETE /api-key/{id}", 200);

pub(crate) const LIST_SUB_ACCOUNTS: Endpoint = api(Verb::Get, "GET /sub-account", 200);
pub(crate) const CREATE_SUB_ACCOUNT: Endpoint = api(Verb::Post, "POST /sub-account", 200);
pub(crate) const GET_SUB_ACCOUNT: Endpoint = api(Verb::Get, "GET /sub-account/{id}", 200);
pub(crate) const UPDATE_SUB_ACCOUNT: Endpoint = api(Verb::Put, "PUT /sub-account/{id}", 200);

pub(crate) const SEND_TRANSMISSION: Endpoint = Endpoint {
    verb: Verb::Post,
    host: Host::Transmission,
    label: "POST /layang/transmissions",
    success: 200,
};

pub(crate) const LIST_SENDING_DOMAINS: Endpoint = api(Verb::Get, "GET /domain/sending", 200);
pub(crate) const CREATE_SENDING_DOMAIN: Endpoint = api(Verb::Post, "POST /domain/sending", 201);
pub(crate) const LIST_UNVERIFIED_SPF: Endpoint =
    api(Verb::Get, "GET /domain/sending/unverified-spf", 200);
pub(crate) const GET_SENDING_DOMAIN: Endpoint = api(Verb::Get, "GET /domain/sending/{id}", 200);
pub(crate) const DELETE_SENDING_DOMAIN: Endpoint =
    api(Verb::Delete, "DELETE /domain/sending/{id}", 200);
pub(crate) const SHARE_SENDING_DOMAIN: Endpoint =
    api(Verb::Put, "PUT /domain/sending/{id}/share", 200);
pub(crate) const SPF_SUGGESTION: Endpoint =
    api(Verb::Get, "GET /domain/sending/{id}/spf-suggestion", 200);
pub(crate) const VERIFY_TXT: Endpoint = api(Verb::Put, "PUT /domain/sending/{id}/verify-txt", 200);

pub(crate) const ANALYTICS_SUMMARY: Endpoint = api(Verb::Get, "GET /analytic/summary", 200);
pub(crate) const ANALYTICS_BREAKDOWN: Endpoint =
    api(Verb::Get, "GET /analytic/summary/breakdown", 200);
pub(crate) const TRANSMISSION_STATUS: Endpoint =
    api(Verb::Get, "GET /analytic/transmission/{id}", 200);
pub(crate) const TRANSMISSION_EVENTS: Endpoint =
    api(Verb::Get, "GET /analytic/transmission/{id}/events", 200);
