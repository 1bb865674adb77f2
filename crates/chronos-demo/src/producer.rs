//! The producer: tasks at a steady rate (some charges at a high priority level, newsletters at
//! a low one), and every 5 s a partner sync per customer (each customer a tenant) and an import
//! group.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos::prelude::*;

use crate::stop::Stop;
use crate::tasks::{BuildReport, ChargeCard, ImportDone, ImportFile, SendEmail, SyncCrm};

/// Enqueues `rate` tasks a second (in tenths of a second) until `stop`.
pub(crate) async fn produce(
    client: Client,
    rate: u64,
    enqueued: Arc<AtomicU64>,
    stop: Stop,
) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let per_tick = (rate / 10).max(1);
    let mut n = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait() => return Ok(()),
        }
        for _ in 0..per_tick {
            n += 1;
            match n % 10 {
                0 => client
                    .enqueue(&BuildReport { n }, EnqueueOptions::new())
                    .await
                    .map(|_| ())?,
                // Large charges jump the queue; newsletters (every tenth email) wait.
                1..=3 => {
                    let cents = n * 7;
                    let opts = if n % 3 == 0 {
                        EnqueueOptions::new().priority(Priority::HIGH)
                    } else {
                        EnqueueOptions::new()
                    };
                    client
                        .enqueue(&ChargeCard { n, cents }, opts)
                        .await
                        .map(|_| ())?
                }
                4 => client
                    .enqueue(
                        &SendEmail {
                            n,
                            to: format!("user{n}@example.com"),
                        },
                        EnqueueOptions::new().process_in(Duration::from_secs(2)),
                    )
                    .await
                    .map(|_| ())?,
                _ => client
                    .enqueue(
                        &SendEmail {
                            n,
                            to: format!("user{n}@example.com"),
                        },
                        if n % 10 == 9 {
                            EnqueueOptions::new().priority(Priority::LOW)
                        } else {
                            EnqueueOptions::new()
                        },
                    )
                    .await
                    .map(|_| ())?,
            }
            enqueued.fetch_add(1, Ordering::Relaxed);
        }
        // Every 5 s: a partner sync per customer of ten, and an import batch of 20 files as a
        // group whose callback runs once they all finished.
        if n % (per_tick * 50) < per_tick {
            let batch = n / (per_tick * 50);
            for customer in 0..10 {
                client
                    .enqueue(
                        &SyncCrm { customer },
                        // Each customer is a tenant (served in turn with the others) and a
                        // rate key (the partner API's limit per customer).
                        EnqueueOptions::new()
                            .tenant(format!("customer-{customer}"))
                            .rate_key(format!("customer-{customer}")),
                    )
                    .await?;
            }
            let group = Group::new(&ImportDone { batch }, EnqueueOptions::new())
                .members((0..20).map(|file| (ImportFile { batch, file }, EnqueueOptions::new())));
            client.enqueue_group(group).await?;
            enqueued.fetch_add(31, Ordering::Relaxed);
        }
    }
}
