//! Every capability trait is implemented for `&T`, `Arc<T>` and `Box<T>` when `T` has it, by
//! calling `T`. So a runtime can be handed a shared broker (`Arc<MyBroker>`) or a borrowed one
//! without a wrapper type, and a wrapper that adds metrics or faults can hold its inner broker
//! behind any of the three.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::{
    ActionOutcome, BrokerError, BulkReport, ChainInfo, ChainStatus, Completion, Consume,
    Coordinate, DeadOutcome, DeadTask, Enqueue, Fetched, FireOutcome, FireState, Flows, Forwarded,
    GroupCreated, GroupRecord, GroupState, HistoryPoint, HistorySpan, Inspect, Interrupt,
    LeaderInfo, LeaseId, Maintain, ManageSchedules, MemberOutcome, MemberPage, MemberReport,
    NewTask, Operate, PutOutcome, QueueName, QueueStats, Reclaimed, Results, ScheduleDef,
    ScheduleEntry, SchedulerMetrics, Schedules, ServerRecord, Signals, StartOutcome, StoredDef,
    TaskAction, TaskFilter, TaskInfo, TaskOutcome, TaskPage, TaskRecord, TaskState, Trigger,
};

/// Writes one trait's forwarding impls for `&T`, `Arc<T>` and `Box<T>` from its method list:
/// each method passes its arguments to `(**self)`, the `T` behind the pointer.
macro_rules! forward {
    ($trait:ident { $($items:tt)* }) => {
        impl<T: $trait + ?Sized> $trait for &T {
            forward!(@items $($items)*);
        }
        impl<T: $trait + ?Sized> $trait for Arc<T> {
            forward!(@items $($items)*);
        }
        impl<T: $trait + ?Sized> $trait for Box<T> {
            forward!(@items $($items)*);
        }
    };
    (@items) => {};
    (@items type $assoc:ident; $($rest:tt)*) => {
        type $assoc = T::$assoc;
        forward!(@items $($rest)*);
    };
    (@items fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty; $($rest:tt)*) => {
        fn $name(&self $(, $arg: $ty)*) -> impl Future<Output = $out> + Send {
            (**self).$name($($arg),*)
        }
        forward!(@items $($rest)*);
    };
}

forward!(Enqueue {
    fn enqueue(&self, tasks: Vec<NewTask>) -> Result<Vec<Result<TaskInfo, BrokerError>>, BrokerError>;
});

forward!(Results {
    fn outcome(&self, queue: &QueueName, id: &str) -> Result<TaskOutcome, BrokerError>;
    fn wait_outcome(&self, queue: &QueueName, id: &str, timeout: Duration) -> Result<TaskOutcome, BrokerError>;
});

forward!(Consume {
    type Reader;
    fn open_reader(&self) -> Result<Self::Reader, BrokerError>;
    fn close_reader(&self, reader: Self::Reader) -> ();
    fn ensure_queue(&self, queue: &QueueName) -> Result<(), BrokerError>;
    fn fetch(&self, reader: &mut Self::Reader, queue: &QueueName, consumer: &str, count: usize, block: Duration) -> Result<Fetched, BrokerError>;
    fn start(&self, queue: &QueueName, leases: &[LeaseId]) -> Result<Vec<StartOutcome>, BrokerError>;
    fn complete(&self, queue: &QueueName, done: &[Completion]) -> Result<u64, BrokerError>;
    fn retry(&self, lease: &LeaseId, delay: Duration, error: &str) -> Result<bool, BrokerError>;
    fn dead_letter(&self, lease: &LeaseId, error: &str, count_attempt: bool) -> Result<DeadOutcome, BrokerError>;
    fn requeue(&self, queue: &QueueName, leases: &[LeaseId]) -> Result<u64, BrokerError>;
    fn watch(&self, reader: &mut Self::Reader, queues: &[QueueName], consumer: &str, count: usize, block: Duration) -> Result<Option<Vec<(usize, Fetched)>>, BrokerError>;
    fn interrupter(&self, reader: &Self::Reader) -> Option<Interrupt>;
});

forward!(Maintain {
    fn forward_due(&self, queue: &QueueName, limit: usize) -> Result<u64, BrokerError>;
    fn reclaim_idle(&self, queue: &QueueName, min_idle: Duration, limit: usize) -> Result<Reclaimed, BrokerError>;
    fn extend_leases(&self, queue: &QueueName, consumer: &str, msg_ids: &[String]) -> Result<Vec<String>, BrokerError>;
    fn trim(&self, queue: &QueueName, archive_max_age: Duration, archive_max_len: u64, limit: usize) -> Result<u64, BrokerError>;
    fn consumers(&self, queue: &QueueName) -> Result<Vec<(String, u64, u64)>, BrokerError>;
    fn publish_server(&self, record: &ServerRecord, ttl: Duration) -> Result<(), BrokerError>;
    fn remove_server(&self, id: &str) -> Result<(), BrokerError>;
    fn remove_consumer(&self, queue: &QueueName, consumer: &str) -> Result<bool, BrokerError>;
    fn cancel_requested(&self, queue: &QueueName, msg_ids: &[String]) -> Result<Vec<String>, BrokerError>;
    fn reclaimed_dead(&self, queue: &QueueName, limit: usize) -> Result<Vec<DeadTask>, BrokerError>;
    fn ack_reclaimed(&self, queue: &QueueName, task_ids: &[String]) -> Result<u64, BrokerError>;
    fn forward_due_next(&self, queue: &QueueName, limit: usize) -> Result<Forwarded, BrokerError>;
    fn signals(&self) -> Result<Option<Signals>, BrokerError>;
});

forward!(Coordinate {
    fn try_lock(&self, key: &str, token: &str, ttl: Duration) -> Result<bool, BrokerError>;
    fn renew_lock(&self, key: &str, token: &str, ttl: Duration) -> Result<bool, BrokerError>;
    fn release_lock(&self, key: &str, token: &str, channel: Option<&str>) -> Result<bool, BrokerError>;
});

forward!(Inspect {
    fn queues(&self) -> Result<Vec<QueueName>, BrokerError>;
    fn queue_stats(&self, queue: &QueueName) -> Result<QueueStats, BrokerError>;
    fn task(&self, queue: &QueueName, id: &str) -> Result<Option<TaskRecord>, BrokerError>;
    fn list_tasks(&self, queue: &QueueName, state: TaskState, offset: usize, limit: usize) -> Result<Vec<TaskRecord>, BrokerError>;
    fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<(), BrokerError>;
    fn paused_queues(&self) -> Result<Vec<QueueName>, BrokerError>;
    fn servers(&self) -> Result<Vec<ServerRecord>, BrokerError>;
    fn scheduler_leader(&self) -> Result<Option<LeaderInfo>, BrokerError>;
});

forward!(Schedules {
    fn acquire_leadership(&self, token: &str, instance: &str, ttl: Duration, min_epoch: u64) -> Result<Option<u64>, BrokerError>;
    fn renew_leadership(&self, token: &str, ttl: Duration) -> Result<bool, BrokerError>;
    fn resign_leadership(&self, token: &str) -> Result<bool, BrokerError>;
    fn leader(&self) -> Result<Option<LeaderInfo>, BrokerError>;
    fn resignations(&self) -> Result<tokio::sync::mpsc::Receiver<()>, BrokerError>;
    fn fence(&self, queue: &QueueName, epoch: u64) -> Result<u64, BrokerError>;
    fn register_schedules(&self, queue: &QueueName, schedule_ids: &[String]) -> Result<Vec<i64>, BrokerError>;
    fn fire(&self, queue: &QueueName, epoch: u64, triggers: Vec<Trigger>, dedup_ttl: Duration, missed: u64) -> Result<Vec<FireOutcome>, BrokerError>;
    fn fire_state(&self, queue: &QueueName, schedule_ids: &[String]) -> Result<Vec<FireState>, BrokerError>;
    fn publish_schedules(&self, instance: &str, entries: &[ScheduleEntry]) -> Result<bool, BrokerError>;
    fn publish_schedule_defs(&self, defs: &[ScheduleDef]) -> Result<(), BrokerError>;
    fn registered_defs(&self, instance: &str, live_within: Duration, known: &[String]) -> Result<Vec<ScheduleDef>, BrokerError>;
    fn schedules(&self, stale_after: Duration, remove_after: Duration) -> Result<Vec<ScheduleEntry>, BrokerError>;
    fn prune_schedules(&self, remove_after: Duration, full: bool) -> Result<Vec<String>, BrokerError>;
    fn scheduler_metrics(&self) -> Result<SchedulerMetrics, BrokerError>;
});

forward!(ManageSchedules {
    fn schedule_revision(&self) -> Result<u64, BrokerError>;
    fn schedule_defs(&self) -> Result<Vec<StoredDef>, BrokerError>;
    fn schedule_def(&self, id: &str) -> Result<Option<StoredDef>, BrokerError>;
    fn put_schedule_def(&self, id: &str, expected: Option<&[u8]>, new: Option<&ScheduleDef>) -> Result<PutOutcome, BrokerError>;
    fn run_schedule(&self, queue: &QueueName, schedule_id: &str, request: &str, task: NewTask) -> Result<FireOutcome, BrokerError>;
    fn forget_fire_state(&self, queue: &QueueName, schedule_ids: &[String]) -> Result<(), BrokerError>;
});

forward!(Operate {
    fn act(&self, queue: &QueueName, id: &str, action: TaskAction) -> Result<ActionOutcome, BrokerError>;
    fn act_all(&self, queue: &QueueName, state: TaskState, filter: &TaskFilter, action: TaskAction, chunk: usize) -> Result<BulkReport, BrokerError>;
    fn list_page(&self, queue: &QueueName, state: TaskState, filter: &TaskFilter, cursor: Option<&str>, limit: usize) -> Result<TaskPage, BrokerError>;
    fn delete_queue(&self, queue: &QueueName, force: bool) -> Result<u64, BrokerError>;
    fn history(&self, queue: &QueueName, span: HistorySpan) -> Result<Vec<HistoryPoint>, BrokerError>;
    fn all_queue_stats(&self) -> Result<Vec<(QueueName, QueueStats)>, BrokerError>;
});

forward!(Flows {
    fn enqueue_successor(&self, task: NewTask) -> Result<bool, BrokerError>;
    fn finish_chain(&self, queue: &QueueName, chain_id: &str, result: Option<Vec<u8>>, keep: Duration) -> Result<(), BrokerError>;
    fn chain_state(&self, chain: &ChainInfo) -> Result<ChainStatus, BrokerError>;
    fn open_group(&self, group: &GroupRecord) -> Result<GroupCreated, BrokerError>;
    fn report_member(&self, report: &MemberReport) -> Result<MemberOutcome, BrokerError>;
    fn group_state(&self, queue: &QueueName, group: &str) -> Result<Option<GroupState>, BrokerError>;
    fn group_results(&self, queue: &QueueName, group: &str, cursor: u64, count: usize) -> Result<MemberPage, BrokerError>;
});
