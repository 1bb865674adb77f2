//! JSON Schemas of task arguments, by kind: what a producer in another language validates a
//! payload against before it sends it (producer contract v1). Workers publish them
//! ([`Schemas`] through the broker), and `chronos schema export` writes one file per kind.

use std::collections::BTreeMap;

/// The schemas of several kinds, by kind: each a JSON Schema (draft 2020-12) of the kind's
/// argument type as its JSON payload (`chronos-codec: json`) is written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schemas {
    by_kind: BTreeMap<String, serde_json::Value>,
}

impl Schemas {
    /// No schema yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds kind `T::KIND` with the schema derived from `T` (`#[derive(JsonSchema)]`), marked
    /// with the kind as `x-chronos-kind`. A kind added twice keeps the last schema.
    #[cfg(feature = "schema")]
    #[cfg_attr(docsrs, doc(cfg(feature = "schema")))]
    pub fn kind<T: crate::TaskArgs + schemars::JsonSchema>(mut self) -> Self {
        let mut schema = serde_json::to_value(schemars::schema_for!(T))
            .unwrap_or_else(|_| serde_json::json!({}));
        if let Some(obj) = schema.as_object_mut() {
            obj.insert("x-chronos-kind".into(), T::KIND.into());
        }
        self.by_kind.insert(T::KIND.to_string(), schema);
        self
    }

    /// Adds `kind` with a schema given as JSON (read back from Redis, say).
    pub fn insert(&mut self, kind: impl Into<String>, schema: serde_json::Value) {
        self.by_kind.insert(kind.into(), schema);
    }

    /// The schema of `kind`, if known.
    pub fn get(&self, kind: &str) -> Option<&serde_json::Value> {
        self.by_kind.get(kind)
    }

    /// Every kind with its schema, by kind.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &serde_json::Value)> {
        self.by_kind.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many kinds.
    pub fn len(&self) -> usize {
        self.by_kind.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.by_kind.is_empty()
    }

    /// A file name for `kind`'s schema: the kind with every byte outside `[A-Za-z0-9_.-]`
    /// (the `:` of `email:send`, say) as `_`, then `.schema.json`.
    pub fn file_name(kind: &str) -> String {
        let safe: String = kind
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{safe}.schema.json")
    }
}

#[cfg(all(test, feature = "schema"))]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, schemars::JsonSchema)]
    struct Email {
        to: String,
        n: u32,
        cc: Option<String>,
    }

    impl crate::TaskArgs for Email {
        const KIND: &'static str = "email:send";
    }

    #[test]
    fn a_kinds_schema_requires_its_fields_and_names_the_kind() {
        let s = Schemas::new().kind::<Email>();
        let schema = s.get("email:send").expect("schema");
        assert_eq!(schema["x-chronos-kind"], "email:send");
        assert_eq!(schema["type"], "object");
        let required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(required, ["to", "n"]);
        assert_eq!(schema["properties"]["n"]["type"], "integer");
        assert_eq!(Schemas::file_name("email:send"), "email_send.schema.json");
    }
}
