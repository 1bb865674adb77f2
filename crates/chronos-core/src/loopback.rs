//! The DNS-rebinding guard of the HTTP servers that run without a token (the console and the
//! ingest): one rule for both, so neither can drift into accepting a name the other refuses.

/// True when `host`, the value of a request's `Host` header, names this machine's loopback
/// interface: `localhost` (any case), or a loopback IP address (`127.0.0.1`, `[::1]`), with or
/// without a port. A request without a `Host` header (`None`: HTTP/1.0) passes too.
///
/// For a server that listens on loopback without a token: a web page whose DNS name a hostile
/// resolver rebinds to 127.0.0.1 reaches such a server from the visitor's browser, but its
/// requests still carry the page's own name as `Host`, which this refuses.
///
/// ```
/// use chronos_core::loopback_host;
///
/// assert!(loopback_host(Some("localhost:8080")));
/// assert!(loopback_host(Some("[::1]:8090")));
/// assert!(!loopback_host(Some("evil.example:8080")));
/// ```
pub fn loopback_host(host: Option<&str>) -> bool {
    let Some(host) = host else {
        // HTTP/1.0 without Host: not a browser that DNS rebinding could steer.
        return true;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::loopback_host;

    #[test]
    fn only_loopback_names_pass() {
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LocalHost",
            "localhost",
            "[::1]:8080",
            "127.1.2.3",
        ] {
            assert!(loopback_host(Some(host)), "{host}");
        }
        for host in [
            "evil.example:8080",
            "10.0.0.5",
            "localhost.evil.example",
            "[::2]:8080",
            "",
        ] {
            assert!(!loopback_host(Some(host)), "{host}");
        }
    }

    #[test]
    fn a_request_without_host_passes() {
        assert!(loopback_host(None));
    }
}
