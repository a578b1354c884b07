//! `nodewright status --watch` in a real terminal: the binary runs on a pseudo-terminal
//! (portable-pty) against the simulated cluster (`nodewright_world::kube_sim`, an HTTP
//! Kubernetes API read through the real `kube` client), and a VT100 screen (vt100) reads
//! what it writes, escape sequences included, as a person would see it.

use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use nodewright::catalog::bundled_instance_types;
use nodewright_world::kube_sim::{SimClock, SimCluster, SimConfig};
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};
use serde_json::{Value, json};

const ROWS: u16 = 40;
const COLS: u16 = 220;

fn node(name: &str, pool: &str, instance_type: &str, capacity: &str, zone: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "karpenter.sh/nodepool": pool,
            "karpenter.sh/capacity-type": capacity,
            "node.kubernetes.io/instance-type": instance_type,
            "topology.kubernetes.io/zone": zone}},
        "spec": {"providerID": format!("aws:///{zone}/i-{name}")},
        "status": {
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

fn pod(name: &str, node: Option<&str>, cpu: &str, memory: &str) -> Value {
    let mut spec = json!({"containers": [{"name": "app", "image": "app",
        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": if node.is_some() { "Running" } else { "Pending" }}
    })
}

/// A program on a pseudo-terminal of `ROWS` x `COLS`, its output read into a VT100 screen.
struct Terminal {
    screen: Arc<Mutex<vt100::Parser>>,
    child: Box<dyn Child + Send + Sync>,
    // Held so the terminal stays open while the program runs.
    _master: Box<dyn MasterPty + Send>,
}

impl Terminal {
    fn run(program: &Path, args: &[&str]) -> Terminal {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("a pseudo-terminal opens");
        let mut command = CommandBuilder::new(program);
        command.args(args);
        let child = pair
            .slave
            .spawn_command(command)
            .expect("the program starts on the terminal");
        drop(pair.slave);
        let mut output = pair
            .master
            .try_clone_reader()
            .expect("the terminal's output");
        let size = |n: u16| std::num::NonZeroU16::new(n).expect("a terminal has a size");
        let screen = Arc::new(Mutex::new(vt100::Parser::new(size(ROWS), size(COLS), 0)));
        let fed = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = output.read(&mut buf) {
                if n == 0 {
                    break;
                }
                fed.lock().expect("the screen").process(&buf[..n]);
            }
        });
        Terminal {
            screen,
            child,
            _master: pair.master,
        }
    }

    /// The visible screen, trailing blanks removed.
    fn screen(&self) -> String {
        let text = self.screen.lock().expect("the screen").screen().contents();
        let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
        let end = lines
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |i| i + 1);
        lines[..end].join("\n") + "\n"
    }

    /// Waits until the screen shows `text`, for up to 30 s.
    fn wait_for(&mut self, text: &str) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            let exited = self.child.try_wait().ok().flatten();
            assert!(
                exited.is_none() && started.elapsed() < Duration::from_secs(30),
                "the screen never showed {text:?} (program exited: {exited:?}):\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_each_nodes_pool_type_price_and_usage_bars_and_the_pending_pod_with_its_reason_in_a_terminal()
 {
    // The nodes were created five hours ago (the simulated clock stamps them).
    let started = Timestamp::now()
        .checked_sub(SignedDuration::from_hours(5))
        .unwrap();
    let sim = SimCluster::start(SimConfig {
        clock: SimClock::manual_at(started),
        ..SimConfig::default()
    })
    .await
    .expect("the simulated cluster starts");
    sim.apply_json(node(
        "ip-10-0-1-5",
        "default",
        "m5.large",
        "on-demand",
        "us-east-1a",
    ))
    .unwrap();
    sim.apply_json(node(
        "ip-10-0-2-7",
        "batch",
        "c5.xlarge",
        "spot",
        "us-east-1b",
    ))
    .unwrap();
    sim.apply_json(pod("web-1", Some("ip-10-0-1-5"), "500m", "1Gi"))
        .unwrap();
    sim.apply_json(pod("web-2", Some("ip-10-0-1-5"), "465m", "2560Mi"))
        .unwrap();
    sim.apply_json(pod("job-1", Some("ip-10-0-2-7"), "1930m", "512Mi"))
        .unwrap();
    sim.apply_json(pod("huge", None, "64", "1Gi")).unwrap();
    // The simulated scheduler marks the pod that fits nowhere Unschedulable.
    sim.step().await;
    let huge = sim
        .get_json("v1", "Pod", "default", "huge")
        .expect("the pod");
    assert!(huge["spec"]["nodeName"].is_null(), "{huge}");
    let why = huge["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
        .and_then(|c| c["message"].as_str())
        .expect("the scheduler's message")
        .to_string();

    let dir = std::env::temp_dir().join(format!("nodewright-status-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig_yaml()).unwrap();
    let mut terminal = Terminal::run(
        Path::new(env!("CARGO_BIN_EXE_nodewright")),
        &[
            "status",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--watch",
            "--interval",
            "0.3",
        ],
    );
    let screen = terminal.wait_for("pending pod");

    let price = |name: &str| {
        bundled_instance_types()
            .unwrap()
            .into_iter()
            .find(|(t, _)| t.name == name)
            .map(|(_, p)| p)
            .expect("the type is in the bundled catalog")
    };
    let m5 = price("m5.large");
    // Spot: the bundled on-demand price less the default 60 % discount, marked estimated.
    let c5 = price("c5.xlarge") * 0.4;
    let total = m5 + c5;
    let expected = format!(
        "\
NODE         NODEPOOL  TYPE       CAPACITY   ZONE        AGE      $/H          CPU                                    MEMORY                               PODS  STATUS
ip-10-0-2-7  batch     c5.xlarge  spot       us-east-1b   5h  {c5_:>7}  1930m/1930m  [####################] 100%  0.5Gi/7.0Gi  [#...................]   7%     1  Ready
ip-10-0-1-5  default   m5.large   on-demand  us-east-1a   5h  {m5_:>7}   965m/1930m  [##########..........]  50%  3.5Gi/7.0Gi  [##########..........]  50%     2  Ready

2 nodes  ~${total:.4}/h (${month:.0}/month)
CPU     2895m/3860m  [###############.....]  75%
memory  4.0Gi/14.0Gi  [######..............]  29%
Prices: bundled us-east-1 on-demand table; ~ marks an estimate: spot taken as on-demand less 60% (--spot-discount)

1 pending pods
PENDING POD   WHY
default/huge  {why}
",
        c5_ = format!("~{c5:.4}"),
        m5_ = format!("{m5:.4}"),
        month = total * 730.0,
    );
    assert_eq!(screen, expected, "\n{screen}");

    // --watch redraws: a second pending pod appears on the next frame.
    sim.apply_json(pod("huge-2", None, "64", "1Gi")).unwrap();
    sim.step().await;
    let screen = terminal.wait_for("2 pending pods");
    assert!(screen.contains("default/huge-2"), "{screen}");
    assert!(
        !screen.contains("1 pending pods"),
        "one frame at a time:\n{screen}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
