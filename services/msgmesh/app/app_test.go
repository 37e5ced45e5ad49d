package app

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/kafkatest"
)

// Each target needs exactly the modules it uses: a gateway never opens
// the webhook store (a dead-letter client), a dispatcher never builds the
// control plane's commands.
func TestResolveNamesEveryEdge(t *testing.T) {
	for target, tc := range map[string]struct{ has, hasNot []string }{
		Gateway:      {has: []string{modKafka, modControlLog, modLimits, modServer, modControlService}, hasNot: []string{modWebhookStore}},
		Dispatcher:   {has: []string{modKafka, modControlLog, modServer, modWebhookStore}, hasNot: []string{modControlService}},
		ControlPlane: {has: []string{modControlService, modWebhookStore, modServer}},
		Realtime:     {has: []string{modServer}, hasNot: []string{modControlService, modWebhookStore}},
		Panel:        {has: []string{ControlPlane, Gateway, Realtime}, hasNot: []string{Dispatcher}},
	} {
		mods, err := Resolve([]string{target})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tc.has {
			if !slices.Contains(mods, m) {
				t.Errorf("%s: resolves %v, missing %s", target, mods, m)
			}
		}
		for _, m := range tc.hasNot {
			if slices.Contains(mods, m) {
				t.Errorf("%s: resolves %v, want no %s", target, mods, m)
			}
		}
		pos := map[string]int{}
		for i, m := range mods {
			pos[m] = i
		}
		for _, m := range mods {
			for _, d := range deps[m] {
				if pos[d] > pos[m] {
					t.Errorf("%s: %s starts before its dependency %s", target, m, d)
				}
			}
		}
	}
	if _, err := Resolve([]string{modKafka}); err == nil {
		t.Error("an internal module was accepted as a target")
	}
}

func testConfig(t *testing.T) config.Config {
	brokers, _ := kafkatest.Brokers(t)
	cfg := config.Defaults()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Kafka.Brokers = brokers
	cfg.Kafka.TopicPrefix = strings.ReplaceAll(kafkatest.Name("app"), ".", "-")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Every target boots alone, in-process, the same way as all: it answers
// /readyz 200 once caught up and stops cleanly. A gateway-only process
// builds the control plane's commands it creates topics through at start
// (not lazily) and no webhook store (no dead-letter client).
func TestEveryTargetStartsAlone(t *testing.T) {
	for _, target := range []string{ControlPlane, Gateway, Realtime, Dispatcher, Panel} {
		t.Run(target, func(t *testing.T) {
			cfg := testConfig(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			a, err := New(ctx, cfg, []string{target}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			wantStore := target == ControlPlane || target == Dispatcher || target == Panel
			if (a.webhooks != nil) != wantStore {
				t.Errorf("webhook store opened: %v, want %v", a.webhooks != nil, wantStore)
			}
			if target == Gateway && (a.cp == nil || a.gw == nil) {
				t.Errorf("control service %v, gateway %v: want both built by New", a.cp != nil, a.gw != nil)
			}
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- a.Run(rctx) }()
			ready := false
			for !ready && ctx.Err() == nil {
				resp, err := http.Get("http://" + a.Addr + "/readyz")
				if err == nil {
					ready = resp.StatusCode == http.StatusOK
					resp.Body.Close()
				}
				if !ready {
					time.Sleep(50 * time.Millisecond)
				}
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !ready {
				t.Fatal("never ready")
			}
		})
	}
}

// A webhook setting that cannot work fails the start of every target
// that needs the webhook store, naming the setting (it used to be logged
// while the webhook API stayed off).
func TestWebhookStoreFailureIsFatal(t *testing.T) {
	for _, target := range []string{ControlPlane, Dispatcher} {
		cfg := testConfig(t)
		cfg.Webhooks.UnsafeCAFile = filepath.Join(t.TempDir(), "missing.pem")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		a, err := New(ctx, cfg, []string{target}, slog.New(slog.DiscardHandler))
		cancel()
		if err == nil {
			a.stopAll(context.Background())
			t.Fatalf("%s: started with an unreadable webhooks.unsafe_ca_file", target)
		}
		if !strings.Contains(err.Error(), "webhooks.unsafe_ca_file") || !strings.HasPrefix(err.Error(), modWebhookStore+": ") {
			t.Fatalf("%s: error %q, want the webhook store naming webhooks.unsafe_ca_file", target, err)
		}
	}
}
