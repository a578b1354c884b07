//! A sweeper without the provisioning core (tests of one sweeper, `sweep-plan`): nothing is
//! ever launched, so an expired or drifted node drains at once and the provisioner launches
//! for its pods once they are pending.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use nodewright::provision::{Offering, ProvisionError, ReplaceReport, Replacement};
use nodewright::removal::{Avoid, Capacity};

/// No replacer: the type of `State::replacer` when there is none.
#[derive(Debug, Clone, Copy)]
pub enum NoReplacement {}

impl Replacement for NoReplacement {
    async fn replace(
        &self,
        _node: &str,
        _pods: &[Pod],
        _reclaimed: Option<&Offering>,
        _now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        match *self {}
    }
}

impl Capacity for NoReplacement {
    async fn replace_for(
        &self,
        _nodes: &[String],
        _pods: &[Pod],
        _avoid: &[Avoid],
        _now: SystemTime,
    ) -> Result<ReplaceReport, ProvisionError> {
        match *self {}
    }
}
