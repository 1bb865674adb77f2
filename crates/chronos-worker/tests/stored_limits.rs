//! Limits stored in Redis ([`chronos_broker::Settings`]) override a running server's
//! configuration without a restart: lowered, lifted, and unset back to the configured value.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronos_broker::{Client, EnqueueOptions, Setting, Settings, SettingsChange};
use chronos_worker::{Context, Mux, QueueLimit, Server, ServerConfig, Task};
use common::{broker, eventually, fast_config, q, Job};

/// How many handlers run now, and the most seen since the last reset.
#[derive(Default)]
struct Running {
    now: AtomicU32,
    max: AtomicU32,
    done: AtomicU32,
}

impl Running {
    fn mux(self: &Arc<Self>) -> Mux {
        let me = self.clone();
        let mut mux = Mux::new();
        mux.handle(move |_ctx: Context, t: Task<Job>| {
            let me = me.clone();
            async move {
                let n = me.now.fetch_add(1, Ordering::SeqCst) + 1;
                me.max.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(t.args.sleep_ms)).await;
                me.now.fetch_sub(1, Ordering::SeqCst);
                me.done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .expect("register");
        mux
    }

    /// Resets the maximum to what runs now.
    fn reset(&self) {
        self.max
            .store(self.now.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

async fn enqueue(client: &Client, queue: &str, n: u32, sleep_ms: u64) {
    let jobs: Vec<Job> = (0..n).map(|n| Job { n, sleep_ms }).collect();
    let opts = EnqueueOptions::new().queue(queue);
    assert!(client
        .enqueue_batch(jobs.iter().map(|j| (j, opts.clone())))
        .await
        .expect("enqueue")
        .iter()
        .all(|r| r.is_ok()));
}

/// Samples the running count every 10 ms while `watching` holds; returns the most seen.
fn sample(running: Arc<Running>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u32> {
    tokio::spawn(async move {
        let mut most = 0;
        while !stop.load(Ordering::SeqCst) {
            most = most.max(running.now.load(Ordering::SeqCst));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        most
    })
}

#[tokio::test]
async fn concurrency_lowered_in_redis_applies_to_a_running_server_and_unset_restores_config() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("narrowing");
    let running = Arc::new(Running::default());
    enqueue(&client, "narrowing", 200, 200).await;
    let cfg = ServerConfig {
        concurrency: 8,
        ..fast_config()
    }
    .queues([("narrowing", 1)])
    .limit("narrowing", QueueLimit::new().concurrency(4));
    let server = Server::new(b.clone(), running.mux(), cfg)
        .expect("server")
        .start()
        .await
        .expect("start");

    // The configured limit: 4 at once.
    eventually(Duration::from_secs(10), "4 tasks run at once", || async {
        running.now.load(Ordering::SeqCst) == 4
    })
    .await;
    assert_eq!(running.max.load(Ordering::SeqCst), 4);

    // Lowered to 1 in Redis while 4 run: once the change window (2 s, plus the 200 ms the
    // tasks already running need to end) has passed, at most 1 runs.
    b.change_queue_settings(&queue, &SettingsChange::new().concurrency(Setting::On(1)))
        .await
        .expect("store");
    let changed = Instant::now();
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let watch = sample(running.clone(), stop.clone());
    let done_before = running.done.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stop.store(true, Ordering::SeqCst);
    let most = watch.await.expect("sampler");
    assert_eq!(
        most,
        1,
        "at most 1 ran after the change window ({:?} after the change)",
        changed.elapsed()
    );
    assert!(
        running.done.load(Ordering::SeqCst) > done_before,
        "tasks still ran, one at a time"
    );

    // Unset: back to the configured 4.
    running.reset();
    b.change_queue_settings(&queue, &SettingsChange::new().unset_concurrency())
        .await
        .expect("unset");
    eventually(Duration::from_secs(4), "back to 4 at once", || async {
        running.now.load(Ordering::SeqCst) == 4
    })
    .await;
    server.shutdown().await;
    assert!(running.max.load(Ordering::SeqCst) <= 4);
}

#[tokio::test]
async fn limits_stored_before_start_apply_and_can_be_lifted_at_run_time() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("stored");
    // No configured limit at all: the stored one alone limits the queue.
    b.change_queue_settings(&queue, &SettingsChange::new().concurrency(Setting::On(1)))
        .await
        .expect("store");
    let running = Arc::new(Running::default());
    enqueue(&client, "stored", 100, 150).await;
    let cfg = ServerConfig {
        concurrency: 6,
        ..fast_config()
    }
    .queues([("stored", 1)]);
    let server = Server::new(b.clone(), running.mux(), cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(10), "3 tasks done", || async {
        running.done.load(Ordering::SeqCst) >= 3
    })
    .await;
    assert_eq!(
        running.max.load(Ordering::SeqCst),
        1,
        "the stored limit holds"
    );

    // Lifted ("none"): the server's own 6 slots fill.
    b.change_queue_settings(&queue, &SettingsChange::new().concurrency(Setting::Off))
        .await
        .expect("lift");
    eventually(Duration::from_secs(4), "6 tasks run at once", || async {
        running.now.load(Ordering::SeqCst) == 6
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_stored_rate_slows_a_running_server_within_the_change_window() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("paced");
    let running = Arc::new(Running::default());
    enqueue(&client, "paced", 400, 20).await;
    // Configured: a generous rate. Stored later: 2 per second.
    let cfg = fast_config().queues([("paced", 1)]).limit(
        "paced",
        QueueLimit::new().rate(1000, Duration::from_secs(1)),
    );
    let server = Server::new(b.clone(), running.mux(), cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(10), "20 tasks done", || async {
        running.done.load(Ordering::SeqCst) >= 20
    })
    .await;
    b.change_queue_settings(
        &queue,
        &SettingsChange::new()
            .rate(Setting::On(chronos_broker::Rate::new(
                2,
                Duration::from_secs(1),
            )))
            .burst(1),
    )
    .await
    .expect("store");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = running.done.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ran = running.done.load(Ordering::SeqCst) - before;
    // 2 per second over 2 s, plus the burst and one edge.
    assert!(ran <= 6, "{ran} tasks ran in 2 s under a rate of 2/s");
    assert!(ran >= 2, "the queue still runs: {ran}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_fetcher_waiting_on_a_slow_rate_wakes_when_the_rate_is_raised() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("slow");
    let running = Arc::new(Running::default());
    enqueue(&client, "slow", 5, 0).await;
    // One start per hour: the first runs, then the fetcher sleeps until the next is due.
    let cfg = fast_config()
        .queues([("slow", 1)])
        .limit("slow", QueueLimit::new().rate(1, Duration::from_secs(3600)));
    let server = Server::new(b.clone(), running.mux(), cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(10), "the first task ran", || async {
        running.done.load(Ordering::SeqCst) >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        running.done.load(Ordering::SeqCst),
        1,
        "the rate holds the rest"
    );

    b.change_queue_settings(
        &queue,
        &SettingsChange::new().rate(Setting::On(chronos_broker::Rate::new(
            100,
            Duration::from_secs(1),
        ))),
    )
    .await
    .expect("store");
    let changed = Instant::now();
    eventually(Duration::from_secs(5), "the other 4 ran", || async {
        running.done.load(Ordering::SeqCst) >= 5
    })
    .await;
    assert!(
        changed.elapsed() < Duration::from_secs(3),
        "the hour-long wait was cut short: {:?}",
        changed.elapsed()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_queue_started_without_any_limit_takes_one_stored_while_it_runs() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let queue = q("unbounded");
    let running = Arc::new(Running::default());
    enqueue(&client, "unbounded", 200, 200).await;
    let cfg = ServerConfig {
        concurrency: 6,
        ..fast_config()
    }
    .queues([("unbounded", 1)]);
    let server = Server::new(b.clone(), running.mux(), cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    // Neither config nor Redis limits it: every slot runs.
    eventually(Duration::from_secs(10), "6 tasks run at once", || async {
        running.now.load(Ordering::SeqCst) == 6
    })
    .await;
    b.change_queue_settings(&queue, &SettingsChange::new().concurrency(Setting::On(2)))
        .await
        .expect("store");
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let watch = sample(running.clone(), stop.clone());
    let done_before = running.done.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stop.store(true, Ordering::SeqCst);
    let most = watch.await.expect("sampler");
    assert!(most <= 2, "at most 2 ran after the change window: {most}");
    assert!(
        running.done.load(Ordering::SeqCst) > done_before,
        "tasks still ran"
    );
    server.shutdown().await;
}

/// A server of 60 queues reads one queue's stored settings per second in turn; a change is
/// pushed, so it applies within the change window even for the queue whose turn is last.
#[tokio::test]
async fn a_change_applies_within_the_window_on_a_server_of_many_queues() {
    let b = broker().await;
    let client = Client::new(b.clone());
    let names: Vec<String> = (0..60).map(|i| format!("wide{i}")).collect();
    let queue = q("wide59");
    let running = Arc::new(Running::default());
    enqueue(&client, "wide59", 200, 200).await;
    let cfg = ServerConfig {
        concurrency: 6,
        ..fast_config()
    }
    .queues(names.iter().map(|n| (n.clone(), 1)));
    let server = Server::new(b.clone(), running.mux(), cfg)
        .expect("server")
        .start()
        .await
        .expect("start");
    eventually(Duration::from_secs(10), "6 tasks run at once", || async {
        running.now.load(Ordering::SeqCst) == 6
    })
    .await;
    b.change_queue_settings(&queue, &SettingsChange::new().concurrency(Setting::On(1)))
        .await
        .expect("store");
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let watch = sample(running.clone(), stop.clone());
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    stop.store(true, Ordering::SeqCst);
    assert_eq!(
        watch.await.expect("sampler"),
        1,
        "the pushed change applied long before the queue's turn (60 s)"
    );
    server.shutdown().await;
}
