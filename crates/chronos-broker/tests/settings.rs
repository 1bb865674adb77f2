//! A queue's stored settings ([`Settings`]) over a real Redis: what is written reads back,
//! values out of range are refused before anything is written, and a change whose reply is
//! lost (the client re-sends it) leaves what one run leaves.

mod common;

use std::time::Duration;

use chronos_broker::fred::interfaces::{HashesInterface, KeysInterface};
use chronos_broker::{
    BrokerError, QueueName, QueueSettings, Rate, Setting, Settings, SettingsChange,
};
use common::{broker, rig};

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("valid queue")
}

fn full_change() -> SettingsChange {
    SettingsChange::new()
        .rate(Setting::On(Rate::new(100, Duration::from_secs(1))))
        .burst(5)
        .concurrency(Setting::On(10))
        .per_key_rate(Setting::Off)
        .aging(Duration::from_secs(60))
}

#[tokio::test]
async fn settings_round_trip_and_unset_back_to_nothing() {
    let b = broker().await;
    let queue = q("mail");
    assert_eq!(
        b.queue_settings(&queue).await.expect("read"),
        QueueSettings::default()
    );

    let stored = b
        .change_queue_settings(&queue, &full_change())
        .await
        .expect("change");
    assert_eq!(stored, full_change().apply(QueueSettings::default()));
    assert_eq!(b.queue_settings(&queue).await.expect("read"), stored);
    assert_eq!(stored.per_key_rate, Some(Setting::Off));

    // The stored text is what the key table documents (the consume scripts read aging_ms).
    let keys = b.keyspace().queue(&queue);
    let raw: std::collections::HashMap<String, String> =
        b.client().hgetall(keys.settings()).await.expect("hgetall");
    assert_eq!(raw.get("rate").map(String::as_str), Some("100/1000"));
    assert_eq!(raw.get("per_key_rate").map(String::as_str), Some("none"));
    assert_eq!(raw.get("aging_ms").map(String::as_str), Some("60000"));

    // Unset field by field: back to "the servers' configuration", and no key is left behind.
    let after = b
        .change_queue_settings(&queue, &SettingsChange::new().unset_rate().unset_burst())
        .await
        .expect("unset");
    assert_eq!((after.rate, after.burst), (None, None));
    assert_eq!(after.concurrency, Some(Setting::On(10)));
    let all = SettingsChange::new()
        .unset_concurrency()
        .unset_per_key_rate()
        .unset_aging();
    assert!(b
        .change_queue_settings(&queue, &all)
        .await
        .expect("unset")
        .is_empty());
    let exists: i64 = b.client().exists(keys.settings()).await.expect("exists");
    assert_eq!(exists, 0, "an empty settings hash is gone");
}

#[tokio::test]
async fn values_out_of_range_are_typed_errors_and_write_nothing() {
    let b = broker().await;
    let queue = q("mail");
    for change in [
        SettingsChange::new().concurrency(Setting::On(0)),
        SettingsChange::new().burst(0),
        SettingsChange::new().rate(Setting::On(Rate::new(0, Duration::from_secs(1)))),
        SettingsChange::new().per_key_rate(Setting::On(Rate::new(1, Duration::ZERO))),
        SettingsChange::new().aging(Duration::from_millis(500)),
        SettingsChange::new().aging(Duration::from_secs(400 * 86_400)),
        // A valid field does not sneak through with an invalid one.
        SettingsChange::new().burst(3).concurrency(Setting::On(0)),
    ] {
        let r = b.change_queue_settings(&queue, &change).await;
        assert!(
            matches!(r, Err(BrokerError::InvalidOption(_))),
            "{change:?}: {r:?}"
        );
    }
    assert!(b.queue_settings(&queue).await.expect("read").is_empty());
}

#[tokio::test]
async fn a_hand_written_bad_value_is_a_protocol_error_not_a_guess() {
    let b = broker().await;
    let queue = q("mail");
    let keys = b.keyspace().queue(&queue);
    let _: i64 = b
        .client()
        .hset(keys.settings(), ("concurrency", "lots"))
        .await
        .expect("hset");
    let r = b.queue_settings(&queue).await;
    assert!(matches!(r, Err(BrokerError::Protocol { .. })), "{r:?}");
    // Unsetting the bad field repairs it.
    b.change_queue_settings(&queue, &SettingsChange::new().unset_concurrency())
        .await
        .expect("unset");
    assert!(b.queue_settings(&queue).await.expect("read").is_empty());
}

#[tokio::test]
async fn a_change_whose_reply_is_lost_leaves_what_one_run_leaves() {
    let rig = rig().await;
    let queue = q("mail");
    rig.lose_reply_of("settings_put");
    let answered = rig
        .via
        .change_queue_settings(&queue, &full_change())
        .await
        .expect("change re-sent");
    rig.assert_lost(1);
    let expected = full_change().apply(QueueSettings::default());
    assert_eq!(answered, expected);
    assert_eq!(
        rig.direct.queue_settings(&queue).await.expect("read"),
        expected
    );

    // An unset re-sent after a lost reply removes once and answers the same.
    rig.lose_reply_of("settings_put");
    let answered = rig
        .via
        .change_queue_settings(&queue, &SettingsChange::new().unset_concurrency())
        .await
        .expect("unset re-sent");
    rig.assert_lost(2);
    assert_eq!(answered.concurrency, None);
    assert_eq!(
        rig.direct.queue_settings(&queue).await.expect("read"),
        answered
    );
}
