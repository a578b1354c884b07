//! The soak's hands on the world: the load curve, each incident as AWS or a user would
//! cause it, AWS reclaiming warned instances, the samples the checker judges, and the
//! fleet's price against the same pods planned from scratch.

use std::time::Duration;

use anyhow::Context as _;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::aws::{
    common_spot_type, ec2, foreign_state, health, launch_foreign, owned_instances, spot_event,
};
use super::incidents::Incident;
use super::objects::{instance_of, tainted, text as s};
use super::observe::Observer;
use super::price::price;
use super::report::{Price, Report};
use super::{PENDING_BOUND, Plan, TAINT_BOUND, cluster};
use crate::fleet_faults::FleetFault;
use crate::kube_sim::Fault;
use crate::lambda::Lambda;
use crate::sqs::model::Fate;
use crate::world::World;

pub struct Stage {
    pub observer: Observer,
    length: Duration,
    foreign: String,
    /// Instances AWS takes at a time (warned spot instances, retired ones).
    reclaim: Vec<(Timestamp, String)>,
    burst: bool,
    kill_pending: bool,
    /// The rogue client waits for a critical pod running on a node.
    rogue_pending: bool,
    next_instances: Timestamp,
    pub events: Vec<(Timestamp, String)>,
    pub prices: Vec<Price>,
    dir: std::path::PathBuf,
}

impl Stage {
    pub async fn new(world: &World, plan: &Plan) -> anyhow::Result<Stage> {
        Ok(Stage {
            observer: Observer::new(TAINT_BOUND, PENDING_BOUND, cluster::budgets()),
            length: plan.length,
            foreign: launch_foreign(world).await?,
            reclaim: Vec::new(),
            burst: false,
            kill_pending: false,
            rogue_pending: false,
            next_instances: world.clock().now(),
            events: Vec::new(),
            prices: Vec::new(),
            dir: plan.out.clone(),
        })
    }

    pub fn log(&mut self, at: Timestamp, what: String) {
        self.events.push((at, what));
    }

    /// Each Deployment at the replicas the load curve asks for at `fraction` of the day.
    pub fn follow_load(&self, world: &World, fraction: f64) -> anyhow::Result<()> {
        for app in &cluster::APPS {
            let want = match (app.name, self.burst) {
                ("burst", true) => 20,
                ("burst", false) => 0,
                _ => cluster::replicas_at(app, fraction),
            };
            let Some(mut d) = world
                .sim
                .get_json("apps/v1", "Deployment", "default", app.name)
            else {
                continue;
            };
            if d["spec"]["replicas"].as_u64() != Some(u64::from(want)) {
                d["spec"]["replicas"] = json!(want);
                world.sim.apply_json(d).context("scaling a Deployment")?;
            }
        }
        Ok(())
    }

    /// One sample for the checker, AWS's reclaiming, and a kill still owed.
    pub async fn tick(
        &mut self,
        world: &World,
        lambda: &Lambda,
        now: Timestamp,
    ) -> anyhow::Result<()> {
        // The soak's own work counts as the world working: its time must not run ahead of
        // a sample.
        let _working = world.clock().busy();
        let due: Vec<String> = self
            .reclaim
            .iter()
            .filter(|(at, _)| *at <= now)
            .map(|(_, id)| id.clone())
            .collect();
        self.reclaim.retain(|(at, _)| *at > now);
        for id in due {
            let _ = ec2(world)
                .terminate_instances()
                .instance_ids(&id)
                .send()
                .await;
            self.observer.aws_took(&id, now);
            self.log(now, format!("AWS reclaimed {id}"));
        }
        if self.kill_pending && kill_one(lambda) {
            self.kill_pending = false;
            self.log(now, "a busy function environment killed".into());
        }
        if self.rogue_pending
            && let Ok(note) = rogue(world).await
        {
            self.rogue_pending = false;
            self.log(now, note);
        }
        let nodes = world.sim.list_json("v1", "Node");
        let pods = world.sim.list_json("v1", "Pod");
        self.observer
            .observe(now, &nodes, &pods, world.sim.take_pod_removals());
        if now >= self.next_instances {
            self.observer
                .observe_instances(&owned_instances(world).await?);
            self.next_instances = now + SignedDuration::from_secs(30);
        }
        Ok(())
    }

    pub async fn act(&mut self, world: &World, lambda: &Lambda, incident: Incident) -> String {
        let _working = world.clock().busy();
        match self.try_act(world, lambda, incident).await {
            Ok(note) => note,
            Err(e) => format!("could not be played: {e:#}"),
        }
    }

    async fn try_act(
        &mut self,
        world: &World,
        lambda: &Lambda,
        incident: Incident,
    ) -> anyhow::Result<String> {
        let now = world.clock().now();
        let nodes = world.sim.list_json("v1", "Node");
        let pods = world.sim.list_json("v1", "Pod");
        let busiest = |capacity: &str| -> Vec<(String, String)> {
            let mut v: Vec<(usize, String, String)> = nodes
                .iter()
                .filter(|n| s(n, "/metadata/labels/karpenter.sh~1capacity-type") == Some(capacity))
                .filter(|n| !tainted(n))
                .filter_map(|n| {
                    let name = s(n, "/metadata/name")?.to_string();
                    let on = pods
                        .iter()
                        .filter(|p| s(p, "/spec/nodeName") == Some(&name))
                        .count();
                    Some((on, name, instance_of(n)?))
                })
                .collect();
            v.sort_by_key(|b| std::cmp::Reverse(b.0));
            v.into_iter().map(|(_, n, i)| (n, i)).collect()
        };
        Ok(match incident {
            Incident::SpotWarning => {
                let (node, id) = busiest("spot").into_iter().next().context("no spot node")?;
                self.warn(world, &node, &id, &pods, now).await?;
                format!("spot warning for {id} ({node})")
            }
            Incident::SpotWave => {
                let targets: Vec<(String, String)> = busiest("spot").into_iter().take(9).collect();
                for (node, id) in &targets {
                    self.warn(world, node, id, &pods, now).await?;
                }
                let foreign = self.foreign.clone();
                spot_event(world, &foreign, now).await?;
                format!(
                    "{} spot warnings at once, and one for the foreign {foreign}",
                    targets.len()
                )
            }
            Incident::RebalanceRecommendation => {
                let (node, id) = busiest("spot").into_iter().next().context("no spot node")?;
                world
                    .put_event(
                        "aws.ec2",
                        "EC2 Instance Rebalance Recommendation",
                        json!({"instance-id": id}),
                        now,
                    )
                    .await?;
                format!("rebalance recommendation for {id} ({node})")
            }
            Incident::ScheduledChange => {
                let (node, id) = busiest("on-demand")
                    .into_iter()
                    .next()
                    .context("no on-demand node")?;
                let lead =
                    SignedDuration::try_from(self.length / 10)?.max(SignedDuration::from_mins(10));
                let start = now + lead;
                world
                    .put_event("aws.health", "AWS Health Event", health(&id, start), now)
                    .await?;
                self.reclaim.push((start, id.clone()));
                format!("scheduled retirement of {id} ({node}) at {start}")
            }
            Incident::InstanceStopping => {
                let (node, id) = busiest("on-demand")
                    .into_iter()
                    .last()
                    .context("no on-demand node")?;
                ec2(world).stop_instances().instance_ids(&id).send().await?;
                self.observer.aws_took(&id, now);
                world
                    .put_event(
                        "aws.ec2",
                        "EC2 Instance State-change Notification",
                        json!({"instance-id": id, "state": "stopping"}),
                        now,
                    )
                    .await?;
                format!("{id} ({node}) stopped")
            }
            Incident::InsufficientCapacity => {
                let t = common_spot_type(world).await?.context("no spot instance")?;
                world.front.fail_fleet(FleetFault {
                    capacity_type: Some("spot".into()),
                    instance_types: vec![t.clone()],
                    code: "InsufficientInstanceCapacity".into(),
                    message: "There is no Spot capacity available that matches your request."
                        .into(),
                });
                format!("spot {t} out of capacity")
            }
            Incident::CapacityBack => {
                world.front.clear_fleet_faults();
                "capacity back".into()
            }
            Incident::ApiFaults => {
                world.sim.inject(Fault::resource("pods", 500).times(3));
                world.sim.inject(
                    Fault::resource("pods", 429)
                        .subresource("eviction")
                        .times(6),
                );
                world.sim.inject(Fault::resource("nodes", 429).times(3));
                world.sim.slow("/api/v1/nodes", Duration::from_secs(20));
                "API server: 500s on pods, 429s on evictions and nodes, node lists 20 s slow".into()
            }
            Incident::ApiHealthy => {
                world.sim.clear_faults();
                "API server healthy".into()
            }
            Incident::Ec2Throttling => {
                for (action, times) in [
                    ("CreateFleet", 2),
                    ("DescribeInstances", 4),
                    ("TerminateInstances", 2),
                ] {
                    world.front.throttle(action, times);
                }
                "EC2 throttles CreateFleet, DescribeInstances and TerminateInstances".into()
            }
            Incident::KillFunction => {
                self.kill_pending = !kill_one(lambda);
                if self.kill_pending {
                    "a kill waits for a busy environment".into()
                } else {
                    "a busy environment killed".into()
                }
            }
            Incident::ThrottledInvocation => {
                let sweeper = lambda
                    .invokers
                    .get("SweeperFunction")
                    .context("no sweeper")?;
                sweeper.submit(json!({}));
                sweeper.submit(json!({}));
                "two extra sweeper events at once (reserved concurrency 1)".into()
            }
            Incident::PoolEdit => {
                let mut p = world
                    .sim
                    .get_json("karpenter.sh/v1", "NodePool", "", "on-demand-arm64")
                    .context("no on-demand pool")?;
                p["spec"]["template"]["metadata"]["labels"]["soak.nodewright.io/edition"] =
                    json!("2");
                world.sim.apply_json(p)?;
                "on-demand-arm64's template gains a label: its nodes drift".into()
            }
            Incident::ExpiryWave => {
                let mut p = world
                    .sim
                    .get_json("karpenter.sh/v1", "NodePool", "", "spot-amd64")
                    .context("no spot pool")?;
                let after = format!("{}m", (self.length.as_secs() / 2 / 60).max(1));
                p["spec"]["template"]["spec"]["expireAfter"] = json!(after);
                world.sim.apply_json(p)?;
                format!("spot-amd64 expireAfter {after}")
            }
            Incident::BurstStart | Incident::BurstEnd => {
                self.burst = incident == Incident::BurstStart;
                format!("burst of batch pods: {}", if self.burst { 20 } else { 0 })
            }
            Incident::Rogue => {
                self.rogue_pending = true;
                "a rogue client waits for a critical pod on a node".into()
            }
        })
    }

    async fn warn(
        &mut self,
        world: &World,
        node: &str,
        id: &str,
        pods: &[Value],
        now: Timestamp,
    ) -> anyhow::Result<()> {
        spot_event(world, id, now).await?;
        let deadline = now + SignedDuration::from_secs(120);
        self.observer.warned(node, deadline, pods);
        self.reclaim.push((deadline, id.to_string()));
        Ok(())
    }

    /// The fleet's price now, per `nodewright status`, against `nodewright plan` on the same
    /// pods from scratch.
    pub async fn price(&mut self, world: &World, at: Timestamp) {
        let _working = world.clock().busy();
        match price(world, &self.dir).await {
            Ok((fleet, scratch)) => self.prices.push(Price { at, fleet, scratch }),
            Err(e) => self.log(at, format!("pricing failed: {e:#}")),
        }
    }

    pub async fn finish(
        mut self,
        world: &World,
        lambda: &Lambda,
        plan: &Plan,
        wall: Duration,
    ) -> anyhow::Result<Report> {
        let foreign = foreign_state(world, &self.foreign).await?;
        let terminated = (foreign == "terminated" || foreign == "shutting-down")
            .then(|| format!("{} (no ownership tag) is {foreign}", self.foreign));
        let fates: Vec<(String, Fate)> = world.queue.with(|q, _| {
            q.fates()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        });
        let lost: Vec<String> = fates
            .iter()
            .filter(|(_, f)| matches!(f, Fate::Expired { .. }))
            .map(|(id, _)| format!("message {id} expired unhandled"))
            .collect();
        self.observer
            .finish(terminated, lost, world.sim.rbac_refusals());
        Ok(Report::new(self, world, lambda, plan, wall, &fates))
    }

    pub fn into_parts(self) -> (Observer, Vec<(Timestamp, String)>, Vec<Price>) {
        (self.observer, self.events, self.prices)
    }
}

fn kill_one(lambda: &Lambda) -> bool {
    [
        "InterruptionFunction",
        "ProvisionerFunction",
        "SweeperFunction",
    ]
    .iter()
    .filter_map(|id| lambda.functions.get(*id))
    .any(|f| f.kill_a_busy_environment())
}

/// A client outside nodewright deletes the do-not-disrupt pod at once, past its budget.
async fn rogue(world: &World) -> anyhow::Result<String> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, DeleteParams};
    let pod = world
        .sim
        .list_json("v1", "Pod")
        .into_iter()
        .find(|p| {
            p.pointer("/metadata/labels/app") == Some(&json!("critical"))
                && s(p, "/spec/nodeName").is_some()
        })
        .context("no critical pod running")?;
    let name = s(&pod, "/metadata/name").unwrap_or("").to_string();
    let pods: Api<Pod> = Api::namespaced(world.sim.client().await?, "default");
    pods.delete(
        &name,
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await?;
    Ok(format!("rogue client deleted default/{name} with grace 0"))
}
