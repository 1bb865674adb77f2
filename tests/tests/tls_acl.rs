//! A managed-Redis-like server: TLS only, the default user off, one ACL user. The broker
//! connects with `rediss://user:password@host:port`, a worker runs a task through it, and a
//! wrong password or a plaintext connection is refused. One test in its own binary: it points
//! `SSL_CERT_FILE` (read by rustls' system roots) at the throwaway CA.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronos::prelude::*;
use chronos_testkit::TlsRedisServer;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Secure(u32);
impl TaskArgs for Secure {
    const KIND: &'static str = "tls:secure";
}

#[tokio::test]
async fn a_task_runs_over_tls_as_an_acl_user() {
    let redis = TlsRedisServer::start().expect("a TLS redis-server");
    std::env::set_var("SSL_CERT_FILE", redis.ca_cert());

    let broker = match RedisBroker::builder(redis.url())
        .namespace(chronos_testkit::namespace())
        .connect()
        .await
    {
        Ok(b) => b,
        Err(e) => panic!("connect over TLS: {e}\n--- server log ---\n{}", redis.log()),
    };
    let ran = Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    let mut mux = Mux::new();
    mux.handle(move |_: Context, t: Task<Secure>| {
        let r = r.clone();
        async move {
            r.fetch_add(t.args.0, Ordering::SeqCst);
            Ok(())
        }
    })
    .expect("register");
    let server = Server::new(broker.clone(), mux, ServerConfig::default())
        .expect("server")
        .start()
        .await
        .expect("start");
    let client = Client::new(broker.clone());
    for n in [1, 2, 4] {
        client
            .enqueue(&Secure(n), EnqueueOptions::new())
            .await
            .expect("enqueue");
    }
    chronos_testkit::eventually(Duration::from_secs(10), "tasks ran over TLS", || async {
        ran.load(Ordering::SeqCst) == 7
    })
    .await;
    server.shutdown().await;
    broker.close().await;

    let wrong = redis.url().replace(redis.password(), "not-the-password");
    let err = RedisBroker::connect(wrong)
        .await
        .expect_err("a wrong password is refused");
    assert!(
        err.to_string().to_uppercase().contains("WRONGPASS"),
        "unexpected error: {err}"
    );
    let plaintext = redis.url().replacen("rediss://", "redis://", 1);
    assert!(
        RedisBroker::connect(plaintext).await.is_err(),
        "a plaintext connection to the TLS port must fail"
    );
}
