//! The slice of W3C WebDriver the harness uses, as JSON over HTTP/1.1 to a chromedriver on
//! loopback.
//!
//! One TCP connection per command with `Connection: close`: chromedriver is local, so a connect
//! costs microseconds, and no connection state means nothing to go stale between commands
//! (a keep-alive pool would need its own error handling for a driver that closed its side).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::BrowserError;

/// Key under which W3C WebDriver carries an element reference.
pub(super) const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// HTTP method of a WebDriver command.
#[derive(Debug, Clone, Copy)]
pub(super) enum Method {
    Get,
    Post,
    Delete,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Delete => "DELETE",
        }
    }
}

/// Sends one command and returns the `value` of its reply. `what` names the command in errors
/// (for example "click `button#go`"). A WebDriver error reply becomes
/// [`BrowserError::WebDriver`]; no reply within `timeout` becomes [`BrowserError::Protocol`].
pub(super) async fn call(
    port: u16,
    method: Method,
    path: &str,
    body: Option<&Value>,
    timeout: Duration,
    what: &str,
) -> Result<Value, BrowserError> {
    let exchange = exchange(port, method, path, body);
    let (status, body) = match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => {
            return Err(BrowserError::Protocol {
                command: what.to_string(),
                reason: format!("{} {path}: {e}", method.as_str()),
            })
        }
        Err(_) => {
            return Err(BrowserError::Protocol {
                command: what.to_string(),
                reason: format!("{} {path}: no reply within {timeout:?}", method.as_str()),
            })
        }
    };
    let json: Value = serde_json::from_slice(&body).map_err(|e| BrowserError::Protocol {
        command: what.to_string(),
        reason: format!(
            "HTTP {status}, body is not JSON ({e}): {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ),
    })?;
    let mut value = match json {
        Value::Object(mut map) => map.remove("value").unwrap_or(Value::Null),
        other => other,
    };
    if let Some(error) = value.get("error").and_then(Value::as_str) {
        let message = value
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(BrowserError::WebDriver {
            command: what.to_string(),
            error: error.to_string(),
            message: message.to_string(),
        });
    }
    if !(200..300).contains(&status) {
        return Err(BrowserError::Protocol {
            command: what.to_string(),
            reason: format!("HTTP {status} without a WebDriver error: {value}"),
        });
    }
    Ok(value.take())
}

/// Writes the request, reads the reply to its end and returns (status, body).
async fn exchange(
    port: u16,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
    let payload = body.map(Value::to_string).unwrap_or_default();
    // chromedriver rejects requests whose Host is not a loopback name (DNS-rebinding guard).
    let mut request = format!(
        "{} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n\
         Connection: close\r\n",
        method.as_str()
    );
    if body.is_some() {
        request.push_str("Content-Type: application/json; charset=utf-8\r\n");
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n", payload.len()));
    request.push_str(&payload);
    stream.write_all(request.as_bytes()).await?;

    let mut raw = Vec::with_capacity(4096);
    let mut buf = vec![0u8; 64 * 1024];
    let (head_end, status, length, chunked) = loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(bad("connection closed before the reply's headers ended"));
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = find(&raw, b"\r\n\r\n") {
            let (status, length, chunked) = parse_head(&raw[..end])?;
            break (end + 4, status, length, chunked);
        }
    };
    // Stop at Content-Length rather than at EOF: a server that keeps the connection open
    // despite `Connection: close` must not turn every command into a timeout.
    loop {
        let have = raw.len() - head_end;
        if let (Some(length), false) = (length, chunked) {
            if have >= length {
                raw.truncate(head_end + length);
                break;
            }
        }
        if chunked && raw[head_end..].ends_with(b"0\r\n\r\n") {
            break;
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
    }
    let body = raw.split_off(head_end);
    let body = if chunked { dechunk(&body)? } else { body };
    Ok((status, body))
}

fn parse_head(head: &[u8]) -> std::io::Result<(u16, Option<usize>, bool)> {
    let head = std::str::from_utf8(head).map_err(|_| bad("reply headers are not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad(&format!("bad status line {status_line:?}")))?;
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().ok();
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    Ok((status, length, chunked))
}

fn dechunk(mut body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len());
    loop {
        let line_end = find(body, b"\r\n").ok_or_else(|| bad("truncated chunk size"))?;
        let size_text = std::str::from_utf8(&body[..line_end]).map_err(|_| bad("chunk size"))?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| bad(&format!("bad chunk size {size_text:?}")))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size {
            return Err(bad("truncated chunk"));
        }
        out.extend_from_slice(&body[..size]);
        body = body.get(size + 2..).unwrap_or_default();
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dechunks_a_chunked_body() {
        let body = b"4\r\n{\"va\r\n9;ext=1\r\nlue\":null\r\n1\r\n}\r\n0\r\n\r\n";
        assert_eq!(dechunk(body).unwrap(), b"{\"value\":null}");
    }

    #[test]
    fn reads_status_and_length_from_the_head() {
        let head = b"HTTP/1.1 404 Not Found\r\ncontent-length: 12\r\nContent-Type: x";
        assert_eq!(parse_head(head).unwrap(), (404, Some(12), false));
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked";
        assert_eq!(parse_head(head).unwrap(), (200, None, true));
        assert!(parse_head(b"garbage").is_err());
    }
}
