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
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
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
// resources, that every name referred to exists, that no port or Service
// leads to the admin API, and that Prometheus alone may scrape the
// metrics port.
func TestManifests(t *testing.T) {
	k, objs := manifests(t)
	cm := objs["configmap.yaml"].(*corev1.ConfigMap)
	dep := objs["deployment.yaml"].(*appsv1.Deployment)
	svc := objs["service.yaml"].(*corev1.Service)
	pdb := objs["pdb.yaml"].(*policyv1.PodDisruptionBudget)
	np := objs["networkpolicy.yaml"].(*networkingv1.NetworkPolicy)

	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("deployment: replicas %v, want 2", dep.Spec.Replicas)
	}
	pod := dep.Spec.Template
	if diff := cmp.Diff(dep.Spec.Selector.MatchLabels, pod.Labels); diff != "" {
		t.Errorf("deployment: selector is not the pod's labels (-selector +labels):\n%s", diff)
	}
	for name, sel := range map[string]map[string]string{"service": svc.Spec.Selector, "pdb": pdb.Spec.Selector.MatchLabels, "networkpolicy": np.Spec.PodSelector.MatchLabels} {
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
	// The pod's ports are the ConfigMap's listeners: the gateway and the
	// metrics. The admin API is a unix socket: no port, no Service.
	if diff := cmp.Diff(map[string]int32{"http": 8080, "metrics": 9180}, ports); diff != "" {
		t.Errorf("deployment: ports (-want +got):\n%s", diff)
	}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.String() != "http" {
			t.Errorf("service: target port %s: the Service is the gateway's port alone", p.TargetPort.String())
		}
	}
	if a := pod.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != fmt.Sprint(ports["metrics"]) {
		t.Errorf("deployment: annotations %v, want prometheus.io/scrape true on the metrics port %d", a, ports["metrics"])
	}
	for _, e := range c.Env {
		if e.Name == "CADDY_ADMIN" {
			t.Errorf("deployment: env CADDY_ADMIN=%q: the admin socket is the image's", e.Value)
		}
	}

	// The gateway's port is open; the metrics port to Prometheus's pods.
	if len(np.Spec.Ingress) != 2 {
		t.Fatalf("networkpolicy: %d ingress rules, want 2 (the gateway's port, the metrics port): %+v", len(np.Spec.Ingress), np.Spec.Ingress)
	}
	open, scrape := np.Spec.Ingress[0], np.Spec.Ingress[1]
	if len(open.From) != 0 || len(open.Ports) != 1 || open.Ports[0].Port.String() != "http" {
		t.Errorf("networkpolicy: rule 1 %+v, want the http port open to all", open)
	}
	if len(scrape.Ports) != 1 || scrape.Ports[0].Port.String() != "metrics" || len(scrape.From) != 1 || scrape.From[0].PodSelector == nil ||
		scrape.From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus" {
		t.Errorf("networkpolicy: rule 2 %+v, want the metrics port open to Prometheus's pods alone", scrape)
	}
}

// imageAdmin is the admin address the image's Containerfile sets
// (CADDY_ADMIN), which hookgate's commands run in the pod dial.
func imageAdmin(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../container/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(src), "CADDY_ADMIN=")
	if !ok {
		t.Fatal("the Containerfile sets no CADDY_ADMIN")
	}
	v, _, _ := strings.Cut(rest, "\n")
	return strings.Trim(strings.TrimSpace(v), `"`)
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
	if kinds["Secret"] != 1 || len(kinds) != 6 {
		t.Errorf("rendered %v: want the 5 resources and the Secret", kinds)
	}
}

// TestConfigMapCaddyfile loads the ConfigMap's Caddyfile with the hookgate
// binary (hookgate adapt --validate: every module provisioned) in the
// Deployment's environment, and checks that the admin API is the image's
// unix socket, mode 0600, that it serves the ports the Deployment names
// (the metrics on theirs), and that the gateways run its reconcile job on
// a schedule, with the sources' environment the Deployment sets.
func TestConfigMapCaddyfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the hookgate binary: skipped under -short")
	}
	_, objs := manifests(t)
	cm := objs["configmap.yaml"].(*corev1.ConfigMap)
	dep := objs["deployment.yaml"].(*appsv1.Deployment)
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
	adapt.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir, "CADDY_ADMIN="+imageAdmin(t),
		"HOOKGATE_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", // not the development secret, which warns
		"REDIS_URL=redis://127.0.0.1:1/0", "HOOKGATE_UPSTREAM=127.0.0.1:1",
		"TRUTH_DSN=postgres://reconcile@127.0.0.1:1/truth", "ENROLL_DSN=postgres://reconcile@127.0.0.1:1/enroll")
	var stderr bytes.Buffer
	adapt.Stderr = &stderr
	out, err := adapt.Output()
	if err != nil {
		t.Fatalf("hookgate adapt --validate: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), `"level":"warn"`) {
		t.Errorf("hookgate adapt warns:\n%s", stderr.String())
	}
	type server struct {
		Listen []string `json:"listen"`
		Routes []struct {
			Handle []struct {
				Handler string `json:"handler"`
			} `json:"handle"`
		} `json:"routes"`
	}
	var cfg struct {
		Admin struct {
			Listen string `json:"listen"`
		} `json:"admin"`
		Apps struct {
			Hookgate struct {
				Reconcile []struct {
					Name     string `json:"name"`
					Every    int64  `json:"every"`
					Truth    any    `json:"truth"`
					Receiver any    `json:"receiver"`
				} `json:"reconcile"`
			} `json:"hookgate"`
			HTTP struct {
				Servers map[string]server `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if want := "unix//data/admin.sock|0600"; cfg.Admin.Listen != want || imageAdmin(t) != want {
		t.Errorf("admin listens on %q, the image's CADDY_ADMIN is %q; want both %q: a socket in the pod, the user's alone", cfg.Admin.Listen, imageAdmin(t), want)
	}
	listen := map[string]bool{}
	for _, s := range cfg.Apps.HTTP.Servers {
		for _, l := range s.Listen {
			metricsOnly := len(s.Routes) == 1 && len(s.Routes[0].Handle) == 1 && s.Routes[0].Handle[0].Handler == "metrics"
			listen[fmt.Sprintf("%s metrics:%v", l, metricsOnly)] = true
		}
	}
	if diff := cmp.Diff(map[string]bool{":8080 metrics:false": true, ":9180 metrics:true": true}, listen); diff != "" {
		t.Errorf("the servers, and whether each serves the metrics alone (-want +got):\n%s", diff)
	}
	if len(cfg.Apps.Hookgate.Reconcile) != 1 || cfg.Apps.Hookgate.Reconcile[0].Every <= 0 {
		t.Fatalf("reconcile jobs %+v: want one the gateways run on a schedule (every)", cfg.Apps.Hookgate.Reconcile)
	}
	env := map[string]bool{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = true
	}
	for _, v := range regexp.MustCompile(`\{env\.([A-Z_]+)\}`).FindAllStringSubmatch(cm.Data["Caddyfile"], -1) {
		if !env[v[1]] {
			t.Errorf("the Caddyfile reads {env.%s}, which the Deployment does not set", v[1])
		}
	}
}
