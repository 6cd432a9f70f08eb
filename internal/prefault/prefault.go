//go:build linux && (amd64 || arm64)

package prefault

// This package imports runtime and unsafe and nothing else (its system
// calls are its own, in assembly): the Go runtime initialises a package
// once every package it imports is, taking the ready ones in import path
// order, so with no other imports it runs among the first, before the
// packages whose initialisers it is here to spare their page faults.
// TestImportsNothing holds that.

import (
	"runtime"
	"unsafe"
)

// rawSyscall makes a system call of up to three arguments; errno is 0 on
// success.
func rawSyscall(trap, a1, a2, a3 uintptr) (r1, errno uintptr)

// heapAhead is how much of the Go heap past the first allocation made here
// is populated.
const heapAhead = 1 << 20

const (
	madvPopulateRead  = 22 // MADV_POPULATE_READ, Linux 5.14
	madvPopulateWrite = 23 // MADV_POPULATE_WRITE, Linux 5.14
)

// pageAlign is what the heap's start is rounded up to for madvise, which
// takes page-aligned addresses: 64 KiB, the largest page Linux uses on
// amd64 or arm64, so it is aligned whatever the kernel's page size.
const pageAlign = 64 << 10

// atFDCWD and oRdonlyCloexec are openat's AT_FDCWD and O_RDONLY|O_CLOEXEC.
const (
	atFDCWD        = ^uintptr(99) // -100
	oRdonlyCloexec = 0o2000000
)

// mark is the first heap allocation made here: the heap grows upwards
// from it, so the pages that follow are the ones about to be used.
var mark *[64]byte

func init() {
	mark = new([64]byte)
	start := (uintptr(unsafe.Pointer(mark)) + pageAlign - 1) &^ (pageAlign - 1)
	// The advice stops, harmlessly, where the heap's usable mapping
	// ends; what lies before that is populated.
	heapAdvice = madvise(start, heapAhead, madvPopulateWrite)

	var pc [1]uintptr
	if runtime.Callers(1, pc[:]) == 1 {
		if lo, hi, ok := mappingOf(pc[0]); ok {
			madvise(lo, hi-lo, madvPopulateRead)
		}
	}
}

// heapAdvice is the heap populate's errno: 0 when the whole range was
// populated, else it stopped where the heap's mapping then ended.
var heapAdvice uintptr

// madvise gives the advice and returns its errno; a kernel without it
// refuses, and that is all.
func madvise(addr, length, advice uintptr) uintptr {
	_, errno := rawSyscall(sysMadvise, addr, length, advice)
	return errno
}

// mappingOf finds, in /proc/self/maps, the mapping that holds addr.
func mappingOf(addr uintptr) (lo, hi uintptr, ok bool) {
	path := [...]byte{'/', 'p', 'r', 'o', 'c', '/', 's', 'e', 'l', 'f', '/', 'm', 'a', 'p', 's', 0}
	fd, errno := rawSyscall(sysOpenat, atFDCWD, uintptr(unsafe.Pointer(&path[0])), oRdonlyCloexec)
	if errno != 0 {
		return 0, 0, false
	}
	defer rawSyscall(sysClose, fd, 0, 0)
	// The lines are in address order, and a Go program maps little below
	// its code: 4 KiB of them is plenty. Code not among them is left as
	// it is.
	var buf [4096]byte
	n, errno := rawSyscall(sysRead, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	if errno != 0 || n == 0 {
		return 0, 0, false
	}
	return findMapping(buf[:n], addr)
}

// findMapping finds the line "lo-hi ..." of a /proc/self/maps text with
// lo <= addr < hi. A partial last line is ignored.
func findMapping(maps []byte, addr uintptr) (lo, hi uintptr, ok bool) {
	for len(maps) > 0 {
		end := 0
		for end < len(maps) && maps[end] != '\n' {
			end++
		}
		if end == len(maps) {
			return 0, 0, false // cut off by the read
		}
		line := maps[:end]
		maps = maps[end+1:]
		l, rest, ok1 := hexField(line, '-')
		h, _, ok2 := hexField(rest, ' ')
		if ok1 && ok2 && l <= addr && addr < h {
			return l, h, true
		}
	}
	return 0, 0, false
}

// hexField reads a hexadecimal number up to sep, and returns what follows
// sep.
func hexField(b []byte, sep byte) (v uintptr, rest []byte, ok bool) {
	for i, c := range b {
		switch {
		case c == sep && i > 0:
			return v, b[i+1:], true
		case i >= 16:
			return 0, nil, false
		case '0' <= c && c <= '9':
			v = v<<4 | uintptr(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uintptr(c-'a'+10)
		default:
			return 0, nil, false
		}
	}
	return 0, nil, false
}
