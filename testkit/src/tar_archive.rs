//! A minimal ustar writer for the test images: directories, regular files and symlinks, owned
//! by root, with a fixed mtime so the same content always gives the same digest. Enough for an
//! OCI layer and an OCI layout archive; nothing here reads archives.

/// Builds an uncompressed tar archive in memory.
#[derive(Default)]
pub struct TarArchive {
    bytes: Vec<u8>,
}

const BLOCK: usize = 512;

impl TarArchive {
    pub fn directory(&mut self, path: &str) -> &mut Self {
        self.entry(path, 0o755, b'5', "", &[])
    }

    pub fn file(&mut self, path: &str, mode: u32, content: &[u8]) -> &mut Self {
        self.entry(path, mode, b'0', "", content)
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> &mut Self {
        self.entry(path, 0o777, b'2', target, &[])
    }

    /// The archive, ended by the two zero blocks tar requires.
    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.resize(self.bytes.len() + 2 * BLOCK, 0);
        self.bytes
    }

    fn entry(
        &mut self,
        path: &str,
        mode: u32,
        kind: u8,
        link_target: &str,
        content: &[u8],
    ) -> &mut Self {
        assert!(
            path.len() < 100,
            "ustar names here stay under 100 bytes: {path}"
        );
        assert!(
            link_target.len() < 100,
            "link target too long: {link_target}"
        );
        let mut header = [0u8; BLOCK];
        header[..path.len()].copy_from_slice(path.as_bytes());
        octal(&mut header[100..108], u64::from(mode));
        octal(&mut header[108..116], 0); // uid
        octal(&mut header[116..124], 0); // gid
        octal(&mut header[124..136], content.len() as u64);
        octal(&mut header[136..148], 1_700_000_000); // mtime, fixed
        header[156] = kind;
        header[157..157 + link_target.len()].copy_from_slice(link_target.as_bytes());
        header[257..263].copy_from_slice(b"ustar\0");
        header[263..265].copy_from_slice(b"00");
        header[265..269].copy_from_slice(b"root");
        header[297..301].copy_from_slice(b"root");
        // The checksum is computed with its own field read as spaces.
        header[148..156].fill(b' ');
        let sum: u32 = header.iter().map(|&byte| u32::from(byte)).sum();
        let checksum = format!("{sum:06o}\0 ");
        header[148..156].copy_from_slice(checksum.as_bytes());
        self.bytes.extend_from_slice(&header);
        self.bytes.extend_from_slice(content);
        let padding = (BLOCK - content.len() % BLOCK) % BLOCK;
        self.bytes.resize(self.bytes.len() + padding, 0);
        self
    }
}

/// `value` in octal, zero-padded, NUL-terminated, filling `field`.
fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    assert!(
        text.len() == digits,
        "{value} does not fit a {digits}-digit field"
    );
    field[..digits].copy_from_slice(text.as_bytes());
    field[digits] = 0;
}
