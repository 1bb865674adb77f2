//! `chronos-core` is the contract a store implements: its dependency tree must hold no store
//! driver, so an implementer or a wrapper does not inherit fred's versions. Read from the
//! workspace's `Cargo.lock`, which lists each package's dependencies.

use std::collections::{BTreeMap, BTreeSet};

#[test]
fn the_core_depends_on_no_redis_client() {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock"))
        .expect("the workspace's Cargo.lock");
    let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let name = package
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'))
            .expect("a package name")
            .to_string();
        let mut list = Vec::new();
        if let Some(start) = package.find("dependencies = [") {
            for line in package[start..].lines().skip(1) {
                if line.starts_with(']') {
                    break;
                }
                // `"name"` or `"name version"`
                let dep = line.trim().trim_matches(|c| c == '"' || c == ',');
                list.push(dep.split(' ').next().unwrap_or_default().to_string());
            }
        }
        deps.entry(name).or_default().extend(list);
    }
    assert!(
        deps.contains_key("chronos-core"),
        "chronos-core is in the lock file"
    );
    let mut seen = BTreeSet::new();
    let mut todo = vec!["chronos-core".to_string()];
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            todo.extend(deps.get(&name).cloned().unwrap_or_default());
        }
    }
    // The lock file lists optional dependencies too, so this is stricter than a default build.
    for driver in ["fred", "redis", "chronos-broker"] {
        assert!(!seen.contains(driver), "chronos-core depends on {driver}");
    }
    assert!(
        seen.contains("serde"),
        "the walk found the core's dependencies: {seen:?}"
    );
}
