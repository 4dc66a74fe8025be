//! Events recorded through the kube-rs adapter fold as client-go's recorder folds them (the
//! emulator, or a real cluster with NODEPULSE_TEST_KUBECONFIG): a repeated Event is one object
//! whose `count` grows, also after someone deleted it, and similar Events (one reason, other
//! messages) become one `(combined from similar events)` Event; a crash-looping pod on
//! containerd has one Event object per reason. Only nodepulse writes Events about the test's
//! uniquely named Node and pod.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{
    Api,
    api::{DeleteParams, ListParams},
};
use nodepulse::{apiserver_client::KubeApi, config::Config};
use nodepulse_actors::ports::{NodeApi, NodeEvent};
use nodepulse_testkit::{
    cluster::{TestCluster, unique_node_name},
    eventually_async,
    objects::events_about,
    pods::wait_pod,
};
use serde_json::json;

use crate::cri_pods::{Setup, app, create_pod, shell, spec};

async fn connect(cluster: &TestCluster) -> Arc<KubeApi> {
    KubeApi::connect(
        Some(&cluster.kubeconfig),
        &Config::embedded_default().expect("default config"),
    )
    .await
    .expect("connects")
}

fn summary(events: &[Event]) -> Vec<(Option<i32>, Option<&str>)> {
    events
        .iter()
        .map(|event| (event.count, event.message.as_deref()))
        .collect()
}

#[tokio::test]
async fn a_repeated_event_is_one_event_whose_count_grows_even_after_it_was_deleted() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("evcount");
    let api = connect(&cluster).await;
    let event = NodeEvent::warning("Rebooted", format!("Node {node} has been rebooted"));
    for _ in 0..12 {
        api.record_event(&node, event.clone())
            .await
            .expect("the event is recorded");
    }
    let events = events_about(&cluster, &node, "Rebooted").await;
    assert_eq!(events.len(), 1, "one Event object: {:?}", summary(&events));
    let folded = &events[0];
    assert_eq!(folded.count, Some(12), "{folded:?}");
    // As the kubelet's recorder names itself: clients select a node's Events by `source`.
    let source = folded.source.as_ref().expect("a source");
    assert_eq!(source.component.as_deref(), Some("kubelet"), "{folded:?}");
    assert_eq!(source.host.as_deref(), Some(node.as_str()), "{folded:?}");
    assert_eq!(folded.reporting_component.as_deref(), Some("kubelet"));
    assert_eq!(folded.message, event.message.clone().into());
    assert!(
        folded.first_timestamp.is_some() && folded.first_timestamp <= folded.last_timestamp,
        "{folded:?}"
    );

    let name = folded.metadata.name.clone().expect("a name");
    Api::<Event>::namespaced(cluster.client.clone(), "default")
        .delete(&name, &DeleteParams::default())
        .await
        .expect("the event is deleted");
    api.record_event(&node, event.clone())
        .await
        .expect("the repeat is recorded anew");
    let events = events_about(&cluster, &node, "Rebooted").await;
    assert_eq!(
        events.len(),
        1,
        "created again after a 404: {:?}",
        summary(&events)
    );
    assert_eq!(events[0].count, Some(13), "{:?}", events[0]);
    assert_eq!(events[0].metadata.name.as_deref(), Some(name.as_str()));
}

/// Written one at a time, in order (as client-go's broadcaster hands a kubelet's Events to
/// its sink): repeats recorded together are one object whose count is all of them, where
/// writes racing each other would create it twice or count a repeat before its Event exists.
/// With the emulator the first write is slowed down (300 ms), so racing repeats would land
/// first.
#[tokio::test]
async fn repeats_recorded_at_once_are_one_event_counting_them_all() {
    use nodepulse_emulator::{FaultAction, FaultRule};

    let cluster = TestCluster::start().await;
    let node = unique_node_name("evburst");
    let api = connect(&cluster).await;
    if cluster.emulator.is_some() {
        cluster.faults().inject(
            FaultRule::new(FaultAction::Latency { millis: 300 })
                .resource("events")
                .times(1),
        );
    }
    let event = NodeEvent::warning("Rebooted", format!("Node {node} has been rebooted"));
    let recorded =
        futures::future::join_all((0..12).map(|_| api.record_event(&node, event.clone()))).await;
    assert!(
        recorded.iter().all(Result::is_ok),
        "every repeat is recorded: {recorded:?}"
    );
    let events = events_about(&cluster, &node, "Rebooted").await;
    assert_eq!(events.len(), 1, "one Event object: {:?}", summary(&events));
    assert_eq!(events[0].count, Some(12), "{:?}", events[0]);
}

/// A write that got no answer (the connection dropped) is tried again, as client-go's
/// recorder does (the second try a random part of 10 s later): the Event is not lost.
#[tokio::test]
async fn an_event_whose_write_got_no_answer_is_written_by_a_later_try() {
    use nodepulse_emulator::{FaultAction, FaultRule};

    let test = "an_event_whose_write_got_no_answer_is_written_by_a_later_try";
    let cluster = TestCluster::start().await;
    if !nodepulse_testkit::attack::needs_emulator(&cluster, test) {
        return;
    }
    let node = unique_node_name("evretry");
    let api = connect(&cluster).await;
    let faults = cluster.faults();
    let dropped = faults.inject(
        FaultRule::new(FaultAction::DropConnection)
            .resource("events")
            .times(1),
    );
    let event = NodeEvent::normal("Starting", "Starting nodepulse.".to_owned());
    api.record_event(&node, event)
        .await
        .expect("the event is recorded");
    let tries = faults
        .rules()
        .into_iter()
        .find(|rule| rule.id == dropped)
        .map(|rule| (rule.matched, rule.injected));
    assert_eq!(
        tries,
        Some((2, 1)),
        "two writes, the first one's connection dropped"
    );
    let events = events_about(&cluster, &node, "Starting").await;
    assert_eq!(
        events.len(),
        1,
        "written by the second try: {:?}",
        summary(&events)
    );
}

#[tokio::test]
async fn similar_events_are_combined_into_one_aggregate_event() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("evsimilar");
    let api = connect(&cluster).await;
    for i in 0..11 {
        let event = NodeEvent::warning("ContainerGCFailed", format!("attempt {i} failed"));
        api.record_event(&node, event)
            .await
            .expect("the event is recorded");
    }
    let events = events_about(&cluster, &node, "ContainerGCFailed").await;
    let (combined, single): (Vec<_>, Vec<_>) = events.iter().partition(|event| {
        event
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("(combined from similar events): "))
    });
    // Nine distinct messages are written as they are; the tenth and eleventh make the
    // aggregate, created once and then counted.
    assert_eq!(single.len(), 9, "{:?}", summary(&events));
    assert_eq!(combined.len(), 1, "{:?}", summary(&events));
    assert_eq!(combined[0].count, Some(2), "{:?}", combined[0]);
    assert_eq!(
        combined[0].message.as_deref(),
        Some("(combined from similar events): attempt 10 failed")
    );
}

/// nodepulse's Events about this very pod (its UID) with `reason`.
async fn pod_events(cluster: &TestCluster, pod: &Pod, reason: &str) -> Vec<Event> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let about = ListParams::default().fields(&format!(
        "involvedObject.name={name},reason={reason},source=kubelet"
    ));
    let events = Api::<Event>::namespaced(cluster.client.clone(), "default")
        .list(&about)
        .await
        .expect("events listed");
    (events.items.into_iter())
        .filter(|event| event.involved_object.uid == pod.metadata.uid)
        .collect()
}

#[actix_rt::test]
async fn a_crash_looping_pod_has_one_event_object_per_reason() {
    let test = "a_crash_looping_pod_has_one_event_object_per_reason";
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(test, "cri-evfold").await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-crash", node.name);
        let crashing = spec("Always", json!([shell("app", "exit 1")]));
        create_pod(&cluster, &node.name, &name, crashing).await;
        let pod = wait_pod(&cluster.client, "default", &name, "restarted", |pod| {
            app(pod).restart_count >= 1
        })
        .await;
        eventually_async("two Starts of the container recorded", || async {
            let started = pod_events(&cluster, &pod, "Started").await;
            started.iter().filter_map(|e| e.count).sum::<i32>() >= 2
        })
        .await;
        for reason in ["Pulled", "Created", "Started"] {
            let events = pod_events(&cluster, &pod, reason).await;
            assert_eq!(events.len(), 1, "{reason}: {:?}", summary(&events));
        }
        let started = pod_events(&cluster, &pod, "Started").await;
        assert!(started[0].count >= Some(2), "{:?}", summary(&started));
    })
    .await;
}
