//! The kubelet's `VolumesInUse` setter: `status.volumesInUse` is the volume manager's list, but
//! only once its reconciler has synced since start — before that the field stays as found, so
//! a restart never tells the attach/detach controller that mounted volumes are free.

use k8s_openapi::api::core::v1::Node;

use super::{SetterResult, StatusInputs};

pub fn set(inputs: &StatusInputs<'_>, node: &mut Node) -> SetterResult {
    let Some(in_use) = inputs.volumes_in_use else {
        return Ok(Vec::new());
    };
    let status = node.status.get_or_insert_with(Default::default);
    // An empty list is omitted, as Go's `omitempty` does.
    status.volumes_in_use = (!in_use.is_empty()).then(|| in_use.to_vec());
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_status::setters::tests::with_volume_inputs;

    #[test]
    fn volumes_in_use_is_left_as_found_until_the_reconciler_synced() {
        let mut node = Node::default();
        node.status.get_or_insert_default().volumes_in_use = Some(vec!["old".into()]);
        with_volume_inputs(None, |inputs| set(inputs, &mut node)).unwrap();
        assert_eq!(
            node.status.as_ref().unwrap().volumes_in_use,
            Some(vec!["old".into()])
        );
        let list = vec!["kubernetes.io/csi/d^v1".to_owned()];
        with_volume_inputs(Some(&list), |inputs| set(inputs, &mut node)).unwrap();
        assert_eq!(node.status.as_ref().unwrap().volumes_in_use, Some(list));
        with_volume_inputs(Some(&[]), |inputs| set(inputs, &mut node)).unwrap();
        assert_eq!(node.status.as_ref().unwrap().volumes_in_use, None);
    }
}
