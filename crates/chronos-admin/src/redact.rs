//! Redis URLs made fit to print: operators paste these into tickets and logs.

/// Query parameters whose value is replaced by `***`: any whose name contains one of these
/// (compared without case), which covers `password`, `sentinel_password`, `token`, `auth`,
/// `secret`, `api_key`, `credentials`, `pwd`.
const SENSITIVE: [&str; 7] = ["pass", "pwd", "secret", "token", "auth", "key", "cred"];

/// A Redis URL with its secrets masked, for messages, logs and page headers.
///
/// Guarantees:
/// - the password of the userinfo (`user:password@`) is replaced by `***`; the user name stays
///   (it tells which ACL user connects). A password-only userinfo (`:password@`) becomes `:***@`;
/// - the value of every query parameter whose name looks sensitive (contains `pass`, `pwd`,
///   `secret`, `token`, `auth`, `key` or `cred`, in any case) is replaced by `***`; other
///   parameters are kept as written;
/// - a fragment (`#...`) is dropped;
/// - a password holding `/`, `?`, `#` or `@` is masked whole: credentials end at the last `@`
///   before the host part.
///
/// Text that is not a URL is returned with the same rules applied as far as they match (a
/// string without `@`, `?` or `#` is returned unchanged).
///
/// ```
/// use chronos_admin::redact_url;
/// assert_eq!(
///     redact_url("rediss://ops:s3cret@cache:6380/0?password=x&timeout=5"),
///     "rediss://ops:***@cache:6380/0?password=***&timeout=5"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, url),
    };
    // A password may hold '/', '?', '#' or '@': the userinfo ends at the last '@' that comes
    // before the query of the host part, so look for it in the whole rest first.
    let (userinfo, after) = match rest.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, rest),
    };
    let after = after.split('#').next().unwrap_or("");
    let (hosts, query) = match after.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (after, None),
    };
    let mut out = String::with_capacity(url.len());
    if let Some(s) = scheme {
        out.push_str(s);
        out.push_str("://");
    }
    if let Some(u) = userinfo {
        match u.split_once(':') {
            Some((user, _)) => {
                out.push_str(user);
                out.push_str(":***@");
            }
            // A lone name before '@' is a user name (redis://user@host), or a password in a
            // form some clients accept (redis://password@host): mask it, it may be secret.
            None if u.is_empty() => out.push('@'),
            None => out.push_str("***@"),
        }
    }
    out.push_str(hosts);
    if let Some(q) = query {
        out.push('?');
        let params: Vec<String> = q
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if sensitive(k) => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out
}

fn sensitive(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    SENSITIVE.iter().any(|s| n.contains(s))
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_and_secret_parameters_are_masked() {
        for (given, shown) in [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            (
                "rediss://ops:s3cret@cache.example:6380/0",
                "rediss://ops:***@cache.example:6380/0",
            ),
            (
                "redis://:secret@h:1?password=x",
                "redis://:***@h:1?password=***",
            ),
            ("redis://user:p@ss@h:1/0", "redis://user:***@h:1/0"),
            ("redis://u:pa/ss?x#y@h:2", "redis://u:***@h:2"),
            (
                "redis://h:1/0?timeout=5&Sentinel_Password=x&node=a",
                "redis://h:1/0?timeout=5&Sentinel_Password=***&node=a",
            ),
            (
                "redis://h:1/?auth_token=abc#frag",
                "redis://h:1/?auth_token=***",
            ),
            ("redis://hunter2@h:1", "redis://***@h:1"),
            ("user:pw@h", "user:***@h"),
            (
                "redis-sentinel://a:1,b:2/mymaster?password=pw",
                "redis-sentinel://a:1,b:2/mymaster?password=***",
            ),
        ] {
            assert_eq!(redact_url(given), shown, "{given}");
        }
    }
}
