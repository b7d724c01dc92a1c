//! `mailtarget-operator run`: one kube-rs `Controller` per kind, sharing the reconcile engine
//! with `plan`/`apply`, plus metrics, health endpoints, leader election and graceful shutdown.

pub mod accounts;
pub mod cache;
pub mod claims;
pub mod common;
pub mod context;
pub mod converge;
pub mod detail;
pub mod error;
pub mod find;
pub mod identity;
pub mod leader;
mod lifecycle;
pub mod managed;
pub mod metrics;
pub mod namespaces;
pub mod placement;
pub mod readiness;
pub mod reflected;
pub mod revision;
pub mod secrets;
pub mod server;
pub mod status;
mod triggers;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::{WatchStreamExt, watcher};

use crate::api::Client as ApiClient;
use crate::cli::ApiArgs;
use crate::crd::{ApiKey, SendingDomain, SubAccount};
use common::until_stopped;
pub use context::{Context, Settings};
pub use error::{Error, Result};
use futures::channel::mpsc::unbounded;
pub use lifecycle::{run, run_elected, shutdown_signal};
use metrics::Metrics;
use reflected::{ReflectedWriter, reflected};
use triggers::{own_changes, touched};

/// Output format of the logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Arguments of `mailtarget-operator run`. Flags override the environment.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Watch only these namespaces: comma-separated, or the flag repeated (default: all
    /// namespaces). Each gets its own watches, so a Role in each suffices.
    #[arg(long, env = "WATCH_NAMESPACE", value_delimiter = ',')]
    pub namespace: Vec<String>,
    /// Reconcile only objects matching this label selector, to shard objects between instances
    /// (e.g. `shard=a`).
    #[arg(long, env = "LABEL_SELECTOR")]
    pub label_selector: Option<String>,
    /// Period of the drift check of each object, e.g. `5m` (jittered by up to 10%).
    #[arg(long, env = "MAILTARGET_RESYNC_INTERVAL", default_value = "5m", value_parser = humantime::parse_duration)]
    pub resync_interval: Duration,
    /// Period of the check of fields only the service's detail endpoints return (an API key's
    /// permissions and allowed IPs, a sub account's IP pool), one GET per such object, e.g.
    /// `1h`; raised to `--resync-interval` when shorter (equal: checked at every resync). Also
    /// how long an account keeps the scope it found in the key list before reading it again.
    #[arg(long, env = "MAILTARGET_DETAIL_RESYNC_INTERVAL", default_value = "1h", value_parser = humantime::parse_duration)]
    pub detail_resync_interval: Duration,
    /// Wait before the first verify-txt call of a new sending domain, doubled after each call.
    #[arg(long, env = "MAILTARGET_VERIFY_FIRST_INTERVAL", default_value = "5s", value_parser = humantime::parse_duration)]
    pub verify_first_interval: Duration,
    /// Longest wait between two verify-txt calls of an unverified sending domain, e.g. `10m`.
    #[arg(long, env = "MAILTARGET_VERIFY_MAX_INTERVAL", default_value = "10m", value_parser = humantime::parse_duration)]
    pub verify_max_interval: Duration,
    /// Address of the `/metrics`, `/healthz` and `/readyz` endpoints.
    #[arg(long, env = "METRICS_ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Elect a leader among replicas with a coordination.k8s.io Lease; only the leader reconciles.
    #[arg(long, env = "LEADER_ELECT", default_value_t = false)]
    pub leader_elect: bool,
    /// Namespace of the leader election Lease (default: the pod's namespace, else `default`).
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Name of the leader election Lease.
    #[arg(
        long,
        env = "LEADER_ELECTION_LEASE",
        default_value = "mailtarget-operator"
    )]
    pub leader_election_lease: String,
    /// How long a Lease stays held without renewal (whole seconds): another replica takes over
    /// at most this long after the leader stops renewing. The leader renews every 2/15 of it
    /// and writes nothing (to the service or to Kubernetes) once 2/3 of it passed since its
    /// last successful renewal was sent (its renew deadline), then exits.
    #[arg(long, env = "LEADER_ELECTION_LEASE_DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    pub leader_election_lease_duration: Duration,
    /// This replica's identity in the Lease and in Events (default: the pod name or host name).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Adoption policy of resources without the `mailtarget.co/adoption-policy` annotation:
    /// `adopt` or `adopt-or-create` take over existing objects of the account (and
    /// pre-existing Secrets) as releases before 2026-11 did. Unsafe in a shared cluster: any
    /// namespace's resource can then take over any object. Default: none.
    #[arg(long, env = "MAILTARGET_DEFAULT_ADOPTION_POLICY", value_enum)]
    pub default_adoption_policy: Option<crate::crd::AdoptionPolicy>,
    /// After SIGTERM or SIGINT, how long the reconciles in flight may take to finish before
    /// they are stopped; the process then releases the leader Lease (at most 2 s more) and
    /// exits, whatever the Kubernetes API does. Keep the Pod's terminationGracePeriodSeconds
    /// above this plus 3 s.
    #[arg(long, env = "MAILTARGET_SHUTDOWN_TIMEOUT", default_value = "20s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: Duration,
    /// Reconciles run at once per kind.
    #[arg(long, env = "MAILTARGET_RECONCILE_CONCURRENCY", default_value_t = 16)]
    pub reconcile_concurrency: u16,
    /// Namespace of the credentials Secrets of ClusterAccounts (as cert-manager's
    /// `--cluster-resource-namespace`). Default: the operator's own namespace (in a pod, its
    /// service account's; elsewhere, the kubeconfig context's).
    #[arg(long, env = "MAILTARGET_CLUSTER_RESOURCE_NAMESPACE")]
    pub cluster_resource_namespace: Option<String>,
    /// How to reach the service.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// The three controllers' shared pieces, built from [`RunArgs`].
pub struct Operator {
    ctx: Arc<Context>,
    /// Becomes true once every cache holds its first list.
    synced: tokio::sync::watch::Sender<bool>,
    /// Watched namespaces; empty: all.
    namespaces: Vec<String>,
    label_selector: Option<String>,
    concurrency: u16,
    /// Where ClusterAccount Secrets live (`None`: the Kubernetes client's default namespace).
    cluster_resource_namespace: Option<String>,
    /// Settings of account clients besides key, addresses and budget (`None`: defaults).
    client_template: Option<crate::api::ClientConfig>,
}

impl Operator {
    /// An operator using `kube` and `api` with `settings`.
    pub fn new(
        kube: Client,
        api: ApiClient,
        metrics: Arc<Metrics>,
        settings: Settings,
        identity: String,
    ) -> Self {
        let reporter = Reporter {
            controller: "mailtarget-operator".into(),
            instance: Some(identity),
        };
        Operator {
            ctx: Arc::new(Context::new(kube, api, metrics, settings, reporter)),
            synced: tokio::sync::watch::Sender::new(false),
            namespaces: Vec::new(),
            label_selector: None,
            concurrency: 16,
            cluster_resource_namespace: None,
            client_template: None,
        }
    }

    /// Sets the namespace of ClusterAccount Secrets (`None`: the Kubernetes client's default
    /// namespace, in a pod its own).
    pub fn with_cluster_resource_namespace(mut self, namespace: Option<String>) -> Self {
        self.cluster_resource_namespace = namespace.filter(|n| !n.is_empty());
        self
    }

    /// Sets the settings account clients take besides key, addresses and budget: timeout, CA
    /// bundle, retries, request observer (its key and addresses are replaced per account).
    pub fn with_client_template(mut self, template: crate::api::ClientConfig) -> Self {
        self.client_template = Some(template);
        self
    }

    /// Restricts the watches to `namespaces` (none: all namespaces; an `Option` gives one
    /// or none) and objects matching `label_selector`.
    pub fn scoped(
        mut self,
        namespaces: impl IntoIterator<Item = String>,
        label_selector: Option<String>,
    ) -> Self {
        self.namespaces = namespaces.into_iter().filter(|n| !n.is_empty()).collect();
        self.namespaces.sort();
        self.namespaces.dedup();
        self.label_selector = label_selector;
        self
    }

    /// Sets how many reconciles of one kind run at once.
    pub fn with_concurrency(mut self, concurrency: u16) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// The shared context (for tests and the metrics server).
    pub fn context(&self) -> Arc<Context> {
        self.ctx.clone()
    }

    /// Turns true once [`Self::run`] has every cache (the watched kinds and the managed
    /// Secrets) filled with its first list: what `/readyz` waits for on the leader.
    pub fn synced(&self) -> tokio::sync::watch::Receiver<bool> {
        self.synced.subscribe()
    }

    /// The watch of `K` with `config` over this operator's namespaces, filling `writer`.
    fn watch_into<K: namespaces::Watchable>(
        &self,
        writer: ReflectedWriter<K>,
        config: &watcher::Config,
    ) -> impl futures::Stream<Item = watcher::Result<watcher::Event<K>>> + Send + use<K> {
        let events =
            namespaces::watch(&self.ctx.kube, &self.namespaces, config, writer.as_reader());
        writer.reflect(events)
    }

    /// The controller of managed kind `K` over its cached watch (`writer` fills its store):
    /// `note` sees each event once the cache holds it; a change starts a reconcile when it is an
    /// input to one (`own_changes`), as does each of `triggers` and a change of the check of an
    /// Account its resources use. Runs until `stop` resolves, then finishes the reconciles in
    /// flight.
    fn managed_controller<K, N, S>(
        &self,
        writer: ReflectedWriter<K>,
        note: N,
        triggers: Vec<triggers::Trigger<K>>,
        config: &ControllerConfig,
        stop: &(impl Fn() -> S + Send + 'static),
    ) -> BoxFuture<'static, ()>
    where
        K: managed::Managed,
        N: FnMut(&watcher::Result<watcher::Event<K>>) + Send + 'static,
        S: std::future::Future<Output = ()> + Send + Sync + 'static,
    {
        // This operator's namespaces and label selector; `managedFields` dropped (see
        // `namespaces`): the operator never reads them, and every write adds an entry.
        let watch = watcher::Config::default().any_semantic();
        let watch = match &self.label_selector {
            Some(s) => watch.labels(s),
            None => watch,
        };
        let store = writer.as_reader();
        let events = until_stopped(self.watch_into(writer, &watch), stop())
            .inspect(note)
            .applied_objects()
            .predicate_filter(own_changes(), Default::default());
        let accounts = self.ctx.accounts.dependents(store.clone());
        let mut controller =
            Controller::for_stream(events, store).reconcile_on(accounts.take_until(stop()));
        for trigger in triggers {
            controller = controller.reconcile_on(trigger);
        }
        (controller.with_config(config.clone()))
            .graceful_shutdown_on(stop())
            .run(
                managed::reconcile::<K>,
                common::error_policy,
                self.ctx.clone(),
            )
            .for_each(|_| async {})
            .boxed()
    }

    /// Runs the three controllers until `shutdown` resolves (then they finish the reconciles in
    /// flight and stop).
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    ) {
        let stop = common::stop_signal(shutdown);
        let config = ControllerConfig::default().concurrency(self.concurrency);
        let secrets_config =
            watcher::Config::default().labels("app.kubernetes.io/managed-by=mailtarget-operator");

        // The managed Secrets, watched once into a cache so that reconciles find intact
        // Secrets without a GET (see `secrets`); managedFields are dropped to save memory. The
        // same watch triggers the Secrets' owners, and only after the cache holds the change:
        // a reconcile started by a deleted or altered Secret always sees it so (with separate
        // `owns` watches, it could run before this cache caught up, and leave the Secret
        // altered until the next resync).
        let (secrets_listed, secret_writer) = reflected::<Secret>();
        let _ = self.ctx.secret_cache.set(secrets_listed.store().clone());
        let (to_subs, subs_trigger) = unbounded();
        let (to_keys, keys_trigger) = unbounded();
        let (to_domains, domains_trigger) = unbounded();
        // Only a deleted or altered Secret starts its owners (`triggers::altered`).
        let ctx = self.ctx.clone();
        let secret_watch = until_stopped(self.watch_into(secret_writer, &secrets_config), stop())
            .for_each(move |event| {
                if let Some(secret) = triggers::altered(&ctx.digest, &event) {
                    triggers::start(&to_subs, triggers::owners(secret));
                    triggers::start(&to_keys, triggers::owners(secret));
                    triggers::start(&to_domains, triggers::owners(secret));
                }
                async {}
            });

        // Each managed kind: one cached watch, whose changes start a reconcile only when they
        // are inputs to one (`own_changes`: not the operator's status writes), and which tells
        // the Accounts its resources use when their in-use protection may change (see
        // `accounts::in_use`).
        let (in_use, in_use_starts) = accounts::in_use::InUseTrigger::channel();
        let (subs_listed, subs_writer) = reflected::<SubAccount>();
        let (keys_listed, keys_writer) = reflected::<ApiKey>();
        let (domains_listed, domains_writer) = reflected::<SendingDomain>();
        let subs_store = subs_listed.store().clone();
        let keys_store = keys_listed.store().clone();
        let domains_store = domains_listed.store().clone();
        let claims = &self.ctx.claims;
        let _ = claims.sub_accounts.set(subs_store.clone());
        let _ = claims.api_keys.set(keys_store.clone());
        let _ = claims.sending_domains.set(domains_store.clone());
        // Once the SubAccount cache holds a change (any change: a status that gets the sub
        // account's id too), the ApiKeys and SendingDomains that reference the sub account are
        // started: a resource waiting for its sub account's id always finds it in that cache
        // (with a separate watch of its own, it could run ahead of the cache and need a GET).
        let (to_keys_of_subs, keys_of_subs) = unbounded();
        let (to_domains_of_subs, domains_of_subs) = unbounded();
        let (keys, domains) = (keys_store.clone(), domains_store.clone());
        let subs_in_use = in_use.clone();
        let note_sub = move |event: &watcher::Result<watcher::Event<SubAccount>>| {
            if let Some(sub) = touched(event) {
                triggers::start(&to_keys_of_subs, triggers::referencing(&keys, sub));
                triggers::start(&to_domains_of_subs, triggers::referencing(&domains, sub));
            }
            subs_in_use.note(event);
        };
        let sub_accounts =
            self.managed_controller(subs_writer, note_sub, vec![subs_trigger], &config, &stop);
        let keys_in_use = in_use.clone();
        let api_keys = self.managed_controller(
            keys_writer,
            move |event| keys_in_use.note(event),
            vec![keys_trigger, keys_of_subs],
            &config,
            &stop,
        );
        let domains_in_use = in_use.clone();
        let domains = self.managed_controller(
            domains_writer,
            move |event| domains_in_use.note(event),
            vec![domains_trigger, domains_of_subs],
            &config,
            &stop,
        );

        // Readiness: every cache holds its first list (see `reflected`: the controllers wait for
        // their stores' too). A stop ends the waits (the watches are dropped): then not ready.
        let synced = {
            let synced = self.synced.clone();
            async move {
                let listed = futures::join!(
                    subs_listed.listed(),
                    keys_listed.listed(),
                    domains_listed.listed(),
                    secrets_listed.listed(),
                );
                synced.send_replace(listed.0 && listed.1 && listed.2 && listed.3);
            }
        };

        let template = self.client_template.clone().unwrap_or_else(|| {
            crate::api::ClientConfig::with_default_urls(String::new().into()).with_observer(
                Arc::new(metrics::ApiRequestMetrics::new(self.ctx.metrics.clone())),
            )
        });
        let accounts = accounts::run(
            self.ctx.clone(),
            accounts::Scope {
                watched: self.namespaces.clone(),
                operator_namespace: self
                    .cluster_resource_namespace
                    .clone()
                    .unwrap_or_else(|| self.ctx.kube.default_namespace().to_owned()),
                template,
                concurrency: self.concurrency,
                in_use: (in_use, in_use_starts),
            },
            stop,
        );

        tokio::join!(
            sub_accounts,
            api_keys,
            domains,
            secret_watch,
            synced,
            accounts
        );
    }
}
