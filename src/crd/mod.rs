//! crd (work in progress)
