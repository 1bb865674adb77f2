//! The Redis cost of the outcomes and enqueue modes beyond the plain path, beside the plain
//! task they add to (no peer row: BullMQ's equivalents go through other calls):
//!
//! * a task whose handler snoozes it once and then succeeds, against one that succeeds at once
//!   (drains of [`N`] tasks at concurrency [`CONCURRENCY`], Redis CPU and calls per task);
//! * the same drain on a queue whose event stream is on (every transition writes an event), and
//!   one whose tasks are retained with a log line each (a history row and its logs kept), with
//!   the batch enqueue of each beside the plain one's;
//! * deduplicated enqueues, one at a time on [`KEYS`] keys: a debounce that extends its waiting
//!   task, a replace that gives it a new payload, and a rejected duplicate, against a plain
//!   enqueue and a created dedup task.
//!
//! Each row is the median of [`RUNS`] runs on a throwaway Redis. The plain rows are here so
//! that a change to them shows beside the new paths.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chronos::prelude::*;
use chronos::{Dedup, DedupMode, EnqueueOutcome};

use crate::cost::{self, Cost};
use crate::fixture::{connect, fill, flush, payload, Payload};

/// Tasks per drain run.
const N: usize = 20_000;
const CONCURRENCY: usize = 16;
const RUNS: usize = 3;
/// Keys of the deduplicated enqueues, and enqueues per key.
const KEYS: usize = 200;
const PER_KEY: usize = 20;

pub(crate) async fn run() -> Result<()> {
    let server = chronos_testkit::RedisServer::start().context("redis for the bench")?;
    let url = server.url();
    println!(
        "== outcomes: snooze and dedup beside the plain path; 100-byte payload, median of {RUNS} \
         runs, redis at {url}"
    );
    let mut runs: [(Vec<Cost>, Vec<Cost>); 4] = Default::default();
    for run in 0..RUNS {
        for (i, mode) in [Drain::Plain, Drain::Snooze, Drain::Events, Drain::Kept]
            .into_iter()
            .enumerate()
        {
            let (fill, drain) = drain(&url, &format!("oc-{i}-{run}"), mode).await?;
            runs[i].0.push(fill);
            runs[i].1.push(drain);
        }
    }
    let [plain, snoozed, events, kept] = runs.map(|(f, d)| (cost::median(&f), cost::median(&d)));
    cost::rows("batch enqueue", &plain.0, None);
    cost::rows("batch enqueue, events on", &events.0, None);
    cost::rows("batch enqueue, retained", &kept.0, None);
    cost::rows("task run to success", &plain.1, None);
    cost::rows("task snoozed once, then success", &snoozed.1, None);
    cost::rows("task run to success, events on", &events.1, None);
    cost::rows("task retained with one log line", &kept.1, None);
    let adds = |what: &str, more: &Cost, base: &Cost| {
        println!(
            "   {what} adds {:.2} us of redis cpu and {:.2} calls per task",
            more.cpu_us - base.cpu_us,
            more.calls - base.calls
        )
    };
    adds("one snooze", &snoozed.1, &plain.1);
    adds("the event stream (enqueue)", &events.0, &plain.0);
    adds("the event stream (run)", &events.1, &plain.1);
    adds("a retention with history and logs (run)", &kept.1, &plain.1);

    let secs = Duration::from_secs;
    let modes: [(&str, Option<DedupMode>); 4] = [
        ("plain enqueue", None),
        (
            "debounced enqueue (extends)",
            Some(DedupMode::Debounce {
                delay: secs(60),
                max_wait: secs(600),
            }),
        ),
        ("replacing enqueue", Some(DedupMode::Replace)),
        ("rejected duplicate", Some(DedupMode::Reject)),
    ];
    let mut created = Vec::new();
    for (label, mode) in modes {
        let mut costs = Vec::new();
        for run in 0..RUNS {
            let (first, rest) = enqueues(&url, &format!("oc-d{run}"), mode).await?;
            costs.push(rest);
            if mode == Some(DedupMode::Reject) {
                created.push(first);
            }
        }
        cost::rows(label, &cost::median(&costs), None);
    }
    cost::rows(
        "created dedup task (lock taken)",
        &cost::median(&created),
        None,
    );
    drop(server);
    Ok(())
}

/// What a drain's tasks do beside running once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drain {
    Plain,
    /// The first run snoozes (due at once), the second succeeds.
    Snooze,
    /// The queue's event stream is on.
    Events,
    /// Each task is retained for a minute and its handler logs one line.
    Kept,
}

/// Enqueues `N` tasks on a fresh namespace and drains them; the Redis cost per task of the
/// enqueue and of the drain (server start to the last ack).
async fn drain(url: &str, ns: &str, mode: Drain) -> Result<(Cost, Cost)> {
    let snooze = mode == Drain::Snooze;
    let client = connect(url, ns).await?;
    flush(&client).await?;
    let broker = client.broker().clone();
    let q = chronos::QueueName::new("default")?;
    if mode == Drain::Events {
        chronos::Events::set_events(&broker, &q, true).await?;
    }
    let opts = match mode {
        Drain::Kept => EnqueueOptions::new().retention(Duration::from_secs(60)),
        _ => EnqueueOptions::new(),
    };
    let f0 = cost::snap(broker.client()).await?;
    fill(&client, N, &opts).await?;
    let filled = cost::delta(&f0, &cost::snap(broker.client()).await?, N as f64);
    let seen: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _t: Task<Payload>| {
        let seen = seen.clone();
        async move {
            let first = seen
                .lock()
                .map(|mut s| s.insert(ctx.task_id().to_string()))
                .unwrap_or(false);
            if snooze && first {
                return Err(TaskError::snooze(Duration::ZERO));
            }
            if mode == Drain::Kept {
                ctx.log("sent");
            }
            Ok(())
        }
    })?;
    let config = ServerConfig::default().concurrency(CONCURRENCY);
    let s0 = cost::snap(broker.client()).await?;
    let server = Server::new(broker.clone(), mux, config)?.start().await?;
    let deadline = Instant::now() + Duration::from_secs(300);
    while server.stats().succeeded < N as u64 {
        anyhow::ensure!(Instant::now() < deadline, "drain of {ns} did not finish");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.shutdown().await;
    let c = cost::delta(&s0, &cost::snap(broker.client()).await?, N as f64);
    let stats = server_snoozes(&broker).await?;
    anyhow::ensure!(
        !snooze || stats == 0,
        "{stats} tasks still wait after their snooze"
    );
    if mode == Drain::Events {
        let kept: u64 = chronos::fred::interfaces::StreamsInterface::xlen(
            broker.client(),
            broker.keyspace().queue(&q).events(),
        )
        .await?;
        anyhow::ensure!(kept > 0, "the event stream stayed empty");
    }
    Ok((filled, c))
}

/// Tasks left scheduled (a snoozed task that never came back would be one).
async fn server_snoozes(broker: &RedisBroker) -> Result<u64> {
    let q = chronos::QueueName::new("default")?;
    Ok(broker.queue_stats(&q).await?.scheduled)
}

/// Enqueues one task per key (creating each, or plain ones without a mode), then
/// `PER_KEY - 1` more per key one at a time; the Redis cost per enqueue of the first round
/// and of the rest.
async fn enqueues(url: &str, ns: &str, mode: Option<DedupMode>) -> Result<(Cost, Cost)> {
    let client = connect(url, ns).await?;
    flush(&client).await?;
    let args = payload();
    let opts = |k: usize| match mode {
        Some(m) => EnqueueOptions::new().dedup(Dedup::key(format!("key:{k}")).mode(m)),
        None => EnqueueOptions::new(),
    };
    let redis = client.broker().client().clone();
    let s0 = cost::snap(&redis).await?;
    for k in 0..KEYS {
        client.enqueue(&args, opts(k)).await?;
    }
    let s1 = cost::snap(&redis).await?;
    let mut answers = Vec::new();
    for _ in 1..PER_KEY {
        for k in 0..KEYS {
            answers.push(client.enqueue(&args, opts(k)).await?.outcome);
        }
    }
    let s2 = cost::snap(&redis).await?;
    let want = match mode {
        None => EnqueueOutcome::Created,
        Some(DedupMode::Debounce { .. }) => EnqueueOutcome::Extended,
        Some(DedupMode::Replace) => EnqueueOutcome::Replaced,
        Some(_) => EnqueueOutcome::Duplicate,
    };
    anyhow::ensure!(
        answers.iter().all(|a| *a == want),
        "{mode:?}: expected only {want:?}"
    );
    Ok((
        cost::delta(&s0, &s1, KEYS as f64),
        cost::delta(&s1, &s2, ((PER_KEY - 1) * KEYS) as f64),
    ))
}
