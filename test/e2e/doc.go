// Package e2e holds the acceptance tests that run gpupolicy's cluster verbs
// against the real local lab cluster (package cluster): a kube-apiserver
// with the real Kueue and Argo controllers and a KWOK-simulated GPU node.
// They skip when the cluster's binaries are not built (make cluster-build).
package e2e
