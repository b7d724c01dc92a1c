//! One [`super::ManagedKind`] implementation per kind.

pub mod sending_domain;
