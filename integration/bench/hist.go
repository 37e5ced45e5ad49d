package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// hist is a lock-free log-linear latency histogram in microseconds: exact
// below 64 µs, then 32 sub-buckets per power of two (under 3.2 % error).
type hist struct {
	counts [nBuckets]atomic.Int64
	n      atomic.Int64
}

const nBuckets = 64 + 58*32

func bucketOf(us uint64) int {
	if us < 64 {
		return int(us)
	}
	e := bits.Len64(us) - 6 // >= 1; us>>e is in [32, 64)
	return 64 + (e-1)*32 + int(us>>uint(e)) - 32
}

// lowerOf is the smallest value in bucket i (the inverse of bucketOf).
func lowerOf(i int) uint64 {
	if i < 64 {
		return uint64(i)
	}
	j := i - 64
	e := j/32 + 1
	return uint64(j%32+32) << uint(e)
}

func (h *hist) add(d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	h.counts[bucketOf(uint64(us))].Add(1)
	h.n.Add(1)
}

// quantile returns the q-quantile (0..1), or 0 with no samples.
func (h *hist) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := int64(q*float64(n-1)) + 1
	var seen int64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return time.Duration(lowerOf(i)) * time.Microsecond
		}
	}
	return 0
}
