//! The emulator's conformance suite: every behaviour nodepulse relies on, checked over real
//! HTTP. Runs against the in-process emulator, or against a real cluster when
//! `NODEPULSE_TEST_KUBECONFIG` names a kubeconfig (emulator-only tests then print SKIPPED).

mod auth;
mod cleanup;
mod common;
mod config_objects;
mod crud;
mod deletion;
mod embedding;
mod ephemeral_containers;
mod events;
mod faults;
mod kube_client;
mod kubectl;
mod lifecycle;
mod patches;
mod pod_defaults;
mod pod_generation;
mod reviews;
mod selectors;
mod service_account_admission;
mod services;
mod storage;
mod subresources;
mod update;
mod validation;
mod watch;
