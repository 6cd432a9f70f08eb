//go:build linux && (amd64 || arm64)

package prefault

import (
	"bufio"
	"fmt"
	"go/build"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

func TestFindMapping(t *testing.T) {
	maps := []byte("00400000-008eb000 r-xp 00000000 fe:00 10117669 /tmp/cordon\n" +
		"008eb000-00dfc000 r--p 004eb000 fe:00 10117669 /tmp/cordon\n" +
		"1bc366000000-1bc366400000 rw-p 00000000 00:00 0 \n" +
		"7ffebb6e3000-7ffebb704000 rw-p 00000000 00:00 0 [stack]\n" +
		"7ffebb800000-7ffebb900000 rw-p 00000000 00:00 0")
	for _, c := range []struct {
		addr   uintptr
		lo, hi uintptr
		ok     bool
	}{
		{0x400000, 0x400000, 0x8eb000, true},
		{0x8eafff, 0x400000, 0x8eb000, true},
		{0x8eb000, 0x8eb000, 0xdfc000, true},
		{0x1bc3663fffff, 0x1bc366000000, 0x1bc366400000, true},
		{0x1bc366400000, 0, 0, false},
		{0x7ffebb6e3010, 0x7ffebb6e3000, 0x7ffebb704000, true},
		{0x7ffebb800010, 0, 0, false}, // the last line was cut off
		{0x3ff000, 0, 0, false},
	} {
		lo, hi, ok := findMapping(maps, c.addr)
		if lo != c.lo || hi != c.hi || ok != c.ok {
			t.Errorf("findMapping(%#x) = %#x, %#x, %v; want %#x, %#x, %v", c.addr, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
	for _, bad := range []string{"", "\n", "zz-10 r-xp\n", "10 r-xp\n", "-10 r-xp\n", "10-\n", "11111111111111111-2 r\n"} {
		if _, _, ok := findMapping([]byte(bad), 0x10); ok {
			t.Errorf("findMapping(%q) found a mapping", bad)
		}
	}
}

// TestCodeResident checks that this binary's code mapping is wholly in
// memory: a test touches a small part of its code, so without the
// package's init most of it would not be.
func TestCodeResident(t *testing.T) {
	var pc [1]uintptr
	runtime.Callers(1, pc[:])
	lo, hi, ok := mappingOf(pc[0])
	if !ok {
		t.Fatalf("no mapping in /proc/self/maps holds this test's code (%#x)", pc[0])
	}
	size, rss := smapsSizes(t, lo)
	if size != hi-lo || rss != size {
		t.Errorf("code mapping %#x-%#x: %d KiB, %d KiB of it resident; want all of it", lo, hi, size>>10, rss>>10)
	}
}

// TestHeapAheadResident checks that the heap pages after mark are in
// memory, up to heapAhead or the end of their mapping. The runtime's
// scavenger may have handed a free page or two back to the kernel since
// init (seen under load), so a few may be missing; without the populate,
// nearly all would be. Where the populate stopped at the end of the
// heap's mapping as it was at init (heapAdvice), which has grown since
// (it did, under make test's load: 236 pages of 256 missing), only the
// first page, which it reached, must be.
func TestHeapAheadResident(t *testing.T) {
	start := (uintptr(unsafe.Pointer(mark)) + pageAlign - 1) &^ (pageAlign - 1)
	pageSize := uintptr(os.Getpagesize())
	lo, hi, ok := mappingOf(start)
	if !ok || lo > start {
		t.Fatalf("no mapping holds the heap at %#x", start)
	}
	end := min(start+heapAhead, hi)
	vec := make([]byte, (end-start)/pageSize)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, start, end-start, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	if heapAdvice != 0 {
		t.Logf("the populate stopped (errno %d) where the heap's mapping ended at init", heapAdvice)
		if vec[0]&1 == 0 {
			t.Errorf("the first heap page after %#x, which the populate reached, is not resident", start)
		}
		return
	}
	missing := 0
	for _, v := range vec {
		if v&1 == 0 {
			missing++
		}
	}
	if missing > len(vec)/32 {
		t.Errorf("%d of the %d heap pages after %#x are not resident (the scavenger may account for %d)", missing, len(vec), start, len(vec)/32)
	}
}

// TestImportsNothing: the package imports only runtime and unsafe, so
// that the runtime initialises it among the first packages, before the
// ones whose page faults it is to take in bulk.
func TestImportsNothing(t *testing.T) {
	p, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range p.Imports {
		if imp != "runtime" && imp != "unsafe" {
			t.Errorf("prefault imports %s: it would be initialised only after it, and after the packages it needs", imp)
		}
	}
}

// smapsSizes reads the Size and Rss of the mapping that starts at lo.
func smapsSizes(t *testing.T, lo uintptr) (size, rss uintptr) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, found := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if start, _, ok := hexField([]byte(line), '-'); ok {
			if in {
				break
			}
			in = start == lo
			found = found || in
			continue
		}
		var kib uintptr
		switch {
		case !in:
		case strings.HasPrefix(line, "Size:"):
			fmt.Sscanf(line, "Size: %d kB", &kib)
			size = kib << 10
		case strings.HasPrefix(line, "Rss:"):
			fmt.Sscanf(line, "Rss: %d kB", &kib)
			rss = kib << 10
		}
	}
	if !found {
		t.Fatalf("no mapping at %#x in /proc/self/smaps", lo)
	}
	return size, rss
}
