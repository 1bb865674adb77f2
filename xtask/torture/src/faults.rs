//! Injecting a planned [`Fault`] into the running fleet, and recording its reach in the model:
//! which worker processes it hit, and from when until when its effect may last (the process
//! back, the traffic flowing, plus the time the recoverer takes to reclaim a lease).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{Context as _, Result};
use chronos::{RedisBroker, Schedules as _};

use crate::gen::Fault;
use crate::journal::now_us;
use crate::model::{FaultRecord, Life, Model};
use crate::procs::{spawn_scheduler, spawn_worker, Fleet, RECOVER_MIN_IDLE};

/// Locks a mutex shared by the run's tasks (a panic elsewhere does not poison the books).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How long after a fault's end a delivery it stranded may still wait: the lease's idle bound,
/// the recoverer's period and a second for the reclaimed task to be fetched again.
fn recovery() -> i64 {
    (RECOVER_MIN_IDLE + Duration::from_millis(1_250)).as_micros() as i64
}

/// Injects `fault` and returns once its effect is over (a killed process replaced, a stopped
/// one continued, a stall lifted, Redis answering again).
pub(crate) async fn inject(
    fleet: Arc<Mutex<Fleet>>,
    model: Arc<Mutex<Model>>,
    broker: RedisBroker,
    fault: Fault,
) -> Result<()> {
    let from = now_us();
    let (pids, to) = match fault {
        Fault::KillWorker(i, ms) => {
            let pid = {
                let mut f = lock(&fleet);
                let slot = f.workers.get_mut(i).context("no such worker")?;
                let pid = slot.proc.pid();
                slot.proc.kill();
                pid
            };
            died(&model, pid);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            respawn(&fleet, &model, i).await?;
            (vec![pid], now_us())
        }
        Fault::StopWorker(i, ms) => {
            let pid = signal_worker(&fleet, i, "-STOP")?;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            signal_worker(&fleet, i, "-CONT")?;
            (vec![pid], now_us())
        }
        Fault::Stall(i, ms) => {
            let pid = {
                let f = lock(&fleet);
                let slot = f.workers.get(i).context("no such worker")?;
                slot.proxy
                    .as_ref()
                    .context("no proxy to stall")?
                    .stall(true);
                slot.proc.pid()
            };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            if let Some(p) = lock(&fleet).workers.get(i).and_then(|s| s.proxy.as_ref()) {
                p.stall(false);
            }
            (vec![pid], now_us())
        }
        Fault::DropReply(target) => {
            let (before, pids) = {
                let f = lock(&fleet);
                match target {
                    Some(i) => {
                        let slot = f.workers.get(i).context("no such worker")?;
                        let proxy = slot.proxy.as_ref().context("no proxy")?;
                        proxy.drop_next_reply();
                        (proxy.dropped_replies(), vec![slot.proc.pid()])
                    }
                    None => {
                        let proxy = f.producer.as_ref().context("no proxy")?;
                        proxy.drop_next_reply();
                        (proxy.dropped_replies(), Vec::new())
                    }
                }
            };
            // The drop happens at the next request through that proxy: an idle worker sends one
            // within its blocking read's time, the producer at its next enqueue.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while tokio::time::Instant::now() < deadline {
                let now = {
                    let f = lock(&fleet);
                    let proxy = match target {
                        Some(i) => f.workers.get(i).and_then(|s| s.proxy.as_ref()),
                        None => f.producer.as_ref(),
                    };
                    proxy.map(|p| p.dropped_replies())
                };
                if now.is_none_or(|n| n > before) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (pids, now_us())
        }
        Fault::KillLeader => {
            let Some(i) = leader_index(&fleet, &broker).await else {
                return Ok(());
            };
            let (url, ns) = {
                let mut f = lock(&fleet);
                f.schedulers[i].kill();
                (f.redis.url(), f.setup.ns.clone())
            };
            let p = tokio::task::spawn_blocking(move || spawn_scheduler(&url, &ns)).await??;
            lock(&fleet).schedulers[i] = p;
            (Vec::new(), now_us())
        }
        Fault::StopLeader(ms) => {
            let Some(i) = leader_index(&fleet, &broker).await else {
                return Ok(());
            };
            lock(&fleet).schedulers[i].signal("-STOP")?;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            lock(&fleet).schedulers[i].signal("-CONT")?;
            (Vec::new(), now_us())
        }
        Fault::RedisRestart => {
            let pids = lock(&fleet).worker_pids();
            let f = fleet.clone();
            tokio::task::spawn_blocking(move || -> Result<()> {
                let mut g = lock(&f);
                let crate::procs::Backend::Standalone(redis) = &mut g.redis else {
                    anyhow::bail!("a Redis restart needs the standalone server");
                };
                redis.kill();
                std::thread::sleep(Duration::from_millis(300));
                redis.restart().context("restart redis")?;
                Ok(())
            })
            .await??;
            (pids, now_us())
        }
    };
    lock(&model).faults.push(FaultRecord {
        fault,
        pids,
        from_us: from,
        to_us: to + recovery(),
    });
    Ok(())
}

fn signal_worker(fleet: &Mutex<Fleet>, i: usize, sig: &str) -> Result<u32> {
    let f = lock(fleet);
    let slot = f.workers.get(i).context("no such worker")?;
    slot.proc.signal(sig)?;
    Ok(slot.proc.pid())
}

fn died(model: &Mutex<Model>, pid: u32) {
    let at = now_us();
    if let Some(l) = lock(model).lives.iter_mut().find(|l| l.pid == pid) {
        l.died_us = Some(at);
    }
}

/// Starts a new worker in slot `i` (through the slot's proxy) and records its life.
pub(crate) async fn respawn(
    fleet: &Arc<Mutex<Fleet>>,
    model: &Arc<Mutex<Model>>,
    i: usize,
) -> Result<()> {
    let setup = lock(fleet).setup_of(i);
    let proc = tokio::task::spawn_blocking(move || spawn_worker(&setup)).await??;
    let pid = proc.pid();
    lock(fleet).workers[i].proc = proc;
    lock(model).lives.push(Life {
        slot: i,
        pid,
        born_us: now_us(),
        died_us: None,
    });
    Ok(())
}

/// The index of the scheduler process that leads now, if one of ours does.
async fn leader_index(fleet: &Mutex<Fleet>, broker: &RedisBroker) -> Option<usize> {
    let id = broker.leader().await.ok()??.id;
    lock(fleet).schedulers.iter().position(|p| p.id == id)
}
