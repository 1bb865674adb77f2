//! The tenants of a queue (fair sharing, [`chronos_broker::Tenants`]): the busiest ones with
//! their counts and settings, and the changes an operator makes to a tenant's settings or to
//! the queue's default for all its tenants, as `chronos tenant` and the console's queue page
//! show and make them.

use chronos_broker::fred::prelude::{HashesInterface, SortedSetsInterface};
use chronos_broker::{
    Inspect, ManageSchedules, Operate, QueueName, RedisBroker, Schedules, TenantChange, TenantPage,
    TenantSettings, TenantStats, Tenants,
};
use serde::Serialize;

use crate::admin::Admin;
use crate::error::AdminError;
use crate::lookup::UnknownTenant;

/// Tenant keys read for a "did you mean" at most, per hash: this runs only on an error path,
/// and a queue with more tenants than this gets no suggestion.
const MAX_SUGGESTED_FROM: u64 = 10_000;

/// Most tenants one listing may ask for (the store reads every tenant's counts anyway; this
/// bounds the reply and the page).
pub const MAX_TENANT_LIST: usize = 1_000;

/// Stored settings of a tenant, or of a queue's default for all its tenants. A field is absent
/// (`null`) when nothing is stored: the default's value applies to a tenant, the built-in one
/// (weight 1, no cap, not paused) to the default.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct TenantSettingsRow {
    /// Share of starts relative to the other tenants.
    pub weight: Option<u32>,
    /// Most tasks of the tenant running at once, cluster-wide.
    pub concurrency: Option<u32>,
    /// Most tasks of the tenant waiting; enqueues past it fail.
    pub backlog: Option<u64>,
    /// A paused tenant's tasks wait until it is resumed.
    pub paused: Option<bool>,
}

impl From<&TenantSettings> for TenantSettingsRow {
    fn from(s: &TenantSettings) -> Self {
        Self {
            weight: s.weight,
            concurrency: s.concurrency,
            backlog: s.backlog,
            paused: s.paused,
        }
    }
}

impl TenantSettingsRow {
    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// One tenant of a queue for display.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TenantRow {
    /// The tenant key (untrusted text: pass it through [`crate::printable`] for a terminal).
    pub tenant: String,
    /// Tasks waiting for their turn.
    pub waiting: u64,
    /// Tasks started or fetched and not settled yet (what its concurrency cap counts).
    pub running: u64,
    /// When its next task to start was enqueued or made ready (unix ms of Redis' clock); None
    /// when none waits.
    pub oldest_ms: Option<i64>,
    /// Whether it is in the rotation now: a task waiting, under its cap, not paused.
    pub ready: bool,
    /// Its own stored settings.
    pub settings: TenantSettingsRow,
    /// What applies to it: its own settings laid over the queue's default (fields neither
    /// stores stay absent: the built-in values apply).
    pub effective: TenantSettingsRow,
}

impl TenantRow {
    fn new(t: &TenantStats, default: &TenantSettings) -> Self {
        Self {
            tenant: t.tenant.clone(),
            waiting: t.waiting,
            running: t.running,
            oldest_ms: t.oldest_ms,
            ready: t.ready,
            settings: (&t.settings).into(),
            effective: (&t.settings.over(default)).into(),
        }
    }

    /// Whether the tenant is paused, by its own setting or the default's.
    pub fn paused(&self) -> bool {
        self.effective.paused == Some(true)
    }

    /// How long its next task to start has waited at `now_ms` (zero when the clocks disagree);
    /// None when none waits.
    pub fn oldest_age_ms(&self, now_ms: i64) -> Option<u64> {
        self.oldest_ms
            .map(|t| u64::try_from(now_ms.saturating_sub(t)).unwrap_or(0))
    }
}

/// The tenants of a queue as one read sees them: the busiest first, with totals over all.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TenantList {
    /// The queue.
    pub queue: String,
    /// The queue's stored default for all its tenants.
    pub default: TenantSettingsRow,
    /// The tenants with the most tasks waiting (then running, then by key), at most the limit
    /// asked for.
    pub tenants: Vec<TenantRow>,
    /// Tenants in all (with work or settings of their own).
    pub total: u64,
    /// Tasks waiting in all tenants, including those not listed.
    pub waiting: u64,
    /// Tasks running in all tenants, including those not listed.
    pub running: u64,
}

impl TenantList {
    fn new(queue: &QueueName, page: &TenantPage) -> Self {
        Self {
            queue: queue.to_string(),
            default: (&page.default).into(),
            tenants: page
                .tenants
                .iter()
                .map(|t| TenantRow::new(t, &page.default))
                .collect(),
            total: page.total,
            waiting: page.waiting,
            running: page.running,
        }
    }

    /// Tenants left out of the listing.
    pub fn more(&self) -> u64 {
        self.total.saturating_sub(self.tenants.len() as u64)
    }

    /// True when the queue has no tenant and no default stored: it does not share by tenant.
    pub fn is_empty(&self) -> bool {
        self.total == 0 && self.default.is_empty()
    }
}

/// The settings of one tenant (or of the default) after a change.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TenantSettingsChanged {
    /// The queue.
    pub queue: String,
    /// The tenant; None for the queue's default for all its tenants.
    pub tenant: Option<String>,
    /// The settings as stored after the change.
    pub settings: TenantSettingsRow,
}

impl<B: Inspect + Operate + Schedules + ManageSchedules + Tenants + 'static> Admin<B> {
    /// The tenants of queue `name`: at most `limit` (up to [`MAX_TENANT_LIST`]) of those with
    /// the most waiting, with totals over all and the default settings.
    /// [`AdminError::QueueNotFound`] for a name that names no queue.
    pub async fn tenants(&self, name: &str, limit: usize) -> Result<TenantList, AdminError> {
        let q = self.require_queue(name).await?;
        let page = self
            .broker()
            .tenants(&q, limit.min(MAX_TENANT_LIST))
            .await?;
        Ok(TenantList::new(&q, &page))
    }

    /// The settings stored for `tenant` of queue `name` (None: the default for all tenants).
    pub async fn tenant_settings(
        &self,
        name: &str,
        tenant: Option<&str>,
    ) -> Result<TenantSettingsRow, AdminError> {
        let q = self.require_queue(name).await?;
        Ok((&self.broker().tenant_settings(&q, tenant).await?).into())
    }

    /// Applies `change` to the settings of `tenant` of queue `name` (None: the queue's default
    /// for all its tenants) in one atomic step; running servers apply it at their next fetch.
    /// A change that changes nothing is refused ([`AdminError::Invalid`]), as is a bad tenant
    /// key or an out-of-range value ([`chronos_broker::BrokerError::InvalidOption`]): nothing
    /// changed then.
    pub async fn change_tenant(
        &self,
        name: &str,
        tenant: Option<&str>,
        change: &TenantChange,
    ) -> Result<TenantSettingsChanged, AdminError> {
        if *change == TenantChange::new() {
            return Err(AdminError::Invalid(
                "nothing to change: name at least one setting".into(),
            ));
        }
        let q = self.require_queue(name).await?;
        let s = self
            .broker()
            .change_tenant_settings(&q, tenant, change)
            .await?;
        Ok(TenantSettingsChanged {
            queue: q.to_string(),
            tenant: tenant.map(str::to_string),
            settings: (&s).into(),
        })
    }

    /// Pauses `tenant` of queue `name` (None: through the default, every tenant that stores
    /// no pause setting of its own): its tasks wait (enqueues still succeed) and it leaves the
    /// rotation at once. Tasks already running finish.
    pub async fn pause_tenant(
        &self,
        name: &str,
        tenant: Option<&str>,
    ) -> Result<TenantSettingsChanged, AdminError> {
        self.change_tenant(name, tenant, &TenantChange::new().paused(Some(true)))
            .await
    }

    /// Resumes `tenant` of queue `name` (None: the default, which then pauses nobody). A
    /// tenant's own pause is removed, and when the default pauses every tenant, the tenant
    /// stores "not paused" so that it runs anyway.
    pub async fn resume_tenant(
        &self,
        name: &str,
        tenant: Option<&str>,
    ) -> Result<TenantSettingsChanged, AdminError> {
        let keep_running = match tenant {
            None => false,
            Some(_) => {
                let q = self.require_queue(name).await?;
                self.broker().tenant_settings(&q, None).await?.paused == Some(true)
            }
        };
        let paused = if keep_running { Some(false) } else { None };
        self.change_tenant(name, tenant, &TenantChange::new().paused(paused))
            .await
    }
}

impl Admin<RedisBroker> {
    /// Checks that `tenant` is a tenant of queue `name`: a task of it waits or runs (or is in
    /// the rotation), or a setting is stored for it. Else [`AdminError::TenantNotFound`] with
    /// the queue's tenants and the closest to the key, so that a typo in a pause or a cap does
    /// not store settings for a tenant that does not exist while the one meant runs on.
    /// (A tenant whose only tasks are delayed is not known yet.) Four reads.
    pub async fn require_tenant(&self, name: &str, tenant: &str) -> Result<(), AdminError> {
        let q = self.require_queue(name).await?;
        chronos_broker::names::check_tenant(tenant)?;
        // [stream, wake stream, waiting, rotation, held, settings, turns]: see
        // QueueKeys::tenants.
        let keys = self.broker().keyspace().queue(&q).tenants();
        let client = self.broker().client();
        let store = |e: chronos_broker::fred::error::Error| {
            AdminError::Broker(chronos_broker::BrokerError::Store(
                chronos_broker::StoreError::new(e, false),
            ))
        };
        let (from, to) = (format!("[{tenant}\0"), format!("({tenant}\u{1}"));
        for hash in [&keys[5], &keys[6]] {
            let found: bool = client.hexists(hash.as_str(), tenant).await.map_err(store)?;
            if found {
                return Ok(());
            }
        }
        for set in [&keys[2], &keys[4]] {
            let n: i64 = client
                .zlexcount(set.as_str(), from.as_str(), to.as_str())
                .await
                .map_err(store)?;
            if n > 0 {
                return Ok(());
            }
        }
        let mut known = Vec::new();
        for hash in [&keys[5], &keys[6]] {
            let len: u64 = client.hlen(hash.as_str()).await.map_err(store)?;
            if len <= MAX_SUGGESTED_FROM {
                let names: Vec<String> = client.hkeys(hash.as_str()).await.map_err(store)?;
                // '' is the default (settings) or the current turn; \x01... a pseudo-tenant.
                known.extend(
                    names
                        .into_iter()
                        .filter(|k| !k.is_empty() && !k.starts_with('\u{1}')),
                );
            }
        }
        Err(AdminError::TenantNotFound(Box::new(UnknownTenant::new(
            name, tenant, known,
        ))))
    }
}
