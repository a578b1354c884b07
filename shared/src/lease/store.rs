//! Where Leases are read and written: the port, and its adapter over `kube::Api<Lease>`.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

use super::decide::LeaseRecord;

/// Where a Lease carries [`LeaseRecord::launches`] (JSON): an annotation of nodewright's, so
/// the Lease stays a plain `coordination.k8s.io/v1` Lease for every other reader.
pub const LAUNCHES_ANNOTATION: &str = "nodewright.io/launches";

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Someone else wrote the Lease between our read and our write (409), or created it
    /// first: they won this round.
    #[error("leases/{namespace}/{name}: changed by another holder since it was read")]
    Conflict { namespace: String, name: String },
    #[error("{verb} leases/{namespace}/{name}")]
    Api {
        verb: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The election kept losing write races (see [`super::Elector::hold`]).
    #[error("leases/{name}: still contended after {attempts} writes")]
    Contended { name: String, attempts: u32 },
}

/// A Lease as read, with the resourceVersion a write must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    pub record: LeaseRecord,
    pub version: String,
}

/// Reading and writing one namespace's Leases with optimistic concurrency.
pub trait LeaseStore: Send + Sync {
    fn read(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Versioned>, LeaseError>> + Send;
    /// Creates the Lease; [`LeaseError::Conflict`] when it already exists.
    fn create(
        &self,
        name: &str,
        record: &LeaseRecord,
    ) -> impl Future<Output = Result<(), LeaseError>> + Send;
    /// Replaces the Lease as of `version`; [`LeaseError::Conflict`] when it changed since.
    fn replace(
        &self,
        name: &str,
        record: &LeaseRecord,
        version: &str,
    ) -> impl Future<Output = Result<(), LeaseError>> + Send;
}

/// Leases of one namespace through an unmodified `kube::Client`.
#[derive(Clone)]
pub struct KubeLeases {
    api: Api<Lease>,
    namespace: String,
}

impl KubeLeases {
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        KubeLeases {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
        }
    }

    fn error(&self, verb: &'static str, name: &str, source: kube::Error) -> LeaseError {
        match &source {
            kube::Error::Api(s) if s.code == 409 => LeaseError::Conflict {
                namespace: self.namespace.clone(),
                name: name.to_string(),
            },
            _ => LeaseError::Api {
                verb,
                namespace: self.namespace.clone(),
                name: name.to_string(),
                source,
            },
        }
    }

    fn object(&self, name: &str, record: &LeaseRecord, version: Option<&str>) -> Lease {
        let micro = |t: Option<SystemTime>| {
            t.and_then(|t| jiff::Timestamp::try_from(t).ok())
                .map(MicroTime)
        };
        let annotations = record
            .launches
            .as_ref()
            .and_then(|l| serde_json::to_string(l).ok())
            .map(|l| [(LAUNCHES_ANNOTATION.to_string(), l)].into());
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(self.namespace.clone()),
                resource_version: version.map(str::to_string),
                annotations,
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: record.holder.clone(),
                renew_time: micro(record.renewed),
                acquire_time: micro(record.acquired),
                lease_duration_seconds: record
                    .duration
                    .map(|d| i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)),
                lease_transitions: Some(record.transitions),
                ..LeaseSpec::default()
            }),
        }
    }
}

/// A Lease written by anyone, in our terms; fields it lacks stay `None`.
fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    let time = |t: Option<MicroTime>| t.map(|t| SystemTime::from(t.0));
    LeaseRecord {
        holder: spec.holder_identity,
        renewed: time(spec.renew_time),
        acquired: time(spec.acquire_time),
        duration: spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs),
        transitions: spec.lease_transitions.unwrap_or(0),
        // Unreadable: as if none were recorded (the Lease's release time bounds them then).
        launches: lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(LAUNCHES_ANNOTATION))
            .and_then(|v| serde_json::from_str(v).ok()),
    }
}

impl LeaseStore for KubeLeases {
    async fn read(&self, name: &str) -> Result<Option<Versioned>, LeaseError> {
        let found = self
            .api
            .get_opt(name)
            .await
            .map_err(|e| self.error("get", name, e))?;
        Ok(found.map(|lease| Versioned {
            record: record_of(&lease),
            version: lease.metadata.resource_version.clone().unwrap_or_default(),
        }))
    }

    async fn create(&self, name: &str, record: &LeaseRecord) -> Result<(), LeaseError> {
        self.api
            .create(&PostParams::default(), &self.object(name, record, None))
            .await
            .map(drop)
            .map_err(|e| self.error("create", name, e))
    }

    async fn replace(
        &self,
        name: &str,
        record: &LeaseRecord,
        version: &str,
    ) -> Result<(), LeaseError> {
        self.api
            .replace(
                name,
                &PostParams::default(),
                &self.object(name, record, Some(version)),
            )
            .await
            .map(drop)
            .map_err(|e| self.error("replace", name, e))
    }
}
