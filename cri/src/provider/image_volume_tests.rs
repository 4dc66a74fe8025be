//! Image volumes on the CRI provider against the in-memory runtime: the volume's image is made
//! present by its own pull policy before the container (its pull failing as a container's does,
//! and nothing created), and the container's mount names the resolved image, read-only, with
//! no host path.

use serde_json::{Value, json};

use super::tests::{Harness, IMAGE, phase, pod, waiting_message, waiting_reason};
use nodepulse_actors::ports::{ImageMount, Mount};

const KITTEN: &str = "nodepulse.test/kitten:1.7";

fn with_kitten(pull_policy: &str) -> Value {
    json!({
        "containers": [{"name": "app", "image": IMAGE,
            "volumeMounts": [{"name": "kitten", "mountPath": "/volume"},
                             {"name": "kitten", "mountPath": "/release", "subPath": "etc"}]}],
        "volumes": [{"name": "kitten", "image": {"reference": KITTEN, "pullPolicy": pull_policy}}],
    })
}

#[tokio::test(start_paused = true)]
async fn an_image_volume_is_pulled_by_its_policy_and_mounted_from_its_image() {
    let mut harness = Harness::new();
    harness.apply(&pod("Always", with_kitten("Always")));
    harness
        .status_where("Running", |s| phase(s) == "Running")
        .await;
    let pulls: Vec<String> = (harness.runtime.calls().into_iter())
        .filter(|call| call.starts_with("PullImage"))
        .collect();
    assert_eq!(
        pulls,
        [format!("PullImage {KITTEN}")],
        "once, for two mounts"
    );
    let kitten = |sub_path: &str| ImageMount {
        image: format!("sha256:{KITTEN}"),
        user_specified_image: KITTEN.to_owned(),
        annotations: [("team".to_owned(), "a".to_owned())].into(),
        sub_path: sub_path.to_owned(),
    };
    let config = &harness.runtime.created("app")[0];
    let image_mounts: Vec<&Mount> = (config.mounts.iter())
        .filter(|mount| mount.image.is_some())
        .collect();
    assert_eq!(
        image_mounts,
        [
            &Mount {
                container_path: "/volume".into(),
                readonly: true,
                image: Some(kitten("")),
                ..Mount::default()
            },
            &Mount {
                container_path: "/release".into(),
                readonly: true,
                image: Some(kitten("etc")),
                ..Mount::default()
            },
        ]
    );
    assert!(
        harness
            .events()
            .starts_with(&[format!("Normal Pulling: Pulling image \"{KITTEN}\"")]),
        "the volume's image first: {:?}",
        harness.events()
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_image_volume_pull_holds_the_container_back_as_its_own_image_would() {
    let mut harness = Harness::new();
    harness
        .runtime
        .fail_pulls(Some("proxyconnect tcp: connection refused"));
    harness.apply(&pod("Always", with_kitten("Always")));
    let status = harness
        .status_where("ErrImagePull", |s| waiting_reason(s) == "ErrImagePull")
        .await;
    let message = waiting_message(&status);
    assert!(message.contains("proxyconnect tcp"), "{message}");
    assert_eq!(
        harness.events(),
        [
            format!("Normal Pulling: Pulling image \"{KITTEN}\""),
            format!("Warning Failed: Failed to pull image \"{KITTEN}\": {message}"),
            "Warning Failed: Error: ErrImagePull".to_owned(),
        ]
    );
    assert_eq!(
        harness.runtime.count("CreateContainer"),
        0,
        "never run without it"
    );
    assert_eq!(phase(&status), "Pending");
}

#[tokio::test(start_paused = true)]
async fn an_absent_image_volume_under_never_waits_with_err_image_never_pull() {
    let mut harness = Harness::new();
    harness.apply(&pod("Always", with_kitten("Never")));
    let status = harness
        .status_where("ErrImageNeverPull", |s| {
            waiting_reason(s) == "ErrImageNeverPull"
        })
        .await;
    assert_eq!(
        waiting_message(&status),
        format!("Container image \"{KITTEN}\" is not present with pull policy of Never")
    );
    assert_eq!(harness.runtime.count("PullImage"), 0);
    assert_eq!(harness.runtime.count("CreateContainer"), 0);
}
