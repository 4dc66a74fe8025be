//! Pressure stall information (PSI) as the kernel writes it in `cpu.pressure`,
//! `memory.pressure` and `io.pressure` (a cgroup v2 directory, or `/proc/pressure/` for the
//! whole system): a `some` and a `full` line of `avg10= avg60= avg300= total=`. Parsed as
//! opencontainers/cgroups' `fs2/psi.go` parses it for cAdvisor, so the kubelet's figures and
//! these agree: `total` stays the kernel's microseconds (cAdvisor and the kubelet copy it
//! unscaled, whatever the Summary type's comment says), a line the kernel does not write (no
//! `full` for the CPU before Linux 5.13) is zeros. A missing file is `None`: this kernel or
//! cgroup has no PSI (the kubelet would write zeros there, which read as "no pressure").

use std::path::Path;

use nodepulse_actors::ports::HostError;

use super::read;

/// The resources the kernel reports pressure for, by their file names' stem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Cpu,
    Memory,
    Io,
}

impl Resource {
    /// The name in `/proc/pressure/`; a cgroup's file adds `.pressure`.
    fn stem(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Memory => "memory",
            Self::Io => "io",
        }
    }
}

/// Where a directory's pressure files are and how they are named.
#[derive(Debug, Clone, Copy)]
pub enum Layout<'a> {
    /// A cgroup v2 directory: `cpu.pressure`, `memory.pressure`, `io.pressure`.
    Cgroup(&'a Path),
    /// The kernel's system-wide `/proc/pressure/`: `cpu`, `memory`, `io`.
    System(&'a Path),
}

impl Layout<'_> {
    fn file(self, resource: Resource) -> std::path::PathBuf {
        match self {
            Self::Cgroup(dir) => dir.join(format!("{}.pressure", resource.stem())),
            Self::System(dir) => dir.join(resource.stem()),
        }
    }
}

/// One line: the share of wall time (percent) some or all tasks stalled over 10 s, 60 s and
/// 300 s, and the stalled time since boot, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PressureLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total_micros: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pressure {
    pub some: PressureLine,
    pub full: PressureLine,
}

/// A pressure file's text; `path` names it in errors.
pub fn parse(path: &Path, text: &str) -> Result<Pressure, HostError> {
    let mut pressure = Pressure::default();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let target = match fields.next() {
            Some("some") => &mut pressure.some,
            Some("full") => &mut pressure.full,
            // fs2 skips lines it does not know; so does this.
            _ => continue,
        };
        for field in fields {
            let invalid = |message: String| HostError::Parse {
                path: path.to_owned(),
                message,
            };
            let (key, value) = field
                .split_once('=')
                .ok_or_else(|| invalid(format!("invalid psi data: {field:?}")))?;
            let average = |value: &str| {
                value
                    .parse::<f64>()
                    .map_err(|error| invalid(format!("invalid {key} PSI value: {error}")))
            };
            match key {
                "avg10" => target.avg10 = average(value)?,
                "avg60" => target.avg60 = average(value)?,
                "avg300" => target.avg300 = average(value)?,
                "total" => {
                    target.total_micros = value
                        .parse()
                        .map_err(|error| invalid(format!("invalid total PSI value: {error}")))?;
                }
                _ => {}
            }
        }
    }
    Ok(pressure)
}

/// `resource`'s pressure in `layout`; `None` when the file is not there.
pub fn read_pressure(layout: Layout, resource: Resource) -> Option<Result<Pressure, HostError>> {
    let path = layout.file(resource);
    if !path.exists() {
        return None;
    }
    Some(read(&path).and_then(|text| parse(&path, &text)))
}

/// The CPU, memory and I/O pressure of one cgroup (or of the node).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pressures {
    pub cpu: Option<Pressure>,
    pub memory: Option<Pressure>,
    pub io: Option<Pressure>,
}

/// All three of `layout`'s pressures; one that cannot be read or parsed is left out (logged).
pub fn pressures(layout: Layout) -> Pressures {
    let one = |resource| {
        read_pressure(layout, resource)?
            .inspect_err(|error| tracing::debug!(%error, "no pressure figure"))
            .ok()
    };
    Pressures {
        cpu: one(Resource::Cpu),
        memory: one(Resource::Memory),
        io: one(Resource::Io),
    }
}

/// The node's pressure: the root cgroup's on cgroup v2 (cAdvisor's root container), else the
/// kernel's system-wide `/proc/pressure/` (the same figures; a cgroup v1 host has only these).
pub fn node_pressures(root: &Path) -> Pressures {
    let cgroup = root.join("sys/fs/cgroup");
    let from_cgroup = pressures(Layout::Cgroup(&cgroup));
    let system = pressures(Layout::System(&root.join("proc/pressure")));
    Pressures {
        cpu: from_cgroup.cpu.or(system.cpu),
        memory: from_cgroup.memory.or(system.memory),
        io: from_cgroup.io.or(system.io),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPU: &str = "some avg10=0.18 avg60=0.03 avg300=0.93 total=793937047\n\
                       full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";

    #[test]
    fn both_lines_are_read_with_the_total_in_the_kernels_microseconds() {
        let pressure = parse(Path::new("cpu.pressure"), CPU).expect("parses");
        assert_eq!(
            pressure.some,
            PressureLine {
                avg10: 0.18,
                avg60: 0.03,
                avg300: 0.93,
                total_micros: 793_937_047,
            }
        );
        assert_eq!(pressure.full, PressureLine::default());
    }

    #[test]
    fn a_missing_full_line_is_zeros_and_a_bad_value_names_the_file() {
        let only_some = "some avg10=1.50 avg60=0.00 avg300=0.00 total=12\n";
        let pressure = parse(Path::new("cpu.pressure"), only_some).expect("parses");
        assert_eq!((pressure.some.avg10, pressure.some.total_micros), (1.5, 12));
        assert_eq!(pressure.full, PressureLine::default());
        let error = parse(Path::new("/x/io.pressure"), "some avg10=high total=1\n")
            .expect_err("not a number");
        assert!(error.to_string().contains("/x/io.pressure"), "{error}");
        let error = parse(Path::new("io.pressure"), "full avg10\n").expect_err("no =");
        assert!(error.to_string().contains("invalid psi data"), "{error}");
    }

    #[test]
    fn files_are_read_from_the_cgroup_and_a_missing_one_is_left_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("cpu.pressure"), CPU).expect("write");
        std::fs::write(
            dir.path().join("memory.pressure"),
            "some avg10=2.00 avg60=1.00 avg300=0.50 total=300\n\
             full avg10=1.00 avg60=0.50 avg300=0.25 total=100\n",
        )
        .expect("write");
        let read = pressures(Layout::Cgroup(dir.path()));
        assert_eq!(read.cpu.map(|p| p.some.total_micros), Some(793_937_047));
        assert_eq!(read.memory.map(|p| p.full.total_micros), Some(100));
        assert_eq!(read.io, None, "no io.pressure: no figure, not zeros");
    }

    #[test]
    fn the_node_falls_back_from_the_root_cgroup_to_proc_pressure() {
        let root = tempfile::tempdir().expect("tempdir");
        let cgroup = root.path().join("sys/fs/cgroup");
        let system = root.path().join("proc/pressure");
        std::fs::create_dir_all(&cgroup).expect("cgroup");
        std::fs::create_dir_all(&system).expect("proc");
        std::fs::write(cgroup.join("cpu.pressure"), "some total=5\nfull total=1\n").expect("w");
        // The kernel's own files are named after the resource alone.
        std::fs::write(system.join("cpu"), "some total=9\nfull total=9\n").expect("w");
        std::fs::write(system.join("io"), "some total=7\nfull total=3\n").expect("w");
        std::fs::write(system.join("memory.pressure"), "some total=1\n").expect("w");
        let node = node_pressures(root.path());
        assert_eq!(
            node.cpu.map(|p| p.some.total_micros),
            Some(5),
            "the cgroup's"
        );
        assert_eq!(
            node.io.map(|p| p.some.total_micros),
            Some(7),
            "the system's"
        );
        assert_eq!(node.memory, None, "not a name the kernel writes there");
    }
}
