//! Fair sharing of one queue between tenants ([`crate::EnqueueOptions::tenant`]): the settings
//! each tenant has in the store, and what an operator sees of them.
//!
//! A queue's ready tasks of different tenants start in a weighted round-robin between the
//! tenants that have a task waiting, are under their concurrency cap and are not paused: each
//! start advances the tenant's turn by `1 / weight`, and the tenant with the earliest turn goes
//! next. A tenant that was idle comes back at the current turn, never with credit saved up.
//! Settings stored for one tenant override, field by field, the queue's default for all
//! tenants, which overrides the built-in one (weight 1, no cap, not paused).

use crate::BrokerError;

/// The most a weight may be: a tenant of weight 1000 starts 1000 tasks for each one of a
/// tenant of weight 1.
pub const MAX_TENANT_WEIGHT: u32 = 1000;

/// The settings of a tenant, or a queue's default for all its tenants, as stored. `None` is
/// "not stored here" (the default's value, else the built-in one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantSettings {
    /// Share of starts relative to other tenants (1 to [`MAX_TENANT_WEIGHT`]; built-in 1).
    pub weight: Option<u32>,
    /// Most tasks of the tenant running at once, cluster-wide (built-in: no cap).
    pub concurrency: Option<u32>,
    /// Most tasks of the tenant waiting (ready) in the queue: an enqueue, delayed or not, made
    /// while that many wait fails with [`BrokerError::TenantFull`] (built-in: no cap). A
    /// delayed task accepted under the cap is never refused later: when it falls due it joins
    /// the waiting tasks whatever their number then, so the cap can be passed by the delayed
    /// tasks accepted earlier.
    pub backlog: Option<u64>,
    /// A paused tenant's tasks wait (enqueues still succeed) until it is resumed.
    pub paused: Option<bool>,
}

impl TenantSettings {
    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// These settings laid over `default`, field by field.
    pub fn over(&self, default: &TenantSettings) -> TenantSettings {
        TenantSettings {
            weight: self.weight.or(default.weight),
            concurrency: self.concurrency.or(default.concurrency),
            backlog: self.backlog.or(default.backlog),
            paused: self.paused.or(default.paused),
        }
    }

    /// Checks the ranges: a weight of 1 to [`MAX_TENANT_WEIGHT`], a concurrency and a backlog
    /// cap of at least 1.
    pub fn validate(&self) -> Result<(), BrokerError> {
        if let Some(w) = self.weight {
            if w == 0 || w > MAX_TENANT_WEIGHT {
                return Err(BrokerError::InvalidOption(format!(
                    "tenant weight must be 1 to {MAX_TENANT_WEIGHT}, not {w}"
                )));
            }
        }
        if self.concurrency == Some(0) {
            return Err(BrokerError::InvalidOption(
                "tenant concurrency must be at least 1 (unset it to lift the cap)".into(),
            ));
        }
        if self.backlog == Some(0) {
            return Err(BrokerError::InvalidOption(
                "tenant backlog cap must be at least 1 (unset it to lift the cap)".into(),
            ));
        }
        Ok(())
    }
}

/// A change to the stored settings of a tenant (or of a queue's default): each field is left
/// as stored, set, or unset (back to the default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantChange {
    pub(crate) weight: Option<Option<u32>>,
    pub(crate) concurrency: Option<Option<u32>>,
    pub(crate) backlog: Option<Option<u64>>,
    pub(crate) paused: Option<Option<bool>>,
}

impl TenantChange {
    /// A change that changes nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the weight (`None`: unset).
    pub fn weight(mut self, w: Option<u32>) -> Self {
        self.weight = Some(w);
        self
    }

    /// Sets the concurrency cap (`None`: unset).
    pub fn concurrency(mut self, n: Option<u32>) -> Self {
        self.concurrency = Some(n);
        self
    }

    /// Sets the backlog cap (`None`: unset).
    pub fn backlog(mut self, n: Option<u64>) -> Self {
        self.backlog = Some(n);
        self
    }

    /// Pauses (`Some(true)`), resumes (`Some(false)`) or unsets the pause (`None`).
    pub fn paused(mut self, p: Option<bool>) -> Self {
        self.paused = Some(p);
        self
    }

    /// The change as the store takes it, field by field (weight, concurrency, backlog,
    /// paused): `None` leave, `Some(None)` unset, `Some(Some(text))` store.
    pub fn fields(&self) -> [Option<Option<String>>; 4] {
        let text = |v: Option<Option<u64>>| v.map(|o| o.map(|n| n.to_string()));
        [
            text(self.weight.map(|o| o.map(u64::from))),
            text(self.concurrency.map(|o| o.map(u64::from))),
            text(self.backlog),
            self.paused
                .map(|o| o.map(|p| if p { "1".to_string() } else { "0".to_string() })),
        ]
    }

    /// `current` with this change applied (checked with [`TenantSettings::validate`]).
    pub fn apply(&self, current: &TenantSettings) -> Result<TenantSettings, BrokerError> {
        let out = TenantSettings {
            weight: self.weight.unwrap_or(current.weight),
            concurrency: self.concurrency.unwrap_or(current.concurrency),
            backlog: self.backlog.unwrap_or(current.backlog),
            paused: self.paused.unwrap_or(current.paused),
        };
        out.validate()?;
        Ok(out)
    }
}

/// One tenant of a queue as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantStats {
    /// The tenant key.
    pub tenant: String,
    /// Tasks waiting for their turn.
    pub waiting: u64,
    /// Tasks started or fetched and not settled yet (what its concurrency cap counts).
    pub running: u64,
    /// When the next task of the tenant to start was enqueued or made ready (unix ms).
    pub oldest_ms: Option<i64>,
    /// Whether the tenant is in the rotation now (it has a task waiting, is under its cap and
    /// not paused).
    pub ready: bool,
    /// Its own stored settings.
    pub settings: TenantSettings,
}

/// The tenants of a queue with work, as one read sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantPage {
    /// The queue's default settings for all tenants.
    pub default: TenantSettings,
    /// Tenants with tasks waiting or running, or with settings of their own; the most waiting
    /// first (then the most running, then by key), at most the limit asked for.
    pub tenants: Vec<TenantStats>,
    /// How many tenants there are in all (with work or settings).
    pub total: u64,
    /// Tasks waiting and running in all tenants, including those left out of `tenants`.
    pub waiting: u64,
    /// See `waiting`.
    pub running: u64,
}
