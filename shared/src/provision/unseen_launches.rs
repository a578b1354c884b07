//! Instances this container launched that DescribeInstances does not list yet.
//!
//! EC2's API is eventually consistent: an instance CreateFleet just returned may be missing
//! from DescribeInstances for a while. In-flight accounting reads the owned instances from
//! DescribeInstances, so without this memory the next poll would not count a launch it
//! just made, and would plan its pods again (with a changed pod set, under another
//! ClientToken: a second instance). Each poll adds the launches it remembers and the list
//! lacks; a launch the list shows, or one older than [`VISIBILITY_WINDOW`], is forgotten.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use crate::aws::{InstanceState, LaunchedInstance, OwnedInstance};
use crate::ids::InstanceId;

/// How long a launch counts without being listed. EC2 propagates within seconds; past
/// this, an instance still unlisted is taken as gone (a spot instance reclaimed at once).
pub const VISIBILITY_WINDOW: Duration = Duration::from_secs(120);

#[derive(Debug, Default)]
pub struct UnseenLaunches {
    launched: HashMap<InstanceId, (OwnedInstance, SystemTime)>,
}

impl UnseenLaunches {
    /// Remembers `instance`, launched at `at` with `tags` (the tags CreateFleet set).
    pub fn record(
        &mut self,
        instance: &LaunchedInstance,
        tags: BTreeMap<String, String>,
        at: SystemTime,
    ) {
        let owned = OwnedInstance {
            id: instance.id.clone(),
            instance_type: instance.instance_type.clone(),
            zone: instance.zone.clone(),
            state: InstanceState::Pending,
            capacity_type: instance.capacity_type,
            launch_time: jiff::Timestamp::try_from(at).ok(),
            tags,
            private_dns_name: None,
            subnet_id: None,
            image_id: None,
            security_groups: Vec::new(),
        };
        self.launched
            .insert(InstanceId::new(instance.id.clone()), (owned, at));
    }

    /// `listed` (DescribeInstances' owned instances) with each remembered launch it lacks
    /// added as pending; forgets what `listed` shows and what is past the window at `now`.
    pub fn merge(&mut self, mut listed: Vec<OwnedInstance>, now: SystemTime) -> Vec<OwnedInstance> {
        self.launched.retain(|id, (_, at)| {
            let young = now.duration_since(*at).unwrap_or_default() < VISIBILITY_WINDOW;
            young && !listed.iter().any(|i| i.id == id.as_str())
        });
        listed.extend(self.launched.values().map(|(i, _)| i.clone()));
        listed
    }

    /// Forgets the launches whose Node has registered: EC2 has shown that instance to the
    /// node (it joined), so from now on the list alone speaks for it. Without this, an
    /// instance that joined and was terminated before any poll listed it would count as
    /// capacity in flight for the rest of the window, and its pods would wait.
    pub fn forget_registered(&mut self, nodes: &[k8s_openapi::api::core::v1::Node]) {
        if self.launched.is_empty() {
            return;
        }
        let registered = super::in_flight::node_instance_ids(nodes);
        self.launched.retain(|id, _| !registered.contains(id));
    }

    /// The launches remembered that `listed` (the live owned instances) lacks: each is
    /// either not visible yet or already terminated, which only a describe by id tells.
    pub fn unlisted(&self, listed: &[OwnedInstance]) -> Vec<String> {
        let mut ids: Vec<String> = self
            .launched
            .keys()
            .filter(|id| !listed.iter().any(|i| i.id == id.as_str()))
            .map(|id| id.as_str().to_string())
            .collect();
        ids.sort();
        ids
    }

    /// [`Self::unlisted`], of the launches made before `asked_at` (when `listed` was
    /// asked for): a later one is missing from it as a rule, and is in flight until a
    /// listing shows it or shows it gone.
    pub fn unlisted_before(&self, listed: &[OwnedInstance], asked_at: SystemTime) -> Vec<String> {
        let mut ids = self.unlisted(listed);
        ids.retain(|id| (self.launched.get(id.as_str())).is_some_and(|(_, at)| *at < asked_at));
        ids
    }

    /// The launches made at or after `since` that `listed` lacks, as pending: a listing
    /// asked for at `since` cannot hold them (an earlier launch it lacks may be gone, which
    /// only a describe by id tells; see [`Self::unlisted_before`]).
    pub fn made_since(&self, listed: &[OwnedInstance], since: SystemTime) -> Vec<OwnedInstance> {
        let mut made: Vec<OwnedInstance> = (self.launched.values())
            .filter(|(i, at)| *at >= since && !listed.iter().any(|l| l.id == i.id))
            .map(|(i, _)| i.clone())
            .collect();
        made.sort_by(|a, b| a.id.cmp(&b.id));
        made
    }

    /// Forgets the launches EC2 describes as terminated: they were seen, and are gone.
    pub fn forget_terminated(&mut self, states: &HashMap<String, InstanceState>) {
        self.launched
            .retain(|id, _| states.get(id.as_str()) != Some(&InstanceState::Terminated));
    }

    pub fn len(&self) -> usize {
        self.launched.len()
    }

    pub fn is_empty(&self) -> bool {
        self.launched.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CapacityType;

    fn launched(id: &str) -> LaunchedInstance {
        LaunchedInstance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
        }
    }

    fn listed(id: &str, state: InstanceState) -> OwnedInstance {
        OwnedInstance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            state,
            capacity_type: CapacityType::Spot,
            launch_time: None,
            tags: BTreeMap::new(),
            private_dns_name: None,
            subnet_id: None,
            image_id: None,
            security_groups: Vec::new(),
        }
    }

    fn ids(instances: &[OwnedInstance]) -> Vec<(&str, InstanceState)> {
        let mut v: Vec<_> = instances.iter().map(|i| (i.id.as_str(), i.state)).collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }

    #[test]
    fn a_launch_the_list_lacks_counts_as_pending_with_the_tags_it_was_launched_with() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut unseen = UnseenLaunches::default();
        let tags = BTreeMap::from([("nodewright.io/nodepool".to_string(), "default".to_string())]);
        unseen.record(&launched("i-new"), tags.clone(), t0);
        let merged = unseen.merge(vec![listed("i-old", InstanceState::Running)], t0);
        assert_eq!(
            ids(&merged),
            [
                ("i-new", InstanceState::Pending),
                ("i-old", InstanceState::Running)
            ]
        );
        assert_eq!(merged.iter().find(|i| i.id == "i-new").unwrap().tags, tags);
    }

    #[test]
    fn a_launch_the_list_shows_is_taken_from_the_list_and_forgotten() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut unseen = UnseenLaunches::default();
        unseen.record(&launched("i-new"), BTreeMap::new(), t0);
        // Listed as terminated (reclaimed): the list's word counts, not the memory's.
        let merged = unseen.merge(vec![listed("i-new", InstanceState::Terminated)], t0);
        assert_eq!(ids(&merged), [("i-new", InstanceState::Terminated)]);
        assert!(unseen.is_empty());
        assert!(unseen.merge(Vec::new(), t0).is_empty());
    }

    #[test]
    fn a_launch_whose_node_registered_is_forgotten_even_if_the_list_never_showed_it() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut unseen = UnseenLaunches::default();
        unseen.record(&launched("i-0123456789abcdef0"), BTreeMap::new(), t0);
        unseen.record(&launched("i-new"), BTreeMap::new(), t0);
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "ip-10-0-0-4.ec2.internal"},
            "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"}
        }))
        .unwrap();
        unseen.forget_registered(&[node]);
        // Terminated meanwhile, so not listed: it is not capacity any more.
        assert_eq!(
            ids(&unseen.merge(Vec::new(), t0)),
            [("i-new", InstanceState::Pending)]
        );
    }

    #[test]
    fn a_launch_described_as_terminated_is_forgotten_and_one_not_described_yet_is_kept() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut unseen = UnseenLaunches::default();
        unseen.record(&launched("i-gone"), BTreeMap::new(), t0);
        unseen.record(&launched("i-new"), BTreeMap::new(), t0);
        unseen.record(&launched("i-up"), BTreeMap::new(), t0);
        let live = vec![listed("i-up", InstanceState::Running)];
        assert_eq!(unseen.unlisted(&live), ["i-gone", "i-new"]);
        unseen.forget_terminated(&HashMap::from([(
            "i-gone".to_string(),
            InstanceState::Terminated,
        )]));
        assert_eq!(
            ids(&unseen.merge(live, t0)),
            [
                ("i-new", InstanceState::Pending),
                ("i-up", InstanceState::Running)
            ]
        );
    }

    #[test]
    fn a_listing_lacks_the_launches_made_after_it_was_asked_for_and_no_others() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut unseen = UnseenLaunches::default();
        unseen.record(&launched("i-before"), BTreeMap::new(), t0);
        unseen.record(
            &launched("i-at"),
            BTreeMap::new(),
            t0 + Duration::from_secs(5),
        );
        unseen.record(
            &launched("i-after"),
            BTreeMap::new(),
            t0 + Duration::from_secs(9),
        );
        unseen.record(
            &launched("i-listed"),
            BTreeMap::new(),
            t0 + Duration::from_secs(9),
        );
        let listing = vec![listed("i-listed", InstanceState::Pending)];
        // (asked at, seconds after t0): the launches the listing cannot hold.
        let cases: [(u64, &[&str]); 3] = [
            (0, &["i-after", "i-at", "i-before"]),
            (5, &["i-after", "i-at"]),
            (10, &[]),
        ];
        for (asked, want) in cases {
            let made = unseen.made_since(&listing, t0 + Duration::from_secs(asked));
            let got: Vec<(&str, InstanceState)> = ids(&made);
            let want: Vec<(&str, InstanceState)> = want
                .iter()
                .map(|id| (*id, InstanceState::Pending))
                .collect();
            assert_eq!(got, want, "asked at {asked}");
        }
    }

    #[test]
    fn a_launch_never_listed_is_forgotten_after_the_window() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut unseen = UnseenLaunches::default();
        unseen.record(&launched("i-new"), BTreeMap::new(), t0);
        let almost = t0 + VISIBILITY_WINDOW - Duration::from_secs(1);
        assert_eq!(unseen.merge(Vec::new(), almost).len(), 1);
        assert!(unseen.merge(Vec::new(), t0 + VISIBILITY_WINDOW).is_empty());
        assert_eq!(unseen.len(), 0);
    }
}
