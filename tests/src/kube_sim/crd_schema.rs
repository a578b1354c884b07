//! Structural schemas of the Karpenter kinds the simulated cluster serves, written from
//! their documented fields (karpenter.sh/v1 NodePool, karpenter.k8s.aws/v1 EC2NodeClass):
//! what `kubectl explain` shows and what `fieldValidation=Strict` checks. Deep, free-form
//! parts (kubelet settings, block devices, status) keep unknown fields, as a structural
//! schema with `x-kubernetes-preserve-unknown-fields` does.

use serde_json::{Map, Value, json};

fn string(d: &str) -> Value {
    json!({ "type": "string", "description": d })
}

fn integer(d: &str) -> Value {
    json!({ "type": "integer", "format": "int32", "description": d })
}

fn boolean(d: &str) -> Value {
    json!({ "type": "boolean", "description": d })
}

fn list(d: &str, items: Value) -> Value {
    json!({ "type": "array", "description": d, "items": items })
}

fn string_map(d: &str) -> Value {
    json!({ "type": "object", "description": d, "additionalProperties": { "type": "string" } })
}

/// An object whose fields are not checked.
fn free(d: &str) -> Value {
    json!({ "type": "object", "description": d, "x-kubernetes-preserve-unknown-fields": true })
}

fn object(d: &str, fields: &[(&str, Value)], required: &[&str]) -> Value {
    let props: Map<String, Value> = fields
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect();
    let mut o = json!({ "type": "object", "description": d, "properties": props });
    if !required.is_empty() {
        o["required"] = json!(required);
    }
    o
}

fn top(d: &str, spec: Value) -> Value {
    object(
        d,
        &[
            (
                "apiVersion",
                string("The versioned schema of this representation of an object."),
            ),
            ("kind", string("The REST resource this object represents.")),
            ("metadata", free("Standard object metadata.")),
            ("spec", spec),
            (
                "status",
                free("The observed state, written by the controller."),
            ),
        ],
        &["spec"],
    )
}

fn requirement() -> Value {
    object(
        "A node selector requirement, with the minimum number of distinct values it must keep.",
        &[
            ("key", string("The label key the requirement applies to.")),
            (
                "operator",
                string("In, NotIn, Exists, DoesNotExist, Gt or Lt."),
            ),
            (
                "values",
                list(
                    "The values the operator compares with.",
                    json!({ "type": "string" }),
                ),
            ),
            (
                "minValues",
                integer("The least number of distinct values the launch must keep open."),
            ),
        ],
        &["key", "operator"],
    )
}

fn taint() -> Value {
    object(
        "A taint the nodes are created with.",
        &[
            ("key", string("The taint key.")),
            ("value", string("The taint value.")),
            (
                "effect",
                string("NoSchedule, PreferNoSchedule or NoExecute."),
            ),
            (
                "timeAdded",
                string("When the taint was added (NoExecute only)."),
            ),
        ],
        &["key", "effect"],
    )
}

fn nodepool() -> Value {
    let template_spec = object(
        "What the nodes launched for this NodePool look like.",
        &[
            (
                "nodeClassRef",
                object(
                    "The cloud provider configuration (EC2NodeClass) the nodes use.",
                    &[
                        ("group", string("API group of the node class.")),
                        ("kind", string("Kind of the node class.")),
                        ("name", string("Name of the node class.")),
                    ],
                    &["group", "kind", "name"],
                ),
            ),
            (
                "requirements",
                list(
                    "Constraints on the nodes, layered with the labels.",
                    requirement(),
                ),
            ),
            (
                "taints",
                list("Taints every node is created with.", taint()),
            ),
            (
                "startupTaints",
                list(
                    "Taints that a daemon removes once the node is set up.",
                    taint(),
                ),
            ),
            (
                "expireAfter",
                string("How long a node lives before it is replaced, or Never."),
            ),
            (
                "terminationGracePeriod",
                string("How long draining may take before the node is forcibly removed."),
            ),
        ],
        &["nodeClassRef", "requirements"],
    );
    let spec = object(
        "The NodePool's desired state: what nodes to launch and when to remove them.",
        &[
            (
                "template",
                object(
                    "The template of the nodes this NodePool launches.",
                    &[
                        (
                            "metadata",
                            object(
                                "Labels and annotations every node gets.",
                                &[
                                    ("labels", string_map("Labels every node gets.")),
                                    ("annotations", string_map("Annotations every node gets.")),
                                ],
                                &[],
                            ),
                        ),
                        ("spec", template_spec),
                    ],
                    &["spec"],
                ),
            ),
            (
                "disruption",
                object(
                    "When nodes of this NodePool may be removed.",
                    &[
                        (
                            "consolidationPolicy",
                            string("WhenEmpty or WhenEmptyOrUnderutilized."),
                        ),
                        (
                            "consolidateAfter",
                            string(
                                "How long a node must be consolidatable before it is removed, or Never.",
                            ),
                        ),
                        (
                            "budgets",
                            list(
                                "How many nodes may be disrupted at once.",
                                object(
                                    "A disruption budget, active always or on a schedule.",
                                    &[
                                        ("nodes", string("A number or percentage of nodes.")),
                                        (
                                            "schedule",
                                            string(
                                                "A cron schedule when the budget starts being active.",
                                            ),
                                        ),
                                        (
                                            "duration",
                                            string(
                                                "How long the budget stays active after each schedule hit.",
                                            ),
                                        ),
                                        (
                                            "reasons",
                                            list(
                                                "The disruption reasons the budget applies to.",
                                                json!({ "type": "string" }),
                                            ),
                                        ),
                                    ],
                                    &["nodes"],
                                ),
                            ),
                        ),
                    ],
                    &[],
                ),
            ),
            (
                "limits",
                json!({ "type": "object", "description": "Bounds on the total resources of this NodePool's nodes.",
                               "additionalProperties": { "x-kubernetes-int-or-string": true } }),
            ),
            (
                "weight",
                integer("Priority among NodePools: higher is tried first."),
            ),
            (
                "replicas",
                json!({ "type": "integer", "format": "int64", "minimum": 0,
                        "description": "Set: a static NodePool, kept at this many nodes whatever the pods ask." }),
            ),
        ],
        &["template"],
    );
    top(
        "NodePool is the Schema for the NodePools API: a set of nodes nodewright may launch.",
        spec,
    )
}

fn selector_term(d: &str, extra: &[(&str, Value)]) -> Value {
    let mut fields = vec![
        (
            "tags",
            string_map("Tags the resource must have; `*` matches any value."),
        ),
        ("id", string("The resource's id.")),
    ];
    fields.extend(extra.iter().cloned());
    object(d, &fields, &[])
}

fn ec2nodeclass() -> Value {
    let spec = object(
        "The EC2 configuration of nodes: AMIs, subnets, security groups, role, user data.",
        &[
            (
                "amiFamily",
                string("AL2, AL2023, Bottlerocket, Windows2019, Windows2022 or Custom."),
            ),
            (
                "amiSelectorTerms",
                list(
                    "Which AMIs to use.",
                    selector_term(
                        "An AMI selector term.",
                        &[
                            (
                                "alias",
                                string("family@version, for example al2023@latest."),
                            ),
                            ("name", string("The AMI name.")),
                            ("owner", string("The AMI owner.")),
                            (
                                "ssmParameter",
                                string("An SSM parameter holding the AMI id."),
                            ),
                        ],
                    ),
                ),
            ),
            (
                "subnetSelectorTerms",
                list(
                    "Which subnets to launch in.",
                    selector_term("A subnet selector term.", &[]),
                ),
            ),
            (
                "securityGroupSelectorTerms",
                list(
                    "Which security groups nodes get.",
                    selector_term(
                        "A security group selector term.",
                        &[("name", string("The security group name."))],
                    ),
                ),
            ),
            (
                "capacityReservationSelectorTerms",
                list(
                    "Which capacity reservations to use.",
                    free("A capacity reservation selector term."),
                ),
            ),
            (
                "role",
                string("The IAM role nodes get (an instance profile is made for it)."),
            ),
            (
                "instanceProfile",
                string("An existing instance profile, instead of a role."),
            ),
            (
                "tags",
                string_map("Tags of every instance, volume and launch template."),
            ),
            (
                "userData",
                string("User data merged with what the AMI family needs."),
            ),
            ("kubelet", free("Kubelet settings.")),
            (
                "blockDeviceMappings",
                list("The instances' volumes.", free("A block device mapping.")),
            ),
            (
                "metadataOptions",
                free("The instance metadata service's options."),
            ),
            (
                "associatePublicIPAddress",
                boolean("Whether instances get a public IP address."),
            ),
            (
                "detailedMonitoring",
                boolean("Whether detailed CloudWatch monitoring is on."),
            ),
            (
                "instanceStorePolicy",
                string("RAID0: use the instance stores as one volume."),
            ),
            ("context", string("The launch context (reserved capacity).")),
        ],
        &[
            "amiSelectorTerms",
            "securityGroupSelectorTerms",
            "subnetSelectorTerms",
        ],
    );
    top(
        "EC2NodeClass is the Schema for the EC2NodeClass API: how nodes are launched in EC2.",
        spec,
    )
}

fn nodeoverlay() -> Value {
    let requirement = object(
        "A label requirement the overlay applies under.",
        &[
            ("key", string("The label key.")),
            (
                "operator",
                json!({ "type": "string", "description": "In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte.",
                        "enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"] }),
            ),
            ("values", list("The values.", string("A value."))),
        ],
        &["key", "operator"],
    );
    let spec = object(
        "NodeOverlaySpec: what the overlay changes of the instance types it selects.",
        &[
            (
                "requirements",
                list("When the overlay applies.", requirement),
            ),
            (
                "priceAdjustment",
                string("A change to the price: -0.5, +1.2, +10% or -15%."),
            ),
            ("price", string("The price, dollars an hour.")),
            (
                "capacity",
                json!({ "type": "object", "description": "Extended resources added to the node's.",
                        "additionalProperties": { "x-kubernetes-int-or-string": true } }),
            ),
            (
                "weight",
                integer("Priority among NodeOverlays: the heaviest applies."),
            ),
        ],
        &[],
    );
    top(
        "NodeOverlay changes the price and extended resources Karpenter's simulation sees.",
        spec,
    )
}

/// The schema of a kind written out here, or `None`.
pub fn for_kind(kind: &str) -> Option<Value> {
    match kind {
        "NodePool" => Some(nodepool()),
        "EC2NodeClass" => Some(ec2nodeclass()),
        "NodeOverlay" => Some(nodeoverlay()),
        _ => None,
    }
}
