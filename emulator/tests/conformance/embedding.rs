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

#[test]
fn the_kubeconfig_is_0600_and_never_written_through_a_planted_link() {
    use std::os::unix::fs::PermissionsExt;
    actix_web::rt::System::new().block_on(async {
        let emulator = Emulator::start(EmulatorConfig {
            workers: 1,
            ..EmulatorConfig::for_tests()
        })
        .await
        .expect("starts");
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("kubeconfig");
        emulator.write_kubeconfig(&path).expect("written");
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let precious = dir.path().join("precious");
        std::fs::write(&precious, "root's file").expect("written");
        let planted = dir.path().join("planted");
        std::os::unix::fs::symlink(&precious, &planted).expect("planted");
        emulator
            .write_kubeconfig(&planted)
            .expect_err("a link is refused");
        assert_eq!(
            std::fs::read_to_string(&precious).expect("read"),
            "root's file"
        );
        emulator.shutdown().await;
    });
}
