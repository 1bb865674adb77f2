//! One forwarding macro for every capability: the `&T`, `Arc<T>` and `Box<T>` impls below, and
//! any wrapper that passes a capability to a broker it holds ([`crate::forward!`]). The method
//! lists live here once; the traits have no default bodies, so a wrapper that forgets a method,
//! or a capability, does not compile.

use std::sync::Arc;

/// Writes the methods of one capability trait inside an `impl` block, each passing its
/// arguments to the broker the wrapper holds.
///
/// * `forward!(Consume => inner)`: every method calls `self.inner` (write the associated
///   `type Reader = B::Reader;` yourself).
/// * `forward!(Consume => inner, before hook)`: each method first calls
///   `self.hook("method_name")` (`fn hook(&self, method: &'static str) -> Result<(), BrokerError>`),
///   so a wrapper can count calls or inject a failure; an `Err` fails the call of a method that
///   answers a `Result`, and is dropped for the two that do not (`close_reader`, `interrupter`).
///
/// A wrapper that changes one method of a capability writes that `impl` by hand; the compiler
/// then lists any method it forgot.
///
/// ```
/// use chronos_core::{forward, BrokerError, Enqueue, Inspect};
///
/// /// Counts the calls that reach the broker it wraps.
/// struct Counting<B> {
///     inner: B,
///     calls: std::sync::atomic::AtomicU64,
/// }
///
/// impl<B> Counting<B> {
///     fn count(&self, _method: &'static str) -> Result<(), BrokerError> {
///         self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
///         Ok(())
///     }
/// }
///
/// impl<B: Enqueue> Enqueue for Counting<B> {
///     forward!(Enqueue => inner, before count);
/// }
///
/// impl<B: Inspect> Inspect for Counting<B> {
///     forward!(Inspect => inner);
/// }
/// ```
#[macro_export]
macro_rules! forward {
    ($trait:ident => $field:ident) => {
        $crate::forward!(@methods $trait, (field $field));
    };
    ($trait:ident => $field:ident, before $hook:ident) => {
        $crate::forward!(@methods $trait, (hook $field $hook));
    };
    (@methods Enqueue, $how:tt) => {
        $crate::forward!(@emit $how
            fn enqueue(&self, tasks: Vec<$crate::NewTask>) -> Result<Vec<Result<$crate::TaskInfo, $crate::BrokerError>>, $crate::BrokerError>;
        );
    };
    (@methods Results, $how:tt) => {
        $crate::forward!(@emit $how
            fn outcome(&self, queue: &$crate::QueueName, id: &str) -> Result<$crate::TaskOutcome, $crate::BrokerError>;
            fn progress(&self, queue: &$crate::QueueName, id: &str) -> Result<Option<$crate::TaskProgress>, $crate::BrokerError>;
            fn wait_outcome(&self, queue: &$crate::QueueName, id: &str, timeout: ::std::time::Duration) -> Result<$crate::TaskOutcome, $crate::BrokerError>;
        );
    };
    (@methods Consume, $how:tt) => {
        $crate::forward!(@emit $how
            type Reader;
            fn open_reader(&self) -> Result<Self::Reader, $crate::BrokerError>;
            plain fn close_reader(&self, reader: Self::Reader) -> ();
            fn ensure_queue(&self, queue: &$crate::QueueName) -> Result<(), $crate::BrokerError>;
            fn fetch(&self, reader: &mut Self::Reader, queue: &$crate::QueueName, consumer: &str, carry: &[$crate::Settlement], count: usize, block: ::std::time::Duration) -> Result<$crate::Fetched, $crate::BrokerError>;
            fn start(&self, queue: &$crate::QueueName, leases: &[$crate::LeaseId]) -> Result<Vec<$crate::StartOutcome>, $crate::BrokerError>;
            fn settle(&self, settlements: &[$crate::Settlement]) -> Result<Vec<$crate::Settled>, $crate::BrokerError>;
            fn watch(&self, reader: &mut Self::Reader, queues: &[$crate::QueueName], consumer: &str, count: usize, block: ::std::time::Duration) -> Result<Option<Vec<(usize, $crate::Fetched)>>, $crate::BrokerError>;
            plain fn interrupter(&self, reader: &Self::Reader) -> Option<$crate::Interrupt>;
        );
    };
    (@methods Maintain, $how:tt) => {
        $crate::forward!(@emit $how
            fn forward_due(&self, queue: &$crate::QueueName, limit: usize) -> Result<u64, $crate::BrokerError>;
            fn reclaim_idle(&self, queue: &$crate::QueueName, min_idle: ::std::time::Duration, limit: usize) -> Result<$crate::Reclaimed, $crate::BrokerError>;
            fn keep_alive(&self, queue: &$crate::QueueName, consumer: &str, msg_ids: &[String], updates: &[$crate::ProgressUpdate]) -> Result<Vec<String>, $crate::BrokerError>;
            fn trim(&self, queue: &$crate::QueueName, archive_max_age: ::std::time::Duration, archive_max_len: u64, limit: usize) -> Result<u64, $crate::BrokerError>;
            fn consumers(&self, queue: &$crate::QueueName) -> Result<Vec<(String, u64, u64)>, $crate::BrokerError>;
            fn record_timings(&self, queue: &$crate::QueueName, deltas: &[$crate::TimingDelta]) -> Result<(), $crate::BrokerError>;
            fn publish_server(&self, record: &$crate::ServerRecord, ttl: ::std::time::Duration) -> Result<(), $crate::BrokerError>;
            fn remove_server(&self, id: &str) -> Result<(), $crate::BrokerError>;
            fn remove_consumer(&self, queue: &$crate::QueueName, consumer: &str) -> Result<bool, $crate::BrokerError>;
            fn cancel_requested(&self, queue: &$crate::QueueName, msg_ids: &[String]) -> Result<Vec<String>, $crate::BrokerError>;
            fn reclaimed_dead(&self, queue: &$crate::QueueName, limit: usize) -> Result<Vec<$crate::DeadTask>, $crate::BrokerError>;
            fn ack_reclaimed(&self, queue: &$crate::QueueName, task_ids: &[String]) -> Result<u64, $crate::BrokerError>;
            fn forward_due_next(&self, queue: &$crate::QueueName, limit: usize) -> Result<$crate::Forwarded, $crate::BrokerError>;
            fn signals(&self) -> Result<Option<$crate::Signals>, $crate::BrokerError>;
        );
    };
    (@methods Coordinate, $how:tt) => {
        $crate::forward!(@emit $how
            fn try_lock(&self, key: &str, token: &str, ttl: ::std::time::Duration) -> Result<bool, $crate::BrokerError>;
            fn renew_lock(&self, key: &str, token: &str, ttl: ::std::time::Duration) -> Result<bool, $crate::BrokerError>;
            fn release_lock(&self, key: &str, token: &str, channel: Option<&str>) -> Result<bool, $crate::BrokerError>;
        );
    };
    (@methods Inspect, $how:tt) => {
        $crate::forward!(@emit $how
            fn queues(&self) -> Result<Vec<$crate::QueueName>, $crate::BrokerError>;
            fn queue_stats(&self, queue: &$crate::QueueName) -> Result<$crate::QueueStats, $crate::BrokerError>;
            fn task(&self, queue: &$crate::QueueName, id: &str) -> Result<Option<$crate::TaskRecord>, $crate::BrokerError>;
            fn list_tasks(&self, queue: &$crate::QueueName, state: $crate::TaskState, offset: usize, limit: usize) -> Result<Vec<$crate::TaskRecord>, $crate::BrokerError>;
            fn set_paused(&self, queue: &$crate::QueueName, paused: bool) -> Result<(), $crate::BrokerError>;
            fn paused_queues(&self) -> Result<Vec<$crate::QueueName>, $crate::BrokerError>;
            fn servers(&self) -> Result<Vec<$crate::ServerRecord>, $crate::BrokerError>;
            fn live_servers(&self) -> Result<Vec<String>, $crate::BrokerError>;
            fn timings(&self, queue: &$crate::QueueName, from_ms: i64, to_ms: i64) -> Result<Vec<$crate::TimingMinute>, $crate::BrokerError>;
            fn scheduler_leader(&self) -> Result<Option<$crate::LeaderInfo>, $crate::BrokerError>;
        );
    };
    (@methods Schedules, $how:tt) => {
        $crate::forward!(@emit $how
            fn acquire_leadership(&self, token: &str, instance: &str, ttl: ::std::time::Duration, min_epoch: u64) -> Result<Option<u64>, $crate::BrokerError>;
            fn renew_leadership(&self, token: &str, ttl: ::std::time::Duration) -> Result<bool, $crate::BrokerError>;
            fn resign_leadership(&self, token: &str) -> Result<bool, $crate::BrokerError>;
            fn leader(&self) -> Result<Option<$crate::LeaderInfo>, $crate::BrokerError>;
            fn resignations(&self) -> Result<$crate::__private::Receiver<()>, $crate::BrokerError>;
            fn fence(&self, queue: &$crate::QueueName, epoch: u64) -> Result<u64, $crate::BrokerError>;
            fn register_schedules(&self, queue: &$crate::QueueName, schedule_ids: &[String]) -> Result<Vec<i64>, $crate::BrokerError>;
            fn fire(&self, queue: &$crate::QueueName, epoch: u64, triggers: Vec<$crate::Trigger>, dedup_ttl: ::std::time::Duration, missed: u64) -> Result<Vec<$crate::FireOutcome>, $crate::BrokerError>;
            fn fire_state(&self, queue: &$crate::QueueName, schedule_ids: &[String]) -> Result<Vec<$crate::FireState>, $crate::BrokerError>;
            fn fire_history(&self, queue: &$crate::QueueName, schedule_id: &str) -> Result<Vec<$crate::FireRecord>, $crate::BrokerError>;
            fn publish_schedules(&self, instance: &str, entries: &[$crate::ScheduleEntry]) -> Result<bool, $crate::BrokerError>;
            fn publish_schedule_defs(&self, defs: &[$crate::ScheduleDef]) -> Result<(), $crate::BrokerError>;
            fn registered_defs(&self, instance: &str, live_within: ::std::time::Duration, known: &[String]) -> Result<Vec<$crate::ScheduleDef>, $crate::BrokerError>;
            fn schedules(&self, stale_after: ::std::time::Duration, remove_after: ::std::time::Duration) -> Result<Vec<$crate::ScheduleEntry>, $crate::BrokerError>;
            fn prune_schedules(&self, remove_after: ::std::time::Duration, full: bool) -> Result<Vec<String>, $crate::BrokerError>;
            fn scheduler_metrics(&self) -> Result<$crate::SchedulerMetrics, $crate::BrokerError>;
        );
    };
    (@methods ManageSchedules, $how:tt) => {
        $crate::forward!(@emit $how
            fn schedule_revision(&self) -> Result<u64, $crate::BrokerError>;
            fn schedule_defs(&self) -> Result<Vec<$crate::StoredDef>, $crate::BrokerError>;
            fn schedule_def(&self, id: &str) -> Result<Option<$crate::StoredDef>, $crate::BrokerError>;
            fn put_schedule_def(&self, id: &str, expected: Option<&[u8]>, new: Option<&$crate::ScheduleDef>) -> Result<$crate::PutOutcome, $crate::BrokerError>;
            fn run_schedule(&self, queue: &$crate::QueueName, schedule_id: &str, request: &str, task: $crate::NewTask) -> Result<$crate::FireOutcome, $crate::BrokerError>;
            fn forget_fire_state(&self, queue: &$crate::QueueName, schedule_ids: &[String]) -> Result<(), $crate::BrokerError>;
        );
    };
    (@methods Operate, $how:tt) => {
        $crate::forward!(@emit $how
            fn act(&self, queue: &$crate::QueueName, id: &str, action: $crate::TaskAction) -> Result<$crate::ActionOutcome, $crate::BrokerError>;
            fn act_many(&self, queue: &$crate::QueueName, ids: &[String], action: $crate::TaskAction) -> Result<Vec<$crate::ActionOutcome>, $crate::BrokerError>;
            fn act_all(&self, queue: &$crate::QueueName, state: $crate::TaskState, filter: &$crate::TaskFilter, action: $crate::TaskAction, chunk: usize) -> Result<$crate::BulkReport, $crate::BrokerError>;
            fn list_page(&self, queue: &$crate::QueueName, state: $crate::TaskState, filter: &$crate::TaskFilter, cursor: Option<&str>, limit: usize) -> Result<$crate::TaskPage, $crate::BrokerError>;
            fn delete_queue(&self, queue: &$crate::QueueName, force: bool) -> Result<u64, $crate::BrokerError>;
            fn history(&self, queue: &$crate::QueueName, span: $crate::HistorySpan) -> Result<Vec<$crate::HistoryPoint>, $crate::BrokerError>;
            fn all_queue_stats(&self) -> Result<Vec<($crate::QueueName, $crate::QueueStats)>, $crate::BrokerError>;
            fn prioritize(&self, queue: &$crate::QueueName, id: &str, priority: $crate::Priority) -> Result<$crate::ActionOutcome, $crate::BrokerError>;
            fn edit(&self, queue: &$crate::QueueName, id: &str, edit: &$crate::TaskEdit) -> Result<$crate::ActionOutcome, $crate::BrokerError>;
        );
    };
    (@methods Flows, $how:tt) => {
        $crate::forward!(@emit $how
            fn enqueue_successor(&self, task: $crate::NewTask) -> Result<bool, $crate::BrokerError>;
            fn finish_chain(&self, queue: &$crate::QueueName, chain_id: &str, result: Option<Vec<u8>>, keep: ::std::time::Duration) -> Result<(), $crate::BrokerError>;
            fn chain_state(&self, chain: &$crate::ChainInfo) -> Result<$crate::ChainStatus, $crate::BrokerError>;
            fn open_group(&self, group: &$crate::GroupRecord) -> Result<$crate::GroupCreated, $crate::BrokerError>;
            fn report_member(&self, report: &$crate::MemberReport) -> Result<$crate::MemberOutcome, $crate::BrokerError>;
            fn group_state(&self, queue: &$crate::QueueName, group: &str) -> Result<Option<$crate::GroupState>, $crate::BrokerError>;
            fn group_results(&self, queue: &$crate::QueueName, group: &str, cursor: u64, count: usize) -> Result<$crate::MemberPage, $crate::BrokerError>;
        );
    };
    (@methods Throttle, $how:tt) => {
        $crate::forward!(@emit $how
            fn acquire_permits(&self, queue: &$crate::QueueName, holder: &str, want: usize, limit: &$crate::PermitLimit) -> Result<$crate::Permits, $crate::BrokerError>;
            fn return_permits(&self, queue: &$crate::QueueName, holder: &str, limit: &$crate::PermitLimit, grant: Option<(&str, usize)>, tokens: &[String]) -> Result<u64, $crate::BrokerError>;
            fn keep_permits(&self, queue: &$crate::QueueName, tokens: &[String], ttl: ::std::time::Duration) -> Result<u64, $crate::BrokerError>;
            fn admit(&self, queue: &$crate::QueueName, deliveries: &[($crate::LeaseId, String)], limit: &$crate::KeyRate) -> Result<Vec<$crate::Admission>, $crate::BrokerError>;
        );
    };
    (@methods Settings, $how:tt) => {
        $crate::forward!(@emit $how
            fn queue_settings(&self, queue: &$crate::QueueName) -> Result<$crate::QueueSettings, $crate::BrokerError>;
            fn change_queue_settings(&self, queue: &$crate::QueueName, change: &$crate::SettingsChange) -> Result<$crate::QueueSettings, $crate::BrokerError>;
        );
    };
    (@methods Tenants, $how:tt) => {
        $crate::forward!(@emit $how
            fn tenant_settings(&self, queue: &$crate::QueueName, tenant: Option<&str>) -> Result<$crate::TenantSettings, $crate::BrokerError>;
            fn change_tenant_settings(&self, queue: &$crate::QueueName, tenant: Option<&str>, change: &$crate::TenantChange) -> Result<$crate::TenantSettings, $crate::BrokerError>;
            fn tenants(&self, queue: &$crate::QueueName, limit: usize) -> Result<$crate::TenantPage, $crate::BrokerError>;
        );
    };
    (@methods SampleQueues, $how:tt) => {
        $crate::forward!(@emit $how
            fn sampler_lease(&self, holder: &str, ttl: ::std::time::Duration) -> Result<bool, $crate::BrokerError>;
            fn release_sampler_lease(&self, holder: &str) -> Result<(), $crate::BrokerError>;
            fn sample_queue(&self, queue: &$crate::QueueName) -> Result<$crate::QueueSample, $crate::BrokerError>;
        );
    };
    (@methods Events, $how:tt) => {
        $crate::forward!(@emit $how
            type EventReader;
            fn open_event_reader(&self) -> Result<Self::EventReader, $crate::BrokerError>;
            fn set_events(&self, queue: &$crate::QueueName, on: bool) -> Result<(), $crate::BrokerError>;
            fn events_on(&self, queue: &$crate::QueueName) -> Result<bool, $crate::BrokerError>;
            fn last_event_id(&self, queue: &$crate::QueueName) -> Result<String, $crate::BrokerError>;
            fn read_events(&self, reader: &mut Self::EventReader, queue: &$crate::QueueName, after: &str, count: usize, block: ::std::time::Duration) -> Result<Vec<$crate::TaskEvent>, $crate::BrokerError>;
            fn create_event_group(&self, queue: &$crate::QueueName, group: &str) -> Result<(), $crate::BrokerError>;
            fn read_event_group(&self, reader: &mut Self::EventReader, queue: &$crate::QueueName, group: &str, consumer: &str, pending_after: Option<&str>, count: usize, block: ::std::time::Duration) -> Result<Vec<$crate::TaskEvent>, $crate::BrokerError>;
            fn claim_events(&self, queue: &$crate::QueueName, group: &str, consumer: &str, min_idle: ::std::time::Duration, count: usize) -> Result<Vec<$crate::TaskEvent>, $crate::BrokerError>;
            fn ack_events(&self, queue: &$crate::QueueName, group: &str, ids: &[String]) -> Result<u64, $crate::BrokerError>;
        );
    };
    (@emit $how:tt) => {};
    (@emit (ptr) type $assoc:ident; $($rest:tt)*) => {
        type $assoc = T::$assoc;
        $crate::forward!(@emit (ptr) $($rest)*);
    };
    (@emit $how:tt type $assoc:ident; $($rest:tt)*) => {
        $crate::forward!(@emit $how $($rest)*);
    };
    (@emit $how:tt plain fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty; $($rest:tt)*) => {
        $crate::forward!(@call $how, $name, ($($arg: $ty),*), $out);
        $crate::forward!(@emit $how $($rest)*);
    };
    (@emit (hook $field:ident $hook:ident) fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty; $($rest:tt)*) => {
        fn $name(&self $(, $arg: $ty)*) -> impl ::std::future::Future<Output = $out> + Send {
            async move {
                self.$hook(stringify!($name))?;
                self.$field.$name($($arg),*).await
            }
        }
        $crate::forward!(@emit (hook $field $hook) $($rest)*);
    };
    (@emit $how:tt fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty; $($rest:tt)*) => {
        $crate::forward!(@call $how, $name, ($($arg: $ty),*), $out);
        $crate::forward!(@emit $how $($rest)*);
    };
    (@call (ptr), $name:ident, ($($arg:ident: $ty:ty),*), $out:ty) => {
        fn $name(&self $(, $arg: $ty)*) -> impl ::std::future::Future<Output = $out> + Send {
            (**self).$name($($arg),*)
        }
    };
    (@call (field $field:ident), $name:ident, ($($arg:ident: $ty:ty),*), $out:ty) => {
        fn $name(&self $(, $arg: $ty)*) -> impl ::std::future::Future<Output = $out> + Send {
            self.$field.$name($($arg),*)
        }
    };
    (@call (hook $field:ident $hook:ident), $name:ident, ($($arg:ident: $ty:ty),*), $out:ty) => {
        fn $name(&self $(, $arg: $ty)*) -> impl ::std::future::Future<Output = $out> + Send {
            // No `Result` to carry a failure: the hook sees the call, and its answer is dropped.
            let _ = self.$hook(stringify!($name));
            self.$field.$name($($arg),*)
        }
    };
}

/// Implements a capability for `&T`, `Arc<T>` and `Box<T>` when `T` has it, so a runtime can be
/// handed a shared or borrowed broker without a wrapper type.
macro_rules! pointers {
    ($($trait:ident),*) => {$(
        impl<T: $crate::$trait + ?Sized> $crate::$trait for &T {
            $crate::forward!(@methods $trait, (ptr));
        }
        impl<T: $crate::$trait + ?Sized> $crate::$trait for Arc<T> {
            $crate::forward!(@methods $trait, (ptr));
        }
        impl<T: $crate::$trait + ?Sized> $crate::$trait for Box<T> {
            $crate::forward!(@methods $trait, (ptr));
        }
    )*};
}

pointers!(
    Enqueue,
    Results,
    Consume,
    Maintain,
    Coordinate,
    Inspect,
    Schedules,
    ManageSchedules,
    Operate,
    Flows,
    Throttle,
    Settings,
    Tenants,
    SampleQueues,
    Events
);
