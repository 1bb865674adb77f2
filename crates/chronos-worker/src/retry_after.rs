//! Reading an HTTP `Retry-After` value (RFC 9110 section 10.2.3), so a handler that called a
//! rate-limited API can block its key for as long as the API asked
//! ([`crate::TaskError::rate_limited_for_header`]).

use std::time::{Duration, SystemTime};

/// A `Retry-After` value that is neither delta-seconds nor an HTTP date. Permanent: the same
/// value never parses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid Retry-After value {value:?}: neither delta-seconds nor an HTTP date")]
pub struct InvalidRetryAfter {
    /// The value as given (cut to its first 64 characters).
    pub value: String,
}

/// How long an HTTP `Retry-After` value asks to wait, counted from `now`.
///
/// Accepts delta-seconds (`"120"`; a value too large for a `u64` saturates) and an HTTP date in
/// any of the three forms RFC 9110 says a recipient must read (`"Sun, 06 Nov 1994 08:49:37
/// GMT"`, the RFC 850 and the asctime forms). A date in the past answers zero. Surrounding
/// whitespace is ignored; anything else (a negative or fractional number, an empty value, a
/// date in another zone) is an [`InvalidRetryAfter`]. Never panics.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use chronos_worker::retry_after_header;
///
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // 1994-11-06 08:49:37
/// assert_eq!(retry_after_header("120", now), Ok(Duration::from_secs(120)));
/// assert_eq!(
///     retry_after_header("Sun, 06 Nov 1994 08:50:07 GMT", now),
///     Ok(Duration::from_secs(30))
/// );
/// assert!(retry_after_header("soon", now).is_err());
/// ```
pub fn retry_after_header(value: &str, now: SystemTime) -> Result<Duration, InvalidRetryAfter> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // All digits: only an overflow can fail, and that much is "a very long time".
        return Ok(Duration::from_secs(v.parse::<u64>().unwrap_or(u64::MAX)));
    }
    match httpdate::parse_http_date(v) {
        Ok(at) => Ok(at.duration_since(now).unwrap_or(Duration::ZERO)),
        Err(_) => Err(InvalidRetryAfter {
            value: value.chars().take(64).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1994-11-06 08:49:37 UTC, the RFC's example date.
    fn rfc_now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777)
    }

    #[test]
    fn delta_seconds_are_read_with_surrounding_whitespace() {
        assert_eq!(retry_after_header("0", rfc_now()), Ok(Duration::ZERO));
        assert_eq!(
            retry_after_header(" 120 ", rfc_now()),
            Ok(Duration::from_secs(120))
        );
        assert_eq!(
            retry_after_header("99999999999999999999999", rfc_now()),
            Ok(Duration::from_secs(u64::MAX)),
            "an overflow saturates"
        );
    }

    #[test]
    fn an_http_date_in_the_future_is_the_time_until_it() {
        let now = rfc_now();
        for v in [
            "Sun, 06 Nov 1994 08:51:37 GMT",
            "Sunday, 06-Nov-94 08:51:37 GMT",
            "Sun Nov  6 08:51:37 1994",
        ] {
            assert_eq!(
                retry_after_header(v, now),
                Ok(Duration::from_secs(120)),
                "{v}"
            );
        }
    }

    #[test]
    fn an_http_date_in_the_past_is_zero() {
        let later = rfc_now() + Duration::from_secs(3600);
        assert_eq!(
            retry_after_header("Sun, 06 Nov 1994 08:49:37 GMT", later),
            Ok(Duration::ZERO)
        );
    }

    #[test]
    fn garbage_is_a_typed_error_and_never_a_panic() {
        for v in [
            "",
            "   ",
            "-5",
            "1.5",
            "+3",
            "soon",
            "Sun, 06 Nov 1994 08:49:37 CET",
            "Sun, 32 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT",
            "\u{0}\u{ffff}é",
            "12 34",
        ] {
            let got = retry_after_header(v, rfc_now());
            assert!(got.is_err(), "{v:?} gave {got:?}");
        }
        let long = "x".repeat(1000);
        assert_eq!(
            retry_after_header(&long, rfc_now())
                .expect_err("garbage")
                .value
                .len(),
            64
        );
    }

    #[test]
    fn the_header_helper_falls_back_on_a_missing_or_bad_value() {
        use crate::{FailureKind, TaskError};
        let fallback = Duration::from_secs(30);
        let kind = |e: TaskError| e.kind();
        assert_eq!(
            kind(TaskError::rate_limited_for_header(Some("7"), fallback)),
            FailureKind::RateLimited {
                delay: Duration::from_secs(7),
                queue_wide: false
            }
        );
        for v in [None, Some("later"), Some("")] {
            assert_eq!(
                kind(TaskError::rate_limited_for_header(v, fallback)),
                FailureKind::RateLimited {
                    delay: fallback,
                    queue_wide: false
                }
            );
        }
        assert_eq!(
            kind(TaskError::rate_limited(Duration::ZERO).queue_wide()),
            FailureKind::RateLimited {
                delay: Duration::ZERO,
                queue_wide: true
            }
        );
        assert_eq!(
            kind(TaskError::retry("boom").queue_wide()),
            FailureKind::Retry,
            "no effect on other errors"
        );
    }
}
