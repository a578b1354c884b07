//! The cluster as EKS describes it: endpoint, certificate authority, version, service CIDRs.

use base64::Engine as _;

/// What nodewright needs from `DescribeCluster`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EksCluster {
    pub name: String,
    /// `https://<id>.<suffix>.<region>.eks.amazonaws.com`.
    pub endpoint: String,
    /// `certificateAuthority.data`: base64 of the PEM bundle (as kubeconfig's
    /// `certificate-authority-data` and bootstrap.sh's `--b64-cluster-ca` take it).
    pub certificate_authority_data: String,
    pub kubernetes_version: String,
    pub service_ipv4_cidr: Option<String>,
    pub service_ipv6_cidr: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("EKS DescribeCluster {name:?} failed")]
    Describe {
        name: String,
        #[source]
        source: Box<
            aws_sdk_eks::error::SdkError<
                aws_sdk_eks::operation::describe_cluster::DescribeClusterError,
            >,
        >,
    },
    #[error(
        "EKS cluster {name:?} has no {field} yet (status {status}); wait until the cluster is ACTIVE"
    )]
    NotReady {
        name: String,
        field: &'static str,
        status: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("cluster certificate authority data is not base64")]
    NotBase64(#[source] base64::DecodeError),
    #[error(
        "cluster certificate authority data is base64 but not a PEM certificate bundle \
         (no '-----BEGIN CERTIFICATE-----' block); an emulator such as moto returns random \
         bytes here: use a kubeconfig for such a cluster instead"
    )]
    NotPem,
    #[error("certificate {index} in the cluster certificate authority is not valid PEM: {reason}")]
    BadBlock { index: usize, reason: String },
}

/// Calls `DescribeCluster` and keeps what nodewright needs.
pub async fn describe_cluster(
    client: &aws_sdk_eks::Client,
    name: &str,
) -> Result<EksCluster, ClusterError> {
    let out = client
        .describe_cluster()
        .name(name)
        .send()
        .await
        .map_err(|e| ClusterError::Describe {
            name: name.to_owned(),
            source: Box::new(e),
        })?;
    let Some(cluster) = out.cluster() else {
        return Err(ClusterError::NotReady {
            name: name.to_owned(),
            field: "description",
            status: "unknown".to_owned(),
        });
    };
    cluster_from_sdk(name, cluster)
}

/// Converts the SDK's description; a cluster still being created has no endpoint or CA yet.
pub fn cluster_from_sdk(
    name: &str,
    cluster: &aws_sdk_eks::types::Cluster,
) -> Result<EksCluster, ClusterError> {
    let status = cluster
        .status()
        .map_or_else(|| "unknown".to_owned(), |s| s.as_str().to_owned());
    let missing = |field| ClusterError::NotReady {
        name: name.to_owned(),
        field,
        status: status.clone(),
    };
    let endpoint = non_empty(cluster.endpoint()).ok_or_else(|| missing("endpoint"))?;
    let ca = non_empty(cluster.certificate_authority().and_then(|c| c.data()))
        .ok_or_else(|| missing("certificateAuthority.data"))?;
    let network = cluster.kubernetes_network_config();
    Ok(EksCluster {
        name: cluster.name().unwrap_or(name).to_owned(),
        endpoint: endpoint.to_owned(),
        certificate_authority_data: ca.to_owned(),
        kubernetes_version: cluster.version().unwrap_or_default().to_owned(),
        service_ipv4_cidr: network
            .and_then(|n| non_empty(n.service_ipv4_cidr()))
            .map(str::to_owned),
        service_ipv6_cidr: network
            .and_then(|n| non_empty(n.service_ipv6_cidr()))
            .map(str::to_owned),
    })
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.trim().is_empty())
}

const PEM_BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const PEM_END: &str = "-----END CERTIFICATE-----";

/// Decodes `certificateAuthority.data` (base64 of a PEM bundle) into DER certificates, the
/// form `kube::Config::root_cert` takes.
pub fn decode_certificate_authority(data: &str) -> Result<Vec<Vec<u8>>, CaError> {
    let compact: String = data.chars().filter(|c| !c.is_whitespace()).collect();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(CaError::NotBase64)?;
    let pem = String::from_utf8_lossy(&pem);
    let mut ders = Vec::new();
    let mut rest = pem.as_ref();
    while let Some(start) = rest.find(PEM_BEGIN) {
        let body_start = start + PEM_BEGIN.len();
        let Some(len) = rest[body_start..].find(PEM_END) else {
            return Err(CaError::BadBlock {
                index: ders.len(),
                reason: format!("no '{PEM_END}' line"),
            });
        };
        let body: String = rest[body_start..body_start + len]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body.as_bytes())
            .map_err(|e| CaError::BadBlock {
                index: ders.len(),
                reason: e.to_string(),
            })?;
        ders.push(der);
        rest = &rest[body_start + len + PEM_END.len()..];
    }
    if ders.is_empty() {
        return Err(CaError::NotPem);
    }
    Ok(ders)
}
