package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/services/msgmesh/app"
)

const k8sDir = "../../deployments/kubernetes"

// k8sObjects is every object of the kustomization, decoded strictly into
// the Kubernetes API types (an unknown or misspelt field fails).
type k8sObjects struct {
	configMaps  map[string]*corev1.ConfigMap
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	pdbs        map[string]*policyv1.PodDisruptionBudget
}

func decodeStrict(t *testing.T, file string, doc []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// splitDocs splits a YAML stream at its "---" lines, dropping empty ones.
func splitDocs(b []byte) [][]byte {
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

func loadK8s(t *testing.T) k8sObjects {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(k8sDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kust struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Labels     []struct {
			Pairs            map[string]string `json:"pairs"`
			IncludeSelectors bool              `json:"includeSelectors"`
		} `json:"labels"`
		Images []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
		Resources []string `json:"resources"`
	}
	decodeStrict(t, "kustomization.yaml", raw, &kust)
	if kust.Kind != "Kustomization" || len(kust.Resources) == 0 {
		t.Fatalf("kustomization.yaml: kind %q with %d resources", kust.Kind, len(kust.Resources))
	}
	o := k8sObjects{map[string]*corev1.ConfigMap{}, map[string]*appsv1.Deployment{}, map[string]*corev1.Service{}, map[string]*policyv1.PodDisruptionBudget{}}
	for _, f := range kust.Resources {
		b, err := os.ReadFile(filepath.Join(k8sDir, f))
		if err != nil {
			t.Fatalf("kustomization resource: %v", err)
		}
		for _, doc := range splitDocs(b) {
			var tm struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 ConfigMap":
				var x corev1.ConfigMap
				decodeStrict(t, f, doc, &x)
				o.configMaps[x.Name] = &x
			case "apps/v1 Deployment":
				var x appsv1.Deployment
				decodeStrict(t, f, doc, &x)
				o.deployments[x.Name] = &x
			case "v1 Service":
				var x corev1.Service
				decodeStrict(t, f, doc, &x)
				o.services[x.Name] = &x
			case "policy/v1 PodDisruptionBudget":
				var x policyv1.PodDisruptionBudget
				decodeStrict(t, f, doc, &x)
				o.pdbs[x.Name] = &x
			default:
				t.Fatalf("%s: unexpected object %s %s", f, tm.APIVersion, tm.Kind)
			}
		}
	}
	return o
}

func exampleSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(k8sDir, "secret.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	decodeStrict(t, "secret.example.yaml", b, &s)
	if s.Kind != "Secret" || s.APIVersion != "v1" {
		t.Fatalf("secret.example.yaml is %s %s", s.APIVersion, s.Kind)
	}
	return &s
}

func selects(sel map[string]string, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Issue 16 item 5: the Kubernetes manifests are valid API objects (strict
// decoding into k8s.io/api types), run every split target with probes on
// /healthz and /readyz at the configured port, a grace period above
// http.shutdown_timeout, resource requests and a PodDisruptionBudget, take
// config from the ConfigMap and secrets from the Secret under names that
// are MsgMesh settings, and each pod's settings pass --verify-config.
func TestKubernetesManifests(t *testing.T) {
	o := loadK8s(t)
	secret := exampleSecret(t)
	cm := o.configMaps["msgmesh-config"]
	if cm == nil {
		t.Fatal("no ConfigMap msgmesh-config")
	}
	envs := map[string]bool{}
	for _, s := range config.Settings() {
		envs[s.Env] = true
	}
	for k := range cm.Data {
		if !envs[k] {
			t.Errorf("ConfigMap key %s is no MsgMesh setting (platform/config)", k)
		}
	}
	_, portStr, err := net.SplitHostPort(cm.Data["MSGMESH_HTTP_ADDR"])
	if err != nil {
		t.Fatalf("MSGMESH_HTTP_ADDR %q: %v", cm.Data["MSGMESH_HTTP_ADDR"], err)
	}
	shutdown, err := time.ParseDuration(cm.Data["MSGMESH_HTTP_SHUTDOWN_TIMEOUT"])
	if err != nil {
		t.Fatalf("MSGMESH_HTTP_SHUTDOWN_TIMEOUT: %v", err)
	}

	want := []string{app.ControlPlane, app.Gateway, app.Realtime, app.Dispatcher}
	var got []string
	for name, d := range o.deployments {
		spec := d.Spec.Template.Spec
		if len(spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", name, len(spec.Containers))
		}
		c := spec.Containers[0]
		var target string
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--target="); ok {
				target = v
			}
		}
		if _, ok := app.Targets[target]; !ok || target == app.All {
			t.Errorf("%s: --target=%q is no split target (%v)", name, target, app.Targets)
		}
		got = append(got, target)
		if d.Spec.Selector == nil || !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("%s: the selector does not select the pod template", name)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("%s: want at least 2 replicas", name)
		}

		// Ports and probes.
		if len(c.Ports) != 1 || c.Ports[0].Name != "http" || fmt.Sprint(c.Ports[0].ContainerPort) != portStr {
			t.Errorf("%s: ports %+v, want one named http on %s (MSGMESH_HTTP_ADDR)", name, c.Ports, portStr)
		}
		probe := func(what string, p *corev1.Probe, path string) {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromString("http") {
				t.Errorf("%s: %s probe %+v, want GET %s on port http", name, what, p, path)
			}
		}
		probe("liveness", c.LivenessProbe, "/healthz")
		probe("startup", c.StartupProbe, "/healthz")
		probe("readiness", c.ReadinessProbe, "/readyz")

		// Graceful shutdown within the grace period.
		var pause time.Duration
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			pause = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
		if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= shutdown+pause {
			t.Errorf("%s: terminationGracePeriodSeconds %d, want above http.shutdown_timeout %v + preStop %v", name, derefOr(g), shutdown, pause)
		}

		// Resources.
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: want cpu and memory requests and a memory limit, got %+v", name, c.Resources)
		}
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: want a read-only root filesystem and no privilege escalation", name)
		}

		// Config from the ConfigMap, secrets from the Secret.
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || o.configMaps[c.EnvFrom[0].ConfigMapRef.Name] == nil {
			t.Errorf("%s: envFrom %+v, want the ConfigMap of the kustomization", name, c.EnvFrom)
		}
		env := map[string]string{}
		for k, v := range cm.Data {
			env[k] = v
		}
		for _, e := range c.Env {
			if !envs[e.Name] {
				t.Errorf("%s: env %s is no MsgMesh setting", name, e.Name)
			}
			ref := e.ValueFrom
			if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != secret.Name {
				t.Errorf("%s: env %s is not taken from the Secret %s", name, e.Name, secret.Name)
				continue
			}
			if _, ok := secret.StringData[ref.SecretKeyRef.Key]; !ok {
				t.Errorf("%s: env %s names key %q, which secret.example.yaml lacks", name, e.Name, ref.SecretKeyRef.Key)
			}
			env[e.Name] = ref.SecretKeyRef.Key // a stand-in; valid values below
		}
		if (env["MSGMESH_BOOTSTRAP_ADMIN_KEY"] != "") != (target == app.ControlPlane) {
			t.Errorf("%s: the bootstrap admin key belongs to the control plane only", name)
		}
		// The KEK file is the Secret's key mounted where secrets.key_file points.
		kekFile := env["MSGMESH_SECRETS_KEY_FILE"]
		var mounted bool
		for _, m := range c.VolumeMounts {
			for _, v := range spec.Volumes {
				if v.Name != m.Name || v.Secret == nil || v.Secret.SecretName != secret.Name {
					continue
				}
				for _, it := range v.Secret.Items {
					if filepath.Join(m.MountPath, it.Path) == kekFile {
						if _, ok := secret.StringData[it.Key]; !ok {
							t.Errorf("%s: the KEK volume names key %q, which secret.example.yaml lacks", name, it.Key)
						}
						mounted = true
					}
				}
			}
		}
		if !mounted {
			t.Errorf("%s: secrets.key_file %q is not a file of the Secret %s mounted in the pod", name, kekFile, secret.Name)
		}

		// Service and PodDisruptionBudget.
		svc := o.services[name]
		if svc == nil || !selects(svc.Spec.Selector, d.Spec.Template.Labels) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
			t.Errorf("%s: want a Service of the same name selecting its pods with targetPort http", name)
		}
		pdb := o.pdbs[name]
		if pdb == nil || pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) || (pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil) {
			t.Errorf("%s: want a PodDisruptionBudget selecting its pods", name)
		}

		// The pod's settings validate, as the binary reads them.
		verifyPodConfig(t, name, c.Args, env)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Deployments run targets %v, want %v", got, want)
	}
}

// verifyPodConfig runs `msgmesh <args> --verify-config` with env (secret
// stand-ins replaced by valid values, the KEK written where the Secret
// would be mounted).
func verifyPodConfig(t *testing.T, name string, args []string, env map[string]string) {
	t.Helper()
	var gen bytes.Buffer
	if code := run([]string{"genkey"}, &gen, &bytes.Buffer{}); code != 0 {
		t.Fatal("genkey failed")
	}
	dir := t.TempDir()
	kek := filepath.Join(dir, "secrets.key")
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	if err := os.WriteFile(kek, []byte(base64.StdEncoding.EncodeToString(raw[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		switch k {
		case "MSGMESH_BOOTSTRAP_ADMIN_KEY", "MSGMESH_OPERATOR_KEY":
			v = strings.TrimSpace(gen.String())
		case "MSGMESH_SECRETS_KEY_FILE":
			v = kek
		case "MSGMESH_DATA_DIR":
			v = dir
		}
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	if code := run(append(slices.Clone(args), "--verify-config"), &out, &errb); code != 0 {
		t.Errorf("%s: its settings do not validate (exit %d):\n%s", name, code, errb.String())
		return
	}
	if !strings.Contains(out.String(), "kafka.brokers = "+env["MSGMESH_KAFKA_BROKERS"]) {
		t.Errorf("%s: ConfigMap settings not applied:\n%s", name, out.String())
	}
}

func derefOr(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
