use std::{
    fs,
    os::unix::{fs::PermissionsExt, net::UnixListener},
    path::Path,
};

use super::*;

/// A tempdir with one entry of each kind nodepulse can make without privileges.
struct Host {
    dir: tempfile::TempDir,
    _socket: UnixListener,
}

impl Host {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("dir")).unwrap();
        fs::write(dir.path().join("file"), b"x").unwrap();
        std::os::unix::fs::symlink("dir", dir.path().join("link-to-dir")).unwrap();
        let socket = UnixListener::bind(dir.path().join("sock")).unwrap();
        Self {
            dir,
            _socket: socket,
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

fn message(path: &str, path_type: &str) -> Result<(), String> {
    set_up(path, Some(path_type)).map_err(|e| e.to_string())
}

#[test]
fn each_type_accepts_its_kind_and_rejects_others_with_the_kubelets_text() {
    let host = Host::new();
    let (dir, file, sock) = (host.path("dir"), host.path("file"), host.path("sock"));
    let missing = host.path("missing");
    let link = host.path("link-to-dir");
    let table: Vec<(&str, &str, Result<(), String>)> = vec![
        ("", &missing, Ok(())),
        ("Directory", &dir, Ok(())),
        ("Directory", &link, Ok(())),
        (
            "Directory",
            &file,
            Err(format!(
                "hostPath type check failed: {file} is not a directory"
            )),
        ),
        (
            "Directory",
            &missing,
            Err(format!(
                "hostPath type check failed: {missing} is not a directory"
            )),
        ),
        ("File", &file, Ok(())),
        (
            "File",
            &dir,
            Err(format!("hostPath type check failed: {dir} is not a file")),
        ),
        ("Socket", &sock, Ok(())),
        (
            "Socket",
            &file,
            Err(format!(
                "hostPath type check failed: {file} is not a socket file"
            )),
        ),
        ("CharDevice", "/dev/null", Ok(())),
        (
            "CharDevice",
            &file,
            Err(format!(
                "hostPath type check failed: {file} is not a character device"
            )),
        ),
        (
            "BlockDevice",
            "/dev/null",
            Err("hostPath type check failed: /dev/null is not a block device".into()),
        ),
        (
            "DirectoryOrCreate",
            &file,
            Err(format!(
                "hostPath type check failed: {file} is not a directory"
            )),
        ),
        (
            "FileOrCreate",
            &dir,
            Err(format!("hostPath type check failed: {dir} is not a file")),
        ),
        (
            "Sideways",
            &dir,
            Err("Sideways is an invalid volume type".into()),
        ),
    ];
    for (path_type, path, want) in table {
        assert_eq!(message(path, path_type), want, "{path_type} {path}");
    }
}

#[test]
fn a_path_with_dot_dot_is_refused_before_any_check() {
    let err = set_up("/var/../etc", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid HostPath `/var/../etc`: must not contain '..'"
    );
}

#[test]
fn directory_or_create_makes_the_whole_path_0755() {
    let host = Host::new();
    let path = host.path("a/b/c");
    set_up(&path, Some("DirectoryOrCreate")).unwrap();
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    // 0755 before the umask, like the kubelet's MkdirAll.
    assert_eq!(mode & !0o755, 0, "{mode:o}");
    assert!(Path::new(&path).is_dir());
    set_up(&path, Some("DirectoryOrCreate")).unwrap();
}

#[test]
fn file_or_create_makes_an_empty_file_but_not_its_parent_and_keeps_content() {
    let host = Host::new();
    let path = host.path("new-file");
    set_up(&path, Some("FileOrCreate")).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"");
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & !0o644, 0, "{mode:o}");

    set_up(&host.path("file"), Some("FileOrCreate")).unwrap();
    assert_eq!(fs::read(host.path("file")).unwrap(), b"x");

    let orphan = host.path("no-parent/file");
    let err = set_up(&orphan, Some("FileOrCreate")).unwrap_err();
    assert!(matches!(err, HostPathError::Create { .. }), "{err}");
    assert!(!Path::new(&host.path("no-parent")).exists());
}
