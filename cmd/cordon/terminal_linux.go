package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	ioctlGetTermios = unix.TCGETS
	ioctlSetTermios = unix.TCSETS
)

// exclusive reports whether the terminal on fd is in exclusive mode.
func exclusive(fd int) bool {
	on, err := unix.IoctlGetInt(fd, unix.TIOCGEXCL)
	return err == nil && on != 0
}

// startOutput undoes tcflow(TCOOFF), and only that: output the user
// stopped with ^S stays stopped.
//
// The box cannot change the line discipline (its seccomp filter refuses
// TIOCSETD). What tcflow(TCIOFF) did is not undone: it sends a STOP
// character, which on a pseudo-terminal only reaches the emulator, and
// the START character that would undo it on a serial line would be a
// stray byte in the output of every run.
func startOutput(fd int) {
	_ = unix.IoctlSetInt(fd, unix.TCXONC, unix.TCOON)
}

// flushInput discards what waits to be read on the terminal on fd.
func flushInput(fd int) {
	_ = unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH)
}

// groupMembers lists the processes in process group pgrp that cordon can
// see.
func groupMembers(pgrp int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if g, err := unix.Getpgid(pid); err == nil && g == pgrp {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// parentOf is the parent of process pid, from /proc/PID/stat (its fourth
// field, after the name in parentheses); 0 when it cannot be read.
func parentOf(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}
