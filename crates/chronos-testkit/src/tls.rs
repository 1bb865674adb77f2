use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::port::on_fresh_port;
use crate::server::{bind_failed, which};
use crate::TestkitError;

/// A `redis-server` that speaks only TLS and only to one ACL user, the way managed Redis
/// services are set up: a throwaway CA and a server certificate for `127.0.0.1`/`localhost` are
/// made at start with `openssl` from `PATH`, the `default` user is switched off, and the ACL
/// user [`TlsRedisServer::USER`] gets a random password. Killed (and its dir, keys included,
/// removed) on drop.
///
/// A client must trust [`TlsRedisServer::ca_cert`]: rustls-based clients read the roots from
/// the system store, which the `SSL_CERT_FILE` environment variable replaces.
#[derive(Debug)]
pub struct TlsRedisServer {
    port: u16,
    password: String,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl TlsRedisServer {
    /// The ACL user the server accepts.
    pub const USER: &'static str = "chronos";

    /// Makes the certificates, starts the server and waits until it accepts connections (up to
    /// 10 s). Fails when `redis-server` or `openssl` is missing, or the build of Redis has no
    /// TLS support (its log then says so).
    pub fn start() -> Result<Self, TestkitError> {
        which("redis-server")?;
        which("openssl")?;
        let dir = tempfile::Builder::new()
            .prefix("chronos-redis-tls-")
            .tempdir()?;
        make_certificates(dir.path())?;
        let bytes: [u8; 12] = rand::random();
        let password: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut server = Self {
            port: 0,
            password,
            dir,
            child: None,
        };
        // A fresh log per attempt: a server that lost its port logged so and exited.
        on_fresh_port(|port| {
            server.port = port;
            let _ = std::fs::remove_file(server.dir.path().join("redis.log"));
            server.spawn()
        })?;
        Ok(server)
    }

    /// `rediss://chronos:<password>@127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!(
            "rediss://{}:{}@127.0.0.1:{}",
            Self::USER,
            self.password,
            self.port
        )
    }

    /// The ACL user's password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The loopback port of the TLS listener (there is no plaintext one).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The PEM file of the throwaway CA that signed the server's certificate.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The server's log so far, for a failing test to print.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    fn spawn(&mut self) -> Result<(), TestkitError> {
        let d = self.dir.path();
        let path = |name: &str| d.join(name).display().to_string();
        let acl_password = format!(">{}", self.password);
        let args: Vec<String> = [
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--tls-port",
            &self.port.to_string(),
            "--tls-cert-file",
            &path("server.crt"),
            "--tls-key-file",
            &path("server.key"),
            "--tls-ca-cert-file",
            &path("ca.crt"),
            "--tls-auth-clients",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            &d.display().to_string(),
            "--logfile",
            &path("redis.log"),
            "--user",
            "default",
            "off",
            "--user",
            Self::USER,
            "on",
            &acl_password,
            "~*",
            "&*",
            "+@all",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let child = Command::new("redis-server")
            .args(&args)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        self.wait_ready()
    }

    /// Ready when the log says so and the TLS port accepts a TCP connection (a TLS handshake
    /// needs a client this crate does not carry); [`TestkitError::PortTaken`] when the log says
    /// another process won the port.
    fn wait_ready(&mut self) -> Result<(), TestkitError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            // Looked at before the log, so the log of a server that exited is complete.
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            let log = self.log();
            if bind_failed(&log) {
                self.stop();
                return Err(TestkitError::PortTaken {
                    port: self.port,
                    log,
                });
            }
            if let Some(status) = exited {
                return Err(self.not_ready(format!("redis-server exited: {status}")));
            }
            let ready = log.contains("Ready to accept connections")
                && std::net::TcpStream::connect_timeout(
                    &([127, 0, 0, 1], self.port).into(),
                    Duration::from_millis(200),
                )
                .is_ok();
            if ready {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(self.not_ready("not ready within 10 s".into()))
    }

    fn not_ready(&self, reason: String) -> TestkitError {
        TestkitError::NotReady {
            port: self.port,
            reason,
            log: self.log(),
        }
    }
}

impl TlsRedisServer {
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for TlsRedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A P-256 CA and a server certificate it signs for `IP:127.0.0.1` and `DNS:localhost`, valid
/// for two days, as `ca.crt`, `server.crt` and `server.key` in `dir`.
fn make_certificates(dir: &Path) -> Result<(), TestkitError> {
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )?;
    let steps: [&[&str]; 3] = [
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=chronos-testkit-ca",
        ],
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    ];
    for args in steps {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(std::io::Error::other(format!(
                "openssl {} failed: {}",
                args.first().unwrap_or(&""),
                String::from_utf8_lossy(&out.stderr)
            ))
            .into());
        }
    }
    Ok(())
}
