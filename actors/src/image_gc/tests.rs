//! The image manager's pure core against the kubelet's rules: the order images go in, what is
//! never removed, the minimum and maximum ages, how much must be freed, and the texts.

use std::{collections::HashSet, time::Duration};

use tokio::time::Instant;

use super::records::{
    ImageFs, ImageRecords, UsageError, expired, format_bytes, free_disk_space_failed,
    removable_for_space, space_need,
};
use crate::ports::ImageInfo;

const MIB: u64 = 1024 * 1024;

fn image(id: &str, tag: &str, size: u64, pinned: bool) -> ImageInfo {
    ImageInfo {
        id: id.to_owned(),
        repo_tags: vec![tag.to_owned()],
        size_bytes: size,
        pinned,
        ..ImageInfo::default()
    }
}

fn in_use(refs: &[&str]) -> HashSet<String> {
    refs.iter()
        .map(|reference| (*reference).to_owned())
        .collect()
}

fn ids(candidates: &[super::records::Candidate]) -> Vec<&str> {
    candidates
        .iter()
        .map(|candidate| candidate.id.as_str())
        .collect()
}

#[test]
fn candidates_are_least_recently_used_first_then_first_detected() {
    let t0 = Instant::now();
    let mut records = ImageRecords::default();
    // c is seen first but used at t0+1; a and b are never used, a detected before b.
    records.detect(&[image("c", "c:1", MIB, false)], &in_use(&["c"]), t0);
    records.detect(
        &[image("c", "c:1", MIB, false), image("a", "a:1", MIB, false)],
        &in_use(&["c:1"]),
        t0 + Duration::from_secs(1),
    );
    let all = [
        image("b", "b:1", MIB, false),
        image("c", "c:1", MIB, false),
        image("a", "a:1", MIB, false),
    ];
    records.detect(&all, &in_use(&[]), t0 + Duration::from_secs(2));
    assert_eq!(ids(&records.candidates()), ["a", "b", "c"]);
}

#[test]
fn images_in_use_by_any_name_and_pinned_images_are_never_candidates() {
    let now = Instant::now();
    let mut records = ImageRecords::default();
    let mut by_digest = image("d", "d:1", MIB, false);
    by_digest.repo_digests = vec!["reg/d@sha256:1".to_owned()];
    let images = [
        image("tagged", "busybox:1", MIB, false),
        image("byid", "x:1", MIB, false),
        by_digest,
        image("pause", "pause:1", MIB, true),
        image("free", "free:1", MIB, false),
    ];
    records.detect(
        &images,
        &in_use(&["busybox:1", "byid", "reg/d@sha256:1"]),
        now,
    );
    assert_eq!(ids(&records.candidates()), ["free"]);
}

#[test]
fn images_gone_from_the_runtime_are_forgotten() {
    let now = Instant::now();
    let mut records = ImageRecords::default();
    records.detect(&[image("a", "a:1", MIB, false)], &in_use(&[]), now);
    records.detect(&[], &in_use(&[]), now);
    assert!(records.get("a").is_none());
}

#[test]
fn space_removal_skips_images_younger_than_the_minimum_age_or_used_at_free_time() {
    let t0 = Instant::now();
    let mut records = ImageRecords::default();
    records.detect(&[image("old", "old:1", MIB, false)], &in_use(&[]), t0);
    let later = t0 + Duration::from_secs(120);
    records.detect(
        &[
            image("old", "old:1", MIB, false),
            image("young", "young:1", MIB, false),
        ],
        &in_use(&[]),
        later - Duration::from_secs(10),
    );
    let chosen = removable_for_space(&records.candidates(), later, Duration::from_secs(120));
    assert_eq!(ids(&chosen), ["old"]);
    let chosen = removable_for_space(&records.candidates(), later, Duration::ZERO);
    assert_eq!(ids(&chosen), ["old", "young"]);
}

#[test]
fn the_max_age_pass_waits_for_the_process_to_be_older_than_max_age() {
    let started = Instant::now();
    let mut records = ImageRecords::default();
    records.detect(&[image("a", "a:1", MIB, false)], &in_use(&[]), started);
    let max = Duration::from_secs(600);
    let candidates = records.candidates();
    assert!(expired(&candidates, started + max, started, max).is_empty());
    assert_eq!(
        ids(&expired(
            &candidates,
            started + max + Duration::from_secs(1),
            started,
            max
        )),
        ["a"]
    );
    assert!(
        expired(&candidates, started + 10 * max, started, Duration::ZERO).is_empty(),
        "zero is off"
    );
}

#[test]
fn bytes_to_free_reach_the_low_threshold_only_from_the_high_one() {
    let fs = |available| ImageFs {
        capacity_bytes: 1000,
        available_bytes: available,
    };
    // 84 % used, high 85: nothing.
    assert_eq!(
        space_need(fs(160), 85, 80).map(|need| need.bytes_to_free),
        Ok(0)
    );
    // 90 % used: free down to 80 % used, 200 available.
    let need = space_need(fs(100), 85, 80).expect("capacity");
    assert_eq!((need.usage_percent, need.bytes_to_free), (90, 100));
    // Exactly at high counts.
    assert_eq!(
        space_need(fs(150), 85, 80).map(|need| need.bytes_to_free),
        Ok(50)
    );
    // More available than capacity is clamped.
    assert_eq!(
        space_need(fs(5000), 0, 0).map(|need| need.usage_percent),
        Ok(0)
    );
    assert_eq!(
        space_need(
            ImageFs {
                capacity_bytes: 0,
                available_bytes: 0
            },
            85,
            80
        ),
        Err(UsageError::ZeroCapacity)
    );
}

#[test]
fn the_free_disk_space_failed_text_is_the_kubelets() {
    assert_eq!(
        free_disk_space_failed(91, 20 * 1024 * MIB + 512 * MIB, 4096),
        "Insufficient free disk space on the node's image filesystem (91% of 20.5 GiB used). Failed to free sufficient space by deleting unused images (freed 4096 bytes). Investigate disk usage, as it could be used by active images, logs, volumes, or other data."
    );
    assert_eq!(format_bytes(1023), "1023 B");
    assert_eq!(format_bytes(1536), "1.5 KiB");
    assert_eq!(
        format_bytes(3 * 1024 * 1024 * 1024 * 1024 * 1024),
        "3072.0 TiB"
    );
}
