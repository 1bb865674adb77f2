//! `forward!` writes the methods of each capability from its own list, so a method added to a
//! trait and not to the list would make every `&T`, `Arc<T>`, `Box<T>` and wrapper broker fail
//! to compile, unless the method had a default body: then wrappers silently lose the store's
//! own implementation (settle-and-fetch, batched bulk actions). This test reads both sources
//! and holds them together: every capability method is required (no default body), and
//! `forward!` lists exactly the trait's methods, each with the trait's parameters in order.

use std::collections::{BTreeMap, BTreeSet};

/// The capability traits' sources, one trait per file.
const CAPABILITIES: &[&str] = &[
    include_str!("../src/capability/consume.rs"),
    include_str!("../src/capability/coordinate.rs"),
    include_str!("../src/capability/enqueue.rs"),
    include_str!("../src/capability/events.rs"),
    include_str!("../src/capability/flows.rs"),
    include_str!("../src/capability/inspect.rs"),
    include_str!("../src/capability/maintain.rs"),
    include_str!("../src/capability/manage_schedules.rs"),
    include_str!("../src/capability/operate.rs"),
    include_str!("../src/capability/results.rs"),
    include_str!("../src/capability/sample_queues.rs"),
    include_str!("../src/capability/schedules.rs"),
    include_str!("../src/capability/settings.rs"),
    include_str!("../src/capability/tenants.rs"),
    include_str!("../src/capability/throttle.rs"),
];

const FORWARD: &str = include_str!("../src/forward.rs");

/// A method of a trait: its name, its parameters' names (after `self`) and whether its
/// signature ends in a body.
struct Method {
    name: String,
    params: Vec<String>,
    has_body: bool,
}

/// The parameter names of the signature that starts at `sig` (just after the method's name):
/// the words before each top-level `:` inside its first parenthesized list, `self` left out.
fn params(sig: &str) -> Vec<String> {
    let Some(open) = sig.find('(') else {
        return Vec::new();
    };
    let mut depth = 0i32;
    let mut part = String::new();
    let mut parts = Vec::new();
    for c in sig[open + 1..].chars() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' if depth == 0 => {
                parts.push(std::mem::take(&mut part));
                break;
            }
            ')' | '>' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut part));
                continue;
            }
            _ => {}
        }
        part.push(c);
    }
    parts
        .iter()
        .filter_map(|p| p.split_once(':').map(|(name, _)| name.trim().to_string()))
        .filter(|name| !name.is_empty())
        .collect()
}

/// The trait named in `src` (`pub trait X`) and its methods, comments left out.
fn trait_methods(src: &str) -> (String, Vec<Method>) {
    let code: String = src
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let start = code.find("pub trait ").expect("a trait");
    let name: String = code[start + "pub trait ".len()..]
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    // The trait's block: from its first `{` to the brace that closes it.
    let open = start + code[start..].find('{').expect("trait body");
    let mut depth = 0usize;
    let mut end = open;
    for (i, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = open + i;
                    break;
                }
            }
            _ => {}
        }
    }
    let body = &code[open + 1..end];
    let mut methods = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find("fn ") {
        let after = &rest[i + 3..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The signature ends at the first `;` (no body) or `{` (a default body) outside `<..>`
        // and `(..)`.
        let mut nest = 0i32;
        let mut has_body = false;
        let mut consumed = after.len();
        for (j, c) in after.char_indices() {
            match c {
                '(' | '<' | '[' => nest += 1,
                ')' | ']' => nest -= 1,
                '>' if !after[..j].ends_with('-') => nest -= 1,
                ';' if nest == 0 => {
                    consumed = j;
                    break;
                }
                '{' if nest == 0 => {
                    has_body = true;
                    consumed = j;
                    break;
                }
                _ => {}
            }
        }
        methods.push(Method {
            params: params(&after[..consumed]),
            name,
            has_body,
        });
        rest = &after[consumed..];
        if has_body {
            // Skip the body.
            let mut depth = 0usize;
            let mut skip = rest.len();
            for (j, c) in rest.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            skip = j + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &rest[skip..];
        }
    }
    (name, methods)
}

/// The methods `forward!` writes per capability, from its `(@methods X, $how:tt)` arms, each
/// with its parameters' names.
fn forwarded() -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut out = BTreeMap::new();
    for arm in FORWARD.split("(@methods ").skip(1) {
        let name: String = arm.chars().take_while(|c| *c != ',').collect();
        let block = &arm[..arm.find("\n    };").unwrap_or(arm.len())];
        let methods = block
            .split("fn ")
            .skip(1)
            .map(|m| {
                let name: String = m
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                (name, params(&m[..m.find(';').unwrap_or(m.len())]))
            })
            .collect();
        out.insert(name, methods);
    }
    out
}

#[test]
fn forward_lists_every_method_of_every_capability_and_none_has_a_default_body() {
    let forwarded = forwarded();
    let mut problems = Vec::new();
    for src in CAPABILITIES {
        let (name, methods) = trait_methods(src);
        assert!(!methods.is_empty(), "no method read from trait {name}");
        for m in &methods {
            if m.has_body {
                problems.push(format!(
                    "{name}::{} has a default body: a wrapper that forgets it silently loses the store's own",
                    m.name
                ));
            }
        }
        let want: BTreeSet<String> = methods.iter().map(|m| m.name.clone()).collect();
        let Some(arm) = forwarded.get(&name) else {
            problems.push(format!("forward! has no arm for {name}"));
            continue;
        };
        let have: BTreeSet<String> = arm.keys().cloned().collect();
        if have != want {
            problems.push(format!(
                "forward!({name}) writes {:?}, the trait has {:?}",
                have.difference(&want).collect::<Vec<_>>(),
                want.difference(&have).collect::<Vec<_>>()
            ));
        }
        for m in &methods {
            if let Some(written) = arm.get(&m.name).filter(|p| **p != m.params) {
                problems.push(format!(
                    "forward!({name}) writes {}({}), the trait has {}({})",
                    m.name,
                    written.join(", "),
                    m.name,
                    m.params.join(", ")
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
