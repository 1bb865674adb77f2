//! The Redis the demo runs on: CHRONOS_REDIS_URL, or a throwaway redis-server for role `all`.

use chronos_testkit::RedisServer;

use crate::args::Role;

/// The URL of the Redis to use, with the throwaway server (if one was started) that must stay
/// alive for the run.
pub(crate) fn url(role: Role) -> anyhow::Result<(String, Option<RedisServer>)> {
    let mut redis = None;
    let url = match std::env::var("CHRONOS_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        Some(url) => url,
        // A throwaway Redis is private to this process: a lone worker or producer on it would
        // never meet the other roles.
        None if role != Role::All => anyhow::bail!(
            "--role {} needs CHRONOS_REDIS_URL: the roles meet in one Redis",
            role.name()
        ),
        None => {
            let server = RedisServer::start()?;
            let url = server.url();
            redis = Some(server);
            url
        }
    };
    Ok((url, redis))
}

/// The URL without its password or secret query parameters: in a container the URL comes
/// from a secret and the first line goes to the cluster's logs.
pub(crate) fn redact(url: &str) -> String {
    chronos_admin::redact_url(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_never_shows_a_password() {
        let shown = redact("redis://app:hunter2@redis:6379/0?password=hunter2");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
