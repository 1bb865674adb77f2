//! `cargo xtask layout`: the structure checks of issue 19, measured on the source tree.
//!
//! * **Crate shares**: non-test lines per package; no package may hold more than
//!   [`MAX_SHARE_PERCENT`] of the total, so one crate cannot quietly become the whole system.
//! * **Import loops**: within each package, files must not import each other in a cycle
//!   (found as strongly connected components of the file -> file `use` graph).
//! * **Room sizes** (issue 36, `sizes.rs`): in the crates under `crates/`, no Rust file over 800
//!   lines and no function over 120.
//!
//! The parsing is deliberately small and hand-written (no `syn`: xtask must build in seconds).
//! It strips comments and literal contents, then reads `use` trees and inline
//! `crate::` / `super::` / `self::` paths. That is an approximation of Rust's name resolution,
//! good enough for the way this workspace is written; the limits are noted where they matter.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};

mod sizes;
mod source;

use source::{find_all, ident_at, is_ident_char, matching_close, skip_ws, strip};

/// The largest share of all non-test lines one package may hold, in percent.
const MAX_SHARE_PERCENT: f64 = 25.0;

/// Runs the checks on the workspace, prints their reports, fails if any check fails.
pub(crate) fn run(rest: &[String]) -> Result<()> {
    if !rest.is_empty() {
        bail!("layout takes no arguments, got {rest:?}");
    }
    let report = check(&crate::root())?;
    print!("{}", report.text);
    if !report.failures.is_empty() {
        bail!("layout check failed:\n  {}", report.failures.join("\n  "));
    }
    Ok(())
}

/// Loops that were already in the tree when this check was written (issue 19), as
/// `(package, files)`. They are reported but do not fail the check, so that CI can hold the
/// line from today; an entry that no longer matches a loop exactly (broken up, or grown) fails
/// the check, so this list can only shrink. Empty it to make every loop fatal.
const KNOWN_LOOPS: &[(&str, &[&str])] = &[];

/// What [`check`] found: the printable report and one line per failed rule.
#[derive(Debug)]
struct Report {
    text: String,
    failures: Vec<String>,
}

/// One package's sources: `(path relative to its src/, contents)`.
#[derive(Debug)]
struct Package {
    name: String,
    /// Its directory from the workspace root (`crates/chronos-core`), with `/` separators.
    dir: String,
    files: Vec<(String, String)>,
}

/// Runs the checks on the tree under `root` (crates/* and xtask, xtask/*).
fn check(root: &Path) -> Result<Report> {
    check_with(root, KNOWN_LOOPS, sizes::KNOWN_LONG)
}

/// [`check`] with given lists of tolerated loops and of tolerated long files and functions.
fn check_with(root: &Path, known: &[(&str, &[&str])], known_long: &[&str]) -> Result<Report> {
    let packages = load_packages(root)?;
    let mut text = String::new();
    let mut failures = Vec::new();

    let analyses: Vec<(String, Analysis)> = packages
        .iter()
        .map(|p| (p.name.clone(), analyze(&p.files)))
        .collect();

    // Crate shares.
    let total: usize = analyses.iter().map(|(_, a)| a.lines).sum();
    let mut rows: Vec<(&str, usize)> = analyses
        .iter()
        .map(|(n, a)| (n.as_str(), a.lines))
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let _ = writeln!(
        text,
        "Crate shares (non-test lines of src/**/*.rs and *.lua; limit {MAX_SHARE_PERCENT} %):"
    );
    let _ = writeln!(text, "  {:<24} {:>7} {:>7}", "package", "lines", "share");
    for (name, lines) in &rows {
        let share = percent(*lines, total);
        let flag = if share > MAX_SHARE_PERCENT {
            failures.push(format!(
                "{name} holds {share:.1} % of all non-test lines (limit {MAX_SHARE_PERCENT} %)"
            ));
            "  <- over the limit"
        } else {
            ""
        };
        let _ = writeln!(text, "  {name:<24} {lines:>7} {share:>6.1} %{flag}");
    }
    let _ = writeln!(text, "  {:<24} {total:>7}", "total");

    // Import loops.
    let loops: Vec<(&str, &Loop)> = analyses
        .iter()
        .flat_map(|(n, a)| a.loops.iter().map(move |l| (n.as_str(), l)))
        .collect();
    let is_known = |name: &str, l: &Loop| {
        known
            .iter()
            .any(|(p, files)| *p == name && l.files.iter().eq(files.iter()))
    };
    if loops.is_empty() {
        let _ = writeln!(text, "\nImport loops between files: none");
    } else {
        let _ = writeln!(text, "\nImport loops between files: {}", loops.len());
        for (name, l) in &loops {
            let tag = if is_known(name, l) {
                "  (known, see KNOWN_LOOPS)"
            } else {
                failures.push(format!("{name}: import loop {}", l.files.join(" <-> ")));
                ""
            };
            let _ = writeln!(text, "  {name}: {}{tag}", l.files.join(" <-> "));
            for (from, to, names) in &l.edges {
                let _ = writeln!(text, "    {from} -> {to}: {}", names.join(", "));
            }
        }
    }
    for (p, files) in known {
        if !loops
            .iter()
            .any(|(name, l)| name == p && l.files.iter().eq(files.iter()))
        {
            failures.push(format!(
                "{p}: KNOWN_LOOPS lists {} but there is no such loop now; remove the entry",
                files.join(" <-> ")
            ));
        }
    }

    // Room sizes, in the crates under crates/ only (xtask's tools are not held to them).
    let rooms: Vec<sizes::Room> = packages
        .iter()
        .zip(&analyses)
        .filter(|(p, _)| p.dir.starts_with("crates/"))
        .flat_map(|(p, (_, a))| {
            a.rooms.iter().map(move |r| sizes::Room {
                path: format!("{}/src/{}", p.dir, r.path),
                lines: r.lines,
                long_fns: r.long_fns.clone(),
            })
        })
        .collect();
    let (size_text, size_failures) = sizes::check(&rooms, known_long);
    text.push_str(&size_text);
    failures.extend(size_failures);
    Ok(Report { text, failures })
}

/// `part` as a percentage of `total` (0 for an empty tree).
fn percent(part: usize, total: usize) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

/// Every package under crates/ and xtask/ (xtask itself and its sub-packages), each with the
/// sources under its own src/ only.
fn load_packages(root: &Path) -> Result<Vec<Package>> {
    let mut dirs = vec![root.join("xtask")];
    for parent in ["crates", "xtask"] {
        let entries =
            fs::read_dir(root.join(parent)).with_context(|| format!("reading {parent}/"))?;
        for entry in entries {
            let path = entry?.path();
            if path.join("Cargo.toml").is_file() {
                dirs.push(path);
            }
        }
    }
    dirs.sort();
    let mut packages = Vec::new();
    for dir in dirs {
        let manifest = fs::read_to_string(dir.join("Cargo.toml"))
            .with_context(|| format!("reading {}", dir.join("Cargo.toml").display()))?;
        let name = package_name(&manifest)
            .unwrap_or_else(|| dir.strip_prefix(root).unwrap_or(&dir).display().to_string());
        let src = dir.join("src");
        let mut files = Vec::new();
        if src.is_dir() {
            collect_sources(&src, "", &mut files)?;
        }
        files.sort();
        let dir = dir
            .strip_prefix(root)
            .unwrap_or(&dir)
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        packages.push(Package { name, dir, files });
    }
    Ok(packages)
}

/// The `name = "..."` of a manifest's `[package]` table.
fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if let Some(value) = line.strip_prefix("name").map(str::trim_start) {
            if in_package {
                return Some(
                    value
                        .strip_prefix('=')?
                        .trim()
                        .trim_matches('"')
                        .to_string(),
                );
            }
        }
    }
    None
}

/// Collects `*.rs` and `*.lua` under `dir`. Test code is left out where it is recognisable by
/// its place: `tests/` directories and `tests.rs` files. Files declared as
/// `#[cfg(test)] mod x;` and inline `#[cfg(test)]` items are recognised later, by [`analyze`];
/// test code behind other cfgs (`cfg(all(test, ..))`, test-only features) is still counted.
/// Lines are physical lines, comments and blank lines included, as `wc -l` counts them.
fn collect_sources(dir: &Path, rel: &str, out: &mut Vec<(String, String)>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let child = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if path.is_dir() {
            if !matches!(name.as_str(), "tests" | "benches" | "examples" | "target") {
                collect_sources(&path, &child, out)?;
            }
        } else if (name.ends_with(".rs") && name != "tests.rs") || name.ends_with(".lua") {
            let text =
                fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            out.push((child, text));
        }
    }
    Ok(())
}

/// One package measured: its non-test line count, its import loops and its Rust files' sizes.
#[derive(Debug, Default)]
struct Analysis {
    lines: usize,
    loops: Vec<Loop>,
    /// Its Rust files' sizes, with paths relative to src/.
    rooms: Vec<sizes::Room>,
}

/// A strongly connected set of files, with the edges inside it and the names on each edge.
#[derive(Debug)]
struct Loop {
    files: Vec<String>,
    edges: Vec<(String, String, Vec<String>)>,
}

/// A parsed Rust file: where it sits in the module tree and what it imports.
#[derive(Debug)]
struct RsFile {
    path: String,
    module: Vec<String>,
    /// The code with comments, literal contents and `#[cfg(test)]` items blanked out.
    code: Vec<char>,
    /// Lines inside `#[cfg(test)]` items.
    test_lines: usize,
    /// Modules this file declares as `#[cfg(test)] mod x;`.
    test_children: Vec<String>,
    uses: Vec<UseDecl>,
}

/// One binding from a `use` declaration, e.g. `use crate::a::{B as C}` gives path
/// `crate::a::B`, binding `C`.
#[derive(Debug, Clone)]
struct UseDecl {
    path: Vec<String>,
    binding: String,
    /// `pub`, `pub(crate)`, `pub(super)`...: a re-export.
    public: bool,
    /// The module the declaration is written in (the file's module plus inline modules).
    at: Vec<String>,
}

/// Measures one package given `(path relative to src/, contents)` pairs.
fn analyze(files: &[(String, String)]) -> Analysis {
    let mut rs: Vec<RsFile> = Vec::new();
    let mut lines = 0;
    for (path, text) in files {
        if path.ends_with(".rs") {
            rs.push(parse_file(path, text));
        } else {
            lines += text.lines().count();
        }
    }

    // Files reachable only through `#[cfg(test)] mod x;` are test code: leave them (and
    // their own submodules) out of both the count and the graph.
    let test_modules: Vec<Vec<String>> = rs
        .iter()
        .flat_map(|f| {
            f.test_children.iter().map(|c| {
                let mut m = f.module.clone();
                m.push(c.clone());
                m
            })
        })
        .collect();
    rs.retain(|f| !test_modules.iter().any(|t| f.module.starts_with(t)));

    for f in &rs {
        let total = files
            .iter()
            .find(|(p, _)| *p == f.path)
            .map_or(0, |(_, t)| t.lines().count());
        lines += total.saturating_sub(f.test_lines);
    }

    let index: HashMap<Vec<String>, usize> = rs
        .iter()
        .enumerate()
        .map(|(i, f)| (f.module.clone(), i))
        .collect();
    let graph = Graph { files: &rs, index };

    // Edges: from -> to, with the names that tie them. A module's edges to its own submodules
    // are left out, as the root's are: it declares them (`mod x;`) and may hold their types,
    // which is a hierarchy, not two peers that need each other.
    let mut edges: BTreeMap<(usize, usize), BTreeSet<String>> = BTreeMap::new();
    for (from, f) in rs.iter().enumerate() {
        for (target, name) in graph.references(f) {
            let to = &rs[target].module;
            let into_own_submodule = to.len() > f.module.len() && to.starts_with(&f.module);
            if target != from && !to.is_empty() && !f.module.is_empty() && !into_own_submodule {
                edges.entry((from, target)).or_default().insert(name);
            }
        }
    }

    let mut adjacency = vec![Vec::new(); rs.len()];
    for &(a, b) in edges.keys() {
        adjacency[a].push(b);
    }
    let loops = strongly_connected(&adjacency)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut c| {
            c.sort_unstable();
            let inside: BTreeSet<usize> = c.iter().copied().collect();
            Loop {
                files: c.iter().map(|&i| rs[i].path.clone()).collect(),
                edges: edges
                    .iter()
                    .filter(|((a, b), _)| inside.contains(a) && inside.contains(b))
                    .map(|((a, b), names)| {
                        (
                            rs[*a].path.clone(),
                            rs[*b].path.clone(),
                            names.iter().cloned().collect(),
                        )
                    })
                    .collect(),
            }
        })
        .collect();
    let rooms = rs
        .iter()
        .map(|f| sizes::Room {
            path: f.path.clone(),
            lines: files
                .iter()
                .find(|(p, _)| *p == f.path)
                .map_or(0, |(_, t)| t.lines().count()),
            long_fns: sizes::long_functions(&f.code, sizes::MAX_FN_LINES),
        })
        .collect();
    Analysis {
        lines,
        loops,
        rooms,
    }
}

/// The module path a file under src/ defines: `lib.rs`/`main.rs` are the root, `a.rs` and
/// `a/mod.rs` are `a`, `a/b.rs` is `a::b`.
fn module_of(path: &str) -> Vec<String> {
    let stem = path.strip_suffix(".rs").unwrap_or(path);
    let mut parts: Vec<String> = stem.split('/').map(str::to_string).collect();
    if parts.len() == 1 && matches!(parts[0].as_str(), "lib" | "main") {
        parts.clear();
    } else if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The inline-module path at position `pos`: the names of the `mod x { ... }` blocks around it.
fn inline_path(blocks: &[(usize, usize, String)], pos: usize) -> Vec<String> {
    blocks
        .iter()
        .filter(|(open, close, _)| *open < pos && pos < *close)
        .map(|(_, _, name)| name.clone())
        .collect()
}

/// Parses one Rust file: blanks test items, finds inline modules and `use` declarations.
fn parse_file(path: &str, text: &str) -> RsFile {
    let module = module_of(path);
    let mut code = strip(text);

    // `#[cfg(test)]` items: a `mod x;` makes x's file test code; any other item is blanked up
    // to its `;` or its closing brace. (`cfg(all(test, ...))` and friends are not recognised.)
    let mut test_children = Vec::new();
    let mut test_line_set = BTreeSet::new();
    for start in find_all(&code, "#[cfg(test)]") {
        let after = start + "#[cfg(test)]".len();
        let Some(end) = (after..code.len()).find(|&j| code[j] == ';' || code[j] == '{') else {
            continue;
        };
        let end = if code[end] == '{' {
            matching_close(&code, end)
        } else {
            let item: String = code[after..end].iter().collect();
            let words: Vec<&str> = item.split_whitespace().collect();
            if let [.., "mod", name] = words.as_slice() {
                test_children.push((*name).to_string());
            }
            end
        };
        let line_of = |p: usize| {
            code[..p.min(code.len())]
                .iter()
                .filter(|c| **c == '\n')
                .count()
        };
        test_line_set.extend(line_of(start)..=line_of(end));
        let stop = (end + 1).min(code.len());
        for c in &mut code[start..stop] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    }

    // Inline modules change what `self` and `super` mean inside them.
    let blocks = inline_blocks(&code);

    // `use` declarations, then blanked so the inline-path scan does not read them again.
    let mut uses = Vec::new();
    for u in find_all(&code, "use") {
        if (u > 0 && (is_ident_char(code[u - 1]) || code[u - 1] == '$'))
            || !code.get(u + 3).is_some_and(|c| c.is_whitespace())
        {
            continue;
        }
        let Some(semi) = (u..code.len()).find(|&j| code[j] == ';') else {
            continue;
        };
        let tree: String = code[u + 3..semi].iter().collect();
        let before: String = code[..u].iter().collect();
        let before = before.trim_end();
        // `pub use` or `pub(crate) use` / `pub(in path) use`.
        let public = before.ends_with("pub")
            || (before.ends_with(')')
                && before
                    .rfind('(')
                    .is_some_and(|p| before[..p].trim_end().ends_with("pub")));
        let mut at = module.clone();
        at.extend(inline_path(&blocks, u));
        for (path, binding) in parse_use_tree(&tree) {
            uses.push(UseDecl {
                path,
                binding,
                public,
                at: at.clone(),
            });
        }
        for c in &mut code[u..semi] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    }

    RsFile {
        path: path.to_string(),
        module,
        test_lines: test_line_set.len(),
        test_children,
        uses,
        code,
    }
}

/// Expands a use tree (`crate::{a::X, b::{self, Y as Z}, c::*}`) into `(path, binding)` pairs.
fn parse_use_tree(tree: &str) -> Vec<(Vec<String>, String)> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = tree.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if is_ident_char(c) {
            let word: String = chars[i..]
                .iter()
                .take_while(|c| is_ident_char(**c))
                .collect();
            i += word.chars().count();
            tokens.push(word);
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".into());
            i += 2;
        } else {
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
            i += 1;
        }
    }
    let mut out = Vec::new();
    if tokens.first().is_some_and(|t| t == "::") {
        return out; // `use ::extern_crate`: never crate-local
    }
    let mut pos = 0;
    parse_subtree(&tokens, &mut pos, &[], &mut out);
    out
}

/// Parses one use tree at `pos` under `prefix`, pushing its `(path, binding)` pairs.
fn parse_subtree(
    tokens: &[String],
    pos: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, String)>,
) {
    let mut path = prefix.to_vec();
    while let Some(tok) = tokens.get(*pos) {
        match tok.as_str() {
            "{" => {
                *pos += 1;
                while *pos < tokens.len() && tokens[*pos] != "}" {
                    parse_subtree(tokens, pos, &path, out);
                    if tokens.get(*pos).is_some_and(|t| t == ",") {
                        *pos += 1;
                    }
                }
                *pos += 1;
                return;
            }
            "*" => {
                *pos += 1;
                out.push((path, "*".into()));
                return;
            }
            _ if is_ident_char(tok.chars().next().unwrap_or(' ')) => {
                path.push(tok.clone());
                *pos += 1;
                if tokens.get(*pos).is_some_and(|t| t == "::") {
                    *pos += 1;
                    continue;
                }
                if path.last().is_some_and(|s| s == "self") && path.len() > 1 {
                    path.pop();
                }
                let mut binding = path.last().cloned().unwrap_or_default();
                if tokens.get(*pos).is_some_and(|t| t == "as") {
                    if let Some(alias) = tokens.get(*pos + 1) {
                        binding = alias.clone();
                    }
                    *pos += 2;
                }
                out.push((path, binding));
                return;
            }
            _ => return,
        }
    }
}

/// The files of one package, indexed by module path, for resolving paths to files.
struct Graph<'a> {
    files: &'a [RsFile],
    index: HashMap<Vec<String>, usize>,
}

impl Graph<'_> {
    /// Every crate-local file `f` refers to, with the name used, from its `use` declarations
    /// and its inline `crate::` / `super::` / `self::` / `child_module::` paths.
    fn references(&self, f: &RsFile) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let code_text: String = f.code.iter().collect();
        for u in &f.uses {
            if u.binding == "*" && u.public {
                continue; // a glob re-export is a facade, not a dependency
            }
            // A re-export ties this file to the target only if its own code uses the name;
            // otherwise it is how other files reach the target, and they get the edge.
            if u.public && !contains_word(&code_text, &u.binding) {
                continue;
            }
            if let Some(hit) = self.resolve(&u.path, &u.at, 0) {
                out.push(hit);
            }
        }
        // Inline paths: the start of every `a::b` sequence not itself preceded by `::`.
        let code = &f.code;
        let blocks = inline_blocks(code);
        let mut i = 0;
        while i < code.len() {
            let starts_path = (i == 0 || !(is_ident_char(code[i - 1]) || code[i - 1] == '$'))
                && !(i >= 2 && code[i - 1] == ':' && code[i - 2] == ':');
            let Some(first) = starts_path.then(|| ident_at(code, i)).flatten() else {
                i += 1;
                continue;
            };
            let mut segs = vec![first];
            let mut j = i + segs[0].chars().count();
            while code.get(j) == Some(&':') && code.get(j + 1) == Some(&':') {
                match ident_at(code, j + 2) {
                    Some(s) => {
                        j += 2 + s.chars().count();
                        segs.push(s);
                    }
                    None => break,
                }
            }
            if segs.len() > 1 {
                let mut at = f.module.clone();
                at.extend(inline_path(&blocks, i));
                if let Some(hit) = self.resolve(&segs, &at, 0) {
                    out.push(hit);
                }
            }
            i = j.max(i + 1);
        }
        out
    }

    /// The file a path written in module `at` refers to, and the name it refers to there.
    /// `None` for paths outside the crate.
    fn resolve(&self, segs: &[String], at: &[String], depth: usize) -> Option<(usize, String)> {
        let mut abs: Vec<String>;
        let mut rest = segs;
        match segs.first()?.as_str() {
            "crate" => {
                abs = Vec::new();
                rest = &segs[1..];
            }
            "self" | "super" => {
                abs = at.to_vec();
                while let Some(s) = rest.first() {
                    match s.as_str() {
                        "self" => {}
                        "super" => {
                            abs.pop()?;
                        }
                        _ => break,
                    }
                    rest = &rest[1..];
                }
            }
            first => {
                // A bare first segment is crate-local only if it names a child module here
                // (Rust 2018 paths); anything else is an extern crate or a local type.
                abs = at.to_vec();
                abs.push(first.to_string());
                if !self.index.contains_key(&abs) {
                    return None;
                }
                abs.pop();
            }
        }
        abs.extend(rest.iter().cloned());

        // The longest prefix that is a module file.
        let k = (0..=abs.len())
            .rev()
            .find(|&k| self.index.contains_key(&abs[..k]))?;
        let file = self.index[&abs[..k]];
        let Some(name) = abs.get(k) else {
            return Some((file, abs.last().cloned().unwrap_or_else(|| "crate".into())));
        };
        // A name the module file imports: follow the `use` to where the name is defined.
        if depth < 8 {
            let module = &self.files[file].module;
            let binding = self.files[file]
                .uses
                .iter()
                .find(|u| &u.binding == name && u.at == *module);
            if let Some(u) = binding {
                let mut path = u.path.clone();
                path.extend(abs[k + 1..].iter().cloned());
                // An import of something outside the crate: no crate-local edge.
                return self.resolve(&path, &u.at, depth + 1);
            }
        }
        Some((file, name.clone()))
    }
}

/// The inline `mod x { ... }` blocks of (already stripped) code: `(open, close, name)`.
fn inline_blocks(code: &[char]) -> Vec<(usize, usize, String)> {
    let mut blocks = Vec::new();
    for m in find_all(code, "mod") {
        if (m > 0 && is_ident_char(code[m - 1]))
            || !code.get(m + 3).is_some_and(|c| c.is_whitespace())
        {
            continue;
        }
        let n = skip_ws(code, m + 3);
        if let Some(name) = ident_at(code, n) {
            let brace = skip_ws(code, n + name.len());
            if code.get(brace) == Some(&'{') {
                blocks.push((brace, matching_close(code, brace), name));
            }
        }
    }
    blocks
}

/// Whether `word` occurs in `text` as a whole identifier.
fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_ident_char) && !after.is_some_and(is_ident_char)
    })
}

/// Tarjan's strongly connected components, iteratively (no recursion depth limit).
fn strongly_connected(adjacency: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = adjacency.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, next edge to look at)
        let mut work = vec![(root, 0)];
        while let Some(&mut (v, ref mut e)) = work.last_mut() {
            if *e == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = adjacency[v].get(*e) {
                *e += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    fn loops(list: &[(&str, &str)]) -> Vec<Vec<String>> {
        analyze(&files(list))
            .loops
            .into_iter()
            .map(|l| l.files)
            .collect()
    }

    #[test]
    fn a_loop_is_found_with_its_names() {
        let a = analyze(&files(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::Beta;\npub struct Alpha;\n"),
            (
                "b.rs",
                "pub struct Beta;\nfn f() -> crate::a::Alpha { todo!() }\n",
            ),
        ]));
        assert_eq!(a.loops.len(), 1);
        assert_eq!(a.loops[0].files, ["a.rs", "b.rs"]);
        let names: Vec<_> = a.loops[0].edges.iter().map(|e| e.2.join(",")).collect();
        assert_eq!(names, ["Beta", "Alpha"]);
    }

    #[test]
    fn a_one_way_import_is_not_a_loop() {
        assert!(loops(&[
            ("lib.rs", "mod a;\nmod b;\npub use a::Alpha;\n"),
            ("a.rs", "use crate::b::Beta;\npub struct Alpha;\n"),
            ("b.rs", "pub struct Beta; // crate::a::Alpha only in a comment\nconst S: &str = \"crate::a::Alpha\";\n"),
        ])
        .is_empty());
    }

    #[test]
    fn super_resolves_relative_to_the_file_module() {
        let found = loops(&[
            ("lib.rs", "mod outer;\n"),
            ("outer/mod.rs", "mod x;\nmod y;\n"),
            ("outer/x.rs", "use super::y::Why;\npub struct Ex;\n"),
            (
                "outer/y.rs",
                "pub struct Why;\nimpl Why { fn e(&self) -> super::x::Ex { todo!() } }\n",
            ),
        ]);
        assert_eq!(found, [["outer/x.rs", "outer/y.rs"]]);
        // Inside an inline test module, `super` is the file itself: no edge to the parent.
        assert!(loops(&[
            ("lib.rs", "mod outer;\n"),
            ("outer/mod.rs", "mod x;\nuse x::Ex;\nfn f(_: Ex) {}\n"),
            (
                "outer/x.rs",
                "pub struct Ex;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n"
            ),
        ])
        .is_empty());
    }

    #[test]
    fn grouped_crate_paths_resolve() {
        let found = loops(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            (
                "a.rs",
                "use crate::{b::Beta, c::{self, Gamma as G}};\npub struct Alpha;\n",
            ),
            ("b.rs", "pub struct Beta;\n"),
            ("c.rs", "use crate::a::Alpha;\npub struct Gamma;\n"),
        ]);
        assert_eq!(found, [["a.rs", "c.rs"]]);
    }

    #[test]
    fn root_re_exports_lead_to_the_defining_module() {
        let found = loops(&[
            (
                "lib.rs",
                "mod a;\nmod b;\npub use a::Alpha;\npub(crate) use b::{Beta};\n",
            ),
            ("a.rs", "use crate::Beta;\npub struct Alpha;\n"),
            ("b.rs", "pub struct Beta;\nfn f(_: crate::Alpha) {}\n"),
        ]);
        assert_eq!(found, [["a.rs", "b.rs"]]);
        // Without the re-export, `crate::Name` points at the root, whose edges are ignored.
        assert!(loops(&[
            ("lib.rs", "mod a;\nmod b;\npub struct Alpha;\nuse a::X;\n"),
            ("a.rs", "pub struct X(crate::Alpha);\n"),
        ])
        .is_empty());
    }

    #[test]
    fn test_code_is_not_counted() {
        let a = analyze(&files(&[
            ("lib.rs", "mod a;\n#[cfg(test)]\nmod props;\n"),
            (
                "a.rs",
                "pub fn f() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n",
            ),
            ("props.rs", "use crate::a::f;\n"),
            ("s.lua", "return 1\n"),
        ]));
        // lib.rs: 1 line; a.rs: 1 line; props.rs: test-only; s.lua: 1 line.
        assert_eq!(a.lines, 3);
    }

    #[test]
    fn strip_keeps_code_and_blanks_literals() {
        let code: String =
            strip("let s = r#\"crate::x\"#; let c = '\"'; // crate::y\nfn f<'a>() {}")
                .into_iter()
                .collect();
        assert!(!code.contains("crate::"));
        assert!(code.contains("fn f<'a>() {}"));
    }

    /// Writes a tiny workspace (crates/* plus xtask) under the temp dir.
    fn scratch_tree(tag: &str, crates: &[(&str, &[(&str, &str)])]) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("xtask-layout-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let write = |path: std::path::PathBuf, text: &str| {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        };
        write(
            root.join("xtask/Cargo.toml"),
            "[package]\nname = \"xtask\"\n",
        );
        write(root.join("xtask/src/main.rs"), "fn main() {}\n");
        for (name, files) in crates {
            let dir = root.join("crates").join(name);
            write(
                dir.join("Cargo.toml"),
                &format!("[package]\nname = \"{name}\"\n"),
            );
            for (path, text) in *files {
                write(dir.join("src").join(path), text);
            }
        }
        root
    }

    #[test]
    fn check_fails_on_a_new_loop_and_on_a_stale_known_one() {
        let looped: &[(&str, &str)] = &[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            ("b.rs", "use crate::a::A;\npub struct B;\n"),
        ];
        let root = scratch_tree("loop", &[("one", looped), ("two", &[("lib.rs", "")])]);
        // (a tree this small fails the share rule too; only the loop failures matter here)
        let loop_failures = |known: &[(&str, &[&str])]| -> Vec<String> {
            let report = check_with(&root, known, &[]).unwrap();
            report
                .failures
                .into_iter()
                .filter(|f| !f.contains(" % "))
                .collect()
        };
        let strict = check_with(&root, &[], &[]).unwrap();
        assert_eq!(loop_failures(&[]), ["one: import loop a.rs <-> b.rs"]);
        assert!(strict.text.contains("a.rs -> b.rs: B"), "{}", strict.text);
        let known: &[(&str, &[&str])] = &[("one", &["a.rs", "b.rs"])];
        assert!(loop_failures(known).is_empty());
        let stale: &[(&str, &[&str])] = &[("two", &["x.rs", "y.rs"])];
        assert_eq!(loop_failures(stale).len(), 2);
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn check_fails_on_an_oversized_package() {
        let root = scratch_tree("share", &[("big", &[("lib.rs", "fn f() {}\n")])]);
        // Two packages, one line each: 50 % each, both over the limit.
        let report = check_with(&root, &[], &[]).unwrap();
        assert_eq!(report.failures.len(), 2, "{}", report.text);
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn the_workspace_passes_every_check() {
        let report = check(&crate::root()).expect("the workspace can be read");
        assert!(
            report.failures.is_empty(),
            "{}\n{}",
            report.text,
            report.failures.join("\n")
        );
    }
}
