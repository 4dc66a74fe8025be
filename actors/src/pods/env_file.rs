//! `valueFrom.fileKeyRef` (the EnvFiles feature): a key's value read from a file in one of the
//! pod's emptyDir volumes, as the kubelet's `envutil.ParseEnv` reads it when a container
//! starts (so a file an init container wrote is there). The file is opened inside the volume
//! (links resolved as if the volume were `/`, as `securejoin.SecureJoin` does) and parsed
//! line by line; only the first assignment of the key counts.

use std::{
    fs::File,
    io::{BufRead, BufReader, Read},
    path::Path,
};

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// Go's `bufio.MaxScanTokenSize`: the kubelet's scanner refuses a longer line.
const MAX_LINE: usize = 64 * 1024;
/// The most a (multi-line) value may hold; the kubelet has no bound, nodepulse keeps the
/// memory one container start holds small. `execve` refuses a longer `NAME=value` anyway.
const MAX_VALUE: usize = 1024 * 1024;

/// Why an env file could not be read; the container's message is the kubelet's generic
/// `couldn't parse env file`, this text goes to the node's log. Retrying helps only once the
/// file changes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvFileError {
    #[error("failed to open environment variable file {path:?}: {reason}")]
    Open { path: String, reason: String },
    #[error("environment variable file {path:?} is not a regular file")]
    NotAFile { path: String },
    #[error("error reading environment variable file {path:?}: {reason}")]
    Read { path: String, reason: String },
    #[error("invalid environment variable format at line {line}: {problem}")]
    Format { line: usize, problem: &'static str },
    #[error("invalid environment variable format starting at line {line}: unclosed single quote")]
    Unclosed { line: usize },
    #[error("the value of {key} in the environment variable file is longer than {MAX_VALUE} bytes")]
    ValueTooLong { key: String },
}

/// The value of `key` in the file at `path` inside the volume directory `volume`: `Ok("")`
/// when the key is absent (or empty, which the kubelet does not tell apart).
pub fn read_env_file(volume: &Path, path: &str, key: &str) -> Result<String, EnvFileError> {
    let shown = volume.join(path).display().to_string();
    let open_error = |error: rustix::io::Errno| EnvFileError::Open {
        path: shown.clone(),
        reason: std::io::Error::from(error).to_string(),
    };
    let root = rustix::fs::open(
        volume,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(open_error)?;
    // Non-blocking, so a FIFO put there is refused instead of waited on.
    let file = rustix::fs::openat2(
        &root,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(open_error)?;
    let file = File::from(file);
    let regular = file
        .metadata()
        .map_err(|error| EnvFileError::Read {
            path: shown.clone(),
            reason: error.to_string(),
        })?
        .is_file();
    if !regular {
        return Err(EnvFileError::NotAFile { path: shown });
    }
    parse_env(BufReader::new(file), key).map_err(|error| match error {
        EnvFileError::Read { reason, .. } => EnvFileError::Read {
            path: shown,
            reason,
        },
        other => other,
    })
}

/// `ParseEnv` over `reader`: `KEY='value'` lines, values in single quotes taken literally and
/// possibly spanning lines, blank lines and `#` comments skipped, leading blanks ignored, a
/// comment allowed after the closing quote; a blank after `=` makes the value empty. A line
/// that breaks the format fails the whole read, unless the key was found before it.
pub fn parse_env(reader: impl BufRead, key: &str) -> Result<String, EnvFileError> {
    let mut lines = Lines {
        reader,
        number: 0,
        buffer: Vec::new(),
    };
    while let Some(line) = lines.next_line()? {
        let line = line.trim_start_matches([' ', '\t']);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let format = |problem| EnvFileError::Format {
            line: lines.number,
            problem,
        };
        let Some((name_part, value_part)) = line.split_once('=') else {
            return Err(format("missing '='"));
        };
        let name = name_part.trim_end_matches([' ', '\t']);
        if name.is_empty() {
            return Err(format("empty variable name"));
        }
        if name.len() != name_part.len() {
            return Err(format("whitespace before '=' is not allowed"));
        }
        if value_part.starts_with([' ', '\t']) {
            // `KEY= 'v'` assigns an empty KEY in a shell (and runs `'v'`).
            if name == key {
                return Ok(String::new());
            }
            continue;
        }
        let Some(quoted) = value_part.strip_prefix('\'') else {
            return Err(format("value must be enclosed in single quotes"));
        };
        let (name, start) = (name.to_owned(), lines.number);
        let mut value = String::new();
        let mut rest = quoted.to_owned();
        loop {
            if let Some(close) = rest.find('\'') {
                value.push_str(&rest[..close]);
                let after = rest[close + 1..].trim_start_matches([' ', '\t']);
                if !after.is_empty() && !after.starts_with('#') {
                    return Err(EnvFileError::Format {
                        line: lines.number,
                        problem: "unexpected content after closing quote",
                    });
                }
                break;
            }
            value.push_str(&rest);
            value.push('\n');
            if value.len() > MAX_VALUE {
                return Err(EnvFileError::ValueTooLong { key: name });
            }
            rest = lines
                .next_line()?
                .ok_or(EnvFileError::Unclosed { line: start })?;
        }
        if name == key {
            return Ok(value);
        }
    }
    Ok(String::new())
}

/// Go's `bufio.Scanner` with `ScanLines`: lines without their `\n` (and a `\r` before it),
/// the last one without a newline too, a line past [`MAX_LINE`] an error.
struct Lines<R> {
    reader: R,
    number: usize,
    buffer: Vec<u8>,
}

impl<R: BufRead> Lines<R> {
    fn next_line(&mut self) -> Result<Option<String>, EnvFileError> {
        self.buffer.clear();
        let limit = u64::try_from(MAX_LINE).unwrap_or(u64::MAX);
        let read = (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.buffer)
            .map_err(|error| EnvFileError::Read {
                path: String::new(),
                reason: error.to_string(),
            })?;
        if read == 0 {
            return Ok(None);
        }
        if self.buffer.last() == Some(&b'\n') {
            self.buffer.pop();
        } else if self.buffer.len() >= MAX_LINE {
            return Err(EnvFileError::Read {
                path: String::new(),
                reason: "bufio.Scanner: token too long".to_owned(),
            });
        }
        if self.buffer.last() == Some(&b'\r') {
            self.buffer.pop();
        }
        self.number += 1;
        // Go keeps invalid UTF-8 as it is; here it becomes U+FFFD, as a Secret's bytes do.
        Ok(Some(String::from_utf8_lossy(&self.buffer).into_owned()))
    }
}

#[cfg(test)]
#[path = "env_file_tests.rs"]
mod tests;
