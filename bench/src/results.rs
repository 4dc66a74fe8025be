//! Where figures go: one JSON file per benchmark under the results directory, each with the
//! machine it was measured on, so the book can cite both. A file of runs (`fleet`, `pods`) keeps
//! the runs of other sizes and builds when one is measured again.

use std::path::Path;

use serde_json::{Value, json};

/// The machine, as `/proc` describes it.
pub fn machine() -> Value {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, name)| name.trim().to_owned());
    let cores = cpuinfo
        .lines()
        .filter(|line| line.starts_with("processor"))
        .count();
    let memory = read("/proc/meminfo")
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .map(|rest| rest.trim().to_owned());
    json!({
        "cpu": model,
        "cores": cores,
        "memory": memory,
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "measuredAt": jiff::Timestamp::now().to_string(),
    })
}

/// Writes `figures` (with the machine added) to `<directory>/<name>.json`.
pub fn write(
    directory: &Path,
    name: &str,
    mut figures: Value,
) -> Result<std::path::PathBuf, String> {
    std::fs::create_dir_all(directory)
        .map_err(|error| format!("{}: {error}", directory.display()))?;
    figures["machine"] = machine();
    let path = directory.join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(&figures).map_err(|error| error.to_string())?;
    std::fs::write(&path, text + "\n").map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(path)
}

/// Adds `run` to the `runs` of `<directory>/<name>.json` (kept from earlier measurements, with
/// the file's other fields), in place of the runs `replaces` picks, ordered by the numeric
/// fields `order`; writes the file.
pub fn add_run(
    directory: &Path,
    name: &str,
    run: Value,
    replaces: impl Fn(&Value) -> bool,
    order: &[&str],
) -> Result<std::path::PathBuf, String> {
    let path = directory.join(format!("{name}.json"));
    let mut file: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| json!({ "runs": [] }));
    let runs = file["runs"]
        .as_array_mut()
        .ok_or_else(|| format!("{}: \"runs\" is not a list", path.display()))?;
    runs.retain(|existing| !replaces(existing));
    runs.push(run);
    runs.sort_by_key(|existing| {
        order
            .iter()
            .map(|field| existing[*field].as_u64().unwrap_or(0))
            .collect::<Vec<_>>()
    });
    write(directory, name, file)
}
