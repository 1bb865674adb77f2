//! The operations layer of chronos-rs: what the `chronos` CLI and the web console do, as a
//! library other programs can call. Thin over the broker's capability traits
//! ([`chronos_broker::Inspect`], [`chronos_broker::Operate`], [`chronos_broker::Schedules`]):
//! it turns their answers into serializable views (payloads decoded to JSON) and their
//! outcomes into typed errors.
//!
//! # Tour
//! [`Admin`] wraps a broker; its methods live beside the views they answer with:
//! * queues ([`QueueRow`], pausing, deletion), the deployment at a glance ([`Overview`]),
//!   history ([`HistoryRow`]), the Redis server ([`RedisInfo`]);
//! * tasks ([`TaskRow`], [`TaskList`], [`MatchCount`]) and actions on them ([`verb`]), one by
//!   one or in bulk runs that report progress ([`BulkJob`], [`BulkStatus`]);
//! * schedules ([`FireRow`], [`overdue_trigger`]), flows ([`FlowView`]), dead letters by error
//!   ([`ErrorGroups`]), tenants ([`TenantList`]), stored limits ([`SettingsRow`]), run and wait
//!   times ([`TimingReport`]), deduplication locks, handler blocks and event streams;
//! * what operators type and read: [`parse_run_at`], [`parse_run_in`], [`parse_state`],
//!   [`printable`], [`redact_url`]; and every failure as one [`AdminError`].
//!
//! ```no_run
//! # async fn run() -> Result<(), chronos_admin::AdminError> {
//! let admin = chronos_admin::connect("redis://127.0.0.1:6379", "chronos").await?;
//! for q in admin.queues().await? {
//!     println!("{} pending={} archived={}", q.name, q.pending, q.archived);
//! }
//! # Ok(()) }
//! ```

mod actions;
mod admin;
mod archive;
mod blocks;
mod bulk;
mod dead_letters;
mod dedup;
mod enqueue;
mod error;
mod events;
mod flows;
mod history;
mod input;
mod lookup;
mod overview;
mod printable;
mod queues;
mod redact;
mod redis_info;
mod schedules;
mod settings;
mod tasks;
mod tenants;
mod timing;

use chronos_broker::{EvictionCheck, RedisBroker};

pub use actions::verb;
pub use admin::Admin;
pub use archive::ArchiveCap;
pub use bulk::{BulkJob, BulkRow, BulkStatus, CancelToken, DEFAULT_BULK_CHUNK};
pub use chronos_broker::{HistoryPoint, TaskAction as Action, TaskEdit};
pub use dead_letters::{error_group_key, ErrorGroup, ErrorGroups};
pub use enqueue::check_kind;
pub use error::AdminError;
pub use flows::{ChainView, FlowView, GroupView, MemberRow, StepRow};
pub use history::HistoryRow;
pub use input::{parse_run_at, parse_run_in, parse_state};
pub use lookup::{UnknownQueue, UnknownTenant};
pub use overview::{LeaderRow, Overview};
pub use printable::{printable, printable_lines};
pub use queues::{LevelRow, QueueRow};
pub use redact::redact_url;
pub use redis_info::RedisInfo;
pub use schedules::{overdue_trigger, FireRow, OVERDUE_GRACE};
pub use settings::SettingsRow;
pub use tasks::{MatchCount, TaskList, TaskRow};
pub use tenants::{
    TenantList, TenantRow, TenantSettingsChanged, TenantSettingsRow, MAX_TENANT_LIST,
};
pub use timing::{KindTiming, Quantiles, TimingReport, TimingStep};

/// Connects to Redis for operating it: never refuses a Redis that may evict keys (an operator
/// must be able to look at any deployment).
pub async fn connect(url: &str, namespace: &str) -> Result<Admin<RedisBroker>, AdminError> {
    let broker = RedisBroker::builder(url)
        .namespace(namespace)
        .eviction_check(EvictionCheck::Skip)
        .connect()
        .await?;
    Ok(Admin::new(broker))
}
