//! Karpenter's leader-election Lease, read so that nodewright never adopts Karpenter's nodes
//! while Karpenter's controller still runs (see [`crate::takeover::karpenter_running`]).

use ::kube::api::Api;
use k8s_openapi::api::coordination::v1::Lease;

use super::cluster::KubeCluster;
use super::error::KubeError;
use crate::takeover::{KARPENTER_LEASE, KARPENTER_NAMESPACES};

pub trait KarpenterLeader: Send + Sync {
    /// Karpenter's leader-election Leases in the namespaces its chart is installed to; none
    /// where there is none.
    fn karpenter_leases(&self) -> impl Future<Output = Result<Vec<Lease>, KubeError>> + Send;
}

impl KarpenterLeader for KubeCluster {
    async fn karpenter_leases(&self) -> Result<Vec<Lease>, KubeError> {
        let mut found = Vec::new();
        for namespace in KARPENTER_NAMESPACES {
            let api: Api<Lease> = Api::namespaced(self.client.clone(), namespace);
            let resource = format!("leases/{namespace}/{KARPENTER_LEASE}");
            let lease = self
                .settings
                .retry
                .run("get", &resource, || api.get_opt(KARPENTER_LEASE))
                .await?;
            found.extend(lease);
        }
        Ok(found)
    }
}
