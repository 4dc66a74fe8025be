//! An in-memory `PodCgroups`: the cgroups made, with the config last applied to each, and
//! every call recorded; a cgroup can be made to fail, as a host that refuses it would.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::{Mutex, PoisonError},
};

use crate::ports::{CgroupDriver, CgroupName, PodCgroups, PodCgroupsError, ResourceConfig};

#[derive(Default)]
struct State {
    cgroups: BTreeMap<CgroupName, ResourceConfig>,
    refused: BTreeSet<CgroupName>,
    calls: Vec<String>,
}

#[derive(Default)]
pub struct FakePodCgroups {
    state: Mutex<State>,
}

impl FakePodCgroups {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `name` fail to be made from now on.
    pub fn refuse(&self, name: CgroupName) {
        self.state().refused.insert(name);
    }

    /// A cgroup left by an earlier run.
    pub fn insert(&self, name: CgroupName) {
        self.state().cgroups.insert(name, ResourceConfig::default());
    }

    /// The config last applied to `name`, if it exists.
    pub fn config(&self, name: &CgroupName) -> Option<ResourceConfig> {
        self.state().cgroups.get(name).cloned()
    }

    /// `ensure <path>`, `update <path>`, `destroy <path>`, in order.
    pub fn calls(&self) -> Vec<String> {
        self.state().calls.clone()
    }
}

impl PodCgroups for FakePodCgroups {
    fn driver(&self) -> CgroupDriver {
        CgroupDriver::Cgroupfs
    }

    fn exists(&self, name: &CgroupName) -> bool {
        self.state().cgroups.contains_key(name)
    }

    fn ensure(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), PodCgroupsError> {
        let mut state = self.state();
        state.calls.push(format!("ensure {}", name.to_cgroupfs()));
        if state.refused.contains(name) {
            return Err(PodCgroupsError::Create {
                path: PathBuf::from(name.to_cgroupfs()),
                message: "permission denied".to_owned(),
            });
        }
        state.cgroups.insert(name.clone(), config.clone());
        Ok(())
    }

    fn update(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), PodCgroupsError> {
        let mut state = self.state();
        state.calls.push(format!("update {}", name.to_cgroupfs()));
        match state.cgroups.get_mut(name) {
            Some(current) => {
                *current = config.clone();
                Ok(())
            }
            None => Err(PodCgroupsError::Missing(name.to_cgroupfs())),
        }
    }

    fn destroy(&self, name: &CgroupName) -> Result<(), PodCgroupsError> {
        let mut state = self.state();
        state.calls.push(format!("destroy {}", name.to_cgroupfs()));
        state
            .cgroups
            .retain(|cgroup, _| !cgroup.components().starts_with(name.components()));
        Ok(())
    }

    fn children(&self, name: &CgroupName) -> Result<Vec<String>, PodCgroupsError> {
        let depth = name.components().len();
        Ok(self
            .state()
            .cgroups
            .keys()
            .filter(|cgroup| {
                cgroup.components().len() == depth + 1
                    && cgroup.components().starts_with(name.components())
            })
            .map(|cgroup| cgroup.base().to_owned())
            .collect())
    }
}
