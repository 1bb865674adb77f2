//! `chronos schema ...`: the JSON Schemas of task kinds that workers published
//! (`RedisBroker::publish_schemas`), for producers in other languages to validate payloads
//! against before they send them.

use std::path::PathBuf;

use anyhow::Context;
use chronos_admin::Admin;
use chronos_broker::{RedisBroker, Schemas};
use clap::Subcommand;

use crate::out::Out;
use crate::table::print_table;

/// The `schema` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum SchemaCmd {
    /// The kinds with a published schema.
    Ls,
    /// Writes each kind's schema as `<dir>/<kind>.schema.json` (`:` and other bytes outside
    /// `[A-Za-z0-9_.-]` as `_`), or prints them as one JSON object by kind without `--out`.
    Export {
        /// The folder to write into (created when missing).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Only these kinds (all when none is given).
        kinds: Vec<String>,
    },
}

pub(crate) async fn run(
    admin: &Admin<RedisBroker>,
    out: &Out,
    cmd: SchemaCmd,
) -> anyhow::Result<()> {
    let all = admin.broker().schemas().await?;
    match cmd {
        SchemaCmd::Ls => {
            if out.json {
                for (kind, _) in all.iter() {
                    out.line(&serde_json::json!({ "kind": kind }))?;
                }
                return Ok(());
            }
            if all.is_empty() {
                println!("no schema published (a worker publishes them with publish_schemas)");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|(kind, _)| vec![kind.to_string(), Schemas::file_name(kind)])
                .collect();
            print_table(&["KIND", "FILE"], &rows);
            Ok(())
        }
        SchemaCmd::Export { out: dir, kinds } => {
            let mut chosen = Schemas::new();
            for kind in &kinds {
                let schema = all
                    .get(kind)
                    .with_context(|| format!("no schema published for kind {kind:?}"))?;
                chosen.insert(kind.clone(), schema.clone());
            }
            let chosen = if kinds.is_empty() { all } else { chosen };
            let Some(dir) = dir else {
                let by_kind: serde_json::Map<String, serde_json::Value> = chosen
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&by_kind)?);
                return Ok(());
            };
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            for (kind, schema) in chosen.iter() {
                let path = dir.join(Schemas::file_name(kind));
                let text = serde_json::to_string_pretty(schema)? + "\n";
                std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                out.done(
                    &serde_json::json!({"kind": kind, "file": path.display().to_string()}),
                    &format!("{kind}: {}", path.display()),
                )?;
            }
            Ok(())
        }
    }
}
