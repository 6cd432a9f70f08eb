package prefault

import (
	"runtime"
	"syscall"
	"unsafe"
)

// heapAhead is how much of the Go heap past the first allocation made here
// is populated.
const heapAhead = 1 << 20

const (
	madvPopulateRead  = 22 // MADV_POPULATE_READ, Linux 5.14
	madvPopulateWrite = 23 // MADV_POPULATE_WRITE, Linux 5.14
)

// pageSize is the kernel's: 4 KiB on amd64, up to 64 KiB on arm64.
var pageSize = uintptr(syscall.Getpagesize())

// mark is the first heap allocation made here: the heap grows upwards
// from it, so the pages that follow are the ones about to be used.
var mark *[64]byte

func init() {
	mark = new([64]byte)
	start := (uintptr(unsafe.Pointer(mark)) + pageSize - 1) &^ (pageSize - 1)
	// The advice stops, harmlessly, where the heap's usable mapping
	// ends; what lies before that is populated.
	madvise(start, heapAhead, madvPopulateWrite)

	var pc [1]uintptr
	if runtime.Callers(1, pc[:]) == 1 {
		if lo, hi, ok := mappingOf(pc[0]); ok {
			madvise(lo, hi-lo, madvPopulateRead)
		}
	}
}

// madvise gives the advice; a kernel without it refuses, and that is all.
func madvise(addr, length, advice uintptr) {
	syscall.Syscall(syscall.SYS_MADVISE, addr, length, advice)
}

// mappingOf finds, in /proc/self/maps, the mapping that holds addr.
func mappingOf(addr uintptr) (lo, hi uintptr, ok bool) {
	fd, err := syscall.Open("/proc/self/maps", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	defer syscall.Close(fd)
	// The lines are in address order, and a Go program maps little below
	// its code: 4 KiB of them is plenty. Code not among them is left as
	// it is.
	var buf [4096]byte
	n, err := syscall.Read(fd, buf[:])
	if err != nil || n <= 0 {
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
