//! This process's own CPU time, for the figures that charge a phase's client-side work (a
//! worker draining, a scheduler leader firing) to what it did. The bench process runs only that
//! phase's loops meanwhile and waits, so its CPU over the phase is theirs.

use anyhow::{anyhow, Result};

/// This process's CPU time so far (user + system, µs), from `/proc/self/stat` (Linux; in clock
/// ticks of 10 ms, so a phase of a second or more reads it to about 1%).
pub(crate) fn process_us() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("unreadable /proc/self/stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks = |i: usize| -> Result<f64> {
        Ok(f.get(i)
            .ok_or_else(|| anyhow!("short /proc/self/stat"))?
            .parse::<f64>()?)
    };
    Ok((ticks(11)? + ticks(12)?) * 10_000.0)
}
