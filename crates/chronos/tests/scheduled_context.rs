//! A task fired by the scheduler tells its handler (and middleware) which schedule fired it and
//! for which trigger time, through typed `Context` accessors over the headers the scheduler sets.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chronos::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Tick;

impl TaskArgs for Tick {
    const KIND: &'static str = "tick";
}

#[tokio::test]
async fn scheduled_task_context_names_its_schedule_and_trigger_time() {
    let url = chronos_testkit::shared_url().expect("redis for tests");
    let broker = RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let mut mux = Mux::new();
    mux.handle(move |ctx: Context, _t: Task<Tick>| {
        let s = s.clone();
        async move {
            s.lock().expect("lock").push((
                ctx.schedule_id().map(str::to_string),
                ctx.trigger_time(),
                ctx.task_id().to_string(),
            ));
            Ok(())
        }
    })
    .expect("register");
    let config = ServerConfig::default().forward_interval(Duration::from_millis(50));
    let server = Server::new(broker.clone(), mux, config)
        .expect("server")
        .start()
        .await
        .expect("start");
    let started = SystemTime::now();
    let mut scheduler = Scheduler::new(broker.clone(), SchedulerConfig::default());
    let id = scheduler
        .register_interval(Duration::from_secs(1), &Tick, ScheduleOptions::new())
        .expect("register");
    let scheduler = scheduler.start().await.expect("start scheduler");
    chronos_testkit::eventually(Duration::from_secs(10), "a scheduled run", || async {
        !seen.lock().expect("lock").is_empty()
    })
    .await;
    scheduler.shutdown().await;
    server.shutdown().await;

    let (schedule, trigger, task_id) = seen.lock().expect("lock")[0].clone();
    assert_eq!(schedule.as_deref(), Some(id.as_str()));
    let trigger = trigger.expect("a typed trigger time");
    let ms = trigger
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    assert_eq!(
        ms % 1000,
        0,
        "interval triggers are aligned to whole seconds"
    );
    // The task id carries the same trigger (in seconds): both come from one trigger.
    assert_eq!(task_id, format!("{id}:{}", ms / 1000));
    // Catch-up may fire a trigger from just before the start, never one from the future.
    let earliest = started - Duration::from_secs(2);
    assert!(
        trigger >= earliest && trigger <= SystemTime::now(),
        "{trigger:?}"
    );
}
