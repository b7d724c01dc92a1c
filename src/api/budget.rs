//! The request budget of one client (= one account): a cap on requests in flight and an
//! optional cap on requests started per second. Every attempt, retries included, takes from it.

use std::num::NonZeroU32;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::{Semaphore, SemaphorePermit};

/// Concurrency slots plus an optional rate limiter.
pub(crate) struct Budget {
    slots: Semaphore,
    rate: Option<DefaultDirectRateLimiter>,
}

impl Budget {
    /// A budget of `max_concurrency` requests in flight (0 counts as 1) and, when given,
    /// `requests_per_second` requests started per second, evenly spaced (no bursts: any one
    /// second, however aligned, sees at most that many requests start, plus one).
    pub(crate) fn new(max_concurrency: usize, requests_per_second: Option<NonZeroU32>) -> Self {
        Self {
            slots: Semaphore::new(max_concurrency.clamp(1, Semaphore::MAX_PERMITS)),
            rate: requests_per_second.map(|rps| {
                RateLimiter::direct(Quota::per_second(rps).allow_burst(NonZeroU32::MIN))
            }),
        }
    }

    /// Waits for a free slot and then for the rate limiter; the slot is held until the returned
    /// guard is dropped (at the end of the attempt, body included).
    pub(crate) async fn acquire(&self) -> Option<SemaphorePermit<'_>> {
        // The semaphore is never closed, so `acquire` cannot fail; if it ever did, the request
        // runs without a slot rather than failing.
        let permit = self.slots.acquire().await.ok();
        if let Some(rate) = &self.rate {
            rate.until_ready().await;
        }
        permit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slots are limited to the configured number and a zero limit still allows one request.
    #[tokio::test]
    async fn slots_are_bounded() {
        let budget = Budget::new(2, None);
        let first = budget.acquire().await;
        let second = budget.acquire().await;
        assert!(first.is_some() && second.is_some());
        assert_eq!(budget.slots.available_permits(), 0);
        drop(first);
        assert_eq!(budget.slots.available_permits(), 1);

        let single = Budget::new(0, None);
        assert_eq!(single.slots.available_permits(), 1);
    }
}
