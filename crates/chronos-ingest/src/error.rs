use std::net::SocketAddr;

/// Why the ingest could not start or stopped serving. (What a request is refused with is an
/// HTTP answer, not this type: see the crate docs for the error codes.)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IngestError {
    /// The ingest would listen on a non-loopback address without a token: anyone who reaches
    /// the port could enqueue any task. Permanent: set [`crate::IngestConfig::token`].
    #[error(
        "refusing to listen on {0} without a token: anyone who reaches it could enqueue tasks; \
         set a token or listen on a loopback address"
    )]
    TokenRequired(SocketAddr),
    /// Binding or serving failed (address in use, permission denied, ...). Transient or
    /// permanent as the OS error says.
    #[error("cannot serve: {0}")]
    Io(#[from] std::io::Error),
}
