//! What the launches of one poll (or one replacement) share: where capacity can be
//! launched ([`super::Launchable`]), the pods by key, and what each EC2NodeClass resolves
//! to — its AMIs, security groups and instance profile — looked up once per class the
//! first time a claim needs it, not once per claim.

use std::collections::HashMap;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;

use super::super::discovery::{images_key, terms_key};
use super::super::live_catalog::freshness::Purpose;
use super::super::node_template::{ProfileChoice, profile_choice};
use super::super::profiles::Cached;
use super::super::turn::Turn;
use super::launch_claim::describe;
use super::{ClaimOutcome, ClassNetwork, Launchable, Provisioner, pod_key};
use crate::api::{EC2NodeClass, NodePool};
use crate::aws::{AwsError, Cloud, ErrorClass, Image, InstanceProfiles};
use crate::catalog::Catalog;
use crate::kube::Cluster;

/// One poll's (or one replacement's) launch context: built once, passed to every claim.
pub(super) struct LaunchContext<'a> {
    pub(super) pools: Vec<NodePool>,
    pub(super) classes: Vec<EC2NodeClass>,
    pub(super) networks: HashMap<String, ClassNetwork>,
    /// Less the offerings found unavailable, again before each round.
    pub(super) catalog: Catalog,
    /// The pods the claims name, by `namespace/name`.
    pub(super) by_key: HashMap<String, &'a Pod>,
    /// The poll's turn: its gate and its time to launch by.
    pub(super) turn: Turn<'a>,
    pub(super) now: SystemTime,
    /// When the poll started, by the provisioner's clock: `now` plus the clock's time
    /// since then is when a CreateFleet is sent.
    pub(super) started: SystemTime,
    /// The node whose pods a replacement launches for (`None` in a poll).
    pub(super) replacing: Option<&'a str>,
    /// Per class, what its claims launch with (or why they cannot), once resolved.
    resolved: HashMap<String, Result<ClassLaunch, Unresolved>>,
}

/// What a class's claims launch with this poll.
#[derive(Clone)]
pub(super) struct ClassLaunch {
    /// Every image the class's `amiSelectorTerms` select (each claim picks its arch).
    pub(super) images: Vec<Image>,
    pub(super) security_group_ids: Vec<String>,
    pub(super) profile: String,
    pub(super) profile_choice: ProfileChoice,
}

/// Why a class's claims cannot launch this poll, as each of them reports it.
#[derive(Clone)]
enum Unresolved {
    Throttled,
    RetryLater(String),
    Failed(String),
}

impl Unresolved {
    fn outcome(&self) -> ClaimOutcome {
        match self {
            Unresolved::Throttled => ClaimOutcome::Throttled,
            Unresolved::RetryLater(why) => ClaimOutcome::RetryLater(why.clone()),
            Unresolved::Failed(why) => ClaimOutcome::Failed(why.clone()),
        }
    }

    fn of(what: &str, e: &AwsError) -> Self {
        match e.class() {
            ErrorClass::Throttled => Unresolved::Throttled,
            ErrorClass::Propagating => {
                Unresolved::RetryLater(format!("{what}: {}; will retry", describe(e)))
            }
            _ => Unresolved::Failed(format!("{what}: {e}")),
        }
    }
}

/// A launch step's AWS error as the claim's outcome: throttled, retried next poll (what
/// passes by itself), or failed.
pub(super) fn failed(what: &str, e: &AwsError) -> ClaimOutcome {
    Unresolved::of(what, e).outcome()
}

impl<'a> LaunchContext<'a> {
    pub(super) fn new(
        launchable: Launchable,
        pods: &'a [Pod],
        turn: Turn<'a>,
        now: SystemTime,
        started: SystemTime,
        replacing: Option<&'a str>,
    ) -> Self {
        let Launchable {
            pools,
            classes,
            networks,
            catalog,
        } = launchable;
        LaunchContext {
            pools,
            classes,
            networks,
            catalog,
            by_key: pods.iter().map(|p| (pod_key(p), p)).collect(),
            turn,
            now,
            started,
            replacing,
            resolved: HashMap::new(),
        }
    }

    /// Resolves `class` afresh for its next claim: a launch failed in a way a stale
    /// lookup may explain (a profile not visible, groups gone).
    pub(super) fn forget_class(&mut self, class: &str) {
        self.resolved.remove(class);
    }
}

impl<K, A> Provisioner<K, A>
where
    K: Cluster,
    A: Cloud,
{
    /// What the claims of `class` launch with: resolved on the first claim of the class,
    /// the same answer for the others.
    pub(super) async fn class_launch(
        &mut self,
        ctx: &mut LaunchContext<'_>,
        class: &EC2NodeClass,
    ) -> Result<ClassLaunch, ClaimOutcome> {
        let name = &class.metadata.name;
        if let Some(found) = ctx.resolved.get(name) {
            return found.clone().map_err(|u| u.outcome());
        }
        let resolved = self.resolve_class(class, ctx.now).await;
        ctx.resolved.insert(name.clone(), resolved.clone());
        resolved.map_err(|u| u.outcome())
    }

    async fn resolve_class(
        &mut self,
        class: &EC2NodeClass,
        now: SystemTime,
    ) -> Result<ClassLaunch, Unresolved> {
        let name = &class.metadata.name;
        let version = self.settings.cluster.kubernetes_version.clone();
        let images_key = images_key(&class.spec.ami_selector_terms, &version);
        let kept = self
            .discovered
            .images(Purpose::Poll, name, &images_key, now)
            .cloned();
        let images = match kept {
            // Resolved earlier (a warm-up keeps it fresh): no SSM or EC2 call on the
            // pods' path.
            Some(kept) => kept,
            None => match self
                .aws
                .resolve(&class.spec.ami_selector_terms, &version)
                .await
            {
                Ok(images) => {
                    self.discovered
                        .put_images(name, images_key, now, images.clone());
                    images
                }
                Err(e) if e.class() == ErrorClass::Throttled => return Err(Unresolved::Throttled),
                Err(e) => {
                    return Err(Unresolved::Failed(format!(
                        "resolving AMIs of EC2NodeClass {name}: {}",
                        describe(&e)
                    )));
                }
            },
        };
        let terms = terms_key(&class.spec.security_group_selector_terms);
        let security_group_ids = match self.discovered.groups(Purpose::Poll, name, &terms, now) {
            Some(cached) => cached.iter().map(|g| g.id.clone()).collect(),
            None => match self
                .aws
                .security_groups(&class.spec.security_group_selector_terms)
                .await
            {
                Ok(g) => {
                    let ids = g.iter().map(|g| g.id.clone()).collect();
                    self.discovered.put_groups(name, terms, now, g);
                    ids
                }
                Err(e) => return Err(Unresolved::of("security group discovery", &e)),
            },
        };
        let profile_choice = profile_choice(&class.spec, &self.settings.default_node_role);
        let profile = match &profile_choice {
            ProfileChoice::Named(p) => p.clone(),
            ProfileChoice::StackDefault => self.settings.default_instance_profile.clone(),
            ProfileChoice::ForRole(role) => self.instance_profile_for(name, role, now).await?,
        };
        Ok(ClassLaunch {
            images,
            security_group_ids,
            profile,
            profile_choice,
        })
    }
}

impl<K, A> Provisioner<K, A>
where
    A: InstanceProfiles + Sync,
{
    /// The instance profile for a class's `role`: from this container's memory, else
    /// ensured through IAM (and remembered, success or failure; see [`super::super::profiles`]).
    async fn instance_profile_for(
        &mut self,
        class: &str,
        role: &str,
        now: SystemTime,
    ) -> Result<String, Unresolved> {
        match self.profiles.lookup(role, now) {
            Cached::Ready(profile) => return Ok(profile),
            Cached::Failed(why) => return Err(Unresolved::Failed(why)),
            Cached::Unknown => {}
        }
        match self.aws.ensure_instance_profile(role).await {
            Ok(profile) => {
                self.profiles.ready(role, &profile);
                Ok(profile)
            }
            Err(e) if e.class() == ErrorClass::Throttled => Err(Unresolved::Throttled),
            Err(e) => {
                let why = format!(
                    "EC2NodeClass {class}: spec.role {role}: no instance profile: {}",
                    describe(&e)
                );
                self.profiles.failed(role, &why, now);
                Err(Unresolved::Failed(why))
            }
        }
    }
}
