//! manifest (work in progress)
