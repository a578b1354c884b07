//! What moto's EKS does not model and the world's AWS front answers in its place: the
//! cluster's authentication mode (`accessConfig` in DescribeCluster, added to moto's
//! answer) and its access entries (ListAccessEntries and DescribeAccessEntry, answered from
//! the entries the world reads from the deployed stack, `access_entries.rs`, the same ones
//! the simulated API server authenticates by). Emulated: moto judges no IAM for these two
//! calls, and every entry is a STANDARD one made by the stack.

use std::sync::Mutex;

use serde_json::{Value, json};

use crate::kube_sim::eks_auth::AccessEntry;

pub struct EksAccess {
    mode: Mutex<String>,
    entries: Mutex<Vec<AccessEntry>>,
}

impl Default for EksAccess {
    fn default() -> Self {
        EksAccess {
            // EKS's default for a cluster created with access entries in mind.
            mode: Mutex::new("API_AND_CONFIG_MAP".into()),
            entries: Mutex::default(),
        }
    }
}

impl EksAccess {
    pub fn set_mode(&self, mode: &str) {
        *self.mode.lock().unwrap_or_else(|p| p.into_inner()) = mode.to_string();
    }

    pub fn set_entries(&self, entries: Vec<AccessEntry>) {
        *self.entries.lock().unwrap_or_else(|p| p.into_inner()) = entries;
    }

    /// The answer to `GET path` when it is an access-entry call: `(status, JSON)`.
    pub fn answer(&self, method: &str, path: &str) -> Option<(u16, Value)> {
        let rest = path.strip_prefix("/clusters/")?;
        let (cluster, rest) = rest.split_once('/')?;
        let rest = rest.strip_prefix("access-entries")?;
        if method != "GET" {
            return None;
        }
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if rest.is_empty() || rest == "/" {
            let arns: Vec<&str> = entries.iter().map(|e| e.principal_arn.as_str()).collect();
            return Some((200, json!({"accessEntries": arns})));
        }
        let principal = percent_encoding::percent_decode_str(rest.trim_start_matches('/'))
            .decode_utf8_lossy()
            .into_owned();
        Some(
            match entries.iter().find(|e| e.principal_arn == principal) {
                Some(e) => (
                    200,
                    json!({"accessEntry": {
                        "clusterName": cluster,
                        "principalArn": e.principal_arn,
                        "kubernetesGroups": e.groups,
                        "type": "STANDARD",
                        "username": e.principal_arn,
                    }}),
                ),
                None => (
                    404,
                    json!({
                        "message": format!("The specified principalArn could not be found: {principal}"),
                    }),
                ),
            },
        )
    }

    /// moto's DescribeCluster answer with the authentication mode added.
    pub fn describe_cluster(&self, method: &str, path: &str, body: Vec<u8>) -> Vec<u8> {
        let is_describe = method == "GET"
            && path
                .strip_prefix("/clusters/")
                .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'));
        if !is_describe {
            return body;
        }
        let Ok(mut answer) = serde_json::from_slice::<Value>(&body) else {
            return body;
        };
        if let Some(cluster) = answer.get_mut("cluster").and_then(Value::as_object_mut) {
            let mode = self.mode.lock().unwrap_or_else(|p| p.into_inner()).clone();
            cluster.insert(
                "accessConfig".into(),
                json!({"authenticationMode": mode, "bootstrapClusterCreatorAdminPermissions": true}),
            );
        }
        serde_json::to_vec(&answer).unwrap_or(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_entries_are_listed_and_described_by_their_url_encoded_principal() {
        let access = EksAccess::default();
        let arn = "arn:aws:iam::123456789012:role/prov";
        access.set_entries(vec![AccessEntry {
            principal_arn: arn.into(),
            groups: vec!["nodewright-provisioner".into()],
            cluster_admin: false,
        }]);
        let (code, list) = access.answer("GET", "/clusters/c/access-entries").unwrap();
        assert_eq!((code, list), (200, json!({"accessEntries": [arn]})));
        let encoded = "/clusters/c/access-entries/arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fprov";
        let (code, one) = access.answer("GET", encoded).unwrap();
        assert_eq!(code, 200);
        assert_eq!(
            one["accessEntry"]["kubernetesGroups"],
            json!(["nodewright-provisioner"])
        );
        assert_eq!(
            access
                .answer("GET", "/clusters/c/access-entries/arn%3Ax")
                .unwrap()
                .0,
            404
        );
        assert_eq!(access.answer("GET", "/clusters/c"), None);
        access.set_mode("CONFIG_MAP");
        let described = access.describe_cluster(
            "GET",
            "/clusters/c",
            br#"{"cluster": {"name": "c"}}"#.to_vec(),
        );
        let described: Value = serde_json::from_slice(&described).unwrap();
        assert_eq!(
            described["cluster"]["accessConfig"]["authenticationMode"],
            "CONFIG_MAP"
        );
        let other = access.describe_cluster("GET", "/clusters/c/node-groups", b"{}".to_vec());
        assert_eq!(other, b"{}");
    }
}
