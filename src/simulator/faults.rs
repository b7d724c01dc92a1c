//! Fault injection: random errors, extra latency, rate limiting and lost responses, driven
//! by a seeded random number generator so that a sequential run repeats exactly.
//!
//! None of this is part of the service's interface; it exists so that reliability tests can
//! exercise a client's retry and idempotency handling.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// Fault injection settings. JSON form (used by `GET`/`PUT /_simulator/faults`):
/// `{"errorRate": 0.0, "latencyMs": 0, "rateLimitRps": null, "dropResponseRate": 0.0, "seed": 0}`;
/// every field is optional on input.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultConfig {
    /// Probability in `[0, 1]` that a request is answered 500 `INTERNAL_ERROR` without being
    /// processed (nothing is committed).
    #[serde(default)]
    pub error_rate: f64,
    /// Extra delay added to every interface request, on top of the configured base latency.
    /// JSON: `latencyMs`, integer milliseconds.
    #[serde(default, rename = "latencyMs", with = "duration_ms")]
    pub latency: Duration,
    /// When set, at most this many requests per one-second window are served; the others get
    /// 429 `RATE_LIMITED` with a `Retry-After` header in whole seconds. Must not be 0.
    #[serde(default)]
    pub rate_limit_rps: Option<u32>,
    /// Probability in `[0, 1]` that a request IS processed (a write is committed) but the
    /// response is lost: half of these get a 500 `INTERNAL_ERROR`, the other half have their
    /// connection closed before a complete response is sent.
    #[serde(default)]
    pub drop_response_rate: f64,
    /// Seed of the random number generator; setting a configuration restarts the generator.
    #[serde(default)]
    pub seed: u64,
}

impl FaultConfig {
    /// Checks the ranges: rates finite and within `[0, 1]`, `rateLimitRps` not 0.
    ///
    /// # Errors
    /// A message naming the offending field.
    pub fn validate(&self) -> Result<(), String> {
        for (name, rate) in [
            ("errorRate", self.error_rate),
            ("dropResponseRate", self.drop_response_rate),
        ] {
            if !rate.is_finite() || !(0.0..=1.0).contains(&rate) {
                return Err(format!("{name} must be a number between 0 and 1"));
            }
        }
        if self.rate_limit_rps == Some(0) {
            return Err("rateLimitRps must be at least 1 (or null for no limit)".into());
        }
        Ok(())
    }

    /// A copy with out-of-range values made safe: rates clamped into `[0, 1]` (NaN becomes 0),
    /// a rate limit of 0 becomes 1.
    fn sanitized(mut self) -> Self {
        let clamp = |rate: f64| {
            if rate.is_nan() {
                0.0
            } else {
                rate.clamp(0.0, 1.0)
            }
        };
        self.error_rate = clamp(self.error_rate);
        self.drop_response_rate = clamp(self.drop_response_rate);
        if self.rate_limit_rps == Some(0) {
            self.rate_limit_rps = Some(1);
        }
        self
    }
}

mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_millis)
    }
}

/// How a lost response is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DropMode {
    /// Answer 500 although the request was processed.
    ServerError,
    /// Close the connection before the response is complete.
    Reset,
}

/// What the fault layer decided for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultAction {
    /// Process normally; `Some` loses the response afterwards.
    Pass(Option<DropMode>),
    /// Answer this status without processing.
    Fail(u16),
    /// Answer 429 with `Retry-After: <seconds>` without processing.
    RateLimited(u64),
}

/// The decision plus the extra latency to apply first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FaultDecision {
    pub latency: Duration,
    pub action: FaultAction,
}

struct FaultState {
    config: FaultConfig,
    rng: StdRng,
    fail_next: u32,
    fail_next_status: u16,
    window_start: Option<Instant>,
    window_count: u32,
}

/// A handle to change fault injection at runtime; clones share the same settings.
#[derive(Clone)]
pub struct FaultHandle {
    inner: Arc<Mutex<FaultState>>,
}

impl FaultHandle {
    pub(crate) fn new(config: FaultConfig) -> Self {
        let config = config.sanitized();
        Self {
            inner: Arc::new(Mutex::new(FaultState {
                rng: StdRng::seed_from_u64(config.seed),
                config,
                fail_next: 0,
                fail_next_status: 500,
                window_start: None,
                window_count: 0,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, FaultState> {
        // A poisoned lock only means another request panicked; the state is still usable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Replaces the settings and restarts the random number generator from `config.seed`, so
    /// the same sequence of requests meets the same faults. Out-of-range rates are clamped
    /// into `[0, 1]`. Pending [`fail_next`](Self::fail_next) failures are kept.
    pub fn set(&self, config: FaultConfig) {
        let config = config.sanitized();
        let mut state = self.lock();
        state.rng = StdRng::seed_from_u64(config.seed);
        state.config = config;
        state.window_start = None;
        state.window_count = 0;
    }

    /// The current settings.
    pub fn get(&self) -> FaultConfig {
        self.lock().config.clone()
    }

    /// The next `n` interface requests are answered with `status` (an error body in the
    /// interface's shape; 429 also gets `Retry-After: 1`) without being processed. Replaces
    /// any earlier pending count. A `status` that is not a valid HTTP status becomes 500.
    pub fn fail_next(&self, n: u32, status: u16) {
        let mut state = self.lock();
        state.fail_next = n;
        state.fail_next_status = if (100..=999).contains(&status) {
            status
        } else {
            500
        };
    }

    /// Removes every fault: default settings (seed 0) and no pending failures.
    pub fn clear(&self) {
        self.set(FaultConfig::default());
        self.fail_next(0, 500);
    }

    /// Decides the fate of one interface request. Every call draws the same number of random
    /// values, so the outcome of request N depends only on the seed and N.
    pub(crate) fn decide(&self) -> FaultDecision {
        self.decide_at(Instant::now())
    }

    fn decide_at(&self, now: Instant) -> FaultDecision {
        let mut state = self.lock();
        let error_roll: f64 = state.rng.random();
        let drop_roll: f64 = state.rng.random();
        let reset_roll: bool = state.rng.random();
        let latency = state.config.latency;

        let action = if state.fail_next > 0 {
            state.fail_next -= 1;
            FaultAction::Fail(state.fail_next_status)
        } else if let Some(retry_after) = state.rate_limited(now) {
            FaultAction::RateLimited(retry_after)
        } else if error_roll < state.config.error_rate {
            FaultAction::Fail(500)
        } else if drop_roll < state.config.drop_response_rate {
            FaultAction::Pass(Some(if reset_roll {
                DropMode::Reset
            } else {
                DropMode::ServerError
            }))
        } else {
            FaultAction::Pass(None)
        };
        FaultDecision { latency, action }
    }
}

impl FaultState {
    /// Counts the request in the current one-second window; `Some(seconds)` when over limit.
    fn rate_limited(&mut self, now: Instant) -> Option<u64> {
        let limit = self.config.rate_limit_rps?;
        let window = Duration::from_secs(1);
        let start = match self.window_start {
            Some(start) if now.duration_since(start) < window => start,
            _ => {
                self.window_start = Some(now);
                self.window_count = 0;
                now
            }
        };
        if self.window_count >= limit {
            let remaining = window.saturating_sub(now.duration_since(start));
            Some(remaining.as_secs_f64().ceil().max(1.0) as u64)
        } else {
            self.window_count += 1;
            None
        }
    }
}

impl std::fmt::Debug for FaultHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultHandle")
            .field("config", &self.get())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actions(handle: &FaultHandle, n: usize) -> Vec<FaultAction> {
        (0..n).map(|_| handle.decide().action).collect()
    }

    /// The same seed gives the same sequence of faults.
    #[test]
    fn seeded_sequence_repeats() {
        let config = FaultConfig {
            error_rate: 0.3,
            drop_response_rate: 0.3,
            seed: 42,
            ..FaultConfig::default()
        };
        let handle = FaultHandle::new(config.clone());
        let first = actions(&handle, 50);
        handle.set(config);
        assert_eq!(first, actions(&handle, 50));
        assert!(first.contains(&FaultAction::Fail(500)));
        assert!(first.contains(&FaultAction::Pass(None)));
        assert!(
            first
                .iter()
                .any(|a| matches!(a, FaultAction::Pass(Some(_))))
        );
    }

    /// Without faults every request passes.
    #[test]
    fn default_passes_everything() {
        let handle = FaultHandle::new(FaultConfig::default());
        assert!(
            actions(&handle, 100)
                .iter()
                .all(|a| *a == FaultAction::Pass(None))
        );
    }

    /// fail_next answers exactly n requests with the given status.
    #[test]
    fn fail_next_counts_down() {
        let handle = FaultHandle::new(FaultConfig::default());
        handle.fail_next(2, 503);
        assert_eq!(
            actions(&handle, 3),
            vec![
                FaultAction::Fail(503),
                FaultAction::Fail(503),
                FaultAction::Pass(None)
            ]
        );
    }

    /// The rate limit admits `rps` requests per window and then answers with a retry delay.
    #[test]
    fn rate_limit_window() {
        let handle = FaultHandle::new(FaultConfig {
            rate_limit_rps: Some(2),
            ..FaultConfig::default()
        });
        let start = Instant::now();
        let at = |ms: u64| handle.decide_at(start + Duration::from_millis(ms)).action;
        assert_eq!(at(0), FaultAction::Pass(None));
        assert_eq!(at(10), FaultAction::Pass(None));
        assert_eq!(at(20), FaultAction::RateLimited(1));
        assert_eq!(at(1001), FaultAction::Pass(None));
    }

    /// Validation names the offending field; JSON uses the documented names.
    #[test]
    fn validation_and_json_names() {
        let bad = FaultConfig {
            error_rate: 1.5,
            ..FaultConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("errorRate"));
        let parsed: FaultConfig =
            serde_json::from_str(r#"{"latencyMs": 250, "rateLimitRps": 5}"#).unwrap();
        assert_eq!(parsed.latency, Duration::from_millis(250));
        assert_eq!(parsed.rate_limit_rps, Some(5));
        let json = serde_json::to_value(&parsed).unwrap();
        assert_eq!(json["latencyMs"], 250);
        assert!(serde_json::from_str::<FaultConfig>(r#"{"bogus": 1}"#).is_err());
    }
}
