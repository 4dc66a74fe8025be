use std::{path::Path, sync::Mutex};

use super::*;

fn container(mounts: serde_json::Value) -> Container {
    serde_json::from_value(serde_json::json!({"name": "app", "volumeMounts": mounts}))
        .expect("a container")
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// Records what it is asked and binds to `/bound/<index>`, or refuses (`refuse_bind`).
#[derive(Default)]
struct RecordingHost {
    asked: Mutex<Vec<(String, String, usize)>>,
    refuse_bind: bool,
}

impl SubPathHost for RecordingHost {
    fn make_missing_dirs(&self, _: &SubPathMount<'_>) -> Result<(), SubPathHostError> {
        Ok(())
    }
    fn bind(&self, mount: &SubPathMount<'_>) -> Result<PathBuf, SubPathHostError> {
        if self.refuse_bind {
            return Err(SubPathHostError(
                "/host/secret is outside the volume".into(),
            ));
        }
        self.asked.lock().unwrap().push((
            mount.volume_path.display().to_string(),
            mount.sub_path.to_owned(),
            mount.mount_index,
        ));
        Ok(PathBuf::from(format!("/bound/{}", mount.mount_index)))
    }
}

fn mount(json: serde_json::Value) -> VolumeMount {
    serde_json::from_value(json).expect("a volume mount")
}

#[test]
fn sub_path_expr_expands_the_containers_variables_and_reports_every_missing_one() {
    let variables = env(&[("POD_NAME", "foo"), ("ANNOTATION", "mypath"), ("EMPTY", "")]);
    let cases = [
        ("$(ANNOTATION)/$(POD_NAME)", Ok("mypath/foo")),
        ("logs/$$(POD_NAME)", Ok("logs/$(POD_NAME)")),
        (
            "$(NOPE)/$(EMPTY)/$(ALSO_NOPE)",
            Err("missing value for ALSO_NOPE, EMPTY, NOPE"),
        ),
        ("$(EMPTY)", Err("missing value for EMPTY")),
    ];
    for (expr, expected) in cases {
        let mount = mount(serde_json::json!({"name": "v", "mountPath": "/m", "subPathExpr": expr}));
        let got = sub_path_of(&mount, &variables).map_err(|e| e.to_string());
        assert_eq!(
            got.as_ref().map(|sub| sub.as_deref().unwrap_or_default()),
            expected.map_err(str::to_owned).as_ref().map(|s| *s),
            "{expr}"
        );
    }
}

#[test]
fn absolute_paths_and_backsteps_are_refused_with_the_kubelets_texts_whatever_their_source() {
    let variables = env(&[("ABSOLUTE", "/tmp"), ("UP", "..")]);
    let cases = [
        (
            serde_json::json!({"subPath": "/etc"}),
            "error SubPath `/etc` must not be an absolute path",
        ),
        (
            serde_json::json!({"subPathExpr": "$(ABSOLUTE)"}),
            "error SubPath `/tmp` must not be an absolute path",
        ),
        (
            serde_json::json!({"subPathExpr": "$(UP)"}),
            "unable to provision SubPath `..`: must not contain '..'",
        ),
        (
            serde_json::json!({"subPath": "a/../../etc"}),
            "unable to provision SubPath `a/../../etc`: must not contain '..'",
        ),
    ];
    for (fields, expected) in cases {
        let mut json = serde_json::json!({"name": "v", "mountPath": "/m"});
        json.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        let error = sub_path_of(&mount(json), &variables).expect_err(expected);
        assert_eq!(error.to_string(), expected);
    }
    // A name merely starting with dots is a name.
    let dots = mount(serde_json::json!({"name": "v", "mountPath": "/m", "subPath": "...a/b"}));
    assert_eq!(sub_path_of(&dots, &[]).unwrap().as_deref(), Some("...a/b"));
}

#[test]
fn each_mount_gets_its_volume_or_the_bind_of_its_sub_path_never_the_joined_path() {
    let app = container(serde_json::json!([
        {"name": "data", "mountPath": "/whole"},
        {"name": "data", "mountPath": "/logs", "subPathExpr": "logs/$(POD_NAME)"},
        {"name": "absent", "mountPath": "/absent", "subPath": "x"},
        {"name": "data", "mountPath": "/cache", "subPath": "cache"},
    ]));
    let host_paths = BTreeMap::from([("data".to_owned(), PathBuf::from("/vol/data"))]);
    let host = RecordingHost::default();
    let sources = mount_sources(
        Some(&host),
        "u1",
        &app,
        &host_paths,
        &BTreeMap::new(),
        &env(&[("POD_NAME", "p")]),
    )
    .expect("prepared");
    assert_eq!(
        sources,
        BTreeMap::from([
            (0, MountSource::Host("/vol/data".into())),
            (1, MountSource::Host("/bound/1".into())),
            (3, MountSource::Host("/bound/3".into())),
        ])
    );
    assert_eq!(
        *host.asked.lock().unwrap(),
        [
            ("/vol/data".to_owned(), "logs/p".to_owned(), 1),
            ("/vol/data".to_owned(), "cache".to_owned(), 3),
        ]
    );
}

#[test]
fn a_refused_bind_or_a_node_without_a_sub_path_host_fails_without_the_hosts_paths() {
    let app =
        container(serde_json::json!([{"name": "data", "mountPath": "/m", "subPath": "link"}]));
    let host_paths = BTreeMap::from([("data".to_owned(), Path::new("/vol/data").to_owned())]);
    let refusing = RecordingHost {
        refuse_bind: true,
        ..RecordingHost::default()
    };
    let expected = "failed to prepare subPath for volumeMount \"data\" of container \"app\"";
    for host in [Some(&refusing as &dyn SubPathHost), None] {
        let error = mount_sources(host, "u1", &app, &host_paths, &BTreeMap::new(), &[])
            .expect_err("refused");
        assert_eq!(error.to_string(), expected);
    }
}

#[test]
fn an_image_volumes_sub_path_is_expanded_and_checked_for_its_form_then_left_to_the_runtime() {
    let app = container(serde_json::json!([
        {"name": "kitten", "mountPath": "/whole"},
        {"name": "kitten", "mountPath": "/etc", "subPath": "etc/app"},
        {"name": "kitten", "mountPath": "/mine", "subPathExpr": "home/$(POD_NAME)"},
        {"name": "data", "mountPath": "/data", "subPath": "cache"},
    ]));
    let host_paths = BTreeMap::from([("data".to_owned(), PathBuf::from("/vol/data"))]);
    let kitten = ImageMount {
        image: "sha256:cafe".to_owned(),
        user_specified_image: "r/kitten:1".to_owned(),
        ..ImageMount::default()
    };
    let images = BTreeMap::from([("kitten".to_owned(), kitten.clone())]);
    let in_image = |sub_path: &str| {
        MountSource::Image(ImageMount {
            sub_path: sub_path.to_owned(),
            ..kitten.clone()
        })
    };
    let host = RecordingHost::default();
    let variables = env(&[("POD_NAME", "p")]);
    let sources =
        mount_sources(Some(&host), "u1", &app, &host_paths, &images, &variables).expect("prepared");
    assert_eq!(
        sources,
        BTreeMap::from([
            (0, in_image("")),
            (1, in_image("etc/app")),
            (2, in_image("home/p")),
            (3, MountSource::Host("/bound/3".into())),
        ])
    );
    // Only the host volume's subPath is bound: the image's is the runtime's to resolve.
    assert_eq!(
        *host.asked.lock().unwrap(),
        [("/vol/data".to_owned(), "cache".to_owned(), 3)]
    );
    for (sub, expected) in [
        (
            "../etc",
            "unable to provision SubPath `../etc`: must not contain '..'",
        ),
        ("/etc", "error SubPath `/etc` must not be an absolute path"),
    ] {
        let app =
            container(serde_json::json!([{"name": "kitten", "mountPath": "/m", "subPath": sub}]));
        let error = mount_sources(None, "u1", &app, &host_paths, &images, &[]).expect_err(sub);
        assert_eq!(error.to_string(), expected);
    }
}
