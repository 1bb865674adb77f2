//! Loopback ports for the servers this crate starts.
//!
//! A `redis-server` is told its port on the command line, so a port is picked free here,
//! released, and bound by the server a few milliseconds later; whatever binds it in between wins
//! it. Under load that gap grows, and two things used to fall into it: a listener bound to port
//! 0 (a [`crate::TcpProxy`] of a test running in parallel) and the source port of an outgoing
//! connection, both drawn by the kernel from its ephemeral range, which the old range
//! (20000..40000) overlapped. When the proxy won, the server failed to bind and exited, and the
//! readiness PING was answered by the other test's proxy: the test ran against someone else's
//! server and counted someone else's lost replies.
//!
//! So: ports are drawn below the ephemeral range (nothing the kernel hands out lands on one), a
//! port (and its cluster bus port, +10000) is handed out at most once per process (a server
//! that restarts on its port, or a cluster bus, never finds it given to another server), and
//! the starter reads the server's own log to see that it bound the port, retrying on a fresh
//! one when another process took it first (see [`on_fresh_port`]).

use std::collections::HashSet;
use std::net::TcpListener;
use std::ops::Range;
use std::sync::{Mutex, OnceLock};

use crate::TestkitError;

/// A cluster node also listens on its port + 10000 (the cluster bus).
const BUS_OFFSET: u16 = 10_000;

/// Lowest port handed out: clear of the well-known and registered services people run locally.
const LOWEST: u16 = 10_000;

/// How many fresh ports a start tries when another process keeps binding the one it picked.
const ATTEMPTS: usize = 5;

/// Ports (and bus ports) handed out by this process so far; never handed out again.
fn handed_out() -> &'static Mutex<HashSet<u16>> {
    static PORTS: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    PORTS.get_or_init(Default::default)
}

/// The ports to draw from: a port and its bus port both below the kernel's ephemeral range
/// (Linux default 32768..60999, so 10000..22768 here). On a machine whose ephemeral range leaves
/// no room below it, the old range is used and only the retry protects a start.
fn candidates() -> Range<u16> {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let high = ephemeral_low.saturating_sub(BUS_OFFSET);
    if high >= LOWEST + 1_000 {
        LOWEST..high
    } else {
        20_000..40_000
    }
}

/// A loopback port free now, with its bus port (+10000) free too, neither handed out before by
/// this process; both are recorded as handed out.
pub(crate) fn free_port() -> Result<u16, TestkitError> {
    let range = candidates();
    let mut taken = handed_out().lock().unwrap_or_else(|p| p.into_inner());
    for _ in 0..500 {
        let port = range.start + rand::random::<u16>() % (range.end - range.start);
        let bus = port + BUS_OFFSET;
        if taken.contains(&port) || taken.contains(&bus) {
            continue;
        }
        let free = TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", bus)).is_ok();
        if free {
            taken.insert(port);
            taken.insert(bus);
            return Ok(port);
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "no free loopback port found").into())
}

/// Runs `start` on a fresh port, and again on another fresh port while it fails with
/// [`TestkitError::PortTaken`] (another process bound the port between the pick and the
/// server's bind), up to 5 ports. Any other error ends it at once.
pub(crate) fn on_fresh_port<T>(
    mut start: impl FnMut(u16) -> Result<T, TestkitError>,
) -> Result<T, TestkitError> {
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match start(free_port()?) {
            Err(e @ TestkitError::PortTaken { .. }) => last = Some(e),
            other => return other,
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::AddrInUse, "no port tried").into()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_bus_ports_are_below_the_ephemeral_range_and_never_handed_out_twice() {
        let range = candidates();
        let mut seen = HashSet::new();
        for _ in 0..200 {
            let p = free_port().expect("port");
            assert!(range.contains(&p), "{p} outside {range:?}");
            assert!(
                seen.insert(p) && seen.insert(p + BUS_OFFSET),
                "{p} handed out twice"
            );
        }
    }

    #[test]
    fn a_taken_port_is_retried_on_a_fresh_one_and_other_errors_end_at_once() {
        let mut tried = Vec::new();
        let port = on_fresh_port(|p| {
            tried.push(p);
            if tried.len() < 3 {
                Err(TestkitError::PortTaken {
                    port: p,
                    log: String::new(),
                })
            } else {
                Ok(p)
            }
        })
        .expect("third port");
        assert_eq!((tried.len(), Some(&port)), (3, tried.last()));
        assert_eq!(tried.iter().collect::<HashSet<_>>().len(), 3);

        let mut calls = 0;
        let err = on_fresh_port::<()>(|_| {
            calls += 1;
            Err(TestkitError::Missing("redis-server"))
        });
        assert!(matches!(err, Err(TestkitError::Missing(_))) && calls == 1);
    }
}
