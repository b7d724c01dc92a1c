//! reconcile (work in progress)
