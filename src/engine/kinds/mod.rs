//! One [`super::ManagedKind`] implementation per kind.

pub mod api_key;
pub mod sending_domain;
pub mod sub_account;
