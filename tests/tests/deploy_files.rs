//! The promises of `deploy/`, checked without Docker or a cluster (these machines have neither):
//! every YAML file parses; the worker's stop timeouts cover the preStop pause and the shutdown
//! grace; every Secret reference resolves inside deploy/k8s; the console is read-only with its
//! token from a Secret; Redis is append-only; and every command names a binary the Dockerfile
//! installs, with subcommands and flags the binaries accept.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_yaml_ng::Value;

/// Room between the worker's grace (plus the preStop pause) and the SIGKILL: the ack flush and
/// the server record's withdrawal after the last handler, and a slow node.
const STOP_MARGIN: Duration = Duration::from_secs(5);

/// The roles of `chronos-demo --role`.
const DEMO_ROLES: &[&str] = &["all", "worker", "scheduler", "producer"];
/// Roles that run a worker pool, so whose container must stop slower than the grace.
const WORKER_ROLES: &[&str] = &["all", "worker"];
/// The environment the binaries read; a misspelt name would silently fall back to a default.
const KNOWN_ENV: &[&str] = &[
    "CHRONOS_REDIS_URL",
    "CHRONOS_NAMESPACE",
    "CHRONOS_DASH_TOKEN",
    "CHRONOS_DASH_READ_ONLY",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

fn deploy() -> PathBuf {
    root().join("deploy")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every document of a YAML file, merge keys (`<<: *anchor`) applied.
fn documents(path: &Path) -> Vec<Value> {
    let text = read(path);
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| {
            let mut v = Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
            v.apply_merge()
                .unwrap_or_else(|e| panic!("{}: bad merge key: {e}", path.display()));
            v
        })
        .filter(|v| !v.is_null())
        .collect()
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read deploy/") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yml" | "yaml")
        ) {
            out.push(path);
        }
    }
}

/// Every Kubernetes object under deploy/k8s, with the file it came from.
fn k8s_objects() -> Vec<(String, Value)> {
    let mut files = Vec::new();
    yaml_files(&deploy().join("k8s"), &mut files);
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            documents(f).into_iter().map(move |d| (name.clone(), d))
        })
        .collect()
}

fn kind_of(v: &Value) -> &str {
    v["kind"].as_str().unwrap_or("")
}

fn name_of(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap_or("")
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(items) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => panic!("not a plain argument: {other:?}"),
            })
            .collect(),
        Value::String(s) => s.split_whitespace().map(str::to_string).collect(),
        Value::Null => Vec::new(),
        other => panic!("not a command: {other:?}"),
    }
}

fn deployments() -> Vec<Value> {
    k8s_objects()
        .into_iter()
        .map(|(_, v)| v)
        .filter(|v| kind_of(v) == "Deployment")
        .collect()
}

fn containers(deployment: &Value) -> &Vec<Value> {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .unwrap_or_else(|| panic!("{} has no containers", name_of(deployment)))
}

/// The value of `--flag` in an argument list.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn demo_role(args: &[String]) -> Option<&str> {
    let bin = args.first()?;
    (bin.rsplit('/').next() == Some("chronos-demo")).then(|| flag(args, "--role").unwrap_or("all"))
}

/// The worker's shutdown grace as this command sets it: the demo's `--grace`, else the
/// library's default (`ServerConfig::shutdown_timeout`), which the demo starts from.
fn worker_grace(args: &[String]) -> Duration {
    match flag(args, "--grace") {
        Some(s) => Duration::from_secs(s.parse().expect("--grace takes seconds")),
        None => chronos::ServerConfig::default().shutdown_timeout,
    }
}

/// Seconds of an `exec: sleep N` preStop hook.
fn prestop_sleep(container: &Value) -> Option<Duration> {
    let hook = &container["lifecycle"]["preStop"];
    if let Some(secs) = hook["sleep"]["seconds"].as_u64() {
        return Some(Duration::from_secs(secs));
    }
    let cmd = strings(&hook["exec"]["command"]);
    match cmd.as_slice() {
        [sleep, n] if sleep.rsplit('/').next() == Some("sleep") => {
            Some(Duration::from_secs(n.parse().expect("sleep takes seconds")))
        }
        _ => None,
    }
}

/// `10s`, `1m30s`, `500ms`, as Compose writes durations.
fn compose_duration(s: &str) -> Duration {
    let mut total = Duration::ZERO;
    let mut digits = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let n: u64 = digits
            .parse()
            .unwrap_or_else(|_| panic!("bad duration {s:?}"));
        digits.clear();
        total += match c {
            'h' => Duration::from_secs(n * 3600),
            'm' if chars.peek() == Some(&'s') => {
                chars.next();
                Duration::from_millis(n)
            }
            'm' => Duration::from_secs(n * 60),
            's' => Duration::from_secs(n),
            _ => panic!("bad duration {s:?}"),
        };
    }
    assert!(digits.is_empty(), "duration {s:?} lacks a unit");
    total
}

fn compose() -> Value {
    let docs = documents(&deploy().join("docker-compose.yml"));
    assert_eq!(docs.len(), 1, "the compose file is one document");
    docs.into_iter().next().unwrap()
}

fn compose_services(compose: &Value) -> BTreeMap<String, Value> {
    compose["services"]
        .as_mapping()
        .expect("compose has services")
        .iter()
        .map(|(k, v)| (k.as_str().expect("service name").to_string(), v.clone()))
        .collect()
}

/// What deploy/Dockerfile installs and how.
struct Image {
    /// Binaries copied into the runtime stage, by file name.
    binaries: BTreeSet<String>,
    user: String,
    entrypoint: String,
    text: String,
}

fn dockerfile() -> Image {
    let text = read(&deploy().join("Dockerfile"));
    let mut binaries = BTreeSet::new();
    let mut user = String::new();
    let mut entrypoint = String::new();
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("COPY --from=") {
            let dest = rest.split_whitespace().last().unwrap();
            if let Some(bin) = dest.strip_prefix("/usr/local/bin/") {
                binaries.insert(bin.to_string());
            }
        } else if let Some(rest) = line.strip_prefix("USER ") {
            user = rest.trim().to_string();
        } else if let Some(rest) = line.strip_prefix("ENTRYPOINT ") {
            entrypoint = rest.trim().to_string();
        }
    }
    Image {
        binaries,
        user,
        entrypoint,
        text,
    }
}

/// Checks one container command against the binaries' interfaces; `env` names the variables
/// the container gets.
fn check_command(place: &str, args: &[String], env: &BTreeSet<String>, image: &Image) {
    let Some(bin) = args.first() else {
        panic!("{place}: no command (the image's default only prints help)");
    };
    let bin = bin.rsplit('/').next().unwrap();
    assert!(
        image.binaries.contains(bin),
        "{place}: runs {bin:?}, but the Dockerfile installs only {:?}",
        image.binaries
    );
    let rest = &args[1..];
    match bin {
        "chronos-demo" => {
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                let value = it
                    .next()
                    .unwrap_or_else(|| panic!("{place}: {a} lacks a value"));
                match a.as_str() {
                    "--role" => assert!(
                        DEMO_ROLES.contains(&value.as_str()),
                        "{place}: no demo role {value:?}"
                    ),
                    "--seconds" | "--rate" | "--grace" => {
                        value
                            .parse::<u64>()
                            .unwrap_or_else(|_| panic!("{place}: {a} {value:?} is no number"));
                    }
                    other => panic!("{place}: the demo has no flag {other:?}"),
                }
            }
            assert!(
                env.contains("CHRONOS_REDIS_URL"),
                "{place}: the demo's roles need CHRONOS_REDIS_URL (they meet in one Redis)"
            );
        }
        "chronos" => {
            let mut it = rest.iter();
            // Global flags, then the subcommand.
            let sub = loop {
                let a = it
                    .next()
                    .unwrap_or_else(|| panic!("{place}: no subcommand"));
                match a.as_str() {
                    "--redis" | "--namespace" => {
                        it.next()
                            .unwrap_or_else(|| panic!("{place}: {a} lacks a value"));
                    }
                    s if s.starts_with('-') => panic!("{place}: no global flag {s:?}"),
                    s => break s.to_string(),
                }
            };
            assert_eq!(sub, "dash", "{place}: deploy/ runs only the console");
            let mut addr = "127.0.0.1:8080".to_string();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--addr" => {
                        addr = it
                            .next()
                            .unwrap_or_else(|| panic!("{place}: --addr lacks a value"))
                            .clone();
                    }
                    "--read-only" => {}
                    "--token" => panic!(
                        "{place}: a token on the command line shows in the process list and the \
                         manifest; it comes from CHRONOS_DASH_TOKEN"
                    ),
                    other => panic!("{place}: `chronos dash` has no flag {other:?}"),
                }
            }
            let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(&addr);
            if !matches!(host, "127.0.0.1" | "localhost" | "[::1]") {
                assert!(
                    env.contains("CHRONOS_DASH_TOKEN"),
                    "{place}: the console on {addr} needs a token (CHRONOS_DASH_TOKEN)"
                );
            }
            assert!(
                env.contains("CHRONOS_REDIS_URL") || flag(rest, "--redis").is_some(),
                "{place}: the console needs the Redis URL"
            );
        }
        other => panic!("{place}: no rule for binary {other:?}"),
    }
    for name in env {
        assert!(
            KNOWN_ENV.contains(&name.as_str()),
            "{place}: {name} is read by none of the binaries (known: {KNOWN_ENV:?})"
        );
    }
}

fn k8s_env_names(container: &Value) -> BTreeSet<String> {
    container["env"]
        .as_sequence()
        .map(|env| {
            env.iter()
                .map(|e| e["name"].as_str().expect("env name").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn k8s_env<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    container["env"]
        .as_sequence()?
        .iter()
        .find(|e| e["name"].as_str() == Some(name))
}

fn compose_env_names(service: &Value) -> BTreeSet<String> {
    match &service["environment"] {
        Value::Mapping(m) => m
            .keys()
            .map(|k| k.as_str().expect("env name").to_string())
            .collect(),
        Value::Sequence(items) => items
            .iter()
            .map(|i| {
                let s = i.as_str().expect("env entry");
                s.split('=').next().unwrap().to_string()
            })
            .collect(),
        _ => BTreeSet::new(),
    }
}

#[test]
fn every_yaml_file_parses() {
    let mut files = Vec::new();
    yaml_files(&deploy(), &mut files);
    let names: BTreeSet<String> = files
        .iter()
        .map(|f| {
            f.strip_prefix(deploy())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for expected in [
        "docker-compose.yml",
        "k8s/kustomization.yaml",
        "k8s/secret.example.yaml",
        "k8s/worker.yaml",
        "k8s/scheduler.yaml",
        "k8s/console.yaml",
        "k8s/disruption.yaml",
    ] {
        assert!(names.contains(expected), "deploy/{expected} is missing");
    }
    for f in &files {
        assert!(!documents(f).is_empty(), "{} is empty", f.display());
    }
    for (file, obj) in k8s_objects() {
        assert!(
            obj["apiVersion"].as_str().is_some() && !kind_of(&obj).is_empty(),
            "{file}: a document without apiVersion or kind"
        );
        if kind_of(&obj) != "Kustomization" {
            assert!(
                !name_of(&obj).is_empty(),
                "{file}: an object without a name"
            );
        }
    }
}

#[test]
fn kustomization_lists_the_manifests_but_not_the_secret_template() {
    let k = documents(&deploy().join("k8s/kustomization.yaml"));
    let listed: BTreeSet<String> = strings(&k[0]["resources"]).into_iter().collect();
    let mut files = Vec::new();
    yaml_files(&deploy().join("k8s"), &mut files);
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        match name.as_str() {
            "kustomization.yaml" => {}
            n if n.contains(".example.") => assert!(
                !listed.contains(n),
                "{n} holds example credentials: `kubectl apply -k` must not apply it"
            ),
            n => assert!(listed.contains(n), "kustomization.yaml does not list {n}"),
        }
    }
    for r in &listed {
        assert!(
            deploy().join("k8s").join(r).exists(),
            "kustomization.yaml lists {r}, which does not exist"
        );
    }
}

#[test]
fn worker_pods_outlive_the_prestop_pause_and_the_shutdown_grace() {
    let mut workers = 0;
    for d in deployments() {
        for c in containers(&d) {
            let args = strings(&c["args"]);
            let Some(role) = demo_role(&args) else {
                continue;
            };
            if !WORKER_ROLES.contains(&role) {
                continue;
            }
            workers += 1;
            let name = name_of(&d);
            let prestop = prestop_sleep(c)
                .unwrap_or_else(|| panic!("{name}: the worker has no preStop pause"));
            let grace = worker_grace(&args);
            let termination = Duration::from_secs(
                d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
                    .as_u64()
                    .unwrap_or(30),
            );
            assert!(
                termination >= prestop + grace + STOP_MARGIN,
                "{name}: terminationGracePeriodSeconds {termination:?} does not cover the preStop \
                 pause {prestop:?} + the shutdown grace {grace:?} + {STOP_MARGIN:?}: running tasks \
                 would be killed"
            );
        }
    }
    assert!(workers > 0, "no worker Deployment in deploy/k8s");
}

#[test]
fn compose_worker_stops_slower_than_its_grace() {
    let compose = compose();
    let mut workers = 0;
    for (name, s) in compose_services(&compose) {
        let args = strings(&s["command"]);
        let Some(role) = demo_role(&args) else {
            continue;
        };
        if !WORKER_ROLES.contains(&role) {
            continue;
        }
        workers += 1;
        let stop = s["stop_grace_period"]
            .as_str()
            .map(compose_duration)
            .unwrap_or(Duration::from_secs(10));
        let grace = worker_grace(&args);
        assert!(
            stop >= grace + STOP_MARGIN,
            "compose {name}: stop_grace_period {stop:?} does not cover the shutdown grace {grace:?} \
             + {STOP_MARGIN:?}"
        );
        assert!(
            s["stop_signal"].is_null() || s["stop_signal"].as_str() == Some("SIGTERM"),
            "compose {name}: the demo drains on SIGTERM"
        );
    }
    assert!(workers > 0, "no worker service in the compose file");
}

#[test]
fn compose_redis_is_append_only_and_stays_the_default() {
    let compose = compose();
    let services = compose_services(&compose);
    let redis = &services["redis"];
    let cmd = strings(&redis["command"]);
    assert_eq!(flag(&cmd, "--appendonly"), Some("yes"), "{cmd:?}");
    assert_eq!(flag(&cmd, "--appendfsync"), Some("everysec"), "{cmd:?}");
    let volumes = strings(&redis["volumes"]);
    let data = volumes
        .iter()
        .find(|v| v.ends_with(":/data") || v.contains(":/data:"))
        .unwrap_or_else(|| panic!("redis keeps /data in no volume: {volumes:?}"));
    let volume = data.split(':').next().unwrap();
    assert!(
        compose["volumes"]
            .as_mapping()
            .is_some_and(|m| m.contains_key(volume)),
        "volume {volume} is not declared"
    );
    assert!(
        strings(&redis["ports"]).contains(&"127.0.0.1:6379:6379".to_string()),
        "README's CHRONOS_REDIS_URL=redis://127.0.0.1:6379 needs Redis published there"
    );
    // `docker compose up -d` (README's two-commands section) starts Redis alone.
    assert!(redis["profiles"].is_null(), "redis must not need a profile");
    for (name, s) in &services {
        if name != "redis" {
            assert!(
                !strings(&s["profiles"]).is_empty(),
                "compose {name} would start with the plain `up -d` meant for Redis alone"
            );
        }
    }
}

#[test]
fn every_secret_reference_resolves_in_deploy_k8s() {
    let objects = k8s_objects();
    let mut secrets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, o) in objects.iter().filter(|(_, o)| kind_of(o) == "Secret") {
        let keys = secrets.entry(name_of(o).to_string()).or_default();
        for field in ["data", "stringData"] {
            if let Some(m) = o[field].as_mapping() {
                keys.extend(m.keys().map(|k| k.as_str().unwrap().to_string()));
            }
        }
    }
    fn walk(v: &Value, found: &mut Vec<(String, Option<String>)>) {
        match v {
            Value::Mapping(m) => {
                for (k, child) in m {
                    match k.as_str() {
                        Some("secretKeyRef") => found.push((
                            child["name"].as_str().unwrap_or("").to_string(),
                            Some(child["key"].as_str().unwrap_or("").to_string()),
                        )),
                        Some("secretRef") => {
                            found.push((child["name"].as_str().unwrap_or("").to_string(), None))
                        }
                        Some("secret") if child["secretName"].is_string() => {
                            found.push((child["secretName"].as_str().unwrap().to_string(), None))
                        }
                        _ => walk(child, found),
                    }
                }
            }
            Value::Sequence(items) => items.iter().for_each(|i| walk(i, found)),
            _ => {}
        }
    }
    let mut refs = Vec::new();
    for (file, o) in &objects {
        let mut found = Vec::new();
        walk(o, &mut found);
        refs.extend(found.into_iter().map(|r| (file.clone(), r)));
    }
    assert!(!refs.is_empty(), "no manifest takes anything from a Secret");
    for (file, (name, key)) in refs {
        let keys = secrets
            .get(&name)
            .unwrap_or_else(|| panic!("{file}: Secret {name:?} is defined nowhere in deploy/k8s"));
        if let Some(key) = key {
            assert!(
                keys.contains(&key),
                "{file}: Secret {name:?} has no key {key:?} (it has {keys:?})"
            );
        }
    }
    // The Redis URL carries a password: no manifest spells it out.
    for d in deployments() {
        for c in containers(&d) {
            if let Some(e) = k8s_env(c, "CHRONOS_REDIS_URL") {
                assert!(
                    e["value"].is_null() && !e["valueFrom"]["secretKeyRef"].is_null(),
                    "{}: CHRONOS_REDIS_URL must come from a Secret",
                    name_of(&d)
                );
            }
        }
    }
}

#[test]
fn the_console_is_read_only_with_its_token_from_a_secret() {
    let objects = k8s_objects();
    let mut consoles = 0;
    for d in deployments() {
        for c in containers(&d) {
            let args = strings(&c["args"]);
            if !args.iter().any(|a| a == "dash") {
                continue;
            }
            consoles += 1;
            let name = name_of(&d);
            let read_only_env = k8s_env(c, "CHRONOS_DASH_READ_ONLY")
                .and_then(|e| e["value"].as_str())
                .is_some_and(|v| v == "true");
            assert!(
                args.iter().any(|a| a == "--read-only") || read_only_env,
                "{name}: the console must be read-only by default"
            );
            let token = k8s_env(c, "CHRONOS_DASH_TOKEN")
                .unwrap_or_else(|| panic!("{name}: the console gets no token"));
            assert!(
                token["value"].is_null() && !token["valueFrom"]["secretKeyRef"].is_null(),
                "{name}: the token must come from a Secret, not the manifest"
            );
            let port = c["ports"][0]["containerPort"]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: the console declares no port"));
            let addr = flag(&args, "--addr").unwrap_or("127.0.0.1:8080");
            assert!(
                addr.ends_with(&format!(":{port}")),
                "{name}: listens on {addr} but declares port {port}"
            );
            let ready = &c["readinessProbe"]["httpGet"];
            assert_eq!(
                ready["path"].as_str(),
                Some("/healthz"),
                "{name}: readiness"
            );
            assert!(!c["livenessProbe"].is_null(), "{name}: no liveness probe");
            assert!(
                prestop_sleep(c).is_some(),
                "{name}: no preStop pause for the endpoints to drop the pod"
            );
            // A Service reaches it, inside the cluster only.
            let labels = d["spec"]["template"]["metadata"]["labels"]
                .as_mapping()
                .unwrap();
            let service = objects
                .iter()
                .map(|(_, o)| o)
                .find(|o| {
                    kind_of(o) == "Service"
                        && o["spec"]["selector"]
                            .as_mapping()
                            .is_some_and(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v)))
                })
                .unwrap_or_else(|| panic!("{name}: no Service selects the console"));
            assert!(
                matches!(service["spec"]["type"].as_str(), None | Some("ClusterIP")),
                "the console's Service must stay inside the cluster"
            );
        }
    }
    assert!(consoles > 0, "no console Deployment in deploy/k8s");

    let compose = compose();
    let console = compose_services(&compose)
        .into_iter()
        .find(|(_, s)| strings(&s["command"]).iter().any(|a| a == "dash"))
        .map(|(_, s)| s)
        .expect("no console service in the compose file");
    assert!(
        strings(&console["command"])
            .iter()
            .any(|a| a == "--read-only"),
        "the compose console must be read-only by default"
    );
    let token = &console["environment"]["CHRONOS_DASH_TOKEN"];
    assert!(
        token.is_null() || token.as_str().is_some_and(|t| t.starts_with("${")),
        "the compose console's token comes from the shell, never a literal: {token:?}"
    );
    for p in strings(&console["ports"]) {
        assert!(
            p.starts_with("127.0.0.1:"),
            "the compose console is published on loopback only: {p}"
        );
    }
}

#[test]
fn pods_run_as_the_images_non_root_user_on_a_read_only_root() {
    let image = dockerfile();
    let uid = image.user.split(':').next().unwrap();
    assert!(
        uid.parse::<u32>().is_ok_and(|u| u != 0),
        "the image's USER must be a numeric non-root id (runAsNonRoot checks it): {:?}",
        image.user
    );
    for d in deployments() {
        let name = name_of(&d);
        let pod = &d["spec"]["template"]["spec"];
        for c in containers(&d) {
            let sc = &c["securityContext"];
            assert!(
                pod["securityContext"]["runAsNonRoot"].as_bool() == Some(true)
                    || sc["runAsNonRoot"].as_bool() == Some(true),
                "{name}: runAsNonRoot"
            );
            let user = sc["runAsUser"]
                .as_u64()
                .or(pod["securityContext"]["runAsUser"].as_u64());
            if let Some(user) = user {
                assert_eq!(
                    user.to_string(),
                    uid,
                    "{name}: runs as another user than the image's"
                );
            }
            assert_eq!(sc["readOnlyRootFilesystem"].as_bool(), Some(true), "{name}");
            assert_eq!(
                sc["allowPrivilegeEscalation"].as_bool(),
                Some(false),
                "{name}"
            );
            assert!(
                !c["resources"]["requests"].is_null() && !c["resources"]["limits"].is_null(),
                "{name}: resources"
            );
            // Overriding the entrypoint would drop tini, the PID 1 that forwards SIGTERM.
            assert!(
                c["command"].is_null(),
                "{name}: use `args`, the image's entrypoint forwards signals"
            );
        }
    }
}

#[test]
fn the_scheduler_runs_several_replicas() {
    let schedulers: Vec<Value> = deployments()
        .into_iter()
        .filter(|d| {
            containers(d)
                .iter()
                .any(|c| demo_role(&strings(&c["args"])) == Some("scheduler"))
        })
        .collect();
    assert_eq!(schedulers.len(), 1, "one scheduler Deployment");
    let replicas = schedulers[0]["spec"]["replicas"].as_u64().unwrap_or(1);
    assert!(
        (2..=3).contains(&replicas),
        "{replicas} scheduler replicas: a follower must be ready to take over"
    );
}

/// Every Deployment of more than one replica has a PodDisruptionBudget that selects its pods
/// and lets a drain take at least one (a budget that allows none blocks node drains for good),
/// and every budget selects the pods of some Deployment (a misspelt label protects nothing).
#[test]
fn replicated_deployments_have_a_disruption_budget_that_selects_them() {
    let objects = k8s_objects();
    let budgets: Vec<&Value> = objects
        .iter()
        .map(|(_, o)| o)
        .filter(|o| kind_of(o) == "PodDisruptionBudget")
        .collect();
    let selects = |budget: &Value, d: &Value| {
        let labels = d["spec"]["template"]["metadata"]["labels"].as_mapping();
        let wanted = budget["spec"]["selector"]["matchLabels"].as_mapping();
        match (labels, wanted) {
            (Some(labels), Some(wanted)) => {
                !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
            }
            _ => false,
        }
    };
    let deployments = deployments();
    for b in &budgets {
        let name = name_of(b);
        assert_eq!(b["apiVersion"].as_str(), Some("policy/v1"), "{name}");
        assert!(
            b["spec"]["selector"]["matchExpressions"].is_null(),
            "{name}: the test reads matchLabels only"
        );
        let selected: Vec<&Value> = deployments.iter().filter(|d| selects(b, d)).collect();
        assert_eq!(
            selected.len(),
            1,
            "{name} selects the pods of {} Deployments",
            selected.len()
        );
        let replicas = selected[0]["spec"]["replicas"].as_u64().unwrap_or(1);
        let min = &b["spec"]["minAvailable"];
        let max = &b["spec"]["maxUnavailable"];
        assert!(
            min.is_null() != max.is_null(),
            "{name}: one of minAvailable and maxUnavailable"
        );
        if let Some(min) = min.as_u64() {
            assert!(
                (1..replicas).contains(&min),
                "{name}: minAvailable {min} of {replicas} replicas"
            );
        } else {
            let max = max.as_u64().unwrap_or_else(|| panic!("{name}: a count"));
            assert!(
                (1..replicas).contains(&max),
                "{name}: maxUnavailable {max} of {replicas} replicas"
            );
        }
    }
    for d in &deployments {
        if d["spec"]["replicas"].as_u64().unwrap_or(1) < 2 {
            continue;
        }
        assert!(
            budgets.iter().any(|b| selects(b, d)),
            "{}: replicated but no PodDisruptionBudget selects its pods",
            name_of(d)
        );
    }
    for role in ["chronos-worker", "chronos-scheduler"] {
        assert!(
            deployments.iter().any(|d| name_of(d) == role),
            "no Deployment {role}"
        );
    }
}

/// The build context leaves out what the Rust build never reads and that can be large.
#[test]
fn the_build_context_leaves_out_node_modules_and_the_ts_build() {
    let ignore = read(&deploy().join("Dockerfile.dockerignore"));
    let lines: BTreeSet<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for needed in [
        "target/",
        "**/target/",
        ".git",
        "**/node_modules",
        "crates/chronos-ts/dist",
    ] {
        assert!(lines.contains(needed), "the .dockerignore lacks {needed}");
    }
}

#[test]
fn the_image_builds_and_installs_what_the_commands_run() {
    let image = dockerfile();
    let text = &image.text;
    for needed in ["chronos", "chronos-demo"] {
        assert!(image.binaries.contains(needed), "the image lacks {needed}");
    }
    let build = text
        .lines()
        .find(|l| l.contains("cargo build"))
        .expect("the Dockerfile builds with cargo");
    for arg in [
        "--release",
        "--locked",
        "-p chronos-cli",
        "-p chronos-demo",
        "--bin chronos ",
        "--bin chronos-demo",
    ] {
        assert!(build.contains(arg), "the cargo build lacks {arg}: {build}");
    }
    assert!(
        text.contains("target/release/chronos "),
        "copies the CLI out"
    );
    assert!(
        text.contains("target/release/chronos-demo "),
        "copies the demo out"
    );
    assert!(
        image.entrypoint.contains("tini"),
        "the entrypoint forwards SIGTERM: {}",
        image.entrypoint
    );
    assert!(
        text.contains("install") && text.contains(" tini"),
        "tini is installed"
    );
    assert!(
        text.contains("ca-certificates"),
        "rediss:// needs the roots"
    );
    assert!(
        text.contains("FROM debian:bookworm-slim"),
        "the runtime stage"
    );

    // The builder's Rust is at least the workspace's rust-version.
    let version = |s: &str| -> (u32, u32) {
        let mut parts = s.split('.').map(|p| p.parse::<u32>().expect("version"));
        (parts.next().unwrap(), parts.next().unwrap())
    };
    let from = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("FROM rust:"))
        .expect("an official rust builder image");
    let tag = from.split(['-', ' ']).next().unwrap();
    let manifest = read(&root().join("Cargo.toml"));
    let msrv = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = "))
        .expect("workspace rust-version")
        .trim_matches('"');
    assert!(
        version(tag) >= version(msrv),
        "rust:{tag} is older than the workspace's rust-version {msrv}"
    );

    // Every command in compose and the manifests runs an installed binary with real flags.
    let compose = compose();
    for (name, s) in compose_services(&compose) {
        if name == "redis" {
            continue;
        }
        assert!(
            s["build"]["dockerfile"].as_str() == Some("deploy/Dockerfile")
                || s["image"].as_str().is_some(),
            "compose {name}: built from deploy/Dockerfile"
        );
        check_command(
            &format!("compose {name}"),
            &strings(&s["command"]),
            &compose_env_names(&s),
            &image,
        );
    }
    for d in deployments() {
        for c in containers(&d) {
            check_command(
                &format!("k8s {}", name_of(&d)),
                &strings(&c["args"]),
                &k8s_env_names(c),
                &image,
            );
        }
    }
}

/// The test's idea of the demo's flags follows the demo itself.
#[test]
fn the_demo_accepts_the_flags_deploy_uses() {
    // The demo's sources, read as one text: its flags, roles and signals live in several files.
    let src = root().join("crates/chronos-demo/src");
    let mut files: Vec<_> = std::fs::read_dir(&src)
        .expect("crates/chronos-demo/src")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    let demo: String = files.iter().map(|p| read(p)).collect();
    for flag in ["\"--role\"", "\"--grace\"", "\"--rate\"", "\"--seconds\""] {
        assert!(demo.contains(flag), "chronos-demo parses no {flag}");
    }
    for role in DEMO_ROLES {
        assert!(
            demo.contains(&format!("\"{role}\" => Role::")),
            "chronos-demo knows no role {role}"
        );
    }
    assert!(
        demo.contains("SignalKind::terminate()"),
        "the demo must drain on SIGTERM, which container runtimes send"
    );
    assert!(
        !demo.contains("shutdown_timeout: Duration"),
        "the demo's grace is `--grace` or the library default, as worker_grace() assumes"
    );
}

#[test]
fn compose_durations_parse() {
    assert_eq!(compose_duration("20s"), Duration::from_secs(20));
    assert_eq!(compose_duration("1m30s"), Duration::from_secs(90));
    assert_eq!(compose_duration("1h"), Duration::from_secs(3600));
    assert_eq!(compose_duration("500ms"), Duration::from_millis(500));
}

/// The console flags and variables deploy/ relies on are the ones `chronos dash` parses, and
/// the probe path is one the console serves.
#[test]
fn the_cli_accepts_the_dash_flags_deploy_uses() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cli = std::fs::read_to_string(root.join("crates/chronos-cli/src/dash.rs")).expect("cli");
    for needle in [
        "env = \"CHRONOS_DASH_ADDR\"",
        "env = \"CHRONOS_DASH_TOKEN\"",
        "env = \"CHRONOS_DASH_READ_ONLY\"",
        "read_only: bool",
        "addr: std::net::SocketAddr",
    ] {
        assert!(cli.contains(needle), "chronos-cli parses no {needle}");
    }
    let server =
        std::fs::read_to_string(root.join("crates/chronos-dash/src/server.rs")).expect("dash");
    assert!(
        server.contains(".route(\"/healthz\""),
        "the console serves /healthz"
    );
}
