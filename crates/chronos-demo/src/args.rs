//! The demo's command line: its role and pace.

use std::time::Duration;

use anyhow::Context as _;
use chronos::prelude::*;

/// Which part of the system this process runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Role {
    All,
    Worker,
    Scheduler,
    Producer,
}

impl Role {
    fn parse(s: &str) -> anyhow::Result<Self> {
        Ok(match s {
            "all" => Role::All,
            "worker" => Role::Worker,
            "scheduler" => Role::Scheduler,
            "producer" => Role::Producer,
            other => anyhow::bail!(
                "unknown role {other:?} (expected all, worker, scheduler or producer)"
            ),
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Role::All => "all",
            Role::Worker => "worker",
            Role::Scheduler => "scheduler",
            Role::Producer => "producer",
        }
    }

    /// Runs the worker pool.
    pub(crate) fn works(self) -> bool {
        matches!(self, Role::All | Role::Worker)
    }

    /// Runs the scheduler.
    pub(crate) fn schedules(self) -> bool {
        matches!(self, Role::All | Role::Scheduler)
    }

    /// Enqueues tasks.
    pub(crate) fn produces(self) -> bool {
        matches!(self, Role::All | Role::Producer)
    }
}

/// The command line.
pub(crate) struct Args {
    pub(crate) seconds: Option<u64>,
    pub(crate) rate: u64,
    pub(crate) role: Role,
    /// The worker's shutdown grace; `deploy/` sizes the containers' stop timeouts above it.
    pub(crate) grace: Duration,
    /// Where the web console listens (role `all` only); None: no console.
    pub(crate) console: Option<String>,
}

/// What `chronos-demo --help` prints.
pub(crate) const HELP: &str = "\
chronos-demo: the whole chronos-rs system in one process (or one role of it)

A worker pool on weighted queues, a producer, and the cluster scheduler firing a 1 s interval
schedule, with a progress line a second, until Ctrl-C, SIGTERM or --seconds; then a graceful
shutdown. Some handlers fail, panic or dead-letter on purpose: that is part of the show.

Usage: chronos-demo [OPTIONS]

Options:
  --role ROLE      all (default), worker, scheduler or producer; the roles other than all
                   run one part each and meet in the Redis of CHRONOS_REDIS_URL
  --rate N         tasks enqueued per second (default 200)
  --seconds N      stop after N seconds (default: run until Ctrl-C or SIGTERM)
  --grace SECS     how long running tasks get to finish on shutdown (default: the
                   library's shutdown timeout)
  --console ADDR   where role all serves the web console (default 127.0.0.1:8080, a free
                   port when taken); `off` for none
  -h, --help       this text

Environment:
  CHRONOS_REDIS_URL  the Redis to use (a password in it is never printed); without it,
                     role all starts a throwaway redis-server from PATH
";

/// The command line, or None when it asked for the help text.
pub(crate) fn parse_args(argv: impl IntoIterator<Item = String>) -> anyhow::Result<Option<Args>> {
    let mut args = Args {
        seconds: None,
        rate: 200,
        role: Role::All,
        grace: ServerConfig::default().shutdown_timeout,
        console: Some("127.0.0.1:8080".into()),
    };
    let mut it = argv.into_iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().context("missing value");
        let mut number = || value()?.parse::<u64>().context("not a number");
        match a.as_str() {
            "--seconds" => args.seconds = Some(number()?),
            "--rate" => args.rate = number()?.max(1),
            "--grace" => args.grace = Duration::from_secs(number()?),
            "--role" => args.role = Role::parse(&value()?)?,
            "--console" => {
                let v = value()?;
                args.console = (v != "off").then_some(v);
            }
            "-h" | "--help" => return Ok(None),
            other => anyhow::bail!(
                "unknown argument {other:?} (expected --seconds N, --rate N, \
                 --role all|worker|scheduler|producer, --grace SECS, --console ADDR|off; \
                 --help tells more)"
            ),
        }
    }
    Ok(Some(args))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> anyhow::Result<Option<Args>> {
        parse_args(a.iter().map(|s| s.to_string()))
    }

    #[test]
    fn help_is_an_answer_not_an_unknown_argument() {
        assert!(args(&["--help"]).expect("help").is_none());
        assert!(args(&["-h"]).expect("help").is_none());
        assert!(HELP.contains("Usage: chronos-demo") && HELP.contains("--role"));
        let err = args(&["--frobnicate"]).err().expect("unknown").to_string();
        assert!(err.contains("--help"), "{err}");
        let a = args(&["--role", "worker", "--rate", "300"])
            .expect("args")
            .expect("not help");
        assert_eq!((a.role, a.rate), (Role::Worker, 300));
    }
}
