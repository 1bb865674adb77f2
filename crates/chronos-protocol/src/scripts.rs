//! The set of scripts, one per atomic transition, embedded from `src/scripts/<capability>/*.lua`.
//!
//! [`Scripts`] is generic over what a script is to its user: [`sources`] gives each one's full
//! text (the [`prologue`](crate::prologue), then `src/scripts/lib.lua`, then its own file), and
//! the broker maps that to its client's loaded script type, so this crate needs no Redis client.

macro_rules! scripts {
    ($($dir:ident: [$($name:ident),* $(,)?]),* $(,)?) => {
        /// One value per script, named as the script's file (`enqueue` is
        /// `src/scripts/enqueue/enqueue.lua`).
        #[derive(Debug, Clone)]
        pub struct Scripts<T> {
            $($(
                #[doc = concat!("`src/scripts/", stringify!($dir), "/", stringify!($name), ".lua`")]
                pub $name: T,
            )*)*
        }

        impl<T> Scripts<T> {
            /// Every script's value with its name, in the order of the listing.
            pub fn all(&self) -> Vec<(&'static str, &T)> {
                vec![$($((stringify!($name), &self.$name),)*)*]
            }

            /// The same set with `f` applied to each value.
            pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> Scripts<U> {
                Scripts { $($($name: f(self.$name),)*)* }
            }
        }

        /// The full text of every script, ready for `SCRIPT LOAD`/`EVAL`: the same on every
        /// call, so each script's SHA1 is stable for a given version of this crate.
        pub fn sources() -> Scripts<String> {
            let head = format!("{}{}", crate::prologue(), include_str!("scripts/lib.lua"));
            Scripts {
                $($($name: format!(
                    "{head}{}",
                    include_str!(concat!(
                        "scripts/", stringify!($dir), "/", stringify!($name), ".lua"
                    )),
                ),)*)*
            }
        }
    };
}

// One folder per capability, named as the broker module that calls its scripts (locks serve
// both the maintenance and the schedules modules, and live with the maintenance ones).
scripts!(
    enqueue: [enqueue, push],
    consume: [claim, start, complete, retry, snooze, backoff, cancel, dead, requeue],
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
        dedup_release,
        zset_page,
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
    settings: [settings_put, events_on],
    tenants: [tenant_put, tenant_stats],
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_starts_with_the_prologue_and_the_helpers() {
        let prologue = crate::prologue();
        let all = sources();
        assert!(all.all().len() >= 30);
        for (name, text) in all.all() {
            assert!(text.starts_with(&prologue), "{name}");
            assert!(text.len() > prologue.len() + 100, "{name} is empty");
        }
    }
}

/// Producer contract v1 (`contract/CONTRACT.md`): the enqueue scripts' full text is checked
/// into `contract/v1/`, where producers in other languages load it from. A change to a script
/// or to the helpers it includes changes that text; `CHRONOS_BLESS=1` rewrites it, and the diff
/// is then reviewed against the contract (its keys and arguments must not change).
#[cfg(test)]
mod contract {
    use super::sources;

    #[test]
    fn the_contract_scripts_are_the_enqueue_scripts_of_this_version() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/contract/v1");
        let all = sources();
        for (name, text) in [("push", &all.push), ("enqueue", &all.enqueue)] {
            let path = format!("{dir}/{name}.lua");
            if std::env::var_os("CHRONOS_BLESS").is_some() {
                std::fs::write(&path, text).expect("write the script");
            }
            let stored = std::fs::read_to_string(&path).expect("read the script");
            assert!(
                stored == *text,
                "{path} differs from the {name} script of this version: run the tests with \
                 CHRONOS_BLESS=1 and review the change against contract/CONTRACT.md"
            );
        }
    }
}
