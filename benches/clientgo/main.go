// Command clientgo times client-go's keyed Backoff (k8s.io/client-go/util/flowcontrol)
// on the same keys, picks and workloads as the Rust harness benches/field.rs,
// so that benches/field.sh can print the crate's time as a ratio to Go's.
//
// Keys, picks and workloads are built from splitmix64 streams with fixed
// seeds, exactly as the Rust side builds them. Each measurement is a run of
// about 0.4 s, timed on one thread by the thread's CPU time and on two by the
// wall clock; ROUNDS runs (default 5) per workload, the median reported as
//
//	RESULT client-go <workload> <keys> <threads> <ns/op>
//
// Arguments `<keys> <workload>` run that one pair only.
package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

const (
	keySeed  = 0x6b65_7973 // "keys"
	pickSeed = 0x7069_636b // "pick"
	picks    = 1 << 20
	runFor   = 400 * time.Millisecond
	chunk    = 1024
)

// The workloads: `next` only; 90 % IsInBackOffSinceUpdate and every tenth
// call Next; IsInBackOffSinceUpdate only.
const (
	next = iota
	mix
	read
)

var workloadNames = []string{"next", "mix", "read"}

type splitmix struct{ state uint64 }

func (s *splitmix) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// kubeletKeys: "<pod UID>_<image ref>", 69 bytes each.
func kubeletKeys(n int) []string {
	s := splitmix{keySeed}
	keys := make([]string, n)
	for i := range keys {
		a, b, c := s.next(), s.next(), s.next()
		keys[i] = fmt.Sprintf("%08x-%04x-%04x-%04x-%012x_registry.k8s.io/app-%05d:v1.%03d",
			a>>32, (a>>16)&0xffff, a&0xffff, b>>48, b&0xffffffffffff, c%100000, (c>>32)%1000)
	}
	return keys
}

func pickOrder(n int) []uint32 {
	s := splitmix{pickSeed}
	order := make([]uint32, picks)
	for i := range order {
		order[i] = uint32(s.next() % uint64(n))
	}
	return order
}

// run calls one workload from position `from` of the pick order until runFor
// has passed; returns the calls made, the wall time and the CPU time of the
// thread it ran on (the goroutine is locked to it).
func run(b *flowcontrol.Backoff, keys []string, order []uint32, workload int, from int) (int, time.Duration, time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu := threadCPU()
	start := time.Now()
	ops, hits := 0, 0
	for {
		for j := 0; j < chunk; j++ {
			i := from + ops + j
			key := keys[order[i%picks]]
			switch workload {
			case next:
				b.Next(key, b.Clock.Now())
			case mix:
				if i%10 == 0 {
					b.Next(key, b.Clock.Now())
				} else if b.IsInBackOffSinceUpdate(key, b.Clock.Now()) {
					hits++
				}
			default:
				if b.IsInBackOffSinceUpdate(key, b.Clock.Now()) {
					hits++
				}
			}
		}
		ops += chunk
		if d := time.Since(start); d >= runFor {
			if hits < 0 {
				panic("unreachable")
			}
			return ops, d, threadCPU() - cpu
		}
	}
}

// fingerprint: FNV-1a over the keys' bytes, then each pick as 4 little-endian
// bytes, as the Rust harness prints it.
func fingerprint(keys []string, order []uint32) uint64 {
	h := uint64(0xcbf29ce484222325)
	add := func(b byte) { h = (h ^ uint64(b)) * 0x100000001b3 }
	for _, k := range keys {
		for i := 0; i < len(k); i++ {
			add(k[i])
		}
	}
	for _, p := range order {
		add(byte(p))
		add(byte(p >> 8))
		add(byte(p >> 16))
		add(byte(p >> 24))
	}
	return h
}

// threadCPU is the calling thread's CPU time (user and system).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rusageThread is Linux's RUSAGE_THREAD.
const rusageThread = 1

func median(xs []float64) float64 {
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

func main() {
	rounds := 5
	if r, err := strconv.Atoi(os.Getenv("ROUNDS")); err == nil && r > 0 {
		rounds = r
	}
	runtime.GOMAXPROCS(2)
	sizes, only := []int{1_000, 100_000}, ""
	if len(os.Args) > 2 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil {
			panic("usage: clientgo [<keys> <next|mix|read>]")
		}
		sizes, only = []int{n}, os.Args[2]
	}
	for _, n := range sizes {
		keys, order := kubeletKeys(n), pickOrder(n)
		fmt.Printf("KEYS %d %d %016x\n", n, len(keys[0]), fingerprint(keys, order))
		for workload, name := range workloadNames {
			if only != "" && only != name {
				continue
			}
			for _, threads := range []int{1, 2} {
				samples := make([]float64, 0, rounds)
				for r := 0; r < rounds; r++ {
					b := flowcontrol.NewBackOff(10*time.Second, 300*time.Second)
					for _, k := range keys {
						// The map keeps a copy of each key's bytes, as the
						// Rust map does: a lookup with the very string that
						// was stored would be decided by comparing pointers,
						// without reading the stored key.
						b.Next(strings.Clone(k), b.Clock.Now())
					}
					samples = append(samples, timed(b, keys, order, workload, threads))
				}
				fmt.Printf("RESULT client-go %s %d %d %.2f\n", name, n, threads, median(samples))
			}
		}
	}
}

// timed runs the workload on `threads` goroutines at once and returns the
// nanoseconds per call: on one thread, its CPU time per call (FIELD_CLOCK=wall
// for wall time), on several, the wall time over all their calls.
func timed(b *flowcontrol.Backoff, keys []string, order []uint32, workload, threads int) float64 {
	var wg sync.WaitGroup
	ops := make([]int, threads)
	took := make([]time.Duration, threads)
	cpu := make([]time.Duration, threads)
	for t := 0; t < threads; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			ops[t], took[t], cpu[t] = run(b, keys, order, workload, t*7919)
		}(t)
	}
	wg.Wait()
	total, longest := 0, time.Duration(0)
	for t := range ops {
		total += ops[t]
		if took[t] > longest {
			longest = took[t]
		}
	}
	if threads == 1 && os.Getenv("FIELD_CLOCK") != "wall" {
		longest = cpu[0]
	}
	return float64(longest.Nanoseconds()) / float64(total)
}
