//! The kubelet's `userns_manager_test.go` tables, on a real directory: allocation, the
//! manager's checks of its range, the record's validation, orphan clean-up, and a block kept
//! across a restart (a new manager over the same directory).

use std::path::Path;

use nodepulse_actors::ports::UserNamespace;

use super::userns::*;

const LENGTH: u32 = 65_536;
const MAX_PODS: u32 = 110;

fn range(first: u32, length: u32) -> IdRange {
    IdRange { first, length }
}

/// The kubelet test's default range: skip the first block, room for 2000 pods.
fn default_range() -> IdRange {
    range(LENGTH, LENGTH * 2000)
}

fn manager(dir: &Path) -> UsernsManager {
    UsernsManager::new(dir, LENGTH, default_range(), MAX_PODS).expect("valid range")
}

#[test]
fn allocates_distinct_blocks_inside_the_range_and_frees_them() {
    let custom = 1_048_576;
    for (length, range) in [
        (LENGTH, default_range()),
        (
            custom,
            IdRange {
                first: custom,
                length: custom * 2000,
            },
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut m = UsernsManager::new(dir.path(), length, range, MAX_PODS).unwrap();
        let (one, got) = m.allocate_one("one").unwrap();
        assert_eq!(got, length);
        assert!(m.is_set(one));
        let (two, got2) = m.allocate_one("two").unwrap();
        assert_ne!(one, two);
        assert_eq!(got2, length);
        // The same record again is fine; a different one is not.
        m.record("two", two, length).unwrap();
        assert!(m.record("two", two + 1, length).is_err());
        m.release("one");
        m.release("two");
        assert!(!m.is_set(one) && !m.is_set(two));

        let mut blocks = Vec::new();
        for i in 0..1000 {
            let (first, got) = m.allocate_one(&i.to_string()).unwrap();
            assert_eq!(got, length);
            assert!(first >= range.first);
            assert!(first <= range.first + range.length - length);
            blocks.push(first);
        }
        for (i, first) in blocks.into_iter().enumerate() {
            let uid = i.to_string();
            assert!(m.is_set(first));
            m.release(&uid);
            assert!(!m.is_set(first));
            m.record(&uid, first, length).unwrap();
            m.release(&uid);
            assert!(!m.is_set(first));
        }
    }
}

#[test]
fn the_range_is_checked_against_the_block_size_and_max_pods() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("default", range(LENGTH, LENGTH * 2000), MAX_PODS, true),
        (
            "firstID not multiple",
            range(LENGTH + 1, LENGTH * 2000),
            MAX_PODS,
            false,
        ),
        (
            "firstID is less than 65535",
            range(1, LENGTH * 2000),
            MAX_PODS,
            false,
        ),
        (
            "mappingLen not multiple",
            range(LENGTH, LENGTH + 1),
            MAX_PODS,
            false,
        ),
        ("range can't fit maxPods", range(LENGTH, LENGTH), 2, false),
    ];
    for (name, range, max_pods, ok) in cases {
        let made = UsernsManager::new(dir.path(), LENGTH, range, max_pods);
        assert_eq!(made.is_ok(), ok, "{name}: {made:?}");
    }
    assert!(matches!(
        UsernsManager::new(dir.path(), LENGTH + 1, default_range(), MAX_PODS),
        Err(UsernsError::LengthNotUnit(_))
    ));
}

#[test]
fn the_kubelets_default_range_starts_one_block_up_and_ends_at_the_top() {
    let range = IdRange::default_for(DEFAULT_IDS_PER_POD);
    assert_eq!((range.first, range.length), (65_536, u32::MAX - 65_535));
    // 2^32 is whole blocks, so the default passes the manager's checks: 65,535 pods' worth.
    assert_eq!(range.length / DEFAULT_IDS_PER_POD, 65_535);
    let dir = tempfile::tempdir().unwrap();
    assert!(UsernsManager::new(dir.path(), DEFAULT_IDS_PER_POD, range, MAX_PODS).is_ok());
}

#[test]
fn a_record_must_be_one_root_mapping_the_same_for_uids_and_gids() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = manager(dir.path());
    let file = |uid: &str, gid: &str| format!(r#"{{"uidMappings":[{uid}],"gidMappings":[{gid}]}}"#);
    let block = r#"{"hostId":131072,"containerId":0,"length":65536}"#;
    let cases = [
        ("basic", file(block, block), true),
        (
            "invalid length",
            file(
                r#"{"hostId":131072,"containerId":0,"length":0}"#,
                r#"{"hostId":131072,"containerId":0,"length":0}"#,
            ),
            false,
        ),
        (
            "wrong offset",
            file(block, r#"{"hostId":1,"containerId":0,"length":65536}"#),
            false,
        ),
        (
            "two GID mappings",
            file(
                block,
                &format!(r#"{block},{{"hostId":196608,"containerId":0,"length":65536}}"#),
            ),
            false,
        ),
        (
            "two UID mappings",
            file(
                &format!(r#"{block},{{"hostId":196608,"containerId":0,"length":65536}}"#),
                block,
            ),
            false,
        ),
        (
            "no root UID",
            file(r#"{"hostId":131072,"containerId":1,"length":65536}"#, block),
            false,
        ),
        (
            "no root GID",
            file(block, r#"{"hostId":131072,"containerId":1,"length":65536}"#),
            false,
        ),
    ];
    for (name, content, ok) in cases {
        let parsed = m.parse_and_record(name, content.as_bytes());
        assert_eq!(parsed.is_ok(), ok, "{name}: {parsed:?}");
    }
}

#[test]
fn orphans_are_freed_unless_known_and_still_on_disk() {
    // (pods on disk, recorded before, known pods, kept after, freed after)
    type Case = (
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    );
    let cases: [(&str, Case); 5] = [
        ("no stale pods", (&["pod-1", "pod-2"], &[], &[], &[], &[])),
        (
            "no stale pods set",
            (
                &["pod-1", "pod-2"],
                &["pod-1", "pod-2"],
                &[],
                &[],
                &["pod-1", "pod-2"],
            ),
        ),
        (
            "one known pod",
            (
                &["pod-1", "pod-2"],
                &["pod-1", "pod-2"],
                &["pod-1"],
                &["pod-1"],
                &["pod-2"],
            ),
        ),
        (
            "set but not listed",
            (
                &[],
                &["pod-1", "pod-2"],
                &["pod-1"],
                &[],
                &["pod-1", "pod-2"],
            ),
        ),
        (
            "no listed pods",
            (&[], &["pod-1", "pod-2"], &[], &[], &["pod-1", "pod-2"]),
        ),
    ];
    for (name, (listed, before, known, kept, freed)) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut m = manager(dir.path());
        for uid in listed {
            std::fs::create_dir(dir.path().join(uid)).unwrap();
        }
        for (i, uid) in before.iter().enumerate() {
            let first = u32::try_from(i + 1).unwrap() * LENGTH;
            m.record(uid, first, LENGTH).unwrap();
        }
        m.cleanup_orphans(known).unwrap();
        for uid in kept {
            assert!(m.allocated(uid), "{name}: {uid} kept");
        }
        for uid in freed {
            assert!(!m.allocated(uid), "{name}: {uid} freed");
        }
    }
}

#[test]
fn a_record_outside_the_range_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = UsernsManager::new(dir.path(), LENGTH, range(LENGTH, LENGTH), 1).unwrap();
    m.record("0", LENGTH, LENGTH).unwrap();
    let refused = m.record("2", 2 * LENGTH, LENGTH).unwrap_err();
    assert!(refused.to_string().contains("out of range"), "{refused}");
}

#[test]
fn a_pods_block_is_written_in_the_kubelets_form_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut first_run = manager(dir.path());
    let UserNamespace::Pod { uids, gids } = first_run.get_or_create("pod-a").unwrap() else {
        panic!("a pod's own namespace");
    };
    assert_eq!(uids, gids);
    assert_eq!((uids[0].container_id, uids[0].length), (0, LENGTH));
    let host_id = uids[0].host_id;
    let written = std::fs::read_to_string(dir.path().join("pod-a").join(MAPPINGS_FILE)).unwrap();
    assert_eq!(
        written,
        format!(
            r#"{{"uidMappings":[{{"hostId":{host_id},"containerId":0,"length":65536}}],"gidMappings":[{{"hostId":{host_id},"containerId":0,"length":65536}}]}}"#
        )
    );
    drop(first_run);

    let mut restarted = manager(dir.path());
    assert!(restarted.allocated("pod-a"), "read back at start");
    assert!(restarted.is_set(host_id));
    let again = restarted.get_or_create("pod-a").unwrap();
    assert_eq!(
        again,
        UserNamespace::Pod {
            uids: uids.clone(),
            gids: uids
        }
    );
    // Another pod never gets the same block.
    let UserNamespace::Pod { uids: other, .. } = restarted.get_or_create("pod-b").unwrap() else {
        panic!("a pod's own namespace");
    };
    assert_ne!(other[0].host_id, host_id);

    restarted.release("pod-a");
    assert!(!dir.path().join("pod-a").join(MAPPINGS_FILE).exists());
    assert!(!restarted.is_set(host_id));
}

#[test]
fn a_bad_record_on_disk_stops_the_manager_with_the_pods_name() {
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("pod-x");
    std::fs::create_dir(&pod).unwrap();
    std::fs::write(pod.join(MAPPINGS_FILE), "{not json").unwrap();
    let error = UsernsManager::new(dir.path(), LENGTH, default_range(), MAX_PODS).unwrap_err();
    assert!(
        error.to_string().starts_with(
            "record pod mappings for existing pod \"pod-x\": invalid user namespace mappings file"
        ),
        "{error}"
    );
}
