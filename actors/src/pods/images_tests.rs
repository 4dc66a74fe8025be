//! Table tests of the image rules: pull decisions per policy and presence, the pull back-off,
//! the kubelet's reasons, messages and events, references, and pull-secret credentials.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{ByteString, api::core::v1::Container, api::core::v1::Secret};
use serde_json::json;
use tokio::time::Instant;

use super::{
    image_ref::{ImageName, parse_image_name, with_default_tag},
    images::{
        ImageRequest, PullBackoff, PullPolicy, PullStep, next_step, pull_failed, pull_succeeded,
    },
    pull_auth::{PullSecretError, pull_auths},
};
use crate::ports::{PodEvent, PullAuth};

fn container(image: &str, policy: Option<&str>) -> Container {
    serde_json::from_value(json!({"name": "app", "image": image, "imagePullPolicy": policy}))
        .expect("a Container")
}

fn event(warning: bool, reason: &str, message: &str) -> PodEvent {
    PodEvent {
        warning,
        reason: reason.to_owned(),
        message: message.to_owned(),
        annotations: BTreeMap::new(),
    }
}

/// The waiting reason, message and event texts of a step, for compact expectations.
fn summary(step: &PullStep) -> (String, String, Vec<String>) {
    let texts = |events: &[PodEvent]| {
        events
            .iter()
            .map(|e| {
                format!(
                    "{} {}: {}",
                    if e.warning { "Warning" } else { "Normal" },
                    e.reason,
                    e.message
                )
            })
            .collect()
    };
    match step {
        PullStep::Present { image_ref, event } => (
            "present".to_owned(),
            image_ref.clone(),
            texts(std::slice::from_ref(event)),
        ),
        PullStep::Pull { image, event } => (
            "pull".to_owned(),
            image.clone(),
            texts(std::slice::from_ref(event)),
        ),
        PullStep::Fail(failure) => (
            failure.reason.to_owned(),
            failure.message.clone(),
            texts(&failure.events),
        ),
    }
}

#[test]
fn pull_policy_defaults_as_the_api_server() {
    let cases = [
        ("busybox", None, PullPolicy::Always),
        ("busybox:latest", None, PullPolicy::Always),
        ("busybox:1.36", None, PullPolicy::IfNotPresent),
        (
            "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            None,
            PullPolicy::IfNotPresent,
        ),
        ("busybox", Some("Never"), PullPolicy::Never),
        ("busybox:1.36", Some("Always"), PullPolicy::Always),
    ];
    for (image, policy, expected) in cases {
        assert_eq!(
            PullPolicy::of(&container(image, policy)),
            expected,
            "{image} {policy:?}"
        );
    }
}

/// (image, pull policy, ImageStatus's answer, expected summary of the step)
type StepCase = (
    &'static str,
    Option<&'static str>,
    Result<Option<&'static str>, &'static str>,
    (String, String, Vec<String>),
);

#[test]
fn each_policy_and_presence_gives_the_kubelets_step() {
    let now = Instant::now();
    let backoff = PullBackoff::default();
    let s = |text: &str| text.to_owned();
    let cases: Vec<StepCase> = vec![
        (
            "busybox:1.36",
            Some("IfNotPresent"),
            Ok(Some("sha256:aa")),
            (
                s("present"),
                s("sha256:aa"),
                vec![s(
                    "Normal Pulled: Container image \"busybox:1.36\" already present on machine and can be accessed by the pod",
                )],
            ),
        ),
        (
            "busybox",
            Some("IfNotPresent"),
            Ok(None),
            (
                s("pull"),
                s("busybox:latest"),
                vec![s("Normal Pulling: Pulling image \"busybox:latest\"")],
            ),
        ),
        (
            "busybox:1.36",
            Some("Always"),
            Err("ignored under Always"),
            (
                s("pull"),
                s("busybox:1.36"),
                vec![s("Normal Pulling: Pulling image \"busybox:1.36\"")],
            ),
        ),
        (
            "busybox:1.36",
            Some("Never"),
            Ok(None),
            (
                s("ErrImageNeverPull"),
                s("Container image \"busybox:1.36\" is not present with pull policy of Never"),
                vec![
                    s(
                        "Warning ErrImageNeverPull: Container image \"busybox:1.36\" is not present with pull policy of Never",
                    ),
                    s("Warning Failed: Error: ErrImageNeverPull"),
                ],
            ),
        ),
        (
            "busybox:1.36",
            Some("Never"),
            Ok(Some("sha256:aa")),
            (
                s("present"),
                s("sha256:aa"),
                vec![s(
                    "Normal Pulled: Container image \"busybox:1.36\" already present on machine and can be accessed by the pod",
                )],
            ),
        ),
        (
            "busybox:1.36",
            Some("IfNotPresent"),
            Err("rpc error: code = Unavailable"),
            (
                s("ImageInspectError"),
                s("Failed to inspect image \"\": rpc error: code = Unavailable"),
                vec![
                    s(
                        "Warning InspectFailed: Failed to inspect image \"\": rpc error: code = Unavailable",
                    ),
                    s("Warning Failed: Error: ImageInspectError"),
                ],
            ),
        ),
        (
            "Busybox",
            Some("IfNotPresent"),
            Ok(None),
            (
                s("InvalidImageName"),
                s(
                    "Failed to apply default image tag \"Busybox\": couldn't parse image name \"Busybox\": invalid reference format: repository name (library/Busybox) must be lowercase",
                ),
                vec![
                    s(
                        "Warning InspectFailed: Failed to apply default image tag \"Busybox\": couldn't parse image name \"Busybox\": invalid reference format: repository name (library/Busybox) must be lowercase",
                    ),
                    s("Warning Failed: Error: InvalidImageName"),
                ],
            ),
        ),
    ];
    for (image, policy, present, expected) in cases {
        let container = container(image, policy);
        let step = next_step(
            ImageRequest::of_container(&container),
            "uid-1",
            present,
            &backoff,
            now,
        );
        assert_eq!(summary(&step), expected, "{image} {policy:?}");
    }
}

#[test]
fn failed_pulls_back_off_ten_seconds_doubling_to_five_minutes_per_pod_and_image() {
    let start = Instant::now();
    let mut backoff = PullBackoff::default();
    let app = container("registry.local/app", Some("IfNotPresent"));
    let step_at = |backoff: &PullBackoff, uid: &str, at: Duration| {
        summary(&next_step(
            ImageRequest::of_container(&app),
            uid,
            Ok(None),
            backoff,
            start + at,
        ))
    };
    let error = "rpc error: code = NotFound desc = failed to resolve reference";
    let failure = pull_failed(
        "registry.local/app:latest",
        "uid-1",
        error,
        &mut backoff,
        start,
    );
    assert_eq!(
        (failure.reason, failure.message.as_str()),
        ("ErrImagePull", error)
    );
    assert_eq!(
        failure.events,
        [
            event(
                true,
                "Failed",
                &format!("Failed to pull image \"registry.local/app:latest\": {error}")
            ),
            event(true, "Failed", "Error: ErrImagePull"),
        ]
    );
    let waiting = step_at(&backoff, "uid-1", Duration::from_secs(9));
    assert_eq!(
        waiting,
        (
            "ImagePullBackOff".to_owned(),
            format!("Back-off pulling image \"registry.local/app:latest\": ErrImagePull: {error}"),
            vec![
                "Normal BackOff: Back-off pulling image \"registry.local/app:latest\"".to_owned(),
                "Warning Failed: Error: ImagePullBackOff".to_owned()
            ]
        )
    );
    assert_eq!(
        step_at(&backoff, "uid-2", Duration::from_secs(1)).0,
        "pull",
        "another pod has its own back-off"
    );
    assert_eq!(
        step_at(&backoff, "uid-1", Duration::from_secs(10)).0,
        "pull"
    );
    // Each failure once the window has passed doubles the window, up to 300 s.
    let mut at = Duration::ZERO;
    let mut windows = Vec::new();
    for _ in 0..7 {
        at += backoff
            .retry_at("uid-1", "registry.local/app:latest", start + at)
            .map_or(Duration::ZERO, |until| until - (start + at));
        pull_failed(
            "registry.local/app:latest",
            "uid-1",
            error,
            &mut backoff,
            start + at,
        );
        windows.push(
            backoff
                .retry_at("uid-1", "registry.local/app:latest", start + at)
                .map(|until| (until - (start + at)).as_secs()),
        );
    }
    assert_eq!(
        windows,
        [
            Some(20),
            Some(40),
            Some(80),
            Some(160),
            Some(300),
            Some(300),
            Some(300)
        ]
    );
    // Idle for more than 600 s, the entry has expired and the next failure starts at 10 s.
    let later = at + Duration::from_secs(601);
    assert_eq!(step_at(&backoff, "uid-1", later).0, "pull");
    pull_failed(
        "registry.local/app:latest",
        "uid-1",
        error,
        &mut backoff,
        start + later,
    );
    assert_eq!(
        backoff.retry_at("uid-1", "registry.local/app:latest", start + later),
        Some(start + later + Duration::from_secs(10))
    );
}

#[test]
fn runtime_error_names_map_to_their_own_reasons() {
    let now = Instant::now();
    let cases = [
        (
            "RegistryUnavailable: dial tcp: connection refused",
            "RegistryUnavailable",
            "image pull failed for x:1 because the registry is unavailable: dial tcp: connection refused",
        ),
        (
            "SignatureValidationFailed: bad signature",
            "SignatureValidationFailed",
            "image pull failed for x:1 because the signature validation failed: bad signature",
        ),
        ("manifest unknown", "ErrImagePull", "manifest unknown"),
    ];
    for (error, reason, message) in cases {
        let failure = pull_failed("x:1", "uid", error, &mut PullBackoff::default(), now);
        assert_eq!(
            (failure.reason, failure.message.as_str()),
            (reason, message),
            "{error}"
        );
    }
}

#[test]
fn a_successful_pull_reports_go_durations_and_the_size() {
    let now = Instant::now();
    let cases = [
        (
            Duration::from_micros(512_900),
            Duration::from_millis(512_900),
            "in 512ms (8m32.9s including waiting)",
        ),
        (
            Duration::from_millis(1500),
            Duration::from_millis(1500),
            "in 1.5s (1.5s including waiting)",
        ),
        (
            Duration::from_secs(3600),
            Duration::from_millis(3_723_040),
            "in 1h0m0s (1h2m3.04s including waiting)",
        ),
        (
            Duration::from_micros(10),
            Duration::ZERO,
            "in 0s (0s including waiting)",
        ),
    ];
    for (pull, waiting, timings) in cases {
        let event = pull_succeeded(
            "busybox:latest",
            pull,
            waiting,
            4_404_224,
            &mut PullBackoff::default(),
            now,
        );
        assert_eq!(
            event,
            super::images_tests::event(
                false,
                "Pulled",
                &format!(
                    "Successfully pulled image \"busybox:latest\" {timings}. Image size: 4404224 bytes."
                )
            )
        );
    }
}

#[test]
fn references_normalize_and_refuse_as_distribution_reference() {
    let name = |repository: &str, tag: Option<&str>, digest: Option<&str>| {
        Ok(ImageName {
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest: digest.map(str::to_owned),
        })
    };
    let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let cases = [
        (
            "busybox",
            name("docker.io/library/busybox", Some("latest"), None),
        ),
        ("team/app:v1", name("docker.io/team/app", Some("v1"), None)),
        (
            "index.docker.io/busybox:1",
            name("docker.io/library/busybox", Some("1"), None),
        ),
        (
            "localhost:5000/app",
            name("localhost:5000/app", Some("latest"), None),
        ),
        (
            "registry.example/a/b__c-d:x.y",
            name("registry.example/a/b__c-d", Some("x.y"), None),
        ),
        (
            &*format!("app@{digest}"),
            name("docker.io/library/app", None, Some(digest)),
        ),
    ];
    for (image, expected) in cases {
        assert_eq!(
            parse_image_name(image).map_err(|e| e.to_string()),
            expected,
            "{image}"
        );
    }
    let refused = [
        (
            "",
            "couldn't parse image name \"\": invalid reference format",
        ),
        (
            "app:",
            "couldn't parse image name \"app:\": invalid reference format",
        ),
        (
            "a//b",
            "couldn't parse image name \"a//b\": invalid reference format",
        ),
        (
            "app_:1",
            "couldn't parse image name \"app_:1\": invalid reference format",
        ),
        (
            "App",
            "couldn't parse image name \"App\": invalid reference format: repository name (library/App) must be lowercase",
        ),
        (
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "couldn't parse image name \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\": invalid repository name (0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef), cannot specify 64-byte hexadecimal strings",
        ),
    ];
    for (image, message) in refused {
        assert_eq!(
            parse_image_name(image).map_err(|e| e.to_string()),
            Err(message.to_owned()),
            "{image:?}"
        );
    }
    assert_eq!(with_default_tag("busybox").as_deref(), Ok("busybox:latest"));
    assert_eq!(
        with_default_tag("busybox:1.36").as_deref(),
        Ok("busybox:1.36")
    );
    assert_eq!(
        with_default_tag(&format!("busybox@{digest}")),
        Ok(format!("busybox@{digest}"))
    );
}

fn pull_secret(kind: &str, key: &str, json: serde_json::Value) -> Secret {
    Secret {
        type_: Some(kind.to_owned()),
        data: Some(BTreeMap::from([(
            key.to_owned(),
            ByteString(json.to_string().into_bytes()),
        )])),
        ..Secret::default()
    }
}

fn auth(username: &str, password: &str) -> PullAuth {
    PullAuth {
        username: username.to_owned(),
        password: password.to_owned(),
        ..PullAuth::default()
    }
}

#[test]
fn pull_secrets_give_the_credentials_the_kubelets_keyring_would() {
    let config = pull_secret(
        "kubernetes.io/dockerconfigjson",
        ".dockerconfigjson",
        json!({"auths": {
            "https://index.docker.io/v1/": {"username": "hub", "password": "h"},
            "quay.io": {"auth": "cXVheTpxMQ=="},
            "quay.io/team": {"username": "team", "password": "t"},
            "*.example.com:5000": {"username": "wild", "password": "w"},
        }}),
    );
    let legacy = pull_secret(
        "kubernetes.io/dockercfg",
        ".dockercfg",
        json!({"quay.io": {"username": "old", "password": "o"}}),
    );
    let opaque = pull_secret(
        "Opaque",
        ".dockerconfigjson",
        json!({"auths": {"quay.io": {"username": "no"}}}),
    );
    let secrets = [config, legacy, opaque];
    let cases = [
        (
            "quay.io/team/app",
            vec![auth("team", "t"), auth("quay", "q1"), auth("old", "o")],
        ),
        (
            "quay.io/other/app",
            vec![auth("quay", "q1"), auth("old", "o")],
        ),
        ("docker.io/library/busybox", vec![auth("hub", "h")]),
        ("registry.example.com:5000/app", vec![auth("wild", "w")]),
        ("registry.example.com/app", vec![]),
        ("a.b.example.com:5000/app", vec![]),
        ("ghcr.io/app", vec![]),
    ];
    for (repository, expected) in cases {
        assert_eq!(
            pull_auths(repository, &secrets),
            Ok(expected),
            "{repository}"
        );
    }
    let bad_auth = pull_secret(
        "kubernetes.io/dockerconfigjson",
        ".dockerconfigjson",
        json!({"auths": {"quay.io": {"auth": "bm9jb2xvbg=="}}}),
    );
    assert_eq!(
        pull_auths("quay.io/app", &[bad_auth]),
        Err(PullSecretError::Auth)
    );
    assert_eq!(
        PullSecretError::Auth.to_string(),
        "unable to parse auth field, must be formatted as base64(username:password)"
    );
    let bad_json = Secret {
        type_: Some("kubernetes.io/dockerconfigjson".to_owned()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_owned(),
            ByteString(b"{".to_vec()),
        )])),
        ..Secret::default()
    };
    assert!(matches!(
        pull_auths("quay.io/app", &[bad_json]),
        Err(PullSecretError::Json(_))
    ));
}
