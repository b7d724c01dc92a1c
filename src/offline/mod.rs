//! offline (work in progress)
