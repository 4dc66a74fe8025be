//! The few mount operations the volume adapters need: a tmpfs with a size, its unmount, telling
//! a tmpfs mount point from a plain directory, and a private mount namespace in which to try a
//! mount without touching the host's mount table (the capability probe and the tests use it).

use std::{
    io,
    os::unix::{ffi::OsStringExt, fs::MetadataExt},
    path::{Path, PathBuf},
};

use rustix::{
    fs::statfs,
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
}
