//! The demo's task kinds: an email, a report, payments, a partner sync, an import group and
//! the scheduled ones.

use chronos::prelude::*;
use serde::{Deserialize, Serialize};

/// An email to send: quick, now and then refused by the relay.
#[derive(Serialize, Deserialize)]
pub(crate) struct SendEmail {
    pub(crate) n: u64,
    pub(crate) to: String,
}
impl TaskArgs for SendEmail {
    const KIND: &'static str = "email:send";
}

/// A slow report, on the low queue.
#[derive(Serialize, Deserialize)]
pub(crate) struct BuildReport {
    pub(crate) n: u64,
}
impl TaskArgs for BuildReport {
    const KIND: &'static str = "report:build";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("low").max_retry(2)
    }
}

/// What the scheduler fires every second, on the critical queue.
#[derive(Serialize, Deserialize)]
pub(crate) struct Reconcile {
    pub(crate) ledger: String,
}
impl TaskArgs for Reconcile {
    const KIND: &'static str = "ledger:reconcile";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("critical")
    }
}

/// A card payment, on the critical queue.
#[derive(Serialize, Deserialize)]
pub(crate) struct ChargeCard {
    pub(crate) n: u64,
    pub(crate) cents: u64,
}
impl TaskArgs for ChargeCard {
    const KIND: &'static str = "payment:charge";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("critical")
    }
}

/// Calls a partner's API: limited to 40 starts a second for the whole cluster, and 4 a second
/// per customer (the task's rate key).
#[derive(Serialize, Deserialize)]
pub(crate) struct SyncCrm {
    pub(crate) customer: u64,
}
impl TaskArgs for SyncCrm {
    const KIND: &'static str = "crm:sync";
    fn default_options() -> EnqueueOptions {
        EnqueueOptions::new().queue("partner")
    }
}

/// A member of an import group: one file of a batch; its result is the rows it read.
#[derive(Serialize, Deserialize)]
pub(crate) struct ImportFile {
    pub(crate) batch: u64,
    pub(crate) file: u64,
}
impl TaskArgs for ImportFile {
    const KIND: &'static str = "import:file";
}

/// The group's callback: runs once, when every file of the batch finished.
#[derive(Serialize, Deserialize)]
pub(crate) struct ImportDone {
    pub(crate) batch: u64,
}
impl TaskArgs for ImportDone {
    const KIND: &'static str = "import:done";
}

/// A runtime schedule (added through the API while the demo runs, not in code).
#[derive(Serialize, Deserialize)]
pub(crate) struct Digest {
    pub(crate) team: String,
}
impl TaskArgs for Digest {
    const KIND: &'static str = "digest:send";
}
