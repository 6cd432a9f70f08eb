// Package prefault maps, when it is initialised, the pages a short-lived
// cordon process is about to touch: its own code, and the next megabyte
// of the Go heap. Importing it is all there is to it.
//
// On the virtual machines cordon is built and tested on, a page fault
// costs about 14 µs, while the same page populated in bulk by
// madvise(MADV_POPULATE_READ or MADV_POPULATE_WRITE) costs about 1 µs; a
// `cordon run` touches some 500 pages it has never touched before. Doing
// it at init, in one system call each, takes about a tenth of cordon
// run's own start-up off (see the README's start-up section). The price
// is resident memory: the code pages (shared with every other cordon
// process, and with the page cache) and up to a megabyte of heap the
// process would soon have used anyway. Where the kernel lacks the advice
// (before Linux 5.14) nothing happens; nothing here can fail a process.
// It works on linux/amd64 and linux/arm64, and does nothing elsewhere.
package prefault
