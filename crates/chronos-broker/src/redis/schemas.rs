//! Task kinds' JSON Schemas in Redis (`<ns>:schemas`, a hash of kind to schema text): what
//! workers publish and `chronos schema export` reads, so producers in other languages can
//! validate a payload before they send it.

use fred::prelude::*;

use super::RedisBroker;
use crate::redis::store::store;
use crate::{BrokerError, Schemas};

impl RedisBroker {
    /// Stores each kind's schema of `schemas`, replacing an earlier one of the same kind
    /// (kinds not named are kept: several services may publish theirs). One call.
    pub async fn publish_schemas(&self, schemas: &Schemas) -> Result<(), BrokerError> {
        if schemas.is_empty() {
            return Ok(());
        }
        let fields: Vec<(String, String)> = schemas
            .iter()
            .map(|(kind, schema)| (kind.to_string(), schema.to_string()))
            .collect();
        let _: i64 = self
            .inner
            .client
            .hset(self.inner.keys.schemas(), fields)
            .await
            .map_err(store)?;
        Ok(())
    }

    /// Every published schema, by kind. A stored schema that is not JSON is an error naming
    /// its kind, not skipped silently.
    pub async fn schemas(&self) -> Result<Schemas, BrokerError> {
        let all: std::collections::HashMap<String, String> = self
            .inner
            .client
            .hgetall(self.inner.keys.schemas())
            .await
            .map_err(store)?;
        let mut out = Schemas::new();
        for (kind, text) in all {
            let schema = serde_json::from_str(&text).map_err(|e| {
                super::reply::bad(
                    "schemas",
                    format!("the schema of {kind:?} is not JSON: {e}"),
                )
            })?;
            out.insert(kind, schema);
        }
        Ok(out)
    }
}
