//! A volume manager's view for the providers' tests, beside the port it fakes (the layering
//! keeps `ports` below the volume manager): the pod's one volume, `data`, is set up once the
//! test says so.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
};

use crate::volume_manager::ports::PodVolumeView;
use crate::volume_manager::{MountReadiness, UnmountedVolumes};

/// Every pod's one volume, `data`: not set up until [`OneVolume::set_up`].
#[derive(Default)]
pub struct OneVolume {
    mounted: AtomicBool,
}

impl OneVolume {
    pub fn set_up(&self) {
        self.mounted.store(true, Ordering::SeqCst);
    }
}

impl PodVolumeView for OneVolume {
    fn readiness(&self, _pod_uid: &str) -> MountReadiness {
        if self.mounted.load(Ordering::SeqCst) {
            MountReadiness::Ready
        } else {
            MountReadiness::Waiting(UnmountedVolumes {
                unmounted: vec!["data".to_owned()],
                ..UnmountedVolumes::default()
            })
        }
    }

    fn host_paths(&self, _pod_uid: &str) -> BTreeMap<String, PathBuf> {
        if self.mounted.load(Ordering::SeqCst) {
            [("data".to_owned(), PathBuf::from("/var/lib/np/u1/data"))].into()
        } else {
            BTreeMap::new()
        }
    }
}
