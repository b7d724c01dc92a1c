//! The accounts controller: one kube-runtime `Controller` per account kind (ClusterAccount,
//! Account) that checks each account with one authenticated read and writes its status, plus
//! the [`AccountRegistry`] that gives each managed resource the client of its account.
//!
//! A check (see the `check` module) reads the key from the account's Secret (a ClusterAccount's in the
//! operator's namespace, an Account's in its own), builds the account's client (kept, with its
//! request budget, while key, addresses and budget stay the same), makes one authenticated read
//! and learns the key's scope. It never writes to the service. The outcome goes to `status`
//! (`Ready` with reasons `Authenticated`, `CredentialsNotFound`, `CredentialsInvalid`,
//! `Unauthorized`, `Unreachable`, `ApiRejected`, `InvalidSpec`; `Reconciling`, `Stalled` as for
//! the other kinds) and to the registry. An Account in use carries an in-use finalizer, and one
//! being deleted waits for its users, `Deleting` (see [`in_use`]).
//!
//! What starts a check: the account's creation or a change of its spec (its own status writes do
//! not: the watch is filtered on `metadata.generation`), any change of a Secret it references
//! (a metadata-only watch of Secrets, so a rotated key is used without a restart and no Secret
//! data is cached), and the resync interval (a key deleted or disabled at the service shows at
//! the next resync). A reconcile that finds the object's generation and its Secret's
//! `resourceVersion` as the last check left them, before the resync is due, makes no call (the
//! Secret watch's first list names the Secret the first check read); a scope found in the key
//! list is kept while the credential stays the same (see the `memo` module).
//!
//! Accounts are shared configuration: every operator instance watches all of them, whatever its
//! `--label-selector`, and checks each for its own use; a ClusterAccount's status has one writer
//! among instances that read Secrets in different namespaces (see the `writer` module).

mod arrivals;
mod check;
mod dependents;
pub mod in_use;
mod memo;
pub mod registry;
mod triggers;
pub mod usage;
mod writer;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};
use kube::{Resource, ResourceExt};

pub use registry::{AccountHandle, AccountName, AccountRegistry, DEFAULT_ACCOUNT, Resolved};
pub use usage::{Needs, Refusal, Usage};

use super::common::until_stopped;
use super::context::Context;
use super::error::Result;
use super::reflected::{not_served, reflected};
use super::status::Outcome;
use crate::crd::{Account, AccountKind, ClusterAccount};
use registry::Checked;

/// What the controller needs to know of an account kind beyond [`AccountKind`].
trait AccountObject:
    AccountKind
    + Resource<DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + serde::Serialize
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The kind, for metrics.
    const KIND: &'static str;
    /// The name the registry files it under.
    fn account_name(&self) -> AccountName;
    /// The namespace of its credentials Secret.
    fn secret_namespace(&self, operator_namespace: &str) -> String;
    /// The API of this object (for its status writes).
    fn api(&self, kube: &kube::Client) -> Api<Self>;
    /// A problem of the spec the schema cannot catch.
    fn spec_problem(&self) -> Option<String> {
        None
    }
    /// The Secret namespace its status records (see [`writer`]): a ClusterAccount's, which
    /// depends on the instance; `None` for an Account, whose Secret every instance reads in the
    /// Account's namespace.
    fn recorded_secret_namespace(&self, _operator_namespace: &str) -> Option<String> {
        None
    }
    /// The object as an `Account`, the kind with in-use protection ([`in_use`]).
    fn as_account(&self) -> Option<&Account> {
        None
    }
}

impl AccountObject for ClusterAccount {
    const KIND: &'static str = "ClusterAccount";
    fn account_name(&self) -> AccountName {
        AccountName::Cluster(self.name_any())
    }
    fn secret_namespace(&self, operator_namespace: &str) -> String {
        operator_namespace.to_owned()
    }
    fn api(&self, kube: &kube::Client) -> Api<Self> {
        Api::all(kube.clone())
    }
    fn spec_problem(&self) -> Option<String> {
        let problems = crate::engine::validate::cluster_account(&self.spec);
        (!problems.is_empty()).then(|| crate::engine::validate::describe(&problems))
    }
    fn recorded_secret_namespace(&self, operator_namespace: &str) -> Option<String> {
        Some(operator_namespace.to_owned())
    }
}

impl AccountObject for Account {
    const KIND: &'static str = "Account";
    fn account_name(&self) -> AccountName {
        AccountName::Namespaced {
            namespace: self.namespace().unwrap_or_default(),
            name: self.name_any(),
        }
    }
    fn secret_namespace(&self, _operator_namespace: &str) -> String {
        self.namespace().unwrap_or_default()
    }
    fn as_account(&self) -> Option<&Account> {
        Some(self)
    }
    fn api(&self, kube: &kube::Client) -> Api<Self> {
        Api::namespaced(kube.clone(), &self.namespace().unwrap_or_default())
    }
}

/// Checks one account and writes its status (see the module documentation).
async fn reconcile<K: AccountObject>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action> {
    super::common::measured(K::KIND, &ctx, check_and_record(obj, &ctx)).await
}

async fn check_and_record<K: AccountObject>(obj: Arc<K>, ctx: &Arc<Context>) -> Result<Action> {
    let registry = &ctx.accounts;
    let name = obj.account_name();
    let uid = super::context::object_uid(obj.as_ref());
    let generation = obj.meta().generation;
    let previous = registry.checked(&name, &uid);
    // An Account being deleted while resources use it is checked as usual (a Secret fixed
    // meanwhile is used), but its status says what it waits for (see `in_use`).
    let mut protection_failed = false;
    let waiting_for = match obj.as_account() {
        Some(account) => match in_use::protect(ctx, account).await {
            Ok(users) if account.meta().deletion_timestamp.is_some() => {
                if users.is_empty() {
                    // The finalizer is off: the object goes.
                    return Ok(Action::await_change());
                }
                Some(users)
            }
            Ok(_) => None,
            // The check goes on; the protection is tried again soon (a failed JSON patch
            // test, a copy older than a finalizer change, is a passing cause).
            Err(e) => {
                tracing::warn!(account = %name, error = %e, "cannot update the Account's in-use finalizer");
                protection_failed = true;
                None
            }
        },
        None => None,
    };
    let deleting = obj.meta().deletion_timestamp.is_some();
    let last = registry.memo.get(&name, &uid);
    let checking = match check_one(ctx, obj.as_ref(), &name, &uid, previous.as_ref(), last).await? {
        Step::Checked(checking) => *checking,
        Step::Unchanged { resync_in } => {
            if let Some(users) = &waiting_for {
                let found = found_in(obj.account_status());
                let outcome = waiting(users);
                let looked_in = obj.recorded_secret_namespace(operator_namespace(ctx));
                writer::write(ctx, obj.as_ref(), &outcome, &found, looked_in).await?;
            }
            return Ok(match protection_failed {
                true => Action::requeue(ctx.failure_backoff(&uid)),
                false => Action::requeue(resync_in),
            });
        }
    };
    let Checking {
        outcome,
        found,
        client,
        fingerprint,
        read,
    } = checking;

    let (reason, message) = outcome.parts();
    let reason = reason.to_string();
    // Logged when the outcome changes (messages hold names and the service's words, never a key).
    if previous.as_ref().map(|p| p.reason.as_str()) != Some(reason.as_str()) {
        if outcome.is_ready() {
            tracing::info!(account = %name, reason = %reason, message, "account checked");
        } else {
            tracing::warn!(account = %name, reason = %reason, message, "account not usable");
        }
    }
    // The cached lists go with the client: kept while it is, new for a new one.
    let service = match (&client, previous.as_ref().and_then(|p| p.service.clone())) {
        (Some(c), Some(kept)) if kept.client().same_as(c) => Some(kept),
        (Some(c), _) => Some(registry.service(c.clone())),
        (None, _) => None,
    };
    // Spec problems are the same for every instance: no Secret namespace recorded with them.
    let looked_in = (reason != "InvalidSpec")
        .then(|| obj.recorded_secret_namespace(operator_namespace(ctx)))
        .flatten();
    let settled = !matches!(outcome, Outcome::Progressing { .. });
    registry.record(
        name.clone(),
        Checked {
            uid: uid.clone(),
            fingerprint,
            service,
            reason,
            ready: outcome.is_ready(),
            scope: found.scope,
            generation,
            usable: false,
            last_good: None,
            deleting,
        },
    );
    // Remembered (so that an unchanged account is not checked again) once its status is
    // written: a check whose write failed, or was refused, is made again.
    registry.memo.forget(&name);
    let (outcome, found) = match &waiting_for {
        // What the Account waits for; the scope its status shows stays unless the check
        // found it again.
        Some(users) if !outcome.is_ready() => (waiting(users), found_in(obj.account_status())),
        Some(users) => (waiting(users), found),
        None => (outcome, found),
    };
    if !writer::write(ctx, obj.as_ref(), &outcome, &found, looked_in).await? {
        return Ok(Action::requeue(ctx.failure_backoff(&uid)));
    }
    if let Some(read) = read {
        registry.memo.record(
            name,
            memo::LastCheck {
                uid: uid.clone(),
                generation,
                secret_version: read.secret_version,
                fingerprint,
                at: std::time::Instant::now(),
                settled,
                listed: read.listed,
            },
        );
    }
    Ok(if settled && !protection_failed {
        ctx.reset_failures(&uid);
        Action::requeue(ctx.resync_delay())
    } else {
        Action::requeue(ctx.failure_backoff(&uid))
    })
}

/// The status outcome of an Account being deleted that waits for its `users` (see
/// [`in_use`]): `Ready=False`, reason `Deleting`, naming them.
fn waiting(users: &[String]) -> Outcome {
    Outcome::progressing(
        registry::DELETING,
        format!(
            "being deleted: waits until the {} resources using it are deleted, through it ({}); the finalizer {} stays until then, and new work through it is refused",
            users.len(),
            in_use::describe(users),
            in_use::IN_USE_FINALIZER
        ),
    )
}

/// What the key's scope fields of `status` say, as a check would have found it.
fn found_in(status: Option<&crate::crd::AccountStatus>) -> check::Found {
    let old = status.cloned().unwrap_or_default();
    check::Found {
        scope: old.scope,
        source: old.scope_source,
        key_id: old.key_id,
        sub_account: old.sub_account_id.zip(old.sub_account_name),
    }
}

/// The `account` label of `name`'s API calls in the metrics: `ClusterAccount/<name>` or
/// `Account/<namespace>/<name>` (names hold no `/`).
fn metric_label(name: &AccountName) -> String {
    match name {
        AccountName::Cluster(name) => format!("ClusterAccount/{name}"),
        AccountName::Namespaced { namespace, name } => format!("Account/{namespace}/{name}"),
    }
}

/// Forgets a deleted account: its last check, and its API call metrics (but the `default`
/// account's while the operator's flags stand in for it).
fn forget(ctx: &Context, name: &AccountName) {
    ctx.accounts.forget(name);
    if !(*name == AccountName::default_account() && ctx.accounts.has_flags_default()) {
        ctx.metrics.forget_account(&metric_label(name));
    }
}

/// Where ClusterAccount Secrets live (`default` before the operator runs).
fn operator_namespace(ctx: &Context) -> &str {
    ctx.accounts.operator_namespace().unwrap_or("default")
}

/// What a reconcile of an account did.
enum Step {
    /// It checked the account.
    Checked(Box<Checking>),
    /// Nothing changed since the last check, whose resync is due in `resync_in`: no call made
    /// (see [`memo`]).
    Unchanged { resync_in: std::time::Duration },
}

/// What one check produced.
struct Checking {
    outcome: Outcome,
    found: check::Found,
    /// The account's client, once its key could be read and its addresses parsed.
    client: Option<crate::api::Client>,
    /// What built the client ([`check::fingerprint`]); zero without a client.
    fingerprint: [u8; 32],
    /// What the authenticated read was made with, when it was made.
    read: Option<Read>,
}

/// What an authenticated read was made with, for [`memo::LastCheck`].
struct Read {
    /// `resourceVersion` of the credentials Secret.
    secret_version: String,
    /// What the key list showed and when it was read (`None`: scope declared, or read failed).
    listed: Option<(check::Found, std::time::Instant)>,
}

impl Checking {
    /// A check that ended before the authenticated read.
    fn before_read(outcome: Outcome) -> Step {
        Step::Checked(Box::new(Checking {
            outcome,
            found: check::Found::default(),
            client: None,
            fingerprint: [0; 32],
            read: None,
        }))
    }
}

/// Checks `obj`: spec, key, client (kept from `previous` while its fingerprint holds), then the
/// authenticated read (see the module documentation), unless `last` shows nothing changed.
///
/// Errors: the Kubernetes API's error reading the Secret.
async fn check_one<K: AccountObject>(
    ctx: &Context,
    obj: &K,
    name: &AccountName,
    uid: &str,
    previous: Option<&Checked>,
    last: Option<memo::LastCheck>,
) -> Result<Step> {
    if let Some(problem) = obj.spec_problem() {
        return Ok(Checking::before_read(Outcome::stalled(
            "InvalidSpec",
            problem,
        )));
    }
    let registry = &ctx.accounts;
    let connection = obj.connection();
    let secret_namespace = obj.secret_namespace(operator_namespace(ctx));
    let (key, secret_version) =
        match check::read_key(&ctx.kube, &secret_namespace, connection).await? {
            Ok(read) => read,
            Err(outcome) => return Ok(Checking::before_read(outcome)),
        };
    let now = std::time::Instant::now();
    let settings = &ctx.settings;
    if let Some(resync_in) = last.as_ref().and_then(|l| {
        l.skip(
            uid,
            obj.meta().generation,
            &secret_version,
            settings.resync_interval,
            now,
        )
    }) {
        tracing::debug!(account = %name, "account and its Secret unchanged since the last check");
        return Ok(Step::Unchanged { resync_in });
    }
    let fingerprint = check::fingerprint(&key, connection);
    let kept = previous
        .filter(|p| p.fingerprint == fingerprint)
        .and_then(|p| p.service.as_ref().map(|s| s.client().clone()));
    let client = match kept {
        Some(client) => client,
        None => match check::build_client(
            &registry.client_template(),
            connection,
            key.clone(),
            &metric_label(name),
        ) {
            Ok(client) => client,
            Err(outcome) => return Ok(Checking::before_read(outcome)),
        },
    };
    if *name == AccountName::default_account() {
        registry.note_default_object(uid, &client);
    }
    let shown_secret = format!(
        "Secret \"{secret_namespace}/{}\"",
        connection.credentials.secret_ref.name
    );
    // A scope found in the key list is kept for the same credential until the detail resync.
    let refresh = settings
        .detail_resync_interval
        .max(settings.resync_interval);
    let listed = last
        .as_ref()
        .and_then(|l| l.listed_for(&fingerprint, refresh, now))
        .cloned();
    let declared = connection.scope;
    let (outcome, found) =
        match check::probe(&client, declared, listed.as_ref().map(|(f, _)| f)).await {
            Ok(found) => (check::ready(&connection.api_url, &found), found),
            Err(e) => (
                check::failed(&connection.api_url, &shown_secret, &e),
                check::Found::default(),
            ),
        };
    let listed = match (declared, &outcome) {
        (None, Outcome::Ready { .. }) => Some(listed.unwrap_or_else(|| (found.clone(), now))),
        _ => None,
    };
    Ok(Step::Checked(Box::new(Checking {
        outcome,
        found,
        client: Some(client),
        fingerprint,
        read: Some(Read {
            secret_version,
            listed,
        }),
    })))
}

/// Where the account controllers run and how they build clients.
pub(super) struct Scope {
    /// Namespaces of Accounts (empty: all).
    pub watched: Vec<String>,
    /// Where ClusterAccount Secrets live.
    pub operator_namespace: String,
    /// Client settings besides key, addresses and budget (timeout, CA bundle, observer).
    pub template: crate::api::ClientConfig,
    /// Checks run at once per kind.
    pub concurrency: u16,
    /// The in-use trigger the managed kinds' watches feed, and the Accounts it starts.
    pub in_use: (
        in_use::InUseTrigger,
        futures::channel::mpsc::UnboundedReceiver<kube::runtime::reflector::ObjectRef<Account>>,
    ),
}

/// The two account controllers, the Secret and Namespace watches they need, until `stop`
/// resolves.
pub(super) async fn run<S, F>(ctx: Arc<Context>, scope: Scope, stop: S)
where
    S: Fn() -> F,
    F: std::future::Future<Output = ()> + Send + Sync + 'static,
{
    let Scope {
        watched,
        operator_namespace,
        template,
        concurrency,
        in_use: (in_use_trigger, in_use_starts),
    } = scope;
    let registry = ctx.accounts.clone();
    let _ = registry.operator_namespace.set(operator_namespace.clone());
    let _ = registry.template.set(template);
    let config = ControllerConfig::default().concurrency(concurrency);
    let kube = ctx.kube.clone();

    // Namespaces (metadata only), for the namespace selectors of ClusterAccounts and
    // SubAccounts; a namespace the cache receives (or sees relabelled), once it holds it, starts
    // the reconciles of the resources in it, which may have waited for it (see `dependents`):
    // from a watch event, or from a relist (after 410 Expired, see `arrivals`).
    let (namespaces, namespaces_writer) = reflected::<PartialObjectMeta<Namespace>>();
    let _ = registry.namespaces.set(namespaces.clone());
    let mut arrivals = arrivals::Arrivals::new(namespaces);
    let (watched_registry, relisted_registry) = (registry.clone(), registry.clone());
    let namespace_watch = until_stopped(
        namespaces_writer.reflect(
            watcher(
                Api::<PartialObjectMeta<Namespace>>::all(kube.clone()),
                watcher::Config::default(),
            )
            .default_backoff(),
        ),
        stop(),
    )
    .inspect(move |event| {
        if let Ok(event) = event {
            let relisted = arrivals.note(event);
            relisted
                .into_iter()
                .for_each(|name| relisted_registry.namespace_changed(name));
        }
    })
    // Watch events only, when the namespace is new or its labels changed (selectors read
    // nothing else) as far as kube's predicate knows: its cache starts empty and forgets a
    // namespace after an hour without events, so such a first event passes too, harmlessly (a
    // reconcile of a resource in order makes no call).
    .filter_map(|event| async move {
        match event {
            Ok(watcher::Event::Apply(namespace)) => Some(Ok::<_, watcher::Error>(namespace)),
            _ => None,
        }
    })
    .predicate_filter(predicates::labels, Default::default())
    .for_each(move |namespace| {
        if let Ok(namespace) = namespace {
            watched_registry.namespace_changed(namespace.name_any());
        }
        async {}
    });

    // ClusterAccounts, cluster-wide.
    let (clusters_reflected, clusters_writer) = reflected::<ClusterAccount>();
    let clusters = clusters_reflected.store().clone();
    let _ = registry.cluster_accounts.set(clusters_reflected);
    let watched_ctx = ctx.clone();
    let cluster_events = until_stopped(
        clusters_writer.reflect(
            watcher(Api::<ClusterAccount>::all(kube.clone()), watcher::Config::default())
                .default_backoff(),
        ),
        stop(),
    )
    .inspect(move |e| {
        // Not served: `default` is the flags'.
        wake_if_not_served(&watched_ctx, e);
        if let Ok(watcher::Event::Delete(obj)) = e {
            forget(&watched_ctx, &obj.account_name());
            if obj.account_name() == AccountName::default_account()
                && watched_ctx.accounts.has_flags_default()
            {
                // Access widens: the flags' `default` has no selectors (every namespace may use
                // it, and adopt through it).
                tracing::warn!(
                    "ClusterAccount \"default\" deleted: the account given by the operator's flags is used again, which every namespace may use and adopt through (it has no namespace selectors); create the object again to restrict it"
                );
            }
        }
    })
    .applied_objects()
    .predicate_filter(predicates::generation, Default::default());

    // Accounts, in the watched namespaces.
    let (accounts_reflected, accounts_writer) = reflected::<Account>();
    let accounts = accounts_reflected.store().clone();
    let _ = registry.accounts.set(accounts_reflected);
    in_use_trigger.read_from(accounts.clone());
    let watched_ctx = ctx.clone();
    let account_watch = super::namespaces::watch(
        &kube,
        &watched,
        &watcher::Config::default(),
        accounts_writer.as_reader(),
    );
    let account_events = until_stopped(accounts_writer.reflect(account_watch), stop())
        .inspect(move |e| {
            if let Ok(watcher::Event::Delete(obj)) = e {
                forget(&watched_ctx, &obj.account_name());
            }
            // Not served: no Account exists.
            wake_if_not_served(&watched_ctx, e);
        })
        .applied_objects()
        // A change of finalizers too: the in-use finalizer taken off while a user came is put
        // back (see `in_use`).
        .predicate_filter(
            predicates::generation.combine(predicates::finalizers),
            Default::default(),
        );

    // Secrets (metadata only) where account Secrets live, routed to the accounts naming them.
    let (to_clusters, cluster_trigger) = futures::channel::mpsc::unbounded();
    let (to_accounts, account_trigger) = futures::channel::mpsc::unbounded();
    let (cluster_cache, account_cache) = (clusters.clone(), accounts.clone());
    let secret_namespaces = triggers::secret_namespaces(&watched, &operator_namespace);
    let secret_watch = futures::stream::select_all(secret_namespaces.into_iter().map(|ns| {
        let api: Api<PartialObjectMeta<Secret>> = match &ns {
            None => Api::all(kube.clone()),
            Some(ns) => Api::namespaced(kube.clone(), ns),
        };
        watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed()
    }))
    .take_until(stop())
    .for_each(move |event| {
        if let Some(secret) = super::triggers::touched(&event) {
            let clusters = triggers::naming(&cluster_cache, secret, &operator_namespace);
            super::triggers::start(&to_clusters, clusters);
            let accounts = triggers::naming(&account_cache, secret, &operator_namespace);
            super::triggers::start(&to_accounts, accounts);
        }
        async {}
    });

    let cluster_controller = Controller::for_stream(cluster_events, clusters.clone())
        .reconcile_on(cluster_trigger)
        .with_config(config.clone())
        .graceful_shutdown_on(stop())
        .run(
            reconcile::<ClusterAccount>,
            super::common::error_policy,
            ctx.clone(),
        )
        .for_each(log_queue_error);
    let account_controller = Controller::for_stream(account_events, accounts.clone())
        .reconcile_on(account_trigger)
        .reconcile_on(in_use_starts.take_until(stop()))
        .with_config(config)
        .graceful_shutdown_on(stop())
        .run(reconcile::<Account>, super::common::error_policy, ctx)
        .for_each(log_queue_error);

    tokio::join!(
        namespace_watch,
        secret_watch,
        cluster_controller,
        account_controller
    );
}

/// Logs a watch failure the controller passed on (e.g. the account CRDs are not installed:
/// `helm upgrade` does not install new CRDs); the watch retries with backoff.
async fn log_queue_error<T, E: std::fmt::Display>(
    result: std::result::Result<T, kube::runtime::controller::Error<E, watcher::Error>>,
) {
    if let Err(kube::runtime::controller::Error::QueueError(e)) = result {
        tracing::warn!(error = %e, "cannot watch the account kinds; are the CRDs installed (`kubectl apply -f crds/`)?");
    }
}

/// Wakes the reconciles waiting on an account's first check (see [`AccountRegistry::usage`])
/// when `event` says the account kind is not served (its CRD is not installed): the cache says
/// so already, and their account resolves without a check.
fn wake_if_not_served<K>(ctx: &Context, event: &watcher::Result<watcher::Event<K>>) {
    if let Err(e) = event
        && not_served(e)
    {
        ctx.accounts.checks.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Account labels name the kind, and the namespace of an Account; `default` is labelled as
    /// the flags' client is.
    #[test]
    fn metric_labels() {
        assert_eq!(
            metric_label(&AccountName::default_account()),
            super::super::metrics::DEFAULT_ACCOUNT_LABEL
        );
        let account = AccountName::Namespaced {
            namespace: "team-a".into(),
            name: "billing".into(),
        };
        assert_eq!(metric_label(&account), "Account/team-a/billing");
    }
}
