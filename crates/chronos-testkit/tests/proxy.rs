//! The proxy's modes: a lost reply (the request runs on Redis, the reply never reaches the
//! client), a cut, and a stall (traffic held, the connection kept, everything delivered later).
//! Also the restartable server with persistence the chaos scenarios use.

use std::net::SocketAddr;

use chronos_testkit::{RedisServer, TcpProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn command(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n{a}\r\n", a.len()).into_bytes());
    }
    out
}

/// Sends one command and returns what came back before the connection closed or a reply ended
/// with CRLF (every reply used here is one line).
async fn call(stream: &mut TcpStream, args: &[&str]) -> Vec<u8> {
    stream.write_all(&command(args)).await.expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return got,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.ends_with(b"\r\n") {
                    return got;
                }
            }
        }
    }
}

#[tokio::test]
async fn armed_request_runs_but_its_reply_is_lost() {
    let redis = RedisServer::start().expect("redis");
    let target: SocketAddr = ([127, 0, 0, 1], redis.port()).into();
    let proxy = TcpProxy::start(target).await.expect("proxy");
    let mut via = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .expect("connect");
    assert_eq!(call(&mut via, &["INCR", "n"]).await, b":1\r\n");

    proxy.drop_reply_to("INCRBY");
    // A request that does not match passes with its reply.
    assert_eq!(call(&mut via, &["INCR", "n"]).await, b":2\r\n");
    assert_eq!(proxy.dropped_replies(), 0);
    // The matching one runs, and the connection closes without a reply.
    assert_eq!(call(&mut via, &["INCRBY", "n", "10"]).await, b"");
    proxy.wait_dropped(1).await;
    assert_eq!(proxy.dropped_replies(), 1);

    // It did run, and the proxy is disarmed: a new connection works normally.
    let mut again = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .expect("reconnect");
    assert_eq!(call(&mut again, &["GET", "n"]).await, b"$2\r\n12\r\n");
    assert_eq!(call(&mut again, &["INCRBY", "n", "1"]).await, b":13\r\n");
}

#[tokio::test]
async fn cut_drops_open_connections() {
    let redis = RedisServer::start().expect("redis");
    let target: SocketAddr = ([127, 0, 0, 1], redis.port()).into();
    let proxy = TcpProxy::start(target).await.expect("proxy");
    let mut via = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .expect("connect");
    assert_eq!(call(&mut via, &["PING"]).await, b"+PONG\r\n");
    proxy.cut();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(call(&mut via, &["PING"]).await, b"");
}

#[tokio::test]
async fn stall_holds_traffic_without_closing_and_delivers_it_afterwards() {
    let redis = RedisServer::start().expect("redis");
    let target: SocketAddr = ([127, 0, 0, 1], redis.port()).into();
    let proxy = TcpProxy::start(target).await.expect("proxy");
    let mut via = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .expect("connect");
    assert_eq!(call(&mut via, &["PING"]).await, b"+PONG\r\n");
    let mut direct = TcpStream::connect(("127.0.0.1", redis.port()))
        .await
        .expect("connect direct");

    proxy.stall(true);
    via.write_all(&command(&["INCR", "n"]))
        .await
        .expect("write");
    let mut buf = [0u8; 64];
    let early =
        tokio::time::timeout(std::time::Duration::from_millis(300), via.read(&mut buf)).await;
    assert!(early.is_err(), "an answer came through a stall: {early:?}");
    // Held in the proxy, not delivered: Redis has not seen the request.
    assert_eq!(call(&mut direct, &["GET", "n"]).await, b"$-1\r\n");

    proxy.stall(false);
    // The same connection, still open, gets the held request through and its reply back.
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), via.read(&mut buf))
        .await
        .expect("reply after the stall")
        .expect("read");
    assert_eq!(&buf[..n], b":1\r\n");
    assert_eq!(call(&mut direct, &["GET", "n"]).await, b"$1\r\n1\r\n");
}

#[tokio::test]
async fn an_append_only_server_keeps_its_data_across_a_kill_and_restart() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
        .expect("redis");
    let mut s = TcpStream::connect(("127.0.0.1", redis.port()))
        .await
        .expect("connect");
    assert_eq!(call(&mut s, &["SET", "k", "v"]).await, b"+OK\r\n");
    redis.kill();
    redis.restart().expect("restart");
    let mut s = TcpStream::connect(("127.0.0.1", redis.port()))
        .await
        .expect("reconnect");
    assert_eq!(call(&mut s, &["GET", "k"]).await, b"$1\r\nv\r\n");
}
