//! A configuration is either accepted whole or refused before anything starts, with the file,
//! the field, the value and the reason in the message.

use std::io::Write;

use nodepulse::{
    cli::Cli,
    config::{Config, ConfigError, Source},
};

fn parse(yaml: &str) -> Result<Config, ConfigError> {
    Config::parse(yaml, Source::File("test.yaml".into()))
}

#[test]
fn the_embedded_default_is_valid_and_matches_the_documented_defaults() {
    let config = Config::embedded_default().expect("the shipped default parses");
    assert_eq!(config.supervision.liveness_timeout.to_string(), "1s");
    assert_eq!(config.supervision.backoff.initial.to_string(), "100ms");
    assert_eq!(config.supervision.max_restarts, 10);
    assert_eq!(config.debug.address, "127.0.0.1:10280");
    assert!(!config.debug.fault_injection.enabled);
    assert_eq!(config.standalone.api_address, "127.0.0.1:16443");
    assert_eq!(
        config.container_runtime_endpoint,
        "unix:///run/containerd/containerd.sock"
    );
    assert_eq!(config.runtime_request_timeout.to_string(), "2m0s");
    assert_eq!(config.runtime_probe_period.to_string(), "5s");
    assert_eq!(
        config.eviction_pressure_transition_period.to_string(),
        "5m0s"
    );
    assert_eq!(config.housekeeping_interval.to_string(), "10s");
    assert_eq!(
        config.eviction_hard,
        nodepulse_actors::eviction::default_eviction_hard(),
        "the file's evictionHard is the kubelet's Linux default"
    );
    assert_eq!(
        parse("maxPods: 110\n").expect("valid").eviction_hard,
        config.eviction_hard,
        "an omitted evictionHard takes the same defaults"
    );
}

#[test]
fn the_report_frequency_follows_the_update_frequency_when_only_that_is_set() {
    assert_eq!(
        parse("maxPods: 110\n")
            .expect("valid")
            .report_frequency()
            .as_secs(),
        300
    );
    assert_eq!(
        parse("nodeStatusUpdateFrequency: 20s\n")
            .expect("valid")
            .report_frequency()
            .as_secs(),
        20
    );
    let both =
        parse("nodeStatusUpdateFrequency: 20s\nnodeStatusReportFrequency: 1m\n").expect("valid");
    assert_eq!(both.report_frequency().as_secs(), 60);
}

#[test]
fn kubelet_duration_syntax_is_accepted() {
    let config = parse(
        "supervision:\n  restartWindow: 1m30s\n  backoff:\n    initial: 250ms\n    max: 1.5m\n",
    )
    .expect("valid durations");
    assert_eq!(config.supervision.restart_window.0.as_secs(), 90);
    assert_eq!(config.supervision.backoff.initial.0.as_millis(), 250);
    assert_eq!(config.supervision.backoff.max.0.as_secs(), 90);
}

#[test]
fn broken_files_are_refused_with_field_value_and_reason() {
    let cases: &[(&str, &[&str])] = &[
        (
            "supervison: {}\n",
            &["test.yaml", "unknown field `supervison`", "expected one of"],
        ),
        (
            "supervision:\n  livenesTimeout: 5s\n",
            &["supervision", "unknown field `livenesTimeout`"],
        ),
        (
            "supervision:\n  backoff:\n    initial: 10x\n",
            &[
                "supervision.backoff.initial",
                "unknown unit \"x\"",
                "\"10x\"",
            ],
        ),
        (
            "supervision:\n  livenessTimeout: -5s\n",
            &["supervision.livenessTimeout", "negative duration \"-5s\""],
        ),
        (
            "supervision:\n  restartWindow: 60\n",
            &["supervision.restartWindow", "missing unit"],
        ),
        (
            "supervision:\n  maxRestarts: many\n",
            &["supervision.maxRestarts", "invalid type"],
        ),
        (
            "supervision:\n  maxRestarts: 0\n",
            &[
                "supervision.maxRestarts",
                "invalid value \"0\"",
                "at least 1",
            ],
        ),
        (
            "supervision:\n  backoff:\n    jitter: 1.5\n",
            &["supervision.backoff.jitter", "\"1.5\"", "between 0 and 1"],
        ),
        (
            "supervision:\n  backoff:\n    multiplier: 0.5\n",
            &["supervision.backoff.multiplier", "at least 1"],
        ),
        (
            "supervision:\n  backoff:\n    initial: 2s\n    max: 1s\n",
            &[
                "supervision.backoff.max",
                "\"1s\"",
                "at least supervision.backoff.initial",
            ],
        ),
        (
            "supervision:\n  livenessInterval: 10s\n  livenessTimeout: 5s\n",
            &["supervision.livenessInterval", "must not exceed"],
        ),
        (
            "supervision:\n  mailboxCapacity: 0\n",
            &["supervision.mailboxCapacity", "at least 1"],
        ),
        (
            "debug:\n  address: localhost\n",
            &["debug.address", "\"localhost\"", "IP address and port"],
        ),
        (
            "debug:\n  faultInjection:\n    enabled: true\n",
            &["debug.faultInjection.token", "at least 16 characters"],
        ),
        (
            "nodeName: Worker_1\n",
            &["nodeName", "\"Worker_1\"", "RFC 1123"],
        ),
        (
            "standalone:\n  apiAddress: 127.0.0.1\n",
            &["standalone.apiAddress", "IP address and port"],
        ),
        ("supervision: [1, 2]\n", &["supervision", "invalid type"]),
        (
            "containerRuntimeEndpoint: /run/containerd/containerd.sock\n",
            &[
                "containerRuntimeEndpoint",
                "\"/run/containerd/containerd.sock\"",
                "unix://",
            ],
        ),
        (
            "runtime: docker\n",
            &["runtime", "unknown variant `docker`", "cri", "simulated"],
        ),
        (
            "runtimeRequestTimeout: 0s\n",
            &["runtimeRequestTimeout", "greater than zero"],
        ),
        (
            "housekeepingInterval: 500ms\n",
            &["housekeepingInterval", "\"500ms\"", "at least 1s"],
        ),
        (
            "evictionHard:\n  memory.free: 1Gi\n",
            &[
                "evictionHard.memory.free",
                "\"1Gi\"",
                "unsupported eviction signal memory.free",
            ],
        ),
        (
            "evictionHard:\n  nodefs.available: 110%\n",
            &[
                "evictionHard.nodefs.available",
                "\"110%\"",
                "must be <= 100%",
            ],
        ),
        (
            "evictionHard:\n  memory.available: 0Mi\n",
            &["evictionHard.memory.available", "must be positive"],
        ),
        (
            "evictionSoft:\n  memory.available: 1Gi\n",
            &[
                "evictionSoftGracePeriod.memory.available",
                "no grace period specified for soft eviction threshold",
            ],
        ),
        (
            "evictionSoftGracePeriod:\n  memory.available: -1m\n",
            &[
                "evictionSoftGracePeriod.memory.available",
                "negative duration",
            ],
        ),
        (
            "evictionMinimumReclaim:\n  nodefs.available: 0%\n",
            &[
                "evictionMinimumReclaim.nodefs.available",
                "must be positive",
            ],
        ),
        (
            "evictionPressureTransitionPeriod: 0s\n",
            &["evictionPressureTransitionPeriod", "greater than zero"],
        ),
        (
            "nodeLeaseDurationSeconds: 0\n",
            &["nodeLeaseDurationSeconds", "\"0\"", "greater than zero"],
        ),
        (
            "nodeLeaseDurationSeconds: -40\n",
            &["nodeLeaseDurationSeconds", "\"-40\"", "greater than zero"],
        ),
        (
            "nodeLeaseDurationSeconds: forty\n",
            &["nodeLeaseDurationSeconds", "invalid type", "\"forty\""],
        ),
        (
            "nodeLeaseDurationSeconds: 4.5\n",
            &["nodeLeaseDurationSeconds", "invalid type", "4.5"],
        ),
        (
            "nodeStatusUpdateFrequency: -10s\n",
            &["nodeStatusUpdateFrequency", "negative duration \"-10s\""],
        ),
        (
            "nodeStatusUpdateFrequency: 0s\n",
            &["nodeStatusUpdateFrequency", "\"0s\"", "greater than zero"],
        ),
        (
            "nodeStatusUpdateFrequency: 10\n",
            &["nodeStatusUpdateFrequency", "missing unit", "\"10\""],
        ),
        (
            "nodeStatusReportFrequency: 0s\n",
            &["nodeStatusReportFrequency", "greater than zero"],
        ),
        (
            "runtimeProbePeriod: -1s\n",
            &["runtimeProbePeriod", "negative duration \"-1s\""],
        ),
        (
            "containerRuntimeDownAfter: 0s\n",
            &["containerRuntimeDownAfter", "greater than zero"],
        ),
        ("kubeAPIQPS: -5\n", &["kubeAPIQPS", "invalid type", "-5"]),
        ("kubeAPIQPS: 0\n", &["kubeAPIQPS", "\"0\"", "at least 1"]),
        (
            "kubeAPIQPS: 50\nkubeAPIBurst: 10\n",
            &["kubeAPIBurst", "\"10\"", "at least kubeAPIQPS"],
        ),
        ("eventRecordQPS: 0\n", &["eventRecordQPS", "at least 1"]),
        ("maxPods: 0\n", &["maxPods", "\"0\"", "at least 1"]),
        ("maxPods: 1.5\n", &["maxPods", "invalid type", "1.5"]),
        ("port: 70000\n", &["port", "invalid value", "70000"]),
        (
            "registerNode: maybe\n",
            &["registerNode", "invalid type", "\"maybe\""],
        ),
        (
            "nodeIP: [10.0.0.1, 'fd00::1', 10.0.0.2]\n",
            &["nodeIP", "at most two addresses"],
        ),
        (
            "nodeIP: [not-an-ip]\n",
            &["nodeIP[0]", "\"not-an-ip\"", "expected an IP address"],
        ),
        ("nodeIP: 10.0.0.1\n", &["nodeIP", "invalid type"]),
        (
            "systemReserved:\n  cpu: -500m\n",
            &["systemReserved.cpu", "\"-500m\"", "must not be negative"],
        ),
        (
            "kubeReserved:\n  memory: lots\n",
            &["kubeReserved.memory", "\"lots\"", "expected a number"],
        ),
        (
            "registerWithTaints: [{key: dedicated, effect: Sometimes}]\n",
            &["registerWithTaints[0].effect", "\"Sometimes\""],
        ),
        (
            "evictionHard:\n  memory.available: -1Gi\n",
            &["evictionHard.memory.available", "\"-1Gi\""],
        ),
        (
            "evictionSoft:\n  nodefs.available: 101%\nevictionSoftGracePeriod:\n  nodefs.available: 1m\n",
            &[
                "evictionSoft.nodefs.available",
                "\"101%\"",
                "must be <= 100%",
            ],
        ),
        (
            "supervision:\n  backoff:\n    jitter: -0.1\n",
            &["supervision.backoff.jitter", "\"-0.1\"", "between 0 and 1"],
        ),
        (
            "supervision:\n  restartWindow: 0s\n",
            &["supervision.restartWindow", "greater than zero"],
        ),
        (
            "supervision:\n  maxRestarts: -1\n",
            &["supervision.maxRestarts", "invalid type", "-1"],
        ),
        (
            "debug:\n  faultInjection:\n    enabled: yes-please\n",
            &["debug.faultInjection.enabled", "invalid type"],
        ),
        (
            "debug:\n  faultInjection:\n    enabled: true\n    token: a-long-enough-token-1\n    tokens: []\n",
            &["debug.faultInjection", "unknown field `tokens`"],
        ),
        ("maxPods: 10\nmaxPods: 20\n", &["duplicate", "maxPods"]),
        ("- just\n- a list\n", &["invalid type"]),
        ("\n# only a comment\n", &["test.yaml", "the file is empty"]),
        ("", &["the file is empty"]),
        ("\u{feff}", &["the file is empty"]),
        (
            "\u{feff}\n# a byte-order mark and a comment\n",
            &["the file is empty"],
        ),
        ("supervision:\n  backoff: {initial: 1s\n", &["test.yaml"]),
        (
            "runtime: simulated\nserverTLSBootstrap: true\n",
            &[
                "serverTLSBootstrap",
                "only a runtime: cri node serves the kubelet API",
            ],
        ),
    ];
    for (yaml, expected) in cases {
        let message = match parse(yaml) {
            Ok(config) => panic!("accepted {yaml:?} as {config:?}"),
            Err(error) => error.to_string(),
        };
        for fragment in *expected {
            assert!(
                message.contains(fragment),
                "the error for {yaml:?} is {message:?}; expected it to mention {fragment:?}"
            );
        }
    }
}

#[test]
fn every_invalid_setting_is_reported_in_the_order_of_the_file() {
    let yaml =
        "maxPods: 0\nsupervision:\n  backoff:\n    jitter: 2\nstandalone:\n  apiAddress: nowhere\n";
    let Err(ConfigError::Invalid { settings, .. }) = parse(yaml) else {
        panic!("{yaml:?} is refused as invalid");
    };
    let fields: Vec<&str> = settings.iter().map(|s| s.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "maxPods",
            "supervision.backoff.jitter",
            "standalone.apiAddress"
        ]
    );
    assert_eq!(settings[1].value, "2");
    assert_eq!(settings[1].reason, "must be between 0 and 1");
}

#[test]
fn a_bad_token_is_never_echoed() {
    let message = parse("debug:\n  faultInjection:\n    enabled: true\n    token: short-secret\n")
        .expect_err("a short token is refused")
        .to_string();
    assert!(!message.contains("short-secret"), "{message}");
}

#[test]
fn an_unreadable_file_names_the_file() {
    let missing = std::env::temp_dir().join("nodepulse-no-such-config.yaml");
    let message = Config::load(&missing)
        .expect_err("missing file")
        .to_string();
    assert!(
        message.contains("nodepulse-no-such-config.yaml") && message.contains("cannot read"),
        "{message}"
    );
}

#[test]
fn command_line_flags_override_the_file() {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    writeln!(file, "nodeName: from-file").expect("write");
    let parse_cli = |arguments: &[&str]| {
        let mut all = vec![
            "nodepulse",
            "--config",
            file.path().to_str().expect("utf-8 path"),
        ];
        all.extend_from_slice(arguments);
        <Cli as clap::Parser>::try_parse_from(all)
            .expect("valid flags")
            .settings()
    };
    assert_eq!(parse_cli(&[]).expect("valid").node_name, "from-file");
    assert_eq!(
        parse_cli(&["--node-name", "from-flag"])
            .expect("valid")
            .node_name,
        "from-flag"
    );
    let refused = parse_cli(&["--node-name", "Not Valid"]).expect_err("invalid name");
    assert!(refused.to_string().contains("--node-name"), "{refused}");
}
