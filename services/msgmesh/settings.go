package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/services/msgmesh/app"
)

// settingFlag is the flag of one configuration key. It takes any text;
// load decodes and validates it together with the environment and the
// file, so that every bad value is reported at once, by name.
type settingFlag struct {
	value string
	kind  string
	set   bool
}

func (f *settingFlag) String() string { return f.value }
func (f *settingFlag) Type() string   { return f.kind }

// Set takes the value; a list flag given twice (--kafka.brokers a:1
// --kafka.brokers b:2) collects both.
func (f *settingFlag) Set(s string) error {
	if f.kind == "list" && f.set {
		s = f.value + "," + s
	}
	f.value, f.set = s, true
	return nil
}

// serveFlags declares the flags of `msgmesh serve`: the command's own and
// one per configuration key (--poll.max_wait=10s), each documented with
// its default and environment variable.
func serveFlags() (fs *pflag.FlagSet, target *string, listTargets, verify *bool, cfgFile *string) {
	fs = pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SortFlags = false
	target = fs.String("target", app.All, "comma-separated targets to run (see --list-targets)")
	listTargets = fs.Bool("list-targets", false, "print the targets and exit")
	verify = fs.Bool("verify-config", false, "load and validate the configuration, print it (secrets masked) or every error, and exit")
	cfgFile = fs.String("config", "", "optional config file, yaml, json or toml (MSGMESH_CONFIG)")
	for _, s := range config.Settings() {
		f := fs.VarPF(&settingFlag{value: s.Default, kind: s.Kind}, s.Key, "", s.Doc+" ("+s.Env+")")
		if s.Kind == "bool" {
			f.NoOptDefVal = "true"
		}
	}
	return fs, target, listTargets, verify, cfgFile
}

// serveUsage is `msgmesh serve --help`.
func serveUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `usage: msgmesh serve [flags]

Runs MsgMesh. Every setting below is also an environment variable (named
in brackets) and a key of the --config file; flags > environment > file >
defaults. Durations are Go durations (500ms, 30s, 1m30s, 24h); lists are
comma-separated. --verify-config checks all of them without starting.

`)
	_, _ = fmt.Fprint(w, fs.FlagUsagesWrapped(0))
}

// envNotSettings are MSGMESH_* variables that are not serve settings but
// are read by the CLI's other commands, the scripts or the tests; they are
// never reported as unknown.
var envNotSettings = map[string]bool{
	"MSGMESH_CONFIG": true, "MSGMESH_KEY": true, "MSGMESH_URL": true,
	// scripts/kafka.sh, scripts/deps.sh and the browser tests
	"MSGMESH_KAFKA_HOME": true, "MSGMESH_KAFKA_PORT": true, "MSGMESH_KAFKA_CONTROLLER_PORT": true,
	"MSGMESH_KAFKA_DATA_DIR": true, "MSGMESH_KAFKA_START_TIMEOUT": true, "MSGMESH_KAFKA_HEAP": true,
	"MSGMESH_KAFKA_NODES": true, "MSGMESH_KAFKA_SECURITY": true, "MSGMESH_KAFKA_SASL_SSL_PORT": true,
	"MSGMESH_CACHE_DIR": true, "MSGMESH_CHROMIUM": true,
}

// unknownEnv reports every MSGMESH_* variable of environ that matches no
// setting (a typo such as MSGMESH_POLL_MAXWAIT would otherwise be silently
// ignored), suggesting the setting it most likely meant. MSGMESH_TEST_*
// belong to the test suite.
func unknownEnv(environ []string) []string {
	known := map[string]string{} // squashed name -> env name
	isKnown := map[string]bool{}
	for _, s := range config.Settings() {
		isKnown[s.Env] = true
		known[squash(s.Env)] = s.Env
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, config.EnvPrefix) || isKnown[name] || envNotSettings[name] || strings.HasPrefix(name, "MSGMESH_TEST_") {
			continue
		}
		msg := name + " matches no setting and is ignored"
		if guess, ok := known[squash(name)]; ok {
			msg += " (did you mean " + guess + "?)"
		}
		out = append(out, msg)
	}
	sort.Strings(out)
	return out
}

func squash(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "_", "")) }

// load reads configuration with viper: flags > MSGMESH_* env > file >
// defaults, decodes every key on its own (so that one bad value does not
// hide the others) and validates the result, returning every problem
// joined, in key order, each naming the key, its variable and the value.
func load(fs *pflag.FlagSet, file string) (config.Config, error) {
	v := viper.New()
	v.SetEnvPrefix("MSGMESH")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	defaults := config.Flatten(config.Defaults())
	for k, val := range defaults {
		v.SetDefault(k, val)
	}
	if file == "" {
		file = os.Getenv("MSGMESH_CONFIG")
	}
	var errs []error
	if file != "" {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return config.Config{}, fmt.Errorf("config file %s: %w", file, err)
		}
		// Unknown keys (a typo in the config file) are errors, not silence.
		for _, k := range v.AllKeys() {
			if _, ok := defaults[k]; !ok {
				errs = append(errs, &config.FieldError{Msg: fmt.Sprintf("config file %s: %q matches no setting", file, k)})
			}
		}
	}
	fs.Visit(func(f *pflag.Flag) {
		if _, ok := defaults[f.Name]; ok {
			v.Set(f.Name, f.Value.String())
		}
	})

	// A key that does not decode keeps its default, so that the keys that
	// depend on it are still checked against something sensible.
	cfg := config.Defaults()
	failed := map[string]bool{}
	for key, field := range config.Fields(&cfg) {
		raw := v.Get(key)
		if err := decodeInto(field, raw); err != nil {
			failed[key] = true
			errs = append(errs, &config.FieldError{Key: key, Msg: fmt.Sprintf("want %s, got %q", wantOf(field.Type()), fmt.Sprint(raw))})
		}
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
	cfg.Secrets.PreviousKeyFiles = splitList(cfg.Secrets.PreviousKeyFiles)
	if len(errs) > 0 {
		verr := config.SortErrors(cfg.Validate())
		if j, ok := verr.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				var fe *config.FieldError
				if errors.As(e, &fe) && failed[fe.Key] {
					continue
				}
				errs = append(errs, e)
			}
		}
		return cfg, config.SortErrors(errs...)
	}
	return cfg, cfg.Validate()
}

// decodeInto decodes raw (a string from a flag or variable, or a typed
// value from the file or the defaults) into the field, as viper's own
// Unmarshal would: weakly typed, durations parsed, strings split at commas.
func decodeInto(field reflect.Value, raw any) error {
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           field.Addr().Interface(),
		WeaklyTypedInput: true,
		ZeroFields:       true,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		),
	})
	if err != nil {
		return err
	}
	return dec.Decode(raw)
}

func wantOf(t reflect.Type) string {
	switch config.KindOf(t) {
	case "duration":
		return "a duration such as 500ms, 30s, 1m30s or 24h"
	case "int":
		return "an integer"
	case "number":
		return "a number"
	case "bool":
		return "true or false"
	case "list":
		return "a comma-separated list"
	}
	return "a string"
}

// describe prints the merged configuration, secrets masked.
func describe(c config.Config) string {
	var b strings.Builder
	m := config.Flatten(c)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := config.FormatValue(m[k])
		if (strings.HasSuffix(k, "_key") || k == "secrets.key" || strings.HasSuffix(k, "password")) && val != "" && val != "[]" {
			val = "(set)"
		}
		if k == "postgres.url" && val != "" {
			if u, err := url.Parse(val); err == nil && u.User != nil {
				if _, has := u.User.Password(); has {
					u.User = url.UserPassword(u.User.Username(), "(set)")
				}
				val = u.Redacted()
				val = strings.Replace(val, "xxxxx", "(set)", 1)
			} else if err != nil {
				val = "(set)"
			}
		}
		fmt.Fprintf(&b, "  %s = %s\n", k, val)
	}
	return b.String()
}

// splitList splits comma-separated entries (one env var may carry
// several) and drops empty ones.
func splitList(in []string) []string {
	var out []string
	for _, e := range in {
		for _, p := range strings.Split(e, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
