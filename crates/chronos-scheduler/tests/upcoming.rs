//! `Spec::upcoming`: a schedule's next triggers from a chosen instant, without waiting for them.
//! Every test but the last needs no Redis; the last runs the real scheduler (against the
//! testkit's Redis, on a test clock) across both DST days and checks that it fires exactly the
//! instants `upcoming` listed.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chronos_broker::time::OffsetDateTime;
use chronos_broker::{Inspect, QueueName, RedisBroker, TaskArgs, TaskState};
use chronos_scheduler::{Clock, ScheduleOptions, Scheduler, SchedulerConfig, Spec};
use serde::{Deserialize, Serialize};

/// Unix ms of an RFC 3339 instant.
fn ms(rfc3339: &str) -> i64 {
    rfc3339
        .parse::<jiff::Timestamp>()
        .unwrap_or_else(|e| panic!("bad test instant {rfc3339}: {e}"))
        .as_millisecond()
}

fn at(rfc3339: &str) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms(rfc3339)) * 1_000_000)
        .expect("in range")
}

/// A trigger as its wall clock and offset, `2027-03-28T03:00:00+02:00`: shows both the instant
/// and the offset it was reported at.
fn wall(t: OffsetDateTime) -> String {
    let off = t.offset().whole_seconds();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{}{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        if off < 0 { '-' } else { '+' },
        off.abs() / 3600,
        off.abs() % 3600 / 60
    )
}

fn walls(ts: Vec<OffsetDateTime>) -> Vec<String> {
    ts.into_iter().map(wall).collect()
}

fn cron(expr: &str, zone: &str) -> Spec {
    Spec::cron(expr, zone).unwrap_or_else(|e| panic!("{expr} in {zone}: {e}"))
}

#[test]
fn interval_triggers_are_aligned_to_the_epoch_not_to_the_starting_instant() {
    let spec = Spec::interval(Duration::from_secs(300)).expect("valid");
    assert_eq!(
        walls(spec.upcoming(at("2027-01-05T10:07:31.250Z"), 3)),
        [
            "2027-01-05T10:10:00+00:00",
            "2027-01-05T10:15:00+00:00",
            "2027-01-05T10:20:00+00:00"
        ]
    );
    // Strictly after: from a trigger itself, the next one.
    assert_eq!(
        walls(spec.upcoming(at("2027-01-05T10:10:00Z"), 1)),
        ["2027-01-05T10:15:00+00:00"]
    );
    assert!(spec.upcoming(at("2027-01-05T10:10:00Z"), 0).is_empty());
}

#[test]
fn system_time_and_offset_date_time_starts_agree() {
    let spec = cron("0 9 * * mon-fri", "Europe/Berlin");
    let from = at("2027-01-08T07:00:00Z");
    let system = SystemTime::UNIX_EPOCH + Duration::from_millis(ms("2027-01-08T07:00:00Z") as u64);
    assert_eq!(spec.upcoming(from, 3), spec.upcoming(system, 3));
    // Friday 09:00 CET, then Monday and Tuesday.
    assert_eq!(
        walls(spec.upcoming(from, 3)),
        [
            "2027-01-08T09:00:00+01:00",
            "2027-01-11T09:00:00+01:00",
            "2027-01-12T09:00:00+01:00"
        ]
    );
}

#[test]
fn five_and_six_field_expressions() {
    let five = cron("*/15 * * * *", "UTC");
    assert_eq!(
        walls(five.upcoming(at("2027-04-01T10:07:31Z"), 3)),
        [
            "2027-04-01T10:15:00+00:00",
            "2027-04-01T10:30:00+00:00",
            "2027-04-01T10:45:00+00:00"
        ]
    );
    // Six fields: seconds first.
    let six = cron("*/20 30 2 * * *", "UTC");
    assert_eq!(
        walls(six.upcoming(at("2027-04-01T00:00:00Z"), 4)),
        [
            "2027-04-01T02:30:00+00:00",
            "2027-04-01T02:30:20+00:00",
            "2027-04-01T02:30:40+00:00",
            "2027-04-02T02:30:00+00:00"
        ]
    );
}

/// 2027-03-28 in Berlin: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist that day. The
/// trigger fires once, at the first instant after the gap.
#[test]
fn a_time_skipped_by_spring_forward_fires_once_right_after_the_gap() {
    let spec = cron("30 2 * * *", "Europe/Berlin");
    assert_eq!(
        walls(spec.upcoming(at("2027-03-26T12:00:00+01:00"), 3)),
        [
            "2027-03-27T02:30:00+01:00",
            "2027-03-28T03:00:00+02:00",
            "2027-03-29T02:30:00+02:00"
        ]
    );
}

/// 2027-10-31 in Berlin: 03:00 CEST falls back to 02:00 CET, so 02:30 happens twice. The
/// trigger fires once, on the first pass (CEST); an expression stepping through the hour fires
/// in both passes, which are distinct instants.
#[test]
fn a_time_repeated_by_fall_back_fires_once_on_its_first_pass() {
    let spec = cron("30 2 * * *", "Europe/Berlin");
    assert_eq!(
        walls(spec.upcoming(at("2027-10-29T12:00:00+02:00"), 3)),
        [
            "2027-10-30T02:30:00+02:00",
            "2027-10-31T02:30:00+02:00",
            "2027-11-01T02:30:00+01:00"
        ]
    );
    let stepping = cron("*/30 2 * * *", "Europe/Berlin");
    assert_eq!(
        walls(stepping.upcoming(at("2027-10-30T23:59:00Z"), 4)),
        [
            "2027-10-31T02:00:00+02:00",
            "2027-10-31T02:30:00+02:00",
            "2027-10-31T02:00:00+01:00",
            "2027-10-31T02:30:00+01:00"
        ]
    );
}

/// A wall clock the test sets.
#[derive(Debug)]
struct SetClock(AtomicI64);

impl Clock for SetClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Serialize, Deserialize)]
struct Nightly {}
impl TaskArgs for Nightly {
    const KIND: &'static str = "nightly";
}

/// Trigger seconds of the tasks schedule `id` enqueued (their ids are `<id>:<trigger secs>`).
async fn fired_secs(b: &RedisBroker, id: &str) -> Vec<i64> {
    let q = QueueName::new("default").expect("queue");
    let tasks = b
        .list_tasks(&q, TaskState::Pending, 0, 1000)
        .await
        .expect("list");
    let prefix = format!("{id}:");
    let mut secs: Vec<i64> = tasks
        .iter()
        .filter_map(|t| t.envelope.as_ref().ok())
        .filter_map(|e| e.id.strip_prefix(&prefix)?.parse().ok())
        .collect();
    secs.sort();
    secs
}

/// The scheduler, on a clock moved noon to noon across each Berlin DST day, fires exactly the
/// triggers `upcoming` listed, one per day: so `upcoming` is what the scheduler fires, not a
/// second opinion. (Each day's step makes one trigger due, which the leader fires as is.)
#[tokio::test]
async fn the_scheduler_fires_exactly_the_listed_triggers_on_both_dst_days() {
    for (id, start) in [
        ("spring", "2027-03-26T12:00:00+01:00"),
        ("fall", "2027-10-29T12:00:00+02:00"),
    ] {
        let ns = chronos_testkit::namespace();
        let url = chronos_testkit::shared_url().expect("redis");
        let b = RedisBroker::builder(url)
            .namespace(ns)
            .connect()
            .await
            .expect("connect");
        let clock = Arc::new(SetClock(AtomicI64::new(ms(start))));
        let cfg = SchedulerConfig {
            leader_ttl: Duration::from_millis(1000),
            publish_interval: Duration::from_millis(200),
            clock: clock.clone(),
            ..SchedulerConfig::default()
        };
        let mut s = Scheduler::new(b.clone(), cfg);
        let spec = "30 2 * * *";
        s.register_cron(
            spec,
            &Nightly {},
            ScheduleOptions::new().id(id).zone("Europe/Berlin"),
        )
        .expect("register");
        let listed: Vec<i64> = cron(spec, "Europe/Berlin")
            .upcoming(at(start), 3)
            .into_iter()
            .map(|t| t.unix_timestamp())
            .collect();
        let h = s.start().await.expect("start");
        chronos_testkit::eventually(Duration::from_secs(10), "leadership", || {
            let led = h.is_leader();
            async move { led }
        })
        .await;
        for day in 1..=3usize {
            clock.0.fetch_add(24 * 3600 * 1000, Ordering::SeqCst);
            let want = listed[..day].to_vec();
            let what = format!("{id}: day {day} fires {want:?}");
            chronos_testkit::eventually(Duration::from_secs(10), &what, || {
                let (b, want) = (&b, &want);
                async move { fired_secs(b, id).await.len() >= want.len() }
            })
            .await;
            assert_eq!(fired_secs(&b, id).await, want, "{id}, day {day}");
        }
        h.shutdown().await;
    }
}
