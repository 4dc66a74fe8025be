use std::{
    os::unix::fs::{PermissionsExt, symlink},
    sync::atomic::{AtomicBool, Ordering},
};

use super::*;

#[test]
fn a_missing_sub_path_is_made_with_the_volumes_mode_setgid_and_sticky_included() {
    let volume = tempfile::tempdir().unwrap();
    fs::set_permissions(volume.path(), fs::Permissions::from_mode(0o3777)).unwrap();
    fs::create_dir(volume.path().join("a")).unwrap();
    let before = fs::metadata(volume.path().join("a")).unwrap().mode();
    make_missing_dirs(volume.path(), "a/b/c").unwrap();
    for dir in ["a/b", "a/b/c"] {
        let mode = fs::metadata(volume.path().join(dir)).unwrap().mode();
        assert_eq!(mode & 0o7777, 0o3777, "{dir}: {mode:o}");
    }
    // Present already: left as it is.
    make_missing_dirs(volume.path(), "a").unwrap();
    assert_eq!(
        fs::metadata(volume.path().join("a")).unwrap().mode(),
        before
    );
}

#[test]
fn nothing_is_made_outside_the_volume_through_a_link() {
    let volume = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), volume.path().join("out")).unwrap();
    let error = make_missing_dirs(volume.path(), "out/deeper").unwrap_err();
    assert!(matches!(error, SubPathFsError::Outside { .. }), "{error}");
    assert!(!outside.path().join("deeper").exists());
    // A link inside the volume is fine to make below.
    fs::create_dir(volume.path().join("real")).unwrap();
    symlink("real", volume.path().join("in")).unwrap();
    make_missing_dirs(volume.path(), "in/deeper").unwrap();
    assert!(volume.path().join("real/deeper").is_dir());
}

#[test]
fn every_component_is_opened_as_itself_and_a_link_is_refused_even_to_inside() {
    let volume = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(volume.path()).unwrap();
    fs::create_dir_all(base.join("a/b")).unwrap();
    symlink(base.join("a"), base.join("link")).unwrap();
    let opened = open_within(&base, &base.join("a/b")).unwrap();
    let inode = fs::metadata(base.join("a/b")).unwrap().ino();
    assert_eq!(fstat(&opened).unwrap().st_ino, inode);
    let error = open_within(&base, &base.join("link/b")).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("unexpected symlink found {}", base.join("link").display())
    );
    let error = open_within(&base, Path::new("/etc")).unwrap_err();
    assert!(matches!(error, SubPathFsError::Outside { .. }), "{error}");
}

/// A thread swaps `dir` between a real directory and a link out of the volume as fast as it
/// can while `dir` is opened again and again: every open either fails or holds the real one.
#[test]
fn a_component_swapped_for_a_link_while_opening_never_yields_what_is_outside() {
    let volume = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(volume.path()).unwrap();
    fs::create_dir(base.join("dir")).unwrap();
    let inside = fs::metadata(base.join("dir")).unwrap().ino();
    symlink(outside.path(), base.join("escape")).unwrap();
    let stop = AtomicBool::new(false);
    let (mut opened, mut refused, mut escaped) = (0, 0, 0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                // dir ⇄ escape: the directory and the link trade names, never missing.
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    base.join("dir"),
                    rustix::fs::CWD,
                    base.join("escape"),
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
            }
        });
        for _ in 0..2000 {
            match open_within(&base, &base.join("dir")) {
                Ok(fd) if fstat(&fd).is_ok_and(|stat| stat.st_ino == inside) => opened += 1,
                Ok(_) => escaped += 1,
                Err(_) => refused += 1,
            }
        }
        // Before any assertion: the swapper must end for the scope to.
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(escaped, 0, "opened what is outside");
    assert!(
        opened > 0 && refused > 0,
        "no race ran: {opened} opened, {refused} refused"
    );
}
