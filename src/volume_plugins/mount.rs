//! The few mount operations the volume adapters need: a tmpfs with a size, its unmount, telling
//! a tmpfs mount point from a plain directory, and a private mount namespace in which to try a
//! mount without touching the host's mount table (the capability probe and the tests use it).

use std::{
    io,
    os::unix::{ffi::OsStringExt, fs::MetadataExt},
    path::{Path, PathBuf},
};

use rustix::{
    fs::{AtFlags, CWD, FileType, StatxAttributes, StatxFlags, statfs, statx},
    mount::{MountFlags, MountPropagationFlags, UnmountFlags, mount, mount_change, unmount},
};

/// `TMPFS_MAGIC` from `<linux/magic.h>`: what `statfs` reports for a tmpfs.
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Mounts a tmpfs of `size_bytes` (unbounded when `None`: the kernel's half of RAM) on `target`.
/// Asks for `noswap` first, as the kubelet does on kernels that have it (6.4+), and mounts
/// without it where the kernel rejects the option.
pub fn mount_tmpfs(target: &Path, size_bytes: Option<u64>) -> io::Result<()> {
    let mut options: Vec<String> = size_bytes
        .map(|s| format!("size={s}"))
        .into_iter()
        .collect();
    options.push("noswap".to_owned());
    let attempt = |options: &[String]| {
        let data = std::ffi::CString::new(options.join(",")).map_err(io::Error::other)?;
        mount(
            "tmpfs",
            target,
            "tmpfs",
            MountFlags::empty(),
            data.as_c_str(),
        )
        .map_err(io::Error::from)
    };
    match attempt(&options) {
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
            options.pop();
            attempt(&options)
        }
        other => other,
    }
}

/// Detaches the mount on `target`.
pub fn unmount_path(target: &Path) -> io::Result<()> {
    unmount(target, UnmountFlags::empty()).map_err(io::Error::from)
}

/// Whether `path` is the root of a tmpfs mount: another device than its parent, and tmpfs.
/// A directory that merely lives on a tmpfs (say, a `/tmp` on tmpfs) is not one.
pub fn is_tmpfs_mount_point(path: &Path) -> io::Result<bool> {
    let Some(parent) = path.parent() else {
        return Ok(false);
    };
    let own = std::fs::symlink_metadata(path)?;
    let parent = std::fs::metadata(parent)?;
    if own.dev() == parent.dev() {
        return Ok(false);
    }
    let fs = statfs(path).map_err(io::Error::from)?;
    #[allow(clippy::unnecessary_cast)] // `f_type`'s width differs between architectures
    Ok(fs.f_type as i64 == TMPFS_MAGIC)
}

/// Runs `f` on a fresh thread moved into a private mount namespace (with private propagation,
/// so nothing it mounts reaches the host). Mounts made there vanish when the thread ends.
/// Fails with the reason when the process may not create one (no `CAP_SYS_ADMIN`).
pub fn in_private_mount_namespace<T: Send>(f: impl FnOnce() -> T + Send) -> io::Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // `unshare` is deprecated only because `CLONE_FILES` can split fd tables between
                // threads; `CLONE_NEWNS` on a thread of our own shares nothing of the sort.
                #[allow(deprecated)]
                rustix::thread::unshare(rustix::thread::UnshareFlags::NEWNS)
                    .map_err(io::Error::from)?;
                mount_change(
                    "/",
                    MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
                )
                .map_err(io::Error::from)?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Detaches every mount at or below `dir` (deepest first), for whoever removes a whole
/// `rootDir` on purpose — a test or a benchmark when it ends: nodepulse itself, like the
/// kubelet, leaves the mounts of running pods in place when it stops. Returns how many.
pub fn detach_all_below(dir: &Path) -> io::Result<usize> {
    let points = mount_points_below(dir)?;
    for point in &points {
        unmount(point, UnmountFlags::DETACH).map_err(io::Error::from)?;
    }
    Ok(points.len())
}

/// The mount points at or below `dir` in this thread's mount table, deepest first. Unlike
/// [`is_likely_mount_point`], it sees bind mounts from the same filesystem too.
pub fn mount_points_below(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let table = std::fs::read_to_string("/proc/thread-self/mountinfo")?;
    let mut points: Vec<PathBuf> = table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape_mount_point)
        .filter(|point| point.starts_with(dir))
        .collect();
    points.sort_by_key(|point| std::cmp::Reverse(point.as_os_str().len()));
    points.dedup();
    Ok(points)
}

/// The mount points at or below `dir` that a walk of it reaches (not through a link, and not
/// into a mount it found): each entry is asked by `statx` whether it is a mount's root
/// (`STATX_ATTR_MOUNT_ROOT`, Linux 5.8: a bind mount from the same filesystem included) or on
/// another device. A pod directory holds a few dozen entries, where the mount table a node
/// with 10,000 pods reads holds 10,000 lines, generated by the kernel on every read: deleting
/// those pods read it once each. Where the kernel does not report the attribute, it is
/// [`mount_points_below`]'s reading of the table. Deepest first, as that one.
pub fn mount_points_within(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let Some(top) = walked(dir)? else {
        return mount_points_below(dir);
    };
    let mut points = Vec::new();
    if top.mount_root {
        points.push(dir.to_path_buf());
        return Ok(points);
    }
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = match std::fs::read_dir(&current) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let path = entry?.path();
            let found = match walked(&path) {
                Ok(Some(found)) => found,
                Ok(None) => return mount_points_below(dir),
                // Gone since the directory was read: not a mount point.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if found.mount_root || found.device != top.device {
                points.push(path);
            } else if found.directory {
                pending.push(path);
            }
        }
    }
    points.sort_by_key(|point| std::cmp::Reverse(point.as_os_str().len()));
    Ok(points)
}

/// Whether `path` (not followed if a link) is a mount's root, a bind mount from the same
/// filesystem included: `statx`'s attribute, or the mount table where the kernel lacks it.
pub fn is_mount_point(path: &Path) -> io::Result<bool> {
    match walked(path)? {
        Some(found) => Ok(found.mount_root),
        None => Ok(mount_count(path)? > 0),
    }
}

/// What [`mount_points_within`] needs of one entry, `None` where the kernel cannot tell a
/// mount's root.
struct Walked {
    mount_root: bool,
    device: (u32, u32),
    directory: bool,
}

fn walked(path: &Path) -> io::Result<Option<Walked>> {
    let found = match statx(CWD, path, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::TYPE) {
        Ok(found) => found,
        Err(rustix::io::Errno::NOSYS) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if !found
        .stx_attributes_mask
        .contains(StatxAttributes::MOUNT_ROOT)
    {
        return Ok(None);
    }
    Ok(Some(Walked {
        mount_root: found.stx_attributes.contains(StatxAttributes::MOUNT_ROOT),
        device: (found.stx_dev_major, found.stx_dev_minor),
        directory: FileType::from_raw_mode(found.stx_mode.into()) == FileType::Directory,
    }))
}

/// A mount point as mountinfo writes it: space, tab, newline and backslash as `\ooo` octal.
fn unescape_mount_point(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|digits| bytes[i] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)));
        match octal.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Mounts of this thread's namespace whose mount point is `path` (from
/// `/proc/thread-self/mountinfo`), to prove a setup did not stack a second mount.
pub fn mount_count(path: &Path) -> io::Result<usize> {
    let table = std::fs::read_to_string("/proc/thread-self/mountinfo")?;
    let wanted = path.to_string_lossy();
    Ok(table
        .lines()
        .filter(|line| line.split(' ').nth(4) == Some(wanted.as_ref()))
        .count())
}

/// The kubelet's `IsLikelyNotMountPoint`, inverted: `path` is on another device than its
/// parent. Misses bind mounts from the same filesystem, as the kubelet's check does.
pub fn is_likely_mount_point(path: &Path) -> io::Result<bool> {
    let Some(parent) = path.parent() else {
        return Ok(true);
    };
    let own = std::fs::symlink_metadata(path)?;
    let parent = std::fs::metadata(parent)?;
    Ok(own.dev() != parent.dev())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_point_with_spaces_is_read_back_from_its_octal_escapes() {
        assert_eq!(
            unescape_mount_point(r"/var/lib/my\040pods\011x\134y"),
            PathBuf::from("/var/lib/my pods\tx\\y")
        );
        assert_eq!(unescape_mount_point(r"/a\9b\"), PathBuf::from(r"/a\9b\"));
    }

    /// The walk finds what the mount table shows below a directory: a tmpfs, a bind mount from
    /// the same filesystem (same device: only its root attribute tells), a mount on a file, and
    /// the directory itself once something is mounted on it; nothing below a plain tree.
    #[test]
    fn the_walk_finds_the_mount_points_the_mount_table_shows() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("pod");
        for sub in ["volumes/tmpfs/cache", "containers/app", "plain/deep"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        std::fs::write(dir.join("etc-hosts"), b"").unwrap();
        std::fs::write(root.path().join("hosts"), b"").unwrap();
        let theirs = root.path().join("theirs");
        std::fs::create_dir_all(&theirs).unwrap();
        assert_eq!(mount_points_within(&dir).unwrap(), Vec::<PathBuf>::new());
        let outcome = in_private_mount_namespace(|| {
            mount_tmpfs(&dir.join("volumes/tmpfs/cache"), Some(4096)).unwrap();
            rustix::mount::mount_bind(&theirs, dir.join("containers/app")).unwrap();
            rustix::mount::mount_bind(root.path().join("hosts"), dir.join("etc-hosts")).unwrap();
            let walked = mount_points_within(&dir).unwrap();
            let table = mount_points_below(&dir).unwrap();
            rustix::mount::mount_bind(&theirs, &dir).unwrap();
            let whole = mount_points_within(&dir).unwrap();
            (walked, table, whole)
        });
        match outcome {
            Ok((mut walked, mut table, whole)) => {
                let mut expected = vec![
                    dir.join("volumes/tmpfs/cache"),
                    dir.join("containers/app"),
                    dir.join("etc-hosts"),
                ];
                expected.sort_by_key(|point| std::cmp::Reverse(point.as_os_str().len()));
                assert_eq!(walked, expected);
                walked.sort();
                table.sort();
                assert_eq!(walked, table, "the walk and the mount table disagree");
                assert_eq!(whole, vec![dir.clone()]);
            }
            // No private mount namespace on this host: nothing can be mounted, nothing to prove.
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}"),
        }
    }
}
