//! Cluster-wide locks with a token and a TTL (leader election, the sampler's lease): a lock is
//! taken with `SET NX PX`, renewed and released only by its holder's token (lock_renew.lua,
//! lock_release.lua).

use std::time::Duration;

use fred::prelude::*;

use super::maintain::ttl_ms;
use super::reply::LockCode;
use super::{reply, RedisBroker};
use crate::redis::store::store;
use crate::{BrokerError, Coordinate};

impl Coordinate for RedisBroker {
    async fn try_lock(&self, key: &str, token: &str, ttl: Duration) -> Result<bool, BrokerError> {
        let ms = ttl_ms(ttl)?;
        let got: Option<String> = self
            .inner
            .client
            .set(
                key,
                token,
                Some(Expiration::PX(ms)),
                Some(SetOptions::NX),
                false,
            )
            .await
            .map_err(store)?;
        Ok(got.is_some())
    }

    async fn renew_lock(&self, key: &str, token: &str, ttl: Duration) -> Result<bool, BrokerError> {
        let args: Vec<Value> = vec![token.into(), ttl_ms(ttl)?.into()];
        let n = self.run(|s| &s.lock_renew, key.to_string(), args).await?;
        Ok(LockCode::from_reply(reply::int(&n, "lock_renew")?) == Some(LockCode::Held))
    }

    async fn release_lock(
        &self,
        key: &str,
        token: &str,
        channel: Option<&str>,
    ) -> Result<bool, BrokerError> {
        let args: Vec<Value> = vec![token.into(), channel.unwrap_or("").into()];
        let n = self.run(|s| &s.lock_release, key.to_string(), args).await?;
        Ok(LockCode::from_reply(reply::int(&n, "lock_release")?) == Some(LockCode::Held))
    }
}
