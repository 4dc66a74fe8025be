//! Version validation as the kubelet's `validateVersions` words it.

use std::sync::Arc;

use futures::future::BoxFuture;
use nodepulse_actors::ports::{ApiResult, CsiDriverRegistration, CsiNodeApi};

use super::*;

/// An API that is never reached: validation happens before any write.
struct Unreached;

impl CsiNodeApi for Unreached {
    fn add_driver_to_node(
        &self,
        _: &str,
        _: &CsiDriverRegistration,
    ) -> BoxFuture<'static, ApiResult<()>> {
        unreachable!("validation writes nothing")
    }
    fn add_driver_to_csi_node(
        &self,
        _: &str,
        _: &CsiDriverRegistration,
    ) -> BoxFuture<'static, ApiResult<()>> {
        unreachable!("validation writes nothing")
    }
    fn remove_driver_from_node(&self, _: &str, _: &str) -> BoxFuture<'static, ApiResult<()>> {
        unreachable!("validation writes nothing")
    }
    fn remove_driver_from_csi_node(&self, _: &str, _: &str) -> BoxFuture<'static, ApiResult<()>> {
        unreachable!("validation writes nothing")
    }
}

fn handler() -> CsiRegistrationHandler {
    CsiRegistrationHandler::new("n1", CsiDrivers::default(), Arc::new(Unreached))
}

fn versions(list: &[&str]) -> Vec<String> {
    list.iter().map(|version| (*version).to_owned()).collect()
}

#[test]
fn the_highest_1_x_version_is_chosen_and_2_x_ignored() {
    let chosen = handler()
        .validate(
            "ValidatePlugin",
            "d",
            &versions(&["1.0.0", "v1.2", "2.0.0"]),
        )
        .expect("valid");
    assert_eq!(chosen, "1.2.0");
}

#[test]
fn no_versions_or_none_supported_are_refused_with_the_kubelets_text() {
    let empty = handler()
        .validate("ValidatePlugin", "d", &[])
        .expect_err("empty");
    assert_eq!(
        empty.to_string(),
        r#"kubernetes.io/csi: ValidatePlugin for CSI driver "d" failed. Plugin returned an empty list for supported versions"#
    );
    let unsupported = handler()
        .validate("RegisterPlugin", "d", &versions(&["0.3.0", "2.0.0"]))
        .expect_err("unsupported");
    assert_eq!(
        unsupported.to_string(),
        r#"kubernetes.io/csi: RegisterPlugin for CSI driver "d" failed. None of the versions specified ["0.3.0" "2.0.0"] are supported. err=could not find a highest supported version from versions (0.3.0 2.0.0) reported by this driver"#
    );
}

#[test]
fn a_registered_driver_is_replaced_only_by_a_higher_version() {
    let handler = handler();
    handler.drivers().insert(
        "d",
        RegisteredDriver {
            endpoint: "/s".to_owned(),
            highest_version: "1.1.0".to_owned(),
        },
    );
    let same = handler
        .validate("ValidatePlugin", "d", &versions(&["1.1.0"]))
        .expect_err("same version");
    assert_eq!(
        same.to_string(),
        r#"kubernetes.io/csi: ValidatePlugin for CSI driver "d" failed. Another driver with the same name is already registered with a higher supported version: "1.1.0""#
    );
    assert_eq!(
        handler
            .validate("ValidatePlugin", "d", &versions(&["1.2.0"]))
            .expect("higher"),
        "1.2.0"
    );
}
