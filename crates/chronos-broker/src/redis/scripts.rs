//! The Lua scripts, one per atomic transition, embedded from `src/scripts/<capability>/*.lua`,
//! each with the constants of the protocol (generated from `protocol.rs`) and the shared helpers
//! of `src/scripts/lib.lua` prepended.

use fred::prelude::*;
use fred::types::scripts::Script;

use super::{protocol, RedisBroker};
use crate::redis::store::store;
use crate::BrokerError;

macro_rules! scripts {
    ($($dir:ident: [$($name:ident),* $(,)?]),* $(,)?) => {
        /// Every script, with its SHA1 computed once at start-up.
        pub(crate) struct Scripts {
            $($(pub(crate) $name: Script,)*)*
        }

        impl Scripts {
            pub(crate) fn new() -> Self {
                let head = format!("{}{}", protocol::prologue(), include_str!("../scripts/lib.lua"));
                Self {
                    $($($name: Script::from_lua(format!(
                        "{head}{}",
                        include_str!(concat!(
                            "../scripts/", stringify!($dir), "/", stringify!($name), ".lua"
                        )),
                    )),)*)*
                }
            }

            /// All scripts with their names, for loading and for the test that loads each.
            pub(crate) fn all(&self) -> Vec<(&'static str, &Script)> {
                vec![$($((stringify!($name), &self.$name),)*)*]
            }
        }
    };
}

// One folder per capability, named as the module of src/redis/ that calls its scripts (locks
// serve both maintain.rs and schedules.rs, and live with the maintenance ones).
scripts!(
    enqueue: [enqueue, push],
    consume: [claim, start, complete, retry, snooze, backoff, dead, requeue],
    maintain: [
        due,
        forward,
        idle,
        reclaim,
        heartbeat,
        janitor,
        lock_renew,
        lock_release,
        drop_consumer,
    ],
    operate: [
        stats,
        admin_run,
        admin_archive,
        admin_delete,
        admin_cancel,
        admin_queue_delete,
        prioritize,
        edit,
    ],
    schedules: [
        leader_acquire,
        fence,
        fire,
        sched_register,
        registry_publish,
        registry_prune,
        sched_put,
        sched_run,
    ],
    flows: [chain_next, group_open, group_report],
    throttle: [permit, permit_return, permit_keep, admit, hold],
    settings: [settings_put],
    tenants: [tenant_put, tenant_stats],
);

impl Scripts {
    /// SCRIPT LOAD of every script on every primary, so the first EVALSHA of each already hits.
    pub(crate) async fn load_all(&self, client: &Client) -> Result<(), BrokerError> {
        for (_, s) in self.all() {
            s.load(client).await.map_err(store)?;
        }
        Ok(())
    }
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
