//! What this build can run: standalone mode (`--standalone`) and the simulated fleet
//! (`--nodes`, `nodes:`) need the `standalone` cargo feature (on by default), which brings in
//! the API emulator. A node built without it (`--no-default-features`) refuses them by name
//! instead of running something else.

/// Whether this build has the API emulator and the fleet simulator.
pub const STANDALONE_BUILT: bool = cfg!(feature = "standalone");

/// A mode asked for that this build was compiled without.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotInThisBuild {
    #[error(
        "--standalone: this build has no standalone mode: built without the `standalone` feature (a default build has it)"
    )]
    Standalone,
    #[error(
        "a fleet (--nodes, or nodes: in the file): this build has no fleet simulator: built without the `standalone` feature (a default build has it)"
    )]
    Fleet,
}

/// Refuses standalone mode or a fleet when this build has neither.
pub fn check_built(standalone: bool, fleet: bool) -> Result<(), NotInThisBuild> {
    refused(STANDALONE_BUILT, standalone, fleet)
}

fn refused(built: bool, standalone: bool, fleet: bool) -> Result<(), NotInThisBuild> {
    match (built, standalone, fleet) {
        (true, _, _) | (false, false, false) => Ok(()),
        (false, true, _) => Err(NotInThisBuild::Standalone),
        (false, false, true) => Err(NotInThisBuild::Fleet),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_without_the_feature_refuses_standalone_and_a_fleet_by_name() {
        assert_eq!(refused(false, true, false), Err(NotInThisBuild::Standalone));
        assert_eq!(refused(false, true, true), Err(NotInThisBuild::Standalone));
        assert_eq!(refused(false, false, true), Err(NotInThisBuild::Fleet));
        assert_eq!(refused(false, false, false), Ok(()));
        let message = NotInThisBuild::Standalone.to_string();
        assert!(message.contains("no standalone mode") && message.contains("`standalone` feature"));
        assert!(
            NotInThisBuild::Fleet
                .to_string()
                .contains("no fleet simulator")
        );
    }

    #[test]
    fn a_build_with_the_feature_runs_both() {
        assert_eq!(refused(true, true, true), Ok(()));
        assert_eq!(refused(true, false, false), Ok(()));
    }
}
