package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

type machine struct {
	CPUs     int
	CPUModel string
	MemGiB   float64
	Kernel   string
	Go       string
	Kafka    string
	MsgMesh  string
}

func describeMachine(kafkaVersion, msgmeshBin string) machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Kafka: kafkaVersion, CPUModel: "unknown"}
	if out, err := exec.Command("nproc").Output(); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
			m.CPUs = n
		}
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				f := strings.Fields(line)
				if len(f) >= 2 {
					kb, _ := strconv.ParseFloat(f[1], 64)
					m.MemGiB = kb / (1 << 20)
				}
			}
		}
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		m.Kernel = utsString(u.Sysname[:]) + " " + utsString(u.Release[:])
	}
	if msgmeshBin != "" {
		if out, err := exec.Command(msgmeshBin, "version").Output(); err == nil {
			m.MsgMesh = strings.TrimSpace(string(out))
		}
	}
	return m
}

func utsString(a []int8) string {
	b := make([]byte, 0, len(a))
	for _, c := range a {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// clkTck is USER_HZ; 100 on every Linux we run on.
const clkTck = 100

// procCPUSeconds reads utime+stime of pid from /proc (0 if unreadable).
func procCPUSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesized command name; utime and stime are
	// fields 14 and 15 (1-based), i.e. 12 and 13 after the ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clkTck
}

// selfCPUSeconds is this process's user+system CPU.
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// findKafkaPid finds the broker JVM (main class kafka.Kafka) whose config
// names the given port, or any kafka.Kafka if only one runs. 0 if none.
func findKafkaPid(port string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var found []int
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte("kafka.Kafka")) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte("/"+port+"/")) {
			return pid
		}
		found = append(found, pid)
	}
	if len(found) == 1 {
		return found[0]
	}
	return 0
}
