//! A Kubernetes API server emulator (work in progress).
