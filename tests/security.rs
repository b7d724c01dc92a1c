//! Security of the operator and of the simulator: no secret value in logs, events, status or
//! metrics, even at trace level and under faults; every simulator endpoint authenticates, honours
//! `allowedIp`, and answers bad input with 400, never 500.
//!
//! The promises these tests prove are listed in `docs/guarantees.md`.

mod common;

#[path = "reliability/harness.rs"]
#[allow(dead_code)]
mod harness;

#[path = "security/capture.rs"]
mod capture;

#[path = "security/hygiene.rs"]
mod hygiene;

#[path = "security/simulator_hardening.rs"]
mod simulator_hardening;
