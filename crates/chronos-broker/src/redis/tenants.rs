//! The tenants of a queue over Redis: their settings in one hash per queue and their counts in
//! the tenants block (`QueueKeys::tenants`; the scheduling itself is in lib.lua, "Tenants").
//!
//! A tenant's settings are one field of the settings hash (`<prefix>tn:c`): the tenant key, or
//! `''` for the queue's default, holding `<weight> <concurrency> <backlog> <paused>` with `-`
//! for a field not stored, so an operator can read them with `redis-cli`.

use fred::prelude::*;

use super::{reply, RedisBroker};
use crate::redis::store::store;
use crate::{
    BrokerError, QueueName, TenantChange, TenantPage, TenantSettings, TenantStats, Tenants,
};

const CONTEXT: &str = "tenants";

impl Tenants for RedisBroker {
    async fn tenant_settings(
        &self,
        queue: &QueueName,
        tenant: Option<&str>,
    ) -> Result<TenantSettings, BrokerError> {
        let field = checked(tenant)?;
        let key = self.queue_keys(queue).tenant_settings();
        let v: Option<String> = self
            .inner
            .client
            .hget(key.as_str(), field)
            .await
            .map_err(store)?;
        Ok(decode(v.as_deref().unwrap_or("")))
    }

    async fn change_tenant_settings(
        &self,
        queue: &QueueName,
        tenant: Option<&str>,
        change: &TenantChange,
    ) -> Result<TenantSettings, BrokerError> {
        let field = checked(tenant)?;
        // Each value is checked on its own: the script merges it with what is stored.
        change.apply(&TenantSettings::default())?;
        let mut args: Vec<Value> = vec![field.into()];
        args.extend(change.fields().into_iter().map(|f| match f {
            None => Value::from(""),
            Some(None) => Value::from("-"),
            Some(Some(v)) => Value::from(v),
        }));
        let v = self
            .run(|s| &s.tenant_put, self.queue_keys(queue).tenants(), args)
            .await?;
        Ok(decode(&reply::string(v, CONTEXT)?))
    }

    async fn tenants(&self, queue: &QueueName, limit: usize) -> Result<TenantPage, BrokerError> {
        self.tenant_page(queue, limit, true).await
    }
}

impl RedisBroker {
    /// The busiest `limit` tenants of `queue` from its load set (O(limit) reads, however many
    /// tenants there are), and with `idle` also the tenants with settings of their own but no
    /// work (every settings field read: for an operator's listing, not for each metrics
    /// sample).
    pub(crate) async fn tenant_page(
        &self,
        queue: &QueueName,
        limit: usize,
        idle: bool,
    ) -> Result<TenantPage, BrokerError> {
        let args: Vec<Value> = vec![
            (limit.min(100_000) as i64).into(),
            if idle { "1" } else { "0" }.into(),
        ];
        let v = self
            .run(|s| &s.tenant_stats, self.queue_keys(queue).tenants(), args)
            .await?;
        let mut cols = reply::array(v, CONTEXT)?.into_iter();
        let mut next = || cols.next().unwrap_or(Value::Null);
        let default = decode(&reply::string(next(), CONTEXT)?);
        let count = |v: Value| reply::int(&v, CONTEXT).map(|n| n.max(0) as u64);
        let total = count(next())?;
        let waiting = count(next())?;
        let running = count(next())?;
        let mut tenants = Vec::new();
        for row in cols {
            let mut c = reply::array(row, CONTEXT)?.into_iter();
            let mut next = || c.next().unwrap_or(Value::Null);
            let tenant = reply::string(next(), CONTEXT)?;
            let waiting = count(next())?;
            let running = count(next())?;
            let ms = reply::int(&next(), CONTEXT)?;
            let ready = reply::int(&next(), CONTEXT)? == 1;
            let settings = decode(&reply::string(next(), CONTEXT)?);
            tenants.push(TenantStats {
                tenant,
                waiting,
                running,
                oldest_ms: (ms >= 0).then_some(ms),
                ready,
                settings,
            });
        }
        Ok(TenantPage {
            default,
            tenants,
            total,
            waiting,
            running,
        })
    }
}

/// The settings field of `tenant` (`''` for the default), checked.
fn checked(tenant: Option<&str>) -> Result<&str, BrokerError> {
    match tenant {
        Some(t) => {
            chronos_core::names::check_tenant(t)?;
            Ok(t)
        }
        None => Ok(""),
    }
}

/// Reads a stored value; a field that does not parse reads as not stored (the scripts do the
/// same).
fn decode(v: &str) -> TenantSettings {
    let f: Vec<&str> = v.split_whitespace().collect();
    let at = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok());
    TenantSettings {
        weight: at(0).and_then(|n| u32::try_from(n).ok()).filter(|&n| n > 0),
        concurrency: at(1).and_then(|n| u32::try_from(n).ok()).filter(|&n| n > 0),
        backlog: at(2).filter(|&n| n > 0),
        paused: at(3).map(|n| n == 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_values_read_back_field_by_field() {
        assert_eq!(decode(""), TenantSettings::default());
        assert_eq!(
            decode("3 - 100 1"),
            TenantSettings {
                weight: Some(3),
                concurrency: None,
                backlog: Some(100),
                paused: Some(true),
            }
        );
        assert_eq!(decode("x 2 - 0").concurrency, Some(2));
        assert_eq!(decode("x 2 - 0").paused, Some(false));
    }
}
