// Package verify is gpupolicy's post-deploy verification: it runs the GPU
// test job (package testjob) through the environment's real cache-free GPU
// step WorkflowTemplate and checks that the cluster admits exactly what the
// admission model (package admission, `gpupolicy explain`) predicts.
//
// # What a run does
//
// For each level n it submits n Workflows together, Batches times, each
// job its own Workflow with workflowTemplateRef to the cache-free template
// (gpu-step-no-cache in the lab) and the argument priority=<the ladder's
// lowest> (batch): verify never runs higher and so never preempts anyone.
// The Workflow's podSpecPatch runs the test job's script, mounted from a
// ConfigMap (testjob.ConfigMapName, or a run-scoped copy when that is absent
// or stale), with --hold; its podMetadata carries the hold as
// gpupolicy.dev/run-seconds, which the local cluster's KWOK node uses as the
// pod's run time (a real kubelet ignores it). Everything else — the locks
// (Argo semaphores), the Kueue queue and priority labels, the requests and
// the GPU-memory declaration — comes from the template as deployed.
//
// It polls the API every Options.Poll and records per job: Submitted (when
// verify created the Workflow), PodCreated (Argo gave the step its lock),
// Admitted (the pod's Kueue Workload's QuotaReserved), ContainerStarted,
// the job's own start and end stamps when its log is readable (a KWOK node
// serves no logs), Ended (the container's end) and Released (the Workload's
// Finished). API stamps have one-second resolution; the first sighting of a
// state wins (a container's start is read while it runs and again from its
// terminated state). A batch ends when every Workflow is final and every started
// container has ended; its Workflows and pods are then deleted before the
// next batch.
//
// With Cancel, a batch of (predicted + 1) jobs follows the levels: once the
// first job has run a third of the hold (1 to 20 s), verify sets its
// Workflow's spec.shutdown to Terminate and times the close (request to the
// container's end) and the hand-off (to the start of the job that took its
// place). Argo stops a running pod by exec'ing kill in it, which a simulated
// node cannot serve; if the pod still runs CancelGrace after the request,
// verify deletes it and says so.
//
// With Faults, a fault batch of (predicted + 1) jobs follows: the first,
// submitted alone, crashes DefaultCrashAfter(Hold) after its checks (the
// test job's --crash-after; on a simulated node the same run time and exit
// code as annotations), the others follow once it runs, and where an
// earlier job reported a CUDA device the second allocates twice its
// declaration beyond it (--allocate-mib). The report's Faults says whether
// the others finished with correct outputs, when the crashed job's quota
// and lock slot were freed and how long the job that took its place waited
// (faults.go).
//
// # Two policies side by side
//
// RunSideBySide runs the same batches under two policies in turn on one
// cluster — each policy's render reconciled before its batches by the
// caller's Deploy — and puts the environment's render back with Restore at
// the end, also after an error or an interrupt; a deploy or the restore is
// never cut short. SideBySide compares the levels both ran: rates and
// their ratio, the hand-off by part, and one at a time each batch's time
// split into first start, runs and gaps (sidebyside.go).
//
// # The service state
//
// Which on-demand services are up is read from the cluster before and after
// each batch (ReadState): a service is up when a Kueue Workload in its
// namespace holds quota (QuotaReserved true, Finished not) in its
// ClusterQueue and names it (the Workload's or its owner pod's name is the
// service's name, starts with "NAME-" or contains "-NAME-"); a service alone
// in its namespace and queue needs no name match. Quota held is what moves
// admission, which is why the state is read from Workloads rather than from
// Deployments: a Deployment scaled to zero has no pod and no Workload, and a
// waking pod the queue has not admitted holds nothing (it is noted). An
// always-on service that holds no quota is noted too, since the prediction
// assumes it does. A batch during which the state changed is not compared.
//
// # What is compared
//
// Per batch, against the prediction for its state (Compare; Checks lists
// the IDs): never more running or holding quota at once than predicted
// (more-at-once); no job beyond the count starting while that many others
// run (did-not-wait, naming the job); as many at once as predicted when
// enough were submitted (fewer-at-once); no admission at all where the
// prediction is zero (admitted-while-starved) — verify then watches one
// batch wait for StarveWatch instead of running the levels, and reports the
// starvation explain predicted; no failed job or failed GPU check; nothing
// unfinished at the timeout; the cancelled job stopped; nothing left behind.
//
// # The report
//
// Summarize turns observed stamps into the write-ups' figures, as pure
// functions: a batch's completion rate is its completed jobs over the time
// from its submission to its last job's end, a level's rate the mean over
// its batches (with the range), against one lone job's rate × n; a hand-off
// gap runs from the end that freed a place to the start of the job that
// took it (with c the most running at once, the r-th job to start took the
// place of the (r−c)-th end); the concurrency reached is the most running
// at once. Markdown, Text, JSON and Timeline (an SVG, a bar per job,
// waiting and running in two colours) present it; WriteDir writes
// report.md, report.json and timeline.svg atomically.
//
// GPU memory is sampled through NVML every second on the machine verify
// runs on (the GPU node), when the binary has NVML (see NVMLBuildFlags) and
// the driver is there; otherwise the report says why it was not sampled.
//
// # Cleanup
//
// Everything a run creates carries LabelRun=<run id> and is deleted at the
// end of each batch and of the run, also when the context is cancelled
// (Ctrl-C) or the run reaches its timeout; Report.Cleanup lists what was
// deleted and anything left, which is a finding.
package verify
