//! Small conversions from SDK types shared by the adapters.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};

/// EC2 tags as a map (a tag without a key is dropped; a missing value is empty).
pub(crate) fn tag_map(tags: &[Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| Some((t.key.clone()?, t.value.clone().unwrap_or_default())))
        .collect()
}

pub(crate) fn tag_spec(
    resource: ResourceType,
    tags: &BTreeMap<String, String>,
) -> TagSpecification {
    let mut spec = TagSpecification::builder().resource_type(resource);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(k).value(v).build());
    }
    spec.build()
}

pub(crate) fn filter(name: &str, values: &[String]) -> Filter {
    Filter::builder()
        .name(name)
        .set_values(Some(values.to_vec()))
        .build()
}

/// An SDK timestamp as a `jiff` one (None if out of jiff's range).
pub(crate) fn timestamp(t: &aws_smithy_types::DateTime) -> Option<jiff::Timestamp> {
    jiff::Timestamp::new(t.secs(), i32::try_from(t.subsec_nanos()).ok()?).ok()
}

/// EC2's architecture spelling as the `kubernetes.io/arch` label spells it; None for
/// architectures nodes cannot run on (i386, Mac).
pub(crate) fn kubernetes_arch(ec2_arch: &str) -> Option<&'static str> {
    match ec2_arch {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    }
}
