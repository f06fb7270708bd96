// Package kubernetes holds the test of hookgate's Kubernetes manifests:
// each decodes strictly into the Kubernetes API types, they refer to one
// another consistently, kustomize renders them, and the ConfigMap's
// Caddyfile loads with the hookgate binary.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// decode decodes one manifest strictly (an unknown or duplicate field
// fails) into the API type of its apiVersion and kind.
func decode(t *testing.T, name string, doc []byte) any {
	t.Helper()
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var obj any
	switch meta.APIVersion + " " + meta.Kind {
	case "v1 ConfigMap":
		obj = new(corev1.ConfigMap)
	case "v1 Secret":
		obj = new(corev1.Secret)
	case "v1 Service":
		obj = new(corev1.Service)
	case "apps/v1 Deployment":
		obj = new(appsv1.Deployment)
	case "policy/v1 PodDisruptionBudget":
		obj = new(policyv1.PodDisruptionBudget)
	case "batch/v1 CronJob":
		obj = new(batchv1.CronJob)
	case "networking.k8s.io/v1 NetworkPolicy":
		obj = new(networkingv1.NetworkPolicy)
	default:
		t.Fatalf("%s: no API type for %s %s here: add it to decode", name, meta.APIVersion, meta.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return obj
}

// kustomization is what kustomization.yaml may hold: a field of
// kustomize's that this test does not know fails it, so that it is
// checked here first.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Resources       []string `json:"resources"`
	SecretGenerator []struct {
		Name string   `json:"name"`
		Envs []string `json:"envs"`
	} `json:"secretGenerator"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// manifests decodes kustomization.yaml and every manifest it lists, each
// a file of its own, and checks that it lists every YAML file here.
func manifests(t *testing.T) (kustomization, map[string]any) {
	t.Helper()
	src, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(src, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return f == "kustomization.yaml" })
	if diff := cmp.Diff(files, slices.Sorted(slices.Values(k.Resources))); diff != "" {
		t.Errorf("kustomization.yaml's resources are not the YAML files here (-files +resources):\n%s", diff)
	}
	objs := map[string]any{}
	for _, f := range k.Resources {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(doc, []byte("\n---")) {
			t.Errorf("%s holds several documents: one manifest a file", f)
		}
		objs[f] = decode(t, f, doc)
	}
	return k, objs
}

// TestManifests decodes every manifest strictly and checks what the
// deployment depends on: the replicas, the user, the probes, the
// resources, that every name referred to exists, and that the CronJob
// runs the config's job against the admin Service.
func TestManifests(t *testing.T) {
	k, objs := manifests(t)
	cm := objs["configmap.yaml"].(*corev1.ConfigMap)
	dep := objs["deployment.yaml"].(*appsv1.Deployment)
	svc := objs["service.yaml"].(*corev1.Service)
	admin := objs["admin-service.yaml"].(*corev1.Service)
	pdb := objs["pdb.yaml"].(*policyv1.PodDisruptionBudget)
	cron := objs["cronjob.yaml"].(*batchv1.CronJob)
	np := objs["networkpolicy.yaml"].(*networkingv1.NetworkPolicy)

	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("deployment: replicas %v, want 2", dep.Spec.Replicas)
	}
	pod := dep.Spec.Template
	if diff := cmp.Diff(dep.Spec.Selector.MatchLabels, pod.Labels); diff != "" {
		t.Errorf("deployment: selector is not the pod's labels (-selector +labels):\n%s", diff)
	}
	for name, sel := range map[string]map[string]string{"service": svc.Spec.Selector, "admin service": admin.Spec.Selector, "pdb": pdb.Spec.Selector.MatchLabels, "networkpolicy": np.Spec.PodSelector.MatchLabels} {
		if diff := cmp.Diff(pod.Labels, sel); diff != "" {
			t.Errorf("%s: selects other pods than the gateway's (-pod +selector):\n%s", name, diff)
		}
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("pdb: minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}

	secretKeys := envExampleKeys(t)
	secretName := k.SecretGenerator[0].Name
	checkPod := func(what string, spec corev1.PodSpec) {
		t.Helper()
		if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
			t.Errorf("%s: the pod must run as non-root 65532: %+v", what, sc)
		}
		if len(spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", what, len(spec.Containers))
		}
		c := spec.Containers[0]
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: the container needs a read-only root, no privilege escalation, no capabilities: %+v", what, sc)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: resources %+v: want CPU and memory requests, and a memory limit", what, c.Resources)
		}
		for _, e := range c.Env {
			if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
				if ref.SecretKeyRef.Name != secretName || !slices.Contains(secretKeys, ref.SecretKeyRef.Key) {
					t.Errorf("%s: env %s reads %s/%s: the Secret is %s, its keys (hookgate.env.example) %v", what, e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key, secretName, secretKeys)
				}
			}
		}
		var config string
		for _, v := range spec.Volumes {
			if v.ConfigMap != nil {
				config = v.Name
				if v.ConfigMap.Name != cm.Name {
					t.Errorf("%s: mounts ConfigMap %s, want %s", what, v.ConfigMap.Name, cm.Name)
				}
			}
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == config && m.MountPath == "/etc/hookgate" }) {
			t.Errorf("%s: the ConfigMap is not mounted at /etc/hookgate, where the image reads its Caddyfile", what)
		}
	}
	checkPod("deployment", pod.Spec)
	c := pod.Spec.Containers[0]
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "http" {
		t.Errorf("deployment: readiness probe %+v, want GET /healthz on http", p)
	}
	if c.LivenessProbe == nil {
		t.Error("deployment: no liveness probe")
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/data" }) {
		t.Error("deployment: nothing writable at /data (XDG_DATA_HOME) under a read-only root")
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != 8080 || ports["admin"] != 2019 {
		t.Errorf("deployment: ports %v, want http 8080 and admin 2019 (the ConfigMap's)", ports)
	}
	for name, s := range map[string]*corev1.Service{"service": svc, "admin service": admin} {
		for _, p := range s.Spec.Ports {
			if _, ok := ports[p.TargetPort.String()]; !ok {
				t.Errorf("%s: target port %s is no port of the pod", name, p.TargetPort.String())
			}
		}
	}

	if cron.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("cronjob: concurrencyPolicy %q, want Forbid", cron.Spec.ConcurrencyPolicy)
	}
	checkPod("cronjob", cron.Spec.JobTemplate.Spec.Template.Spec)
	args := cron.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	if len(args) == 0 || args[0] != "reconcile" || !slices.Contains(args, "--repair") {
		t.Errorf("cronjob: args %q, want hookgate reconcile ... --repair", args)
	}
	wantAddr := fmt.Sprintf("%s:%d", admin.Name, admin.Spec.Ports[0].Port)
	if i := slices.Index(args, "--address"); i < 0 || i+1 >= len(args) || args[i+1] != wantAddr {
		t.Errorf("cronjob: args %q, want --address %s (the admin Service)", args, wantAddr)
	}
	reconcilePods := cron.Spec.JobTemplate.Spec.Template.Labels
	if len(np.Spec.Ingress) != 2 || len(np.Spec.Ingress[1].From) != 1 || !cmp.Equal(np.Spec.Ingress[1].From[0].PodSelector.MatchLabels, reconcilePods) {
		t.Errorf("networkpolicy: the admin port must be open to the CronJob's pods (%v) alone: %+v", reconcilePods, np.Spec.Ingress)
	}
}

// envExampleKeys are the keys of hookgate.env.example.
func envExampleKeys(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("hookgate.env.example")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for line := range strings.Lines(string(src)) {
		if k, _, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(line, "#") {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestKustomize renders the directory with kustomize's own library, as
// kubectl apply -k does (hookgate.env made from the example), and decodes
// every object it renders strictly.
func TestKustomize(t *testing.T) {
	dir := t.TempDir()
	files, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if f == "hookgate.env.example" {
			f = "hookgate.env"
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rendered, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize: %v", err)
	}
	out, err := rendered.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for i, doc := range bytes.Split(out, []byte("\n---\n")) {
		switch obj := decode(t, fmt.Sprintf("rendered document %d", i+1), doc).(type) {
		case *corev1.Secret:
			kinds["Secret"]++
			if keys := envExampleKeys(t); len(obj.Data) != len(keys) {
				t.Errorf("rendered Secret has %d keys, want %d", len(obj.Data), len(keys))
			}
		default:
			kinds[fmt.Sprintf("%T", obj)]++
		}
	}
	if kinds["Secret"] != 1 || len(kinds) != 7 {
		t.Errorf("rendered %v: want the 7 resources and the Secret", kinds)
	}
}

// TestConfigMapCaddyfile loads the ConfigMap's Caddyfile with the hookgate
// binary (hookgate adapt --validate: every module provisioned) in the
// Deployment's environment, and checks that the CronJob's job is in it,
// that it serves the ports the Deployment names, and that the CronJob's
// arguments are flags hookgate reconcile takes.
func TestConfigMapCaddyfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the hookgate binary: skipped under -short")
	}
	_, objs := manifests(t)
	cm := objs["configmap.yaml"].(*corev1.ConfigMap)
	cron := objs["cronjob.yaml"].(*batchv1.CronJob)
	dir := t.TempDir()
	bin := filepath.Join(dir, "hookgate")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/hookgate").CombinedOutput(); err != nil {
		t.Fatalf("building hookgate: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(cm.Data["Caddyfile"]), 0o600); err != nil {
		t.Fatal(err)
	}
	adapt := exec.Command(bin, "adapt", "--config", path, "--validate")
	adapt.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir,
		"HOOKGATE_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", // not the development secret, which warns
		"REDIS_URL=redis://127.0.0.1:1/0", "HOOKGATE_UPSTREAM=127.0.0.1:1")
	var stderr bytes.Buffer
	adapt.Stderr = &stderr
	out, err := adapt.Output()
	if err != nil {
		t.Fatalf("hookgate adapt --validate: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), `"level":"warn"`) {
		t.Errorf("hookgate adapt warns:\n%s", stderr.String())
	}
	var cfg struct {
		Admin struct {
			Listen string `json:"listen"`
		} `json:"admin"`
		Apps struct {
			Hookgate struct {
				Reconcile []struct {
					Name  string `json:"name"`
					Every int64  `json:"every"`
				} `json:"reconcile"`
			} `json:"hookgate"`
			HTTP struct {
				Servers map[string]struct {
					Listen []string `json:"listen"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.Listen != ":2019" {
		t.Errorf("admin listens on %q, want :2019 (the admin Service's target)", cfg.Admin.Listen)
	}
	var listen []string
	for _, s := range cfg.Apps.HTTP.Servers {
		listen = append(listen, s.Listen...)
	}
	if !slices.Equal(listen, []string{":8080"}) {
		t.Errorf("the gateway listens on %v, want [:8080] (the Deployment's http port)", listen)
	}
	args := cron.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	job := args[slices.Index(args, "--job")+1]
	if !slices.ContainsFunc(cfg.Apps.Hookgate.Reconcile, func(j struct {
		Name  string `json:"name"`
		Every int64  `json:"every"`
	}) bool {
		return j.Name == job && j.Every == 0
	}) {
		t.Errorf("the config has no job %q run only by the command (without every): %+v", job, cfg.Apps.Hookgate.Reconcile)
	}
	help, err := exec.Command(bin, "help", "reconcile").CombinedOutput()
	if err != nil {
		t.Fatalf("hookgate help reconcile: %v\n%s", err, help)
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--") && !strings.Contains(string(help), "  "+a+" ") {
			t.Errorf("cronjob: hookgate reconcile takes no flag %s:\n%s", a, help)
		}
	}
}
