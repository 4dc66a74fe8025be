//! Where the credentials are written, never through a link planted at a file's name: what is
//! at the name is removed first (a link itself, not what it names), then the file is created
//! new (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600), so a link planted in between is refused
//! too. A directory is made (0755) only where it is missing, as the kubelet's `MkdirAll`: an
//! existing one keeps the mode its owner gave it.

use std::{
    fs::{DirBuilder, File, OpenOptions},
    io::{self, Read as _, Write as _},
    os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _},
    path::Path,
};

/// `dir` and its missing parents, each new one 0755 (less the umask); existing ones untouched.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o755).create(dir)
}

/// `path` as a new file of mode 0600 holding `contents`, synced; whatever was at the name is
/// gone, and nothing it linked to was touched.
pub fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// The text of `path`, which must not be a link (`O_NOFOLLOW`: a link is an error, `ELOOP`).
pub fn read_not_through_a_link(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?
        .read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_planted_link_is_replaced_and_what_it_names_is_untouched() {
        let directory = tempfile::tempdir().expect("temp dir");
        let victim = directory.path().join("victim");
        std::fs::write(&victim, "victim").expect("written");
        let path = directory.path().join("key.partial");
        std::os::unix::fs::symlink(&victim, &path).expect("a link");
        write_private(&path, b"secret").expect("written");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "victim");
        let metadata = std::fs::symlink_metadata(&path).expect("there");
        assert!(metadata.file_type().is_file());
        assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
        assert_eq!(read_not_through_a_link(&path).expect("read"), "secret");

        std::fs::remove_file(&path).expect("removed");
        std::os::unix::fs::symlink(&victim, &path).expect("a link");
        let error = read_not_through_a_link(&path).expect_err("a link is not read");
        assert_eq!(error.raw_os_error(), Some(libc::ELOOP));
    }

    #[test]
    fn an_existing_directory_keeps_its_mode() {
        let directory = tempfile::tempdir().expect("temp dir");
        let private = directory.path().join("pki");
        std::fs::create_dir(&private).expect("made");
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("mode");
        create_dir(&private).expect("there already");
        let mode = std::fs::metadata(&private)
            .expect("there")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
