// Command probe is the workload Keyward's installed tests run on the one-node cluster. It
// reports, every two seconds, a SHA-256 of each environment variable named in PROBE_ENV and of
// each file named in PROBE_FILES (comma-separated), and the addresses of each host name in
// PROBE_DNS, so a test can compare what a container sees with what it expects without a secret
// value ever reaching a log.
package main

import (
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func list(name string) []string {
	var out []string
	for _, s := range strings.Split(os.Getenv(name), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func report() {
	for _, name := range list("PROBE_ENV") {
		if v, ok := os.LookupEnv(name); ok {
			fmt.Printf("probe env %s sha256=%x\n", name, sha256.Sum256([]byte(v)))
		} else {
			fmt.Printf("probe env %s missing\n", name)
		}
	}
	for _, path := range list("PROBE_FILES") {
		if b, err := os.ReadFile(path); err == nil {
			fmt.Printf("probe file %s sha256=%x\n", path, sha256.Sum256(b))
		} else {
			fmt.Printf("probe file %s missing\n", path)
		}
	}
	for _, host := range list("PROBE_DNS") {
		if addrs, err := net.LookupHost(host); err == nil {
			fmt.Printf("probe dns %s %s\n", host, strings.Join(addrs, ","))
		} else {
			fmt.Printf("probe dns %s error\n", host)
		}
	}
}

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		report()
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}
