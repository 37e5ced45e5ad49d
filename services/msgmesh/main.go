// Command msgmesh runs MsgMesh: any set of its targets under one lifecycle.
//
//	msgmesh serve [--target=all] [--config file] [--http.addr ...] [--verify-config] [--list-targets]
//	msgmesh version
//
// Configuration: flags > MSGMESH_* environment > config file > defaults
// (key http.addr ↔ MSGMESH_HTTP_ADDR ↔ --http.addr). See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/logging"
	"github.com/msgmesh/msgmesh/services/msgmesh/app"
)

// Version is set at build time (-ldflags "-X main.Version=...").
var Version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: msgmesh serve [flags] | msgmesh version | msgmesh serve --help")
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "msgmesh", Version)
		return 0
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "help", "--help", "-h":
		fmt.Fprintln(stdout, "usage: msgmesh serve [flags] | msgmesh version | msgmesh serve --help")
		return 0
	}
	fmt.Fprintf(stderr, "msgmesh: unknown command %q (want serve or version)\n", args[0])
	return 2
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs, target, listTargets, verify, cfgFile := serveFlags()
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "msgmesh serve: %v (see msgmesh serve --help)\n", err)
		return 2
	}
	targets := strings.Split(*target, ",")
	if _, err := app.Resolve(targets); err != nil {
		fmt.Fprintf(stderr, "msgmesh: %v\n", err)
		return 2
	}
	if *listTargets {
		fmt.Fprint(stdout, app.TargetList())
		return 0
	}
	cfg, err := load(fs, *cfgFile)
	if err != nil {
		fmt.Fprintf(stderr, "msgmesh: invalid configuration:\n%v\n", indent(err))
		return 2
	}
	if *verify {
		fmt.Fprintf(stdout, "configuration OK\n%s", describe(cfg))
		return 0
	}
	log := newLogger(cfg.Log, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	a, err := app.New(startCtx, cfg, targets, log)
	cancel()
	if err != nil {
		log.Error("msgmesh failed to start", "err", err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		log.Error("msgmesh stopped on error", "err", err)
		return 1
	}
	log.Info("msgmesh stopped")
	return 0
}

// serveFlags declares the flags of `msgmesh serve`: the command's own and
// the configuration keys that may be set as flags (bound in load).
func serveFlags() (fs *pflag.FlagSet, target *string, listTargets, verify *bool, cfgFile *string) {
	fs = pflag.NewFlagSet("serve", pflag.ContinueOnError)
	target = fs.String("target", app.All, "comma-separated targets to run (see --list-targets)")
	listTargets = fs.Bool("list-targets", false, "print the targets and exit")
	verify = fs.Bool("verify-config", false, "load and validate the configuration, print it (secrets masked) and exit")
	cfgFile = fs.String("config", "", "optional config file (yaml, json or toml)")
	def := config.Defaults()
	fs.String("http.addr", def.HTTP.Addr, "HTTP listen address (MSGMESH_HTTP_ADDR)")
	fs.String("data_dir", def.DataDir, "data directory of the embedded broker (MSGMESH_DATA_DIR)")
	fs.StringSlice("kafka.brokers", nil, "Kafka seed brokers; empty runs the embedded broker (MSGMESH_KAFKA_BROKERS)")
	fs.String("kafka.embedded_addr", def.Kafka.EmbeddedAddr, "where the embedded broker serves Kafka (MSGMESH_KAFKA_EMBEDDED_ADDR)")
	fs.String("log.level", def.Log.Level, "debug, info, warn or error (MSGMESH_LOG_LEVEL)")
	fs.String("log.format", def.Log.Format, "text or json (MSGMESH_LOG_FORMAT)")
	return fs, target, listTargets, verify, cfgFile
}

// load reads configuration with viper: flags > MSGMESH_* env > file >
// defaults, then validates it once, reporting every error together.
func load(fs *pflag.FlagSet, file string) (config.Config, error) {
	v := viper.New()
	v.SetEnvPrefix("MSGMESH")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	for k, val := range flatten(config.Defaults()) {
		v.SetDefault(k, val)
	}
	for _, name := range []string{"http.addr", "data_dir", "kafka.brokers", "kafka.embedded_addr", "log.level", "log.format"} {
		if err := v.BindPFlag(name, fs.Lookup(name)); err != nil {
			return config.Config{}, err
		}
	}
	if file == "" {
		file = os.Getenv("MSGMESH_CONFIG")
	}
	if file != "" {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return config.Config{}, fmt.Errorf("config file %s: %w", file, err)
		}
	}
	var cfg config.Config
	// Unknown keys (a typo in the config file) are errors, not silence.
	if err := v.Unmarshal(&cfg, func(dc *mapstructure.DecoderConfig) { dc.ErrorUnused = true }); err != nil {
		return config.Config{}, err
	}
	// An empty MSGMESH_KAFKA_BROKERS means "embedded".
	var brokers []string
	for _, b := range cfg.Kafka.Brokers {
		for _, p := range strings.Split(b, ",") {
			if p = strings.TrimSpace(p); p != "" {
				brokers = append(brokers, p)
			}
		}
	}
	cfg.Kafka.Brokers = brokers
	return cfg, cfg.Validate()
}

// flatten turns the defaults into viper keys (mapstructure tag paths), so
// AutomaticEnv knows every key.
func flatten(c config.Config) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			tag := t.Field(i).Tag.Get("mapstructure")
			if tag == "" {
				continue
			}
			key := tag
			if prefix != "" {
				key = prefix + "." + tag
			}
			f := v.Field(i)
			if f.Kind() == reflect.Struct {
				walk(key, f)
				continue
			}
			out[key] = f.Interface()
		}
	}
	walk("", reflect.ValueOf(c))
	return out
}

func describe(c config.Config) string {
	var b strings.Builder
	m := flatten(c)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := fmt.Sprint(m[k])
		if strings.HasSuffix(k, "_key") && val != "" {
			val = "(set)"
		}
		fmt.Fprintf(&b, "  %s = %s\n", k, val)
	}
	return b.String()
}

func indent(err error) string {
	return "  " + strings.ReplaceAll(err.Error(), "\n", "\n  ")
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	return logging.New(c.Level, c.Format, w)
}
