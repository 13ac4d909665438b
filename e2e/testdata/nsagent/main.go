// Command nsagent is a training process's agent for the e2e tests that
// need one in a pid namespace of its own (started under unshare): it says
// hello with its own pid there, streams one allocator figure every 100 ms
// and exits when gputop closes the connection.
//
//	nsagent SOCKET MIB
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: nsagent SOCKET MIB")
		os.Exit(2)
	}
	mib, err := strconv.ParseUint(os.Args[2], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := net.Dial("unix", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() { // gputop closing the connection ends the process
		c.Read(make([]byte, 1<<16))
		os.Exit(0)
	}()
	enc := json.NewEncoder(c)
	hello := map[string]any{"type": "hello", "v": 1, "pid": os.Getpid(), "argv": []string{"train.py", "--mib", os.Args[2]},
		"devices": []map[string]any{{"index": 0, "uuid": "GPU-e2e-ns", "name": "E2E GPU", "total": 80 << 30}},
		"t":       time.Now().UnixNano()}
	if err := enc.Encode(hello); err != nil {
		os.Exit(1)
	}
	for {
		smp := map[string]any{"type": "sample", "t": time.Now().UnixNano(), "dev": 0,
			"allocated": mib << 20, "reserved": 2 * mib << 20, "peak": mib << 20}
		if err := enc.Encode(smp); err != nil {
			os.Exit(0)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
