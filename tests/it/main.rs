//! The daemon's black-box tests, in one binary so the suite links once instead of 26 times
//! (`tests/heavy` holds the two that need the machine to themselves).
//! One module per property; each module's own doc says what it proves. `nodepulse-testkit`
//! (testkit/) holds what they share: the test cluster (the emulator, or a real one named by
//! `NODEPULSE_TEST_KUBECONFIG`), daemons as processes, fixture hosts, a private containerd.
//!
//! Tests wait on timers and I/O far more than they compute: `scripts/test.sh` runs them with
//! more threads than cores.

mod actor_faults;
mod alias_bombs;
mod api_faults;
mod api_recovery;
mod book_build;
mod bootstrap_restart;
mod bootstrap_skipped;
mod cleanup;
mod cli_commands;
mod config_fuzz;
mod config_rejection;
mod container_log_rotation;
mod cri_capabilities;
mod cri_cgroups;
mod cri_engine_health;
mod cri_env_files;
mod cri_events;
mod cri_gc;
mod cri_image_volume;
mod cri_isolation;
mod cri_lifecycle;
mod cri_pod_faults;
mod cri_pod_level_downward;
mod cri_pod_rules;
mod cri_pod_spec;
mod cri_pods;
mod cri_pods_view;
mod cri_resize;
mod cri_runtime;
mod cri_stats;
mod cri_sub_path_expr;
mod cri_sub_paths;
mod csi;
mod csi_attach;
mod csi_claims;
mod csi_pod;
mod csi_registration;
mod daemon_process;
mod debug_endpoint;
mod deploy_join;
mod deploy_manifests;
mod docs_links;
mod event_correlation;
mod eviction;
mod fleet;
mod heartbeat_faults;
mod image_gc;
mod kubeconfig_tls;
mod kubelet_api;
mod kubelet_api_bounds;
mod kubelet_api_cadvisor;
mod kubelet_api_in_flight;
mod kubelet_api_log_query;
mod kubelet_api_logs;
mod kubelet_api_metrics;
mod kubelet_api_stats;
mod kubelet_api_streams;
mod kubelet_api_summary;
mod kubelet_api_volume_stats;
mod layering;
mod lease;
mod local_storage_eviction;
mod metrics;
mod monitoring_names;
mod node_identity;
mod node_signal_conditions;
mod node_status;
mod pod_dirs;
mod pod_generation;
mod pods;
mod probes;
mod process_faults;
mod prometheus_scrape;
mod reliability_security;
mod runtime_probe;
mod serving_certificate;
mod signal_actors;
mod standalone_ports;
mod static_pod_gc;
mod static_pod_start;
mod static_pod_url;
mod static_pod_url_redirects;
mod static_pod_validation;
mod static_pods;
mod status_manager;
mod string_errors;
mod supervision;
mod tls_bootstrap;
mod volumes;
