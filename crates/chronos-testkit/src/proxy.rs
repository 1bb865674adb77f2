use std::io;
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A loopback TCP proxy in front of a Redis, for fault tests: [`TcpProxy::cut`] drops every
/// connection open at that moment (both directions, mid-command if need be); new connections are
/// accepted as before, so clients see a network cut followed by a reconnect.
#[derive(Debug)]
pub struct TcpProxy {
    port: u16,
    cuts: watch::Sender<u64>,
    accept: JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on a free loopback port and forwards to `target`. Needs a tokio runtime.
    pub async fn start(target: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let (cuts, _) = watch::channel(0u64);
        let watcher = cuts.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut cut = watcher.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        // Returning drops both sockets: the client sees the connection reset.
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Ok(Self { port, cuts, accept })
    }

    /// `redis://127.0.0.1:<proxy port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Drops every connection open now.
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}
