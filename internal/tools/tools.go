//go:build tools

// Package tools pins the modules the project builds on (design.md's chosen
// dependencies) so that go.mod and go.sum carry them before every package
// imports them.
package tools

import (
	_ "github.com/NVIDIA/go-nvml/pkg/nvml"
	_ "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	_ "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	_ "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	_ "k8s.io/apimachinery/pkg/util/json"
	_ "k8s.io/client-go/dynamic"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	_ "sigs.k8s.io/kustomize/api/krusty"
	_ "sigs.k8s.io/kustomize/kyaml/filesys"
	_ "sigs.k8s.io/yaml"
)
