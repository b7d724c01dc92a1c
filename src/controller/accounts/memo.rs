//! What the accounts controller remembers of each account's last authenticated check, beyond
//! what the registry keeps for resources: enough to skip a check nothing asked for, and to keep
//! a scope found in the key list while the credential stays the same.
//!
//! - A reconcile of an account whose generation and credentials Secret (its `resourceVersion`)
//!   are those of the last check, ended `Ready` or `Stalled`, before its resync is due, makes no
//!   call: the Secret watch's first list (at start-up, or after a relist) names the Secret
//!   version the check already read. The resync (at least `--resync-interval` after the check)
//!   always calls.
//! - A scope found in the key list (`spec.scope` unset) is kept while the credential (key,
//!   addresses, budget) is the same, for at most `--detail-resync-interval` (default 1 h, never
//!   less than the resync interval): a key never moves to another sub account, so resyncs in
//!   between make the one-key read only. A changed credential, or the interval, reads the list
//!   again (which also shows a renamed sub account, or a scope the list could not tell before).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::check::Found;
use super::registry::AccountName;
use crate::controller::common::Locked;

/// The last check of one account that made the authenticated read.
#[derive(Clone, Debug)]
pub(super) struct LastCheck {
    /// UID of the object checked.
    pub uid: String,
    /// Its `metadata.generation`.
    pub generation: Option<i64>,
    /// `resourceVersion` of the credentials Secret it read.
    pub secret_version: String,
    /// [`super::check::fingerprint`] of the credential it checked.
    pub fingerprint: [u8; 32],
    /// When it ended.
    pub at: Instant,
    /// True when it ended `Ready` or `Stalled` (not retried with backoff).
    pub settled: bool,
    /// What the key list showed, and when that list was read (`None`: the scope was declared,
    /// or the read failed).
    pub listed: Option<(Found, Instant)>,
}

impl LastCheck {
    /// How long until the resync of the account is due, when a check of the object `uid` at
    /// `generation`, whose Secret is at `secret_version`, may be skipped (see the module
    /// documentation); `None` when it must call.
    pub fn skip(
        &self,
        uid: &str,
        generation: Option<i64>,
        secret_version: &str,
        resync: Duration,
        now: Instant,
    ) -> Option<Duration> {
        let unchanged = self.uid == uid
            && self.generation == generation
            && self.secret_version == secret_version
            && self.settled;
        let elapsed = now.saturating_duration_since(self.at);
        resync
            .checked_sub(elapsed)
            .filter(|left| unchanged && !left.is_zero())
    }

    /// The key list's answer of an earlier check, while it holds for the credential
    /// `fingerprint`: the same credential, listed less than `refresh` ago.
    pub fn listed_for(
        &self,
        fingerprint: &[u8; 32],
        refresh: Duration,
        now: Instant,
    ) -> Option<&(Found, Instant)> {
        self.listed.as_ref().filter(|(_, listed_at)| {
            self.fingerprint == *fingerprint && now.saturating_duration_since(*listed_at) < refresh
        })
    }
}

/// The last checks by account name.
#[derive(Debug, Default)]
pub(super) struct CheckMemo(Mutex<HashMap<AccountName, LastCheck>>);

impl CheckMemo {
    /// The last check of `name`, if it was of the object `uid`.
    pub fn get(&self, name: &AccountName, uid: &str) -> Option<LastCheck> {
        let memo = self.0.locked();
        memo.get(name).filter(|c| c.uid == uid).cloned()
    }

    /// Records the last check of `name`.
    pub fn record(&self, name: AccountName, check: LastCheck) {
        let mut memo = self.0.locked();
        memo.insert(name, check);
    }

    /// Forgets `name` (deleted, or its last check made no authenticated read).
    pub fn forget(&self, name: &AccountName) {
        let mut memo = self.0.locked();
        memo.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{KeyScope, ScopeSource};

    const RESYNC: Duration = Duration::from_secs(300);

    fn last(at: Instant) -> LastCheck {
        LastCheck {
            uid: "u1".into(),
            generation: Some(2),
            secret_version: "17".into(),
            fingerprint: [1; 32],
            at,
            settled: true,
            listed: Some((
                Found {
                    scope: Some(KeyScope::Company),
                    source: Some(ScopeSource::KeyList),
                    key_id: Some(5),
                    sub_account: None,
                },
                at,
            )),
        }
    }

    /// A check is skipped only for the same object, generation and Secret version after a
    /// settled outcome, and only until the resync is due (then for what is left of it).
    #[test]
    fn only_an_unchanged_account_before_its_resync_is_skipped() {
        let at = Instant::now();
        let soon = at + Duration::from_secs(10);
        let check = last(at);
        assert_eq!(
            check.skip("u1", Some(2), "17", RESYNC, soon),
            Some(Duration::from_secs(290))
        );
        assert_eq!(check.skip("u2", Some(2), "17", RESYNC, soon), None);
        assert_eq!(check.skip("u1", Some(3), "17", RESYNC, soon), None);
        assert_eq!(check.skip("u1", Some(2), "18", RESYNC, soon), None);
        assert_eq!(check.skip("u1", Some(2), "17", RESYNC, at + RESYNC), None);
        let retried = LastCheck {
            settled: false,
            ..last(at)
        };
        assert_eq!(retried.skip("u1", Some(2), "17", RESYNC, soon), None);
    }

    /// A listed scope holds for the same credential until the refresh interval has passed.
    #[test]
    fn a_listed_scope_holds_for_the_same_credential_until_refreshed() {
        let at = Instant::now();
        let check = last(at);
        let refresh = Duration::from_secs(3600);
        let later = at + Duration::from_secs(1000);
        assert_eq!(
            check
                .listed_for(&[1; 32], refresh, later)
                .map(|(f, _)| f.key_id),
            Some(Some(5))
        );
        assert!(check.listed_for(&[2; 32], refresh, later).is_none());
        assert!(check.listed_for(&[1; 32], refresh, at + refresh).is_none());
        let declared = LastCheck {
            listed: None,
            ..last(at)
        };
        assert!(declared.listed_for(&[1; 32], refresh, later).is_none());
    }
}
