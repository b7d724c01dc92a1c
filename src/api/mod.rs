//! api (work in progress)
