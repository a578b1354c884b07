//! Identities as types: an EC2 instance id is not a node name, and a pod's uid is not its
//! `namespace/name`. Each is parsed once, where it enters the provisioner (an EC2 answer,
//! a Kubernetes object), and compared as itself from then on. The capacity type is
//! [`crate::catalog::CapacityType`].
//!
//! They convert back to text where they leave it (a tag, a label, the functions that take
//! plain names), through `as_str`, `Display` and `From`.

use std::fmt;

use k8s_openapi::api::core::v1::{Node, Pod};

macro_rules! identity {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(String);

        impl $name {
            /// Text already known to be one (from an EC2 answer, a Kubernetes object, a
            /// tag nodewright wrote).
            pub fn new(text: impl Into<String>) -> $name {
                $name(text.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

identity!(
    /// An EC2 instance id (`i-` and hex digits).
    InstanceId
);
identity!(
    /// A Kubernetes Node's name.
    NodeName
);
identity!(
    /// A pod's `metadata.uid` (its `namespace/name` when it has none: a pod built in
    /// memory, such as a capacity window's placeholder).
    PodUid
);
identity!(
    /// One launch decision's id: the `nodewright.io/nodeclaim` tag and label, and the
    /// stem of its CreateFleet ClientToken.
    NodeClaimId
);

impl InstanceId {
    /// `text` when it reads as an instance id (`i-` and letters or digits); `None`
    /// otherwise (a replacement recorded as `none`, a node name).
    pub fn parse(text: &str) -> Option<InstanceId> {
        let rest = text.trim().strip_prefix("i-")?;
        (!rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric()))
            .then(|| InstanceId(text.trim().to_string()))
    }
}

impl NodeName {
    /// The node's name; `None` for a node without one (never served by an API server).
    pub fn of(node: &Node) -> Option<NodeName> {
        node.metadata.name.clone().map(NodeName)
    }
}

impl PodUid {
    /// The pod's uid, or its `namespace/name` when it has none.
    pub fn of(pod: &Pod) -> PodUid {
        PodUid(pod.metadata.uid.clone().unwrap_or_else(|| {
            format!(
                "{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or("default"),
                pod.metadata.name.as_deref().unwrap_or_default()
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_text_shaped_like_an_instance_id_is_one() {
        let cases = [
            ("i-0123456789abcdef0", true),
            (" i-0abc ", true),
            ("i-", false),
            ("none", false),
            ("i-0replacement", true),
            ("i-a,b", false),
            ("ip-10-0-0-1.ec2.internal", false),
        ];
        for (text, want) in cases {
            assert_eq!(InstanceId::parse(text).is_some(), want, "{text:?}");
        }
    }

    #[test]
    fn a_pod_without_a_uid_is_named_by_namespace_and_name() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "kube-system"}
        }))
        .unwrap();
        assert_eq!(PodUid::of(&pod).as_str(), "kube-system/p");
        let with_uid: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "1234"}
        }))
        .unwrap();
        assert_eq!(PodUid::of(&with_uid).as_str(), "1234");
    }
}
