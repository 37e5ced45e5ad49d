// Package deployments holds what runs MsgMesh outside this repository:
// the Dockerfile and docker compose file, the Kubernetes manifests
// (kubernetes/), the Grafana dashboard (grafana/) and the Prometheus alert
// rules (prometheus/). Its tests check them: the manifests decode strictly
// into the Kubernetes API types and agree with the configuration settings,
// and every dashboard and alert query parses and names only metrics a
// running node serves on /metrics.
package deployments
