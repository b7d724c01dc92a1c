//! When to read the detail of an API object: the fields that only the service's detail
//! endpoints return (an API key's `permissions` and `allowedIp`, a sub account's `ipPoolId`;
//! interface document, "Resources and their fields") cost one `GET` per object, so they are
//! checked once per detail resync interval instead of at every resync.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// When each object's detail was last read, and when it is due again.
#[derive(Debug)]
pub struct DetailSchedule {
    resync: Duration,
    interval: Duration,
    reads: Mutex<HashMap<String, Instant>>,
}

impl DetailSchedule {
    /// A schedule for objects that resync every `resync` and check their detail every
    /// `interval` (raised to `resync` when shorter).
    pub fn new(resync: Duration, interval: Duration) -> Self {
        DetailSchedule {
            resync,
            interval: interval.max(resync),
            reads: Mutex::default(),
        }
    }

    /// True when the detail of `key` is due: never read, or read at least `interval - resync
    /// / 2` ago, so that the periodic resync that follows (resyncs come every `resync`, plus up
    /// to 10% jitter) compares the detail-only fields and corrects changes made at the service,
    /// while other resyncs and the reconciles triggered in between make no per-object `GET`.
    /// With `interval == resync`, every resync reads the detail.
    ///
    /// `known`: the object's status already mirrors those fields from an earlier read (by this
    /// process or one before a restart). The first time such a key is seen, its last read is
    /// taken to be a random moment within the past interval, so that an operator that restarts
    /// spreads those reads over one interval rather than making them all at once.
    pub fn due(&self, key: &str, known: bool) -> bool {
        self.due_at(key, known, Instant::now())
    }

    fn due_at(&self, key: &str, known: bool, now: Instant) -> bool {
        let max_age = self.interval.saturating_sub(self.resync / 2);
        let Ok(mut reads) = self.reads.lock() else {
            return true;
        };
        let read = match reads.get(key) {
            Some(t) => *t,
            None if known => {
                let t = now
                    .checked_sub(self.interval.mul_f64(rand::random::<f64>()))
                    .unwrap_or(now);
                reads.insert(key.to_string(), t);
                t
            }
            None => return true,
        };
        now.saturating_duration_since(read) >= max_age
    }

    /// Forgets `key` (its object is being deleted).
    pub fn forget(&self, key: &str) {
        if let Ok(mut reads) = self.reads.lock() {
            reads.remove(key);
        }
    }

    /// Records that the detail of `key` was just read (or returned by a create or update).
    pub fn read(&self, key: &str) {
        if let Ok(mut reads) = self.reads.lock() {
            reads.insert(key.to_string(), Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);
    const RESYNC: Duration = Duration::from_secs(300);

    /// An object whose status knows nothing is read at once; after a read it is not due again
    /// within the interval.
    #[test]
    fn unknown_objects_are_read_then_wait_an_interval() {
        let s = DetailSchedule::new(RESYNC, HOUR);
        assert!(s.due("ns/a", false));
        s.read("ns/a");
        assert!(!s.due("ns/a", false));
        assert!(!s.due("ns/a", true));
        s.forget("ns/a");
        assert!(s.due("ns/a", false), "a forgotten key is unknown again");
    }

    /// After a restart, objects whose status mirrors the detail are spread over one interval:
    /// some are due at once, most are not, never all.
    #[test]
    fn known_objects_are_spread_over_one_interval() {
        let s = DetailSchedule::new(RESYNC, HOUR);
        let due = (0..1000)
            .filter(|i| s.due(&format!("ns/{i}"), true))
            .count();
        // Due when the random age is at least 57.5 of 60 minutes: about 4%.
        assert!((5..150).contains(&due), "{due} of 1000 due at once");
        // The first answer sticks: asking again does not draw a new age.
        let again = (0..1000)
            .filter(|i| s.due(&format!("ns/{i}"), true))
            .count();
        assert_eq!(again, due);
    }

    /// A read is due again at the first resync at least `interval - resync / 2` later.
    #[test]
    fn due_again_after_the_interval() {
        let s = DetailSchedule::new(RESYNC, HOUR);
        s.read("ns/a");
        let now = Instant::now();
        assert!(!s.due_at("ns/a", false, now + HOUR - RESYNC));
        assert!(s.due_at("ns/a", false, now + HOUR - RESYNC / 2));
    }

    /// An interval shorter than the resync interval is raised to it: with both equal, a read
    /// half a resync ago is due (every resync reads the detail).
    #[test]
    fn interval_never_shorter_than_resync() {
        let s = DetailSchedule::new(RESYNC, Duration::from_secs(1));
        s.read("ns/a");
        let now = Instant::now();
        assert!(!s.due_at("ns/a", false, now + RESYNC / 4));
        assert!(s.due_at("ns/a", false, now + RESYNC / 2));
    }
}
