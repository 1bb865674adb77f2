//! Fair sharing between the tenants of a queue: their stored settings and their counts.

use std::future::Future;

use crate::{BrokerError, QueueName, TenantChange, TenantPage, TenantSettings};

/// Reads and changes the settings of a queue's tenants ([`TenantSettings`]) and lists them
/// with their counts. Settings live in the store, so every server applies a change at its next
/// fetch: a paused tenant leaves the rotation at once, a raised cap lets its tasks start.
///
/// Every call is one atomic step, and a change stores absolute values (safe to re-send).
/// Implemented for `&T`, `Arc<T>` and `Box<T>` when `T` has it.
pub trait Tenants: Send + Sync {
    /// The settings stored for `tenant` of `queue` (`None`: the queue's default for all its
    /// tenants); all fields `None` when nothing is stored.
    fn tenant_settings(
        &self,
        queue: &QueueName,
        tenant: Option<&str>,
    ) -> impl Future<Output = Result<TenantSettings, BrokerError>> + Send;

    /// Applies `change` to the settings of `tenant` (`None`: the default) in one atomic step,
    /// puts the tenants it concerns in or out of the rotation, and returns the settings as
    /// stored. Values out of range are refused with [`BrokerError::InvalidOption`].
    fn change_tenant_settings(
        &self,
        queue: &QueueName,
        tenant: Option<&str>,
        change: &TenantChange,
    ) -> impl Future<Output = Result<TenantSettings, BrokerError>> + Send;

    /// The tenants of `queue` with work or settings, the most waiting first, at most `limit`
    /// of them, with totals over all.
    fn tenants(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> impl Future<Output = Result<TenantPage, BrokerError>> + Send;
}
