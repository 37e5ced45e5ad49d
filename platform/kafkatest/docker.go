package kafkatest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	tckafka "github.com/testcontainers/testcontainers-go/modules/kafka"
)

// dockerImage is the Kafka image the testcontainers module starts; its
// environment settings are written for Confluent's local image.
const dockerImage = "confluentinc/confluent-local:7.5.0"

var (
	dockerOnce    sync.Once
	dockerBrokers []string
	dockerErr     error
)

// dockerUp reports whether a Docker engine answers a ping within 2 s, on
// DOCKER_HOST (unix:// or tcp://) or /var/run/docker.sock. Set
// MSGMESH_TEST_DOCKER=0 to never use Docker.
func dockerUp() bool {
	if os.Getenv("MSGMESH_TEST_DOCKER") == "0" {
		return false
	}
	network, addr := "unix", "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		switch {
		case strings.HasPrefix(h, "unix://"):
			addr = strings.TrimPrefix(h, "unix://")
		case strings.HasPrefix(h, "tcp://"):
			network, addr = "tcp", strings.TrimPrefix(h, "tcp://")
		default:
			return false
		}
	}
	if network == "unix" {
		if _, err := os.Stat(addr); err != nil {
			return false
		}
	}
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	resp, err := c.Get("http://docker/_ping")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// dockerKafka starts one Kafka container per test binary with the
// testcontainers Kafka module (Ryuk removes it when the binary exits).
func dockerKafka() ([]string, error) {
	dockerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c, err := tckafka.Run(ctx, dockerImage, tckafka.WithClusterID("msgmesh-test"))
		if err != nil {
			dockerErr = fmt.Errorf("testcontainers kafka: %w", err)
			return
		}
		dockerBrokers, dockerErr = c.Brokers(ctx)
	})
	return dockerBrokers, dockerErr
}
