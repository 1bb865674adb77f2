//! A running server applies a change of a tenant's settings at its next fetch: a pause stops
//! the tenant's tasks from starting while others run on, a resume and a raised cap let them
//! start, with no restart and no config change.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos::prelude::*;
use chronos::{QueueName, TenantChange, Tenants};
use chronos_tests::Work;

#[tokio::test]
async fn a_running_server_applies_a_tenants_pause_resume_and_cap_at_once() {
    let url = chronos_testkit::shared_url().expect("redis");
    let broker = RedisBroker::builder(url)
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
        .expect("connect");
    let queue = QueueName::new("default").expect("queue");
    let started = Arc::new(AtomicU64::new(0));
    let seen = started.clone();
    let mut mux = Mux::new();
    mux.handle(move |_ctx: Context, task: Task<Work>| {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(task.args.sleep_ms)).await;
            Ok(())
        }
    })
    .expect("register");
    let server = Server::new(broker.clone(), mux, ServerConfig::default())
        .expect("server")
        .start()
        .await
        .expect("start");
    // Paused while the server runs: its tasks wait, another tenant's run.
    broker
        .change_tenant_settings(&queue, Some("p"), &TenantChange::new().paused(Some(true)))
        .await
        .expect("pause");
    let client = Client::new(broker.clone());
    for _ in 0..4 {
        client
            .enqueue(&Work { sleep_ms: 0 }, EnqueueOptions::new().tenant("p"))
            .await
            .expect("enqueue");
    }
    client
        .enqueue(&Work { sleep_ms: 0 }, EnqueueOptions::new().tenant("o"))
        .await
        .expect("enqueue");
    chronos_testkit::eventually(Duration::from_secs(10), "the other tenant ran", || async {
        started.load(Ordering::SeqCst) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        started.load(Ordering::SeqCst),
        1,
        "the paused tenant started nothing"
    );
    let page = broker.tenants(&queue, 10).await.expect("tenants");
    assert_eq!(page.waiting, 4, "{page:?}");

    // Resumed with a cap of 1 and tasks that take a while (1.5 s): one at a time.
    broker
        .change_tenant_settings(
            &queue,
            Some("p"),
            &TenantChange::new().paused(Some(false)).concurrency(Some(1)),
        )
        .await
        .expect("resume");
    for _ in 0..3 {
        client
            .enqueue(&Work { sleep_ms: 1500 }, EnqueueOptions::new().tenant("p"))
            .await
            .expect("enqueue");
    }
    chronos_testkit::eventually(Duration::from_secs(10), "the quick ones ran", || async {
        started.load(Ordering::SeqCst) >= 6
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        started.load(Ordering::SeqCst),
        6,
        "one slow task at a time under the cap"
    );
    let page = broker.tenants(&queue, 10).await.expect("tenants");
    let p = page.tenants.iter().find(|t| t.tenant == "p").expect("p");
    assert_eq!((p.running, p.waiting), (1, 2), "{p:?}");
    // A raised cap lets the rest start together.
    broker
        .change_tenant_settings(&queue, Some("p"), &TenantChange::new().concurrency(Some(5)))
        .await
        .expect("raise");
    chronos_testkit::eventually(Duration::from_secs(10), "all eight ran", || async {
        started.load(Ordering::SeqCst) == 8
    })
    .await;
    server.shutdown().await;
}
