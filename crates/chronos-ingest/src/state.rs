//! What every handler shares: the client, the config, the token's digest.

use chronos_core::Client;
use sha2::{Digest, Sha256};

use crate::config::IngestConfig;

/// The router's state.
#[derive(Debug)]
pub(crate) struct AppState<B> {
    pub(crate) client: Client<B>,
    pub(crate) config: IngestConfig,
    /// SHA-256 of the token: offered tokens are hashed and the digests compared, so the
    /// comparison takes the same time whatever the length and content of the guess.
    token_digest: Option<[u8; 32]>,
}

impl<B> AppState<B> {
    pub(crate) fn new(client: Client<B>, config: IngestConfig) -> Self {
        let config = config.normalized();
        let token_digest = config
            .token
            .as_deref()
            .map(|t| Sha256::digest(t.as_bytes()).into());
        Self {
            client,
            config,
            token_digest,
        }
    }

    /// True when a token is configured.
    pub(crate) fn has_token(&self) -> bool {
        self.token_digest.is_some()
    }

    /// True when `offered` is the token, compared in constant time.
    pub(crate) fn token_matches(&self, offered: &str) -> bool {
        let Some(want) = &self.token_digest else {
            return false;
        };
        let got: [u8; 32] = Sha256::digest(offered.as_bytes()).into();
        // Every byte is looked at whatever the first difference: no early exit to time.
        want.iter()
            .zip(got.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}
