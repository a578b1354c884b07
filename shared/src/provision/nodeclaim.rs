//! Node claim ids. One id per launch decision, the `nodewright.io/nodeclaim` tag and label
//! and the stem of the CreateFleet ClientToken (`<id>-<attempt>`, see [`super::attempts`]).
//! The id is derived from the decision (the NodePool and the pods it is for), so an
//! invocation retried after a crash sends the same token, and EC2 answers it without
//! launching twice.

use sha2::{Digest, Sha256};

pub fn nodeclaim_id<'a>(nodepool: &str, pod_uids: impl IntoIterator<Item = &'a str>) -> String {
    let mut uids: Vec<&str> = pod_uids.into_iter().collect();
    uids.sort_unstable();
    let mut h = Sha256::new();
    h.update(nodepool.as_bytes());
    for uid in uids {
        h.update([0u8]);
        h.update(uid.as_bytes());
    }
    format!("nw-{}", &hex::encode(h.finalize())[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_decision_gets_the_same_id_whatever_the_pod_order() {
        let a = nodeclaim_id("default", ["uid-1", "uid-2"]);
        assert_eq!(a, nodeclaim_id("default", ["uid-2", "uid-1"]));
        assert!(a.starts_with("nw-") && a.len() == 15);
        assert_ne!(a, nodeclaim_id("default", ["uid-1"]));
        assert_ne!(a, nodeclaim_id("other", ["uid-1", "uid-2"]));
    }
}
