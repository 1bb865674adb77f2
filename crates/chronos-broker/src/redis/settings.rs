//! A queue's stored settings over Redis: one hash per queue (`QueueKeys::settings`), read with
//! one `HGETALL` and changed by settings_put.lua.
//!
//! The fields, all text so an operator can read them with `redis-cli`:
//!
//! | field | value |
//! |---|---|
//! | `rate` | `<n>/<period ms>` (at most n starts per period), or `none` (no rate limit) |
//! | `burst` | `<n>` |
//! | `concurrency` | `<n>`, or `none` (no concurrency limit) |
//! | `per_key_rate` | `<n>/<period ms>`, or `none` |
//! | `aging_ms` | `<ms>` (read by the consume scripts' priority levels) |
//! | `retry_level` | `0`..`9` (read by forward.lua: the level retries go to) |
//!
//! An absent field means "the server's configuration"; `none` lifts a configured limit. That
//! keeps "not stored" and "stored as unlimited" apart without a second field, and every field
//! is changed on its own.

use std::time::Duration;

use fred::prelude::*;

use super::{reply, RedisBroker};
use crate::{BrokerError, QueueName, QueueSettings, Rate, Setting, Settings, SettingsChange};

/// Field of the queue-wide rate.
const RATE: &str = "rate";
/// Field of the burst.
const BURST: &str = "burst";
/// Field of the concurrency.
const CONCURRENCY: &str = "concurrency";
/// Field of the per-key rate.
const PER_KEY_RATE: &str = "per_key_rate";
/// Field of the aging time, in ms: the consume scripts read it by this name.
const AGING_MS: &str = super::protocol::SETTINGS_AGING;
/// Field of the level retries go to: forward.lua reads it by this name.
const RETRY_LEVEL: &str = super::protocol::SETTINGS_RETRY_LEVEL;
/// The stored value that lifts a limit.
const NONE: &str = "none";

const CONTEXT: &str = "queue settings";

impl Settings for RedisBroker {
    async fn queue_settings(&self, queue: &QueueName) -> Result<QueueSettings, BrokerError> {
        let key = self.queue_keys(queue).settings();
        let fields: Vec<(String, String)> = self
            .inner
            .client
            .hgetall::<std::collections::HashMap<String, String>, _>(key)
            .await
            .map_err(crate::redis::store::store)?
            .into_iter()
            .collect();
        decode(fields)
    }

    async fn change_queue_settings(
        &self,
        queue: &QueueName,
        change: &SettingsChange,
    ) -> Result<QueueSettings, BrokerError> {
        change.validate()?;
        let keys = self.queue_keys(queue);
        let args = encode(change);
        let reply = if args.is_empty() {
            // Nothing to change: a plain read answers the same, without a write.
            return self.queue_settings(queue).await;
        } else {
            self.run(|s| &s.settings_put, vec![keys.settings()], args)
                .await?
        };
        // Running servers re-read at once; one that misses this (a reconnect) re-reads every
        // queue after its resubscription, or when its rotation reaches the queue.
        if let Err(e) = self.signal_settings(queue).await {
            tracing::warn!(queue = %queue, error = %e, "settings changed, but the servers could not be told; they see it within their settings poll rotation");
        }
        let flat = reply::array(reply, CONTEXT)?;
        let mut fields = Vec::with_capacity(flat.len() / 2);
        let mut it = flat.into_iter();
        while let (Some(f), Some(v)) = (it.next(), it.next()) {
            fields.push((reply::string(f, CONTEXT)?, reply::string(v, CONTEXT)?));
        }
        decode(fields)
    }
}

/// The script's arguments for `change`: field, value pairs (an empty value removes the field).
fn encode(change: &SettingsChange) -> Vec<Value> {
    fn put<T>(out: &mut Vec<Value>, field: &str, v: Option<Option<T>>, text: impl Fn(T) -> String) {
        if let Some(v) = v {
            out.push(field.into());
            out.push(v.map(text).unwrap_or_default().into());
        }
    }
    let mut out = Vec::new();
    put(&mut out, RATE, change.rate, setting(rate_text));
    put(&mut out, BURST, change.burst, |n| n.to_string());
    put(
        &mut out,
        CONCURRENCY,
        change.concurrency,
        setting(|n: u32| n.to_string()),
    );
    put(
        &mut out,
        PER_KEY_RATE,
        change.per_key_rate,
        setting(rate_text),
    );
    put(&mut out, AGING_MS, change.aging, |d| {
        d.as_millis().to_string()
    });
    put(&mut out, RETRY_LEVEL, change.retry_level, |p| p.to_string());
    out
}

fn setting<T>(text: impl Fn(T) -> String) -> impl Fn(Setting<T>) -> String {
    move |s| match s {
        Setting::Off => NONE.to_string(),
        Setting::On(v) => text(v),
    }
}

fn rate_text(r: Rate) -> String {
    format!("{}/{}", r.n, r.period.as_millis())
}

/// Reads the stored fields. A field this version does not know is skipped (a newer writer's);
/// a known field with a value it cannot read, or out of range, fails the read: acting on a
/// guess about a limit is worse than keeping the last one known.
fn decode(fields: Vec<(String, String)>) -> Result<QueueSettings, BrokerError> {
    let mut s = QueueSettings::default();
    for (field, value) in fields {
        let bad = || reply::bad(CONTEXT, format!("field {field:?} holds {value:?}"));
        match field.as_str() {
            RATE => s.rate = Some(parse_setting(&value, parse_rate).ok_or_else(bad)?),
            BURST => s.burst = Some(value.parse().map_err(|_| bad())?),
            CONCURRENCY => {
                s.concurrency = Some(parse_setting(&value, |v| v.parse().ok()).ok_or_else(bad)?)
            }
            PER_KEY_RATE => {
                s.per_key_rate = Some(parse_setting(&value, parse_rate).ok_or_else(bad)?)
            }
            AGING_MS => s.aging = Some(Duration::from_millis(value.parse().map_err(|_| bad())?)),
            RETRY_LEVEL => {
                s.retry_level = Some(
                    value
                        .parse::<u8>()
                        .ok()
                        .and_then(|l| crate::Priority::level(l).ok())
                        .ok_or_else(bad)?,
                )
            }
            _ => {}
        }
    }
    // Limits are range-checked on read as on write. The aging time is only read as a number:
    // the consume scripts take whatever is stored (a test or an operator may write a shorter
    // one by hand), and it must not keep a server from reading the limits beside it.
    QueueSettings { aging: None, ..s }
        .validate()
        .map_err(|e| reply::bad(CONTEXT, format!("stored value out of range: {e}")))?;
    Ok(s)
}

fn parse_setting<T>(v: &str, parse: impl Fn(&str) -> Option<T>) -> Option<Setting<T>> {
    if v == NONE {
        Some(Setting::Off)
    } else {
        parse(v).map(Setting::On)
    }
}

fn parse_rate(v: &str) -> Option<Rate> {
    let (n, ms) = v.split_once('/')?;
    Some(Rate::new(
        n.parse().ok()?,
        Duration::from_millis(ms.parse().ok()?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_reads_back_as_written() {
        let change = SettingsChange::new()
            .rate(Setting::On(Rate::new(100, Duration::from_secs(1))))
            .burst(5)
            .concurrency(Setting::Off)
            .per_key_rate(Setting::On(Rate::new(5, Duration::from_millis(250))))
            .aging(Duration::from_secs(60));
        let args = encode(&change);
        let mut fields = Vec::new();
        let mut it = args.into_iter();
        while let (Some(f), Some(v)) = (it.next(), it.next()) {
            fields.push((
                f.as_string().unwrap_or_default(),
                v.as_string().unwrap_or_default(),
            ));
        }
        assert!(fields.contains(&("rate".into(), "100/1000".into())));
        assert!(fields.contains(&("concurrency".into(), "none".into())));
        assert!(fields.contains(&("aging_ms".into(), "60000".into())));
        assert_eq!(
            decode(fields).unwrap(),
            change.apply(QueueSettings::default())
        );
    }

    #[test]
    fn unreadable_fields_are_protocol_errors_and_unknown_ones_are_skipped() {
        for (f, v) in [
            ("rate", "x"),
            ("burst", "-1"),
            ("concurrency", "0"),
            ("aging_ms", "soon"),
        ] {
            let r = decode(vec![(f.into(), v.into())]);
            assert!(
                matches!(r, Err(BrokerError::Protocol { .. })),
                "{f}={v}: {r:?}"
            );
        }
        assert_eq!(
            decode(vec![("later".into(), "1".into())]).unwrap(),
            QueueSettings::default()
        );
        // A short aging time written by hand reads as it is.
        let short = decode(vec![("aging_ms".into(), "300".into())]).unwrap();
        assert_eq!(short.aging, Some(Duration::from_millis(300)));
    }
}
