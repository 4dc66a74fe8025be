//! The library API: the emulator starts inside an existing actix System (as in the daemon's
//! standalone mode), writes a kubeconfig kubectl-style clients can read, and shuts down.

use nodepulse_emulator::{Emulator, EmulatorConfig};

#[test]
fn starts_and_stops_inside_an_actix_system() {
    let outcome = actix_web::rt::System::new().block_on(async {
        let emulator = Emulator::start(EmulatorConfig {
            workers: 1,
            ..EmulatorConfig::for_tests()
        })
        .await
        .expect("starts");
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("nested").join("kubeconfig");
        emulator
            .write_kubeconfig(&path)
            .expect("kubeconfig written");
        let kubeconfig = std::fs::read_to_string(&path).expect("readable");
        assert!(kubeconfig.contains(&emulator.base_url()));
        let health = reqwest::get(format!("{}/healthz", emulator.base_url()))
            .await
            .expect("reachable");
        let status = health.status().as_u16();
        let base = emulator.base_url();
        emulator.shutdown().await;
        let after = reqwest::get(format!("{base}/healthz")).await;
        (status, after.is_err())
    });
    assert_eq!(
        outcome,
        (200, true),
        "served while running, refused after shutdown"
    );
}
