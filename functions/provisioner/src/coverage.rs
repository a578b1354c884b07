//! Coverage without a gap: consecutive scheduled invocations overlap, and a Lease decides
//! which one acts (see `nodewright::lease`). The others keep their pod watch and warm
//! caches and take over the moment the Lease is released or expires.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use nodewright::clock::Clock;
use nodewright::lease::{Elector, Hold, KubeLeases, MayAct, Refusal};

use super::deadline::DEFAULT_DEADLINE_MARGIN;
use super::parse_duration;

/// `LEASE_DURATION`: how long a holder's claim stands after each renewal, so how long the
/// others wait when a holder dies without releasing. A few seconds: short enough that a
/// dead holder costs pending pods little, long enough to ride out a slow renewal.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(6);
/// The shortest `LEASE_DURATION` accepted: Lease durations are whole seconds.
pub const MIN_LEASE_DURATION: Duration = Duration::from_secs(1);
/// `LEASE_NAME`: the provisioner's Lease; the sweeper would take its own name.
pub const DEFAULT_LEASE_NAME: &str = "nodewright-provisioner";
/// `LEASE_NAMESPACE`: `kube-system` exists in every cluster, and nodewright creates no
/// namespace of its own. The least-privilege RBAC names this Lease in this namespace: a
/// `LEASE_NAME` or `LEASE_NAMESPACE` of another value needs RBAC of its own.
pub const DEFAULT_LEASE_NAMESPACE: &str = "kube-system";
/// How often an invocation that does not hold the Lease looks at it again: a released
/// Lease is taken within this.
pub const STANDBY_RECHECK: Duration = Duration::from_secs(1);

/// How an invocation bounds its own time and takes its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoverageConfig {
    /// See [`DEFAULT_DEADLINE_MARGIN`].
    pub deadline_margin: Duration,
    pub lease_name: String,
    pub lease_namespace: String,
    pub lease_duration: Duration,
}

impl Default for CoverageConfig {
    fn default() -> Self {
        CoverageConfig {
            deadline_margin: DEFAULT_DEADLINE_MARGIN,
            lease_name: DEFAULT_LEASE_NAME.into(),
            lease_namespace: DEFAULT_LEASE_NAMESPACE.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
        }
    }
}

impl CoverageConfig {
    /// `DEADLINE_MARGIN`, `LEASE_DURATION` (durations as `POLL_INTERVAL`), `LEASE_NAME`,
    /// `LEASE_NAMESPACE`; unset means the default.
    pub fn from_lookup(env: impl Fn(&str) -> Option<String>) -> Result<CoverageConfig, String> {
        let d = CoverageConfig::default();
        let duration = |name: &str, default: Duration| match env(name) {
            Some(v) => parse_duration(&v).ok_or_else(|| {
                format!("{name}={v:?}: expected seconds (5, 0.5, 5s) or milliseconds (500ms)")
            }),
            None => Ok(default),
        };
        let text = |name: &str, default: String| {
            env(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .unwrap_or(default)
        };
        let config = CoverageConfig {
            deadline_margin: duration("DEADLINE_MARGIN", d.deadline_margin)?,
            lease_duration: duration("LEASE_DURATION", d.lease_duration)?,
            lease_name: text("LEASE_NAME", d.lease_name),
            lease_namespace: text("LEASE_NAMESPACE", d.lease_namespace),
        };
        if config.deadline_margin.is_zero() {
            return Err(
                "DEADLINE_MARGIN=0: the invocation would start work it cannot finish \
                        before Lambda's deadline"
                    .into(),
            );
        }
        if config.lease_duration < MIN_LEASE_DURATION {
            return Err(format!(
                "LEASE_DURATION={:?} is shorter than {MIN_LEASE_DURATION:?} (Lease durations \
                 are whole seconds)",
                config.lease_duration
            ));
        }
        Ok(config)
    }

    /// How often a holder renews: three renewals per lease duration, so one slow or failed
    /// renewal does not lose the Lease.
    pub fn renew_every(&self) -> Duration {
        self.lease_duration / 3
    }
}

/// The Lease part of a warm container's state: where the Lease lives and this container's
/// name, to which each invocation adds its request id.
pub struct LeaseSetup {
    pub store: KubeLeases,
    /// The log stream name in Lambda: one per container.
    pub container: String,
}

/// Runs `work` as the holder: with a Lease, renewed every `every` while the work runs, so
/// a holder busy for longer than the Lease (a cold container building its catalog, a price
/// refresh waiting up to `PRICE_FETCH_TIMEOUT`) is not taken over while it works. Without
/// a Lease, just `work`. A renewal that finds the Lease lost or fails is logged; the check
/// before each launch refuses then.
pub async fn while_holding<T>(
    elector: Option<&Elector<KubeLeases>>,
    every: Duration,
    clock: &dyn Clock,
    work: impl std::future::Future<Output = T>,
) -> T {
    let Some(elector) = elector else {
        return work.await;
    };
    tokio::select! {
        output = work => output,
        never = renew_every(elector, every, clock) => match never {},
    }
}

async fn renew_every(
    elector: &Elector<KubeLeases>,
    every: Duration,
    clock: &dyn Clock,
) -> std::convert::Infallible {
    loop {
        clock.sleep(every).await;
        match elector.hold(SystemTime::from(clock.now())).await {
            Ok(Hold::Held { .. }) => {}
            Ok(Hold::Waiting { holder, .. }) => {
                tracing::warn!(holder, "the Lease was taken over while this holder worked");
            }
            Err(e) => tracing::warn!(
                error = nodewright::error_chain(&e),
                "renewing the Lease while working failed"
            ),
        }
    }
}

/// The check asked right before each CreateFleet during one invocation: the Lease still
/// this invocation's, renewed now. (The deadline is the poll's `Turn`'s to check.)
pub struct InvocationGate {
    pub elector: Arc<Elector<KubeLeases>>,
    pub clock: Arc<dyn Clock>,
}

impl MayAct for InvocationGate {
    fn may_act(&self) -> BoxFuture<'_, Result<(), Refusal>> {
        async move {
            let lease = self.elector.name().to_string();
            match self.elector.hold(SystemTime::from(self.clock.now())).await {
                Ok(Hold::Held { .. }) => Ok(()),
                Ok(Hold::Waiting { holder, .. }) => Err(Refusal::TakenOver { lease, holder }),
                Err(source) => Err(Refusal::Unconfirmed { lease, source }),
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(vars: &'static [(&'static str, &'static str)]) -> Result<CoverageConfig, String> {
        CoverageConfig::from_lookup(move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn the_lease_and_margin_come_from_the_environment_or_their_defaults() {
        assert_eq!(lookup(&[]), Ok(CoverageConfig::default()));
        let set = lookup(&[
            ("DEADLINE_MARGIN", "3"),
            ("LEASE_DURATION", "2s"),
            ("LEASE_NAME", "nodewright-sweeper"),
            ("LEASE_NAMESPACE", " nodewright "),
        ]);
        assert_eq!(
            set,
            Ok(CoverageConfig {
                deadline_margin: Duration::from_secs(3),
                lease_duration: Duration::from_secs(2),
                lease_name: "nodewright-sweeper".into(),
                lease_namespace: "nodewright".into(),
            })
        );
        assert_eq!(
            CoverageConfig::default().renew_every(),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn a_zero_margin_or_a_sub_second_lease_is_refused_with_the_variable_named() {
        for (vars, name) in [
            (&[("DEADLINE_MARGIN", "0")][..], "DEADLINE_MARGIN"),
            (&[("DEADLINE_MARGIN", "soon")][..], "DEADLINE_MARGIN"),
            (&[("LEASE_DURATION", "500ms")][..], "LEASE_DURATION"),
        ] {
            let err = lookup(vars).expect_err(name);
            assert!(err.starts_with(name), "{err}");
        }
    }
}
