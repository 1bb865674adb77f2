use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

/// A loopback TCP proxy in front of a Redis, for fault tests.
///
/// * [`TcpProxy::cut`] drops every connection open at that moment (both directions, mid-command
///   if need be); new connections are accepted as before, so clients see a network cut followed
///   by a reconnect.
/// * [`TcpProxy::hold`] closes every new connection at once while set, so a client that lost its
///   connection cannot reconnect (and re-send) until the test lets it.
/// * [`TcpProxy::drop_reply_to`] arms a lost reply: the next request whose bytes contain a
///   pattern (a script's SHA1, a command name) reaches Redis and runs there, but its reply is
///   swallowed and that connection is cut. The client sees "connection closed" for a command
///   that did take effect, and re-sends it after reconnecting: the path every idempotent
///   transition must survive.
/// * [`TcpProxy::stall`] holds all traffic while set, in both directions, on open and new
///   connections alike, without closing anything: a network partition that heals. Bytes sent
///   meanwhile are delivered, in order, when the stall ends, as TCP would after retransmits.
/// * [`TcpProxy::retarget`] sends new connections to another server, so that with a
///   [`TcpProxy::cut`] a client reconnects to a different Redis at the same address: what a
///   client sees when a failover moves its primary.
#[derive(Debug)]
pub struct TcpProxy {
    port: u16,
    cuts: watch::Sender<u64>,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Where new connections go.
    target: Mutex<Option<SocketAddr>>,
    /// The pattern of an armed lost reply (an empty pattern matches any request).
    armed: Mutex<Option<Vec<u8>>>,
    /// How many replies were dropped so far.
    dropped: Mutex<u64>,
    /// New connections are closed at once while set.
    held: std::sync::atomic::AtomicBool,
    dropped_changed: Notify,
    /// No bytes are forwarded while set.
    stalled: std::sync::atomic::AtomicBool,
    stall_changed: Notify,
}

impl Shared {
    /// Returns once traffic may flow (at once unless a stall is on).
    async fn flowing(&self) {
        loop {
            // Created before the check, so a stall lifted in between still wakes it.
            let woken = self.stall_changed.notified();
            if !self.stalled.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            woken.await;
        }
    }
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards to `target`. Needs a tokio runtime.
    pub async fn start(target: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let (cuts, _) = watch::channel(0u64);
        let shared = Arc::new(Shared::default());
        *lock(&shared.target) = Some(target);
        let watcher = cuts.clone();
        let state = shared.clone();
        let accept = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                if state.held.load(std::sync::atomic::Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let mut cut = watcher.subscribe();
                let state = state.clone();
                let Some(target) = *lock(&state.target) else {
                    continue;
                };
                tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let (client_rx, client_tx) = inbound.into_split();
                    let (server_rx, server_tx) = outbound.into_split();
                    // Set by the upstream half when it forwarded the request whose reply is to be
                    // lost; the downstream half then swallows the next bytes and ends.
                    let (doomed_tx, doomed_rx) = watch::channel(false);
                    tokio::select! {
                        _ = upstream(client_rx, server_tx, &state, doomed_tx) => {}
                        _ = downstream(server_rx, client_tx, &state, doomed_rx) => {}
                        // Returning drops both sockets: the client sees the connection reset.
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Ok(Self {
            port,
            cuts,
            shared,
            accept,
        })
    }

    /// `redis://127.0.0.1:<proxy port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The proxy's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// While `on`, every new connection is closed as soon as it is accepted (open ones are left
    /// alone): clients cannot reconnect until it is turned off again.
    pub fn hold(&self, on: bool) {
        self.shared
            .held
            .store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// While `on`, no byte is forwarded in either direction, on any connection, and nothing is
    /// closed: clients see a peer that stopped answering (their commands time out only by their
    /// own timers), and everything held is delivered when the stall is lifted.
    pub fn stall(&self, on: bool) {
        self.shared
            .stalled
            .store(on, std::sync::atomic::Ordering::SeqCst);
        if !on {
            self.shared.stall_changed.notify_waiters();
        }
    }

    /// Sends every connection accepted from now on to `target`; open ones stay where they are
    /// (a [`TcpProxy::cut`] ends them).
    pub fn retarget(&self, target: SocketAddr) {
        *lock(&self.shared.target) = Some(target);
    }

    /// Drops every connection open now.
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Arms one lost reply: the next request (on any connection) whose bytes contain `pattern`
    /// is forwarded to Redis, and the reply to it is dropped and its connection cut. An empty
    /// pattern matches the next request of all. Arming again before it fired replaces the
    /// pattern.
    pub fn drop_reply_to(&self, pattern: impl AsRef<[u8]>) {
        *lock(&self.shared.armed) = Some(pattern.as_ref().to_vec());
    }

    /// Arms a lost reply for the next request of all (see [`TcpProxy::drop_reply_to`]).
    pub fn drop_next_reply(&self) {
        self.drop_reply_to([]);
    }

    /// How many replies were dropped so far.
    pub fn dropped_replies(&self) -> u64 {
        *lock(&self.shared.dropped)
    }

    /// Waits until at least `n` replies were dropped in all.
    pub async fn wait_dropped(&self, n: u64) {
        loop {
            let woken = self.shared.dropped_changed.notified();
            if self.dropped_replies() >= n {
                return;
            }
            woken.await;
        }
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Client to Redis: forwards everything; marks the connection doomed when a request matches the
/// armed pattern (disarming it, so exactly one reply is lost).
async fn upstream(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    state: &Shared,
    doomed: watch::Sender<bool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        state.flowing().await;
        let chunk = &buf[..n];
        {
            let mut armed = lock(&state.armed);
            let hit = armed
                .as_ref()
                .is_some_and(|p| p.is_empty() || contains(chunk, p));
            if hit {
                *armed = None;
                doomed.send_replace(true);
            }
        }
        if to.write_all(chunk).await.is_err() {
            return;
        }
    }
}

/// Redis to client: forwards replies until the connection is doomed; then the next bytes from
/// Redis (the reply to the doomed request, and anything queued behind it) are dropped and the
/// connection ends.
async fn downstream(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    state: &Shared,
    doomed: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        state.flowing().await;
        if *doomed.borrow() {
            *lock(&state.dropped) += 1;
            state.dropped_changed.notify_waiters();
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
