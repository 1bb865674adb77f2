//! The Lua scripts of `chronos-protocol`, loaded into this broker's client: their text is the
//! same on every start, so each one's SHA1 is computed once and stays valid across restarts.

use fred::prelude::*;
use fred::types::scripts::Script;

use super::RedisBroker;
use crate::redis::store::store;
use crate::BrokerError;

/// Every script, as fred's EVALSHA handle.
pub(crate) type Scripts = chronos_protocol::Scripts<Script>;

/// The scripts of this version, with their SHA1s computed.
pub(crate) fn scripts() -> Scripts {
    chronos_protocol::sources().map(Script::from_lua)
}

/// SCRIPT LOAD of every script on every primary, so the first EVALSHA of each already hits.
pub(crate) async fn load_all(scripts: &Scripts, client: &Client) -> Result<(), BrokerError> {
    for (_, s) in scripts.all() {
        s.load(client).await.map_err(store)?;
    }
    Ok(())
}

impl RedisBroker {
    /// EVALSHA of `script` with `keys` declared (every key it touches: the first routes the
    /// call, and all of them share one hash tag), reloading the script on NOSCRIPT (after a
    /// Redis restart).
    pub(crate) async fn run(
        &self,
        script: impl Fn(&Scripts) -> &Script,
        keys: impl Into<fred::types::MultipleKeys> + Send,
        args: Vec<Value>,
    ) -> Result<Value, BrokerError> {
        let s = script(&self.inner.scripts);
        s.evalsha_with_reload::<Value, _, _>(&self.inner.client, keys, args)
            .await
            .map_err(store)
    }

    /// The names and SHA1s of every script, as loaded.
    pub fn script_shas(&self) -> Vec<(&'static str, String)> {
        self.inner
            .scripts
            .all()
            .into_iter()
            .map(|(n, s)| (n, s.sha1().to_string()))
            .collect()
    }
}
