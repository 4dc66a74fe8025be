use std::{
    fs,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use super::*;

fn file(data: &str, mode: u32) -> FileProjection {
    FileProjection {
        data: data.as_bytes().to_vec(),
        mode,
        fs_user: None,
    }
}

fn payload(files: &[(&str, &str, u32)]) -> Payload {
    files
        .iter()
        .map(|(path, data, mode)| ((*path).to_owned(), file(data, *mode)))
        .collect()
}

fn link(path: &Path) -> String {
    fs::read_link(path).unwrap().to_string_lossy().into_owned()
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Names directly in the target directory, hidden ones included.
fn entries(dir: &Path) -> Vec<String> {
    // Sorted bytewise: `..2…` before `..data` before visible names.
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn first_write_builds_the_kubelets_layout() {
    let dir = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(dir.path()).unwrap();
    let outcome = writer
        .write(&payload(&[
            ("app.conf", "a=1\n", 0o644),
            ("keys/tls.key", "secret", 0o400),
        ]))
        .unwrap();
    let WriteOutcome::Written { data_dir } = outcome else {
        panic!("first write must write: {outcome:?}");
    };
    // `..2026_12_01_04_35_18.3954087152`
    let (stamp, suffix) = data_dir.trim_start_matches("..").split_once('.').unwrap();
    assert_eq!(stamp.len(), "2006_01_02_15_04_05".len(), "{data_dir}");
    assert!(suffix.chars().all(|c| c.is_ascii_digit()), "{data_dir}");
    assert_eq!(mode(&dir.path().join(&data_dir)), 0o755);

    let root = dir.path();
    assert_eq!(link(&root.join("..data")), data_dir);
    assert_eq!(link(&root.join("app.conf")), "..data/app.conf");
    assert_eq!(link(&root.join("keys")), "..data/keys");
    assert_eq!(fs::read(root.join("app.conf")).unwrap(), b"a=1\n");
    assert_eq!(fs::read(root.join("keys/tls.key")).unwrap(), b"secret");
    assert_eq!(mode(&root.join("app.conf")), 0o644);
    assert_eq!(mode(&root.join("keys/tls.key")), 0o400);
    assert_eq!(entries(root), [&data_dir, "..data", "app.conf", "keys"]);
}

#[test]
fn an_identical_payload_writes_nothing_but_restores_a_missing_link() {
    let dir = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(dir.path()).unwrap();
    let files = payload(&[("a", "1", 0o644), ("b", "2", 0o644)]);
    writer.write(&files).unwrap();
    let before = link(&dir.path().join("..data"));
    fs::remove_file(dir.path().join("b")).unwrap();

    assert_eq!(writer.write(&files).unwrap(), WriteOutcome::Unchanged);
    assert_eq!(link(&dir.path().join("..data")), before);
    assert_eq!(link(&dir.path().join("b")), "..data/b");
}

#[test]
fn an_update_swaps_the_data_dir_and_removes_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(dir.path()).unwrap();
    writer.write(&payload(&[("a", "1", 0o644)])).unwrap();
    let old = link(&dir.path().join("..data"));

    let outcome = writer.write(&payload(&[("a", "2", 0o600)])).unwrap();
    let WriteOutcome::Written { data_dir } = outcome else {
        panic!("changed bytes must be written");
    };
    assert_ne!(data_dir, old);
    assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"2");
    assert_eq!(mode(&dir.path().join("a")), 0o600);
    assert_eq!(entries(dir.path()), [&data_dir, "..data", "a"]);
}

#[test]
fn a_shrunk_payload_removes_the_names_that_vanished() {
    let dir = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(dir.path()).unwrap();
    writer
        .write(&payload(&[
            ("keep", "k", 0o644),
            ("gone", "g", 0o644),
            ("sub/x", "x", 0o644),
        ]))
        .unwrap();
    let outcome = writer.write(&payload(&[("keep", "k", 0o644)])).unwrap();
    let WriteOutcome::Written { data_dir } = outcome else {
        panic!("a removal must be written even with unchanged bytes");
    };
    assert_eq!(entries(dir.path()), [&data_dir, "..data", "keep"]);
    assert_eq!(fs::read(dir.path().join("keep")).unwrap(), b"k");
}

#[test]
fn modes_are_exact_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(dir.path()).unwrap();
    // 0666/0777 would lose group and other write bits to a 022 umask if not chmodded.
    writer
        .write(&payload(&[("rw", "x", 0o666), ("rwx", "y", 0o777)]))
        .unwrap();
    assert_eq!(mode(&dir.path().join("rw")), 0o666);
    assert_eq!(mode(&dir.path().join("rwx")), 0o777);
}

#[test]
fn fs_user_owns_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(dir.path()).unwrap();
    // Root may give the file away; anyone else may only name themselves.
    let own_uid = fs::metadata(dir.path()).unwrap().uid();
    let owner = if own_uid == 0 { 4242 } else { own_uid };
    let mut files = payload(&[("token", "t", 0o600)]);
    files.get_mut("token").unwrap().fs_user = Some(owner);
    writer.write(&files).unwrap();
    assert_eq!(fs::metadata(dir.path().join("token")).unwrap().uid(), owner);
}

#[test]
fn invalid_paths_fail_with_the_kubelets_texts_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(dir.path()).unwrap();
    let long_name = "n".repeat(256);
    let long_path = "d/".repeat(2049);
    let table = [
        ("", "invalid path: must not be empty: \"\""),
        (
            "/etc/passwd",
            "invalid path: must be relative path: /etc/passwd",
        ),
        ("a/../b", "invalid path: must not contain '..': a/../b"),
        ("..data", "invalid path: must not start with '..': ..data"),
        (
            long_name.as_str(),
            "invalid path: filenames must be less than or equal to 255 characters",
        ),
        (
            long_path.as_str(),
            "invalid path: must be less than or equal to 4096 characters",
        ),
    ];
    for (path, message) in table {
        let err = writer.write(&payload(&[(path, "x", 0o644)])).unwrap_err();
        assert_eq!(err.to_string(), message);
        assert!(!err.is_retryable());
    }
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn paths_are_cleaned_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(dir.path()).unwrap();
    writer.write(&payload(&[("./a//b/", "x", 0o644)])).unwrap();
    assert_eq!(fs::read(dir.path().join("a/b")).unwrap(), b"x");
}

#[test]
fn a_missing_target_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = AtomicWriter::new(dir.path().join("absent")).unwrap_err();
    assert!(err.is_retryable(), "{err}");
}

/// A reader resolving `..data` once sees one complete set; a reader of a visible name sees one
/// complete version of that file.
#[test]
fn a_reader_never_sees_a_half_written_set() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let writer = AtomicWriter::new(&root).unwrap();
    let version = |n: usize| {
        let body = format!("{n}:").repeat(1000);
        payload(&[("a", &body, 0o644), ("b", &body, 0o644)])
    };
    writer.write(&version(0)).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let consistent_reads = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (root, done, consistent_reads) = (root.clone(), done.clone(), consistent_reads.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let data_dir = root.join(link(&root.join("..data")));
                // The old directory may be removed under us: that is a retry, not a mix.
                if let (Ok(a), Ok(b)) = (
                    fs::read_to_string(data_dir.join("a")),
                    fs::read_to_string(data_dir.join("b")),
                ) {
                    assert_eq!(a, b, "one data dir, two versions");
                    consistent_reads.fetch_add(1, Ordering::Relaxed);
                }
                // Resolving `a` may pass through the old directory just as it is removed.
                let Ok(visible) = fs::read_to_string(root.join("a")) else {
                    continue;
                };
                let n = visible.split(':').next().unwrap();
                assert_eq!(visible, format!("{n}:").repeat(1000), "a torn file");
            }
        })
    };
    // Keep writing until the reader has overlapped many writes, however the threads are
    // scheduled.
    let mut n = 0;
    while n < 200 || (consistent_reads.load(Ordering::Relaxed) < 50 && !reader.is_finished()) {
        n += 1;
        writer.write(&version(n)).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    reader
        .join()
        .expect("the reader saw a torn file or a mixed set");
    assert_eq!(
        fs::read_to_string(root.join("b")).unwrap(),
        format!("{n}:").repeat(1000)
    );
}

#[test]
fn a_data_dir_left_unlinked_by_a_killed_writer_is_removed_at_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(dir.path()).unwrap();
    let files = payload(&[("key", "value", 0o644)]);
    writer.write(&files).unwrap();
    // As a process killed after making its new directory, before linking it.
    let stray = dir.path().join("..2026_12_01_09_00_00.123456789");
    fs::create_dir(&stray).unwrap();
    fs::write(stray.join("key"), "half").unwrap();

    assert_eq!(writer.write(&files).unwrap(), WriteOutcome::Unchanged);
    assert!(!stray.exists(), "the unlinked directory is gone");
    let data = dir.path().join(link(&dir.path().join("..data")));
    assert_eq!(fs::read_to_string(data.join("key")).unwrap(), "value");
    let kept: Vec<String> = entries(dir.path())
        .into_iter()
        .filter(|name| name.starts_with("..2"))
        .collect();
    assert_eq!(kept.len(), 1, "only the linked data directory: {kept:?}");
}

#[test]
fn a_data_link_leading_out_of_the_volume_is_refused_and_its_target_left_alone() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("a"), "the host's file").unwrap();
    for target in [
        outside.path().to_path_buf(),
        Path::new("../").join(outside.path().file_name().unwrap()),
        "..data".into(),
    ] {
        let volume = tempfile::tempdir_in(outside.path().parent().unwrap()).unwrap();
        symlink(&target, volume.path().join(DATA_DIR_NAME)).unwrap();
        let writer = AtomicWriter::new(volume.path()).unwrap();
        let refused = writer
            .write(&payload(&[("a", "new", 0o644)]))
            .expect_err("a foreign ..data is refused");
        assert!(
            matches!(refused, AtomicWriteError::ForeignDataLink { .. }),
            "{target:?}: {refused}"
        );
        assert!(!refused.is_retryable());
        assert_eq!(
            fs::read_to_string(outside.path().join("a")).unwrap(),
            "the host's file",
            "{target:?}"
        );
        assert_eq!(entries(volume.path()), [DATA_DIR_NAME], "{target:?}");
    }
}

#[test]
fn a_data_dir_swapped_for_a_link_is_refused_and_its_target_left_alone() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("a"), "the host's file").unwrap();
    let volume = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(volume.path()).unwrap();
    let WriteOutcome::Written { data_dir } = writer.write(&payload(&[("a", "1", 0o644)])).unwrap()
    else {
        panic!("first write writes");
    };
    fs::remove_dir_all(volume.path().join(&data_dir)).unwrap();
    symlink(outside.path(), volume.path().join(&data_dir)).unwrap();
    let refused = writer
        .write(&payload(&[("b", "2", 0o644)]))
        .expect_err("a data dir that is a link is refused");
    assert!(
        matches!(refused, AtomicWriteError::ForeignDataLink { .. }),
        "{refused}"
    );
    assert_eq!(
        fs::read_to_string(outside.path().join("a")).unwrap(),
        "the host's file"
    );
}

#[test]
fn an_old_file_replaced_by_a_link_is_not_read_through_but_rewritten() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("same"), "1").unwrap();
    let volume = tempfile::tempdir().unwrap();
    let writer = AtomicWriter::new(volume.path()).unwrap();
    writer.write(&payload(&[("a", "1", 0o644)])).unwrap();
    let old = volume.path().join(DATA_DIR_NAME).join("a");
    fs::remove_file(&old).unwrap();
    symlink(outside.path().join("same"), &old).unwrap();
    let outcome = writer.write(&payload(&[("a", "1", 0o644)])).unwrap();
    assert!(
        matches!(outcome, WriteOutcome::Written { .. }),
        "{outcome:?}"
    );
    let new = volume.path().join(DATA_DIR_NAME).join("a");
    assert!(fs::symlink_metadata(&new).unwrap().is_file());
    assert_eq!(
        fs::read_to_string(outside.path().join("same")).unwrap(),
        "1"
    );
}

#[test]
fn a_new_file_is_never_written_through_a_link_or_over_a_file() {
    let outside = tempfile::tempdir().unwrap();
    let precious = outside.path().join("precious");
    fs::write(&precious, "the host's file").unwrap();
    fs::set_permissions(&precious, fs::Permissions::from_mode(0o600)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let planted = dir.path().join("token");
    symlink(&precious, &planted).unwrap();
    let error = write_new_file(&planted, &file("stolen", 0o644)).expect_err("refused");
    assert!(error.is_retryable(), "{error}");
    assert_eq!(fs::read_to_string(&precious).unwrap(), "the host's file");
    assert_eq!(mode(&precious), 0o600, "the link's target keeps its mode");
    let existing = dir.path().join("existing");
    fs::write(&existing, "kept").unwrap();
    write_new_file(&existing, &file("replaced", 0o600)).expect_err("refused");
    assert_eq!(fs::read_to_string(&existing).unwrap(), "kept");
}
