//! Tearing a pod down (deleted, evicted, or gone from the API): its containers stopped with the
//! grace period left (`kill`: preStop hooks, sidecars last; the runtime sends SIGTERM, then
//! SIGKILL), the sandboxes stopped and removed,
//! then the final status and TerminatePod — so a pod the API no longer shows has nothing left in the runtime.

use std::sync::Arc;

use super::{
    engine::{Ending, Engine},
    grace::grace_left,
    sent_status::SentStatus,
};
use nodepulse_actors::{pods::PodUpdate, ports::PodEvent};

impl Engine {
    pub async fn terminate(self: &Arc<Self>, uid: &str, ending: Ending) {
        let _ = self.runtime_name().await;
        if let Err(error) = self.refresh(uid).await {
            tracing::warn!(%error, uid, "cannot list the pod's containers to stop them; retrying");
            self.retry_soon(uid);
            return;
        }
        let Some((pod, runtime)) = self
            .core()
            .pods
            .get(uid)
            .map(|e| (e.pod.clone(), e.runtime.clone()))
        else {
            return;
        };
        let grace = grace_left(&pod, &ending, self.now());
        self.kill_containers(&pod, &runtime, grace, None).await;
        for sandbox in &runtime.sandboxes {
            if let Err(error) = self.runtime.stop_pod_sandbox(sandbox.id.clone()).await {
                tracing::warn!(%error, uid, "error killing pod");
                self.event(
                    &pod,
                    PodEvent::warning("FailedKillPod", format!("error killing pod: {error}")),
                );
                self.retry_soon(uid);
                return;
            }
        }
        // The containers as they ended, read before RemovePodSandbox takes them away.
        let _ = self.refresh(uid).await;
        for sandbox in &runtime.sandboxes {
            if let Err(error) = self.runtime.remove_pod_sandbox(sandbox.id.clone()).await {
                tracing::warn!(%error, uid, "RemovePodSandbox failed; the sandbox stays stopped");
            }
        }
        self.report_final(uid, &ending);
        let mut core = self.core();
        core.crash.forget(&format!("{uid}/"));
        let gone = ending == Ending::Gone;
        if gone {
            core.pods.remove(uid);
            self.pods_view.forget(uid);
        }
        drop(core);
        if gone {
            self.release_user_namespace(uid);
        }
        // The pod cgroup goes once nothing of the pod runs (the kubelet's Destroy).
        self.want_cgroup_housekeeping();
        self.wake();
        self.wake_static_successors(&pod);
    }

    fn retry_soon(&self, uid: &str) {
        let at = self.now();
        if let Some(entry) = self.core().pods.get_mut(uid) {
            entry.retry_at = Some(at);
        }
    }

    /// The status the pod ends with (its containers as they stopped), then TerminatePod.
    fn report_final(&self, uid: &str, ending: &Ending) {
        let mut core = self.core();
        let runtime_name = core.runtime_name.clone().unwrap_or_default();
        let Some(entry) = core.pods.get_mut(uid) else {
            return;
        };
        if *ending == Ending::Gone {
            entry.end.finish_untold();
            return;
        }
        let status = self.status_of(entry, &runtime_name, Some(ending));
        let pod = entry.kept.clone();
        let send_terminated = entry.end.finish();
        entry.last_sent = Some(SentStatus::of(&status));
        core.outbox.push(PodUpdate::Status {
            pod: pod.clone(),
            status: Box::new(status),
        });
        if send_terminated {
            core.outbox.push(PodUpdate::Terminated { pod });
        }
    }
}
