// Command wakeloop measures what a Go loop waking 1000 times a second costs
// in CPU, with nothing else to do: the floor under a Go sampler at 1 kHz.
// Run it with different GOMAXPROCS; bench/probe/run.sh does.
//
//	wakeloop [-mode timer|sleep|ticker] [-seconds 10]
package main

import (
	"flag"
	"fmt"
	"runtime"
	"syscall"
	"time"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	mode := flag.String("mode", "timer", "timer (a reset timer, as gputop's Go sampler), sleep or ticker")
	secs := flag.Float64("seconds", 10, "how long to run")
	flag.Parse()
	d := time.Duration(*secs * float64(time.Second))
	start := time.Now()
	c0 := cpu()
	n := 0
	switch *mode {
	case "timer":
		t := time.NewTimer(time.Hour)
		next := time.Now()
		for time.Since(start) < d {
			next = next.Add(time.Millisecond)
			t.Reset(time.Until(next))
			<-t.C
			n++
		}
	case "ticker":
		tk := time.NewTicker(time.Millisecond)
		for time.Since(start) < d {
			<-tk.C
			n++
		}
	case "sleep":
		for time.Since(start) < d {
			time.Sleep(time.Millisecond)
			n++
		}
	default:
		fmt.Println("unknown -mode", *mode)
		return
	}
	el := time.Since(start)
	fmt.Printf("go-%s GOMAXPROCS=%d: %.1f ticks/s, cpu %.2f%% of a core\n", *mode, runtime.GOMAXPROCS(0),
		float64(n)/el.Seconds(), 100*float64(cpu()-c0)/float64(el))
}
