//! The soak's cluster, shaped like the seed write-ups' clusters: a spot pool on amd64 and
//! an on-demand pool on arm64 with their budgets, Deployments whose replicas follow a daily
//! load curve, PodDisruptionBudgets, a `do-not-disrupt` pod, zone spread and anti-affinity,
//! a DaemonSet on every node, and a burst of batch pods. (The simulated cluster has no Job
//! controller: the burst is a Deployment scaled up and back down.)

use std::collections::BTreeMap;

/// Each pool's disruption budget (`nodes`), as the YAML below sets it.
pub fn budgets() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("spot-amd64".to_string(), "2".to_string()),
        ("on-demand-arm64".to_string(), "1".to_string()),
    ])
}

/// Pools, the node class, the DaemonSet and the PDBs; the Deployments come from
/// [`deployments`]. `CLUSTER` and `NODE_ROLE` are filled in by `kit::with_world_names`.
pub const BASE: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: spot-amd64}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["spot"]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: ["c", "m", "r"]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
        - {key: karpenter.k8s.aws/instance-cpu, operator: In, values: ["2", "4", "8"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: 720h
  limits: {cpu: 400}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 2m
    budgets: [{nodes: "2"}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: on-demand-arm64}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: ["arm64"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: ["c", "m"]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["5"]}
        - {key: karpenter.k8s.aws/instance-cpu, operator: In, values: ["2", "4"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: 720h
  limits: {cpu: 100}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5m
    budgets: [{nodes: "1"}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: NODE_ROLE
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: node-agent}}
  template:
    metadata: {labels: {app: node-agent}}
    spec:
      tolerations: [{operator: Exists}]
      containers: [{name: agent, image: agent, resources: {requests: {cpu: 50m, memory: 64Mi}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec: {maxUnavailable: 1, selector: {matchLabels: {app: web}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: worker, namespace: default}
spec: {maxUnavailable: 1, selector: {matchLabels: {app: worker}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: api, namespace: default}
spec: {minAvailable: 2, selector: {matchLabels: {app: api}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: critical, namespace: default}
spec: {maxUnavailable: 0, selector: {matchLabels: {app: critical}}}
"#;

/// One Deployment of the day.
pub struct App {
    pub name: &'static str,
    pub pool: &'static str,
    pub cpu: &'static str,
    pub grace: u32,
    /// Replicas at the day's quietest and busiest.
    pub low: u32,
    pub high: u32,
    pub extra: &'static str,
}

pub const APPS: [App; 5] = [
    App {
        name: "web",
        pool: "spot-amd64",
        cpu: "500m",
        grace: 30,
        low: 4,
        high: 20,
        extra: "topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}]",
    },
    App {
        name: "worker",
        pool: "spot-amd64",
        cpu: "1",
        grace: 90,
        low: 2,
        high: 6,
        extra: "",
    },
    App {
        name: "api",
        pool: "on-demand-arm64",
        cpu: "500m",
        grace: 20,
        low: 3,
        high: 6,
        extra: "affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 100, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: api}}}}]}}",
    },
    App {
        name: "critical",
        pool: "spot-amd64",
        cpu: "250m",
        grace: 10,
        low: 1,
        high: 1,
        extra: "",
    },
    App {
        name: "burst",
        pool: "spot-amd64",
        cpu: "1",
        grace: 0,
        low: 0,
        high: 0,
        extra: "",
    },
];

/// The Deployment of `app` at `replicas`.
pub fn deployment(app: &App, replicas: u32) -> String {
    let annotations = if app.name == "critical" {
        "annotations: {karpenter.sh/do-not-disrupt: \"true\"}"
    } else {
        "annotations: {}"
    };
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata:
      labels: {{app: {name}}}
      {annotations}
    spec:
      nodeSelector: {{karpenter.sh/nodepool: {pool}}}
      terminationGracePeriodSeconds: {grace}
      containers: [{{name: app, image: app, resources: {{requests: {{cpu: "{cpu}", memory: 512Mi}}}}}}]
      {extra}
"#,
        name = app.name,
        pool = app.pool,
        grace = app.grace,
        cpu = app.cpu,
        extra = app.extra,
    )
}

/// Replicas of `app` at `fraction` of the day (0 at midnight): the quietest at night, the
/// busiest at noon, a cosine between.
pub fn replicas_at(app: &App, fraction: f64) -> u32 {
    let load = (1.0 - (std::f64::consts::TAU * fraction).cos()) / 2.0;
    app.low + ((app.high - app.low) as f64 * load).round() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_curve_is_quiet_at_night_and_busiest_at_noon() {
        let web = &APPS[0];
        assert_eq!(replicas_at(web, 0.0), 4);
        assert_eq!(replicas_at(web, 0.5), 20);
        assert_eq!(replicas_at(web, 1.0), 4);
        assert_eq!(replicas_at(web, 0.25), 12);
    }

    #[test]
    fn every_document_is_yaml() {
        for doc in serde_yaml::Deserializer::from_str(BASE) {
            let _: serde_yaml::Value = serde::Deserialize::deserialize(doc).unwrap();
        }
        for app in &APPS {
            let _: serde_yaml::Value = serde_yaml::from_str(&deployment(app, 3)).unwrap();
        }
    }
}
