//! simulator (work in progress)
