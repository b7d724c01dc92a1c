//! Test-only Kubernetes API server emulator.
