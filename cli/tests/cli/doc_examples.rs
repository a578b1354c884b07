//! Every `nodewright` command the documentation shows is run, so a doc cannot drift from the
//! CLI. In README.md, CONTRIBUTING.md and docs/*.md:
//! - a line of a ```sh block whose command is `nodewright ...`, or a pipeline ending in one or
//!   piping one into kubectl, runs with `bash -o pipefail` and must exit 0, or the status a
//!   trailing `# exit N` names;
//! - in a ```console block, each `$ ` line is such a command and the lines under it are what it
//!   prints (stdout and stderr together), compared exactly.
//!
//! Commands run in a scratch directory that sees the repository's `examples/` and `shared/`,
//! with this build's `nodewright` first on the PATH. A pipeline that reads a cluster with
//! `kubectl`, `nodewright status` and `nodewright handback` run against the simulated
//! cluster (Karpenter's CRDs installed, examples/getting-started.yaml applied) with the
//! real kubectl from `.venv`.
//! `nodewright eks-token` needs AWS credentials and is the one command not run.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::markdown::{Block, blocks, pages, root};
use nodewright_world::kube_sim::{SimClock, SimCluster, SimConfig};
use serde::Deserialize;

/// One documented command and what the page says it does.
#[derive(Debug)]
struct Example {
    at: String,
    command: String,
    exit: i32,
    /// For a console block: the exact output.
    output: Option<String>,
}

impl Example {
    /// Needs a cluster: reads one with kubectl, or is `status` or `handback`.
    fn in_world(&self) -> bool {
        ["kubectl", "nodewright status", "nodewright handback"]
            .iter()
            .any(|c| self.command.contains(c))
    }
}

/// Runs `nodewright` (last in a pipeline or alone, or first into kubectl, which the world
/// answers), and is not `eks-token`.
fn runnable(command: &str) -> bool {
    let last = command.rsplit('|').next().unwrap_or(command).trim_start();
    let into_kubectl = command.starts_with("nodewright ") && last.starts_with("kubectl ");
    (last.starts_with("nodewright ") || into_kubectl) && !command.contains("nodewright eks-token")
}

/// The command without its trailing comment, and the status a `# exit N` comment names.
fn split_comment(line: &str) -> (String, i32) {
    match line.split_once(" #") {
        Some((command, comment)) => {
            let exit = comment
                .trim()
                .strip_prefix("exit ")
                .map(|n| {
                    n.chars()
                        .take_while(char::is_ascii_digit)
                        .collect::<String>()
                })
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            (command.trim().to_string(), exit)
        }
        None => (line.trim().to_string(), 0),
    }
}

fn sh_examples(page: &str, block: &Block) -> Vec<Example> {
    let mut out = Vec::new();
    let mut pending = String::new();
    let mut start = block.line;
    for (i, line) in block.lines.iter().enumerate() {
        if pending.is_empty() {
            start = block.line + i;
        }
        if let Some(continued) = line.strip_suffix('\\') {
            pending.push_str(continued);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let (command, exit) = split_comment(&std::mem::take(&mut pending));
        if runnable(&command) {
            out.push(Example {
                at: format!("{page}:{start}"),
                command,
                exit,
                output: None,
            });
        }
    }
    out
}

fn console_examples(page: &str, block: &Block) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    for (i, line) in block.lines.iter().enumerate() {
        if let Some(command) = line.strip_prefix("$ ") {
            let (command, exit) = split_comment(command);
            out.push(Example {
                at: format!("{page}:{}", block.line + i),
                command,
                exit,
                output: Some(String::new()),
            });
        } else if let Some(last) = out.last_mut() {
            let output = last.output.get_or_insert_with(String::new);
            output.push_str(line.trim_end());
            output.push('\n');
        }
    }
    out.retain(|e| runnable(&e.command));
    out
}

fn examples() -> Vec<Example> {
    let mut out = Vec::new();
    for (page, text) in pages() {
        for block in blocks(&text) {
            match block.info.as_str() {
                "sh" | "bash" | "shell" => out.extend(sh_examples(&page, &block)),
                "console" => out.extend(console_examples(&page, &block)),
                _ => {}
            }
        }
    }
    out
}

/// A directory to run in that sees the repository's example and test data by the paths the
/// docs use.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nodewright-doc-examples-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["examples", "shared"] {
        let link = dir.join(name);
        if !link.exists() {
            std::os::unix::fs::symlink(root().join(name), &link).unwrap();
        }
    }
    dir
}

fn run(example: &Example, dir: &Path, kubeconfig: &Path) -> (i32, String) {
    let binary = Path::new(env!("CARGO_BIN_EXE_nodewright"));
    let kubectl = nodewright_world::kubectl::kubectl_path();
    let path = format!(
        "{}:{}:{}",
        binary.parent().unwrap().display(),
        kubectl.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // pipefail: a kubectl that fails must fail the pipeline, not feed nodewright nothing.
    let out = Command::new("bash")
        .args(["-o", "pipefail", "-c"])
        .arg(format!("{{ {} ; }} 2>&1", example.command))
        .current_dir(dir)
        .env("PATH", path)
        .env("KUBECONFIG", kubeconfig)
        // kubectl keeps its discovery cache under HOME: not the user's.
        .env("HOME", dir)
        .output()
        .expect("bash runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The simulated cluster the docs' cluster commands read: Karpenter's CRDs, the
/// getting-started NodePool, EC2NodeClass and Deployment, its pods Unschedulable.
async fn world() -> SimCluster {
    let sim = SimCluster::start(SimConfig {
        clock: SimClock::manual(),
        crds_installed: true,
        ..SimConfig::default()
    })
    .await
    .expect("the simulated cluster starts");
    let text = std::fs::read_to_string(root().join("examples/getting-started.yaml")).unwrap();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(doc).unwrap();
        if !value.is_null() {
            sim.apply_json(value).expect("the example applies");
        }
    }
    sim.step().await;
    sim
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_nodewright_command_in_the_docs_runs_as_the_docs_say() {
    let examples = examples();
    assert!(
        examples.len() >= 20,
        "found only {} documented commands: is the extraction broken?",
        examples.len()
    );
    assert!(
        examples.iter().any(|e| e.in_world()) && examples.iter().any(|e| e.output.is_some()),
        "no command against a cluster or with its output shown: {examples:#?}"
    );
    let sim = world().await;
    let dir = scratch();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig_yaml()).unwrap();
    let mut failures = Vec::new();
    for example in &examples {
        let (code, output) = run(example, &dir, &kubeconfig);
        if code != example.exit {
            failures.push(format!(
                "{}: `{}` exited {code}, the doc says {}:\n{output}",
                example.at, example.command, example.exit
            ));
        } else if let Some(want) = &example.output {
            let got: String = output
                .lines()
                .map(|l| l.trim_end().to_string() + "\n")
                .collect();
            if got.trim_end() != want.trim_end() {
                failures.push(format!(
                    "{}: `{}` printed\n{got}\nthe doc shows\n{want}",
                    example.at, example.command
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "{} of {} documented commands do not do what the docs say:\n\n{}",
        failures.len(),
        examples.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_extraction_finds_commands_pipelines_continuations_and_expected_statuses() {
    let page = "\
```sh
make demo
nodewright validate -f examples/invalid.yaml   # exit 1: on purpose
kubectl get nodepools -o yaml | nodewright validate -f -
nodewright plan \\
  -f examples/getting-started.yaml
nodewright eks-token --cluster c
```

```console
$ nodewright version
nodewright 1.2.3
$ echo no
no
```
";
    let found: Vec<(String, i32, Option<String>)> = blocks(page)
        .iter()
        .flat_map(|b| match b.info.as_str() {
            "sh" => sh_examples("p", b),
            _ => console_examples("p", b),
        })
        .map(|e| (e.command, e.exit, e.output))
        .collect();
    assert_eq!(
        found,
        [
            (
                "nodewright validate -f examples/invalid.yaml".into(),
                1,
                None
            ),
            (
                "kubectl get nodepools -o yaml | nodewright validate -f -".into(),
                0,
                None
            ),
            (
                "nodewright plan    -f examples/getting-started.yaml".into(),
                0,
                None
            ),
            (
                "nodewright version".into(),
                0,
                Some("nodewright 1.2.3\n".into())
            ),
        ]
    );
}
