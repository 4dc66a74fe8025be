//! nodepulse's configuration: one YAML file, read and validated completely before anything
//! starts. An invalid file is refused with the file, the field, the value and the reason; the
//! daemon never runs on half a configuration. With no file given, the embedded default
//! (`config/nodepulse.yaml`) is used.

mod aliasing;
mod build_features;
mod cgroups;
mod container_logs;
mod duration;
mod fleet;
mod kubelet_api;
mod model;
mod published;
pub mod reference;
mod settings;
mod validate;

use std::path::{Path, PathBuf};

pub use aliasing::{ExcessiveAliasing, check_aliasing};
pub use build_features::{NotInThisBuild, STANDALONE_BUILT, check_built};
pub use cgroups::{
    CGROUP_V1_REFUSED, CgroupDriver, ENFORCE_KUBE_RESERVED, ENFORCE_KUBE_RESERVED_COMPRESSIBLE,
    ENFORCE_NONE, ENFORCE_PODS, ENFORCE_SYSTEM_RESERVED, ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE,
};
pub use container_logs::{MaxSizeError, parse_max_size};
pub use duration::{DurationError, GoDuration};
pub use fleet::{
    FLEET_NODE_STATUS_SYNCS, FLEET_NODE_VOLUME_FETCHES, FleetSizeError, generated_name,
    with_generated,
};
pub use kubelet_api::{
    AnonymousAuthentication, AuthorizationMode, DEFAULT_KUBELET_ADDRESS, KubeletAuthentication,
    KubeletAuthorization, WebhookAuthentication, WebhookAuthorization, X509Authentication,
};
pub use model::{
    BackoffConfig, Config, DebugConfig, FaultInjectionConfig, FleetNodeConfig, RuntimeKind,
    StandaloneConfig, SupervisionConfig, TaintConfig,
};
pub use nodepulse_cri::client::{EndpointError, socket_path};
pub use published::HIDDEN;
pub use settings::{Bootstrap, Overrides, Settings, SettingsError};
pub use validate::{InvalidSetting, check_node_name};

/// The default configuration, compiled in so `nodepulse --standalone` needs no file at all.
pub const EMBEDDED_DEFAULT: &str = include_str!("../../config/nodepulse.yaml");

/// Where the configuration came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    Embedded,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Embedded => f.write_str("<embedded default configuration>"),
        }
    }
}

/// A configuration that was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{source_name}: cannot read the configuration file: {error}")]
    Unreadable {
        source_name: Source,
        #[source]
        error: std::io::Error,
    },
    #[error(
        "{source_name}: the file is empty; write at least one setting (see config/nodepulse.yaml)"
    )]
    Empty { source_name: Source },
    /// Not YAML, a wrong type, an unknown field or a value that does not parse.
    #[error("{source_name}: {field}: {reason}")]
    Syntax {
        source_name: Source,
        field: String,
        reason: String,
    },
    /// Well-formed but not acceptable: every refused setting (at least one), each on its own
    /// line with the file, so one run of `check-config` lists everything to fix.
    #[error("{}", refusals(source_name, settings))]
    Invalid {
        source_name: Source,
        settings: Vec<InvalidSetting>,
    },
}

/// `FILE: FIELD: invalid value "VALUE": REASON`; several under a line counting them.
fn refusals(source: &Source, settings: &[InvalidSetting]) -> String {
    let lines = settings
        .iter()
        .map(|setting| format!("{source}: {setting}"));
    match settings.len() {
        1 => lines.collect(),
        count => std::iter::once(format!("{source}: {count} invalid settings:"))
            .chain(lines)
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

impl Config {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let source = Source::File(path.to_owned());
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Unreadable {
            source_name: source.clone(),
            error,
        })?;
        Self::parse(&text, source)
    }

    /// The embedded default, validated like any file.
    pub fn embedded_default() -> Result<Self, ConfigError> {
        Self::parse(EMBEDDED_DEFAULT, Source::Embedded)
    }

    /// Parses and validates YAML text that came from `source`.
    pub fn parse(text: &str, source: Source) -> Result<Self, ConfigError> {
        // A byte-order mark (editors on some systems write one) is not content.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let has_content = text
            .lines()
            .map(str::trim)
            .any(|line| !line.is_empty() && !line.starts_with('#') && line != "---");
        if !has_content {
            return Err(ConfigError::Empty {
                source_name: source,
            });
        }
        check_aliasing(text.as_bytes()).map_err(|error| ConfigError::Syntax {
            source_name: source.clone(),
            field: "(top level)".to_owned(),
            reason: error.to_string(),
        })?;
        let deserializer = serde_yaml_ng::Deserializer::from_str(text);
        let config: Self = serde_path_to_error::deserialize(deserializer).map_err(|error| {
            // A YAML syntax error ends the path in `?`: the field it was reading is unknown.
            let path = error.path().to_string();
            let field = match path.trim_end_matches(".?").trim_end_matches('?') {
                "" | "." => "(top level)".to_owned(),
                known => known.to_owned(),
            };
            let reason = without_path_prefix(&error.into_inner().to_string(), &field);
            ConfigError::Syntax {
                source_name: source.clone(),
                field,
                reason,
            }
        })?;
        validate::validate(&config).map_err(|settings| ConfigError::Invalid {
            source_name: source,
            settings,
        })?;
        Ok(config)
    }
}

/// The YAML library may start its message with (part of) the path already shown; say it once.
fn without_path_prefix(reason: &str, field: &str) -> String {
    match reason.split_once(": ") {
        Some((prefix, rest)) if field.starts_with(prefix) && !prefix.contains(' ') => {
            rest.to_owned()
        }
        _ => reason.to_owned(),
    }
}
