//go:build linux

package linux

import (
	"encoding/binary"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// seccompData lays out struct seccomp_data for x/net/bpf's VM, which loads
// words big-endian; the kernel loads them in native order, so the fields
// are written in the order the VM reads them.
func seccompData(nr int, auditArch uint32, arg1 uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], uint32(nr))
	binary.BigEndian.PutUint32(b[offArch:], auditArch)
	binary.BigEndian.PutUint32(b[offArg1Low:], uint32(arg1))
	binary.BigEndian.PutUint32(b[offArg1Low+4:], uint32(arg1>>32))
	return b
}

// seccompArg0 is seccompData with args[0] (a socket's family) set.
func seccompArg0(nr int, auditArch uint32, arg0 uint64) []byte {
	b := seccompData(nr, auditArch, 0)
	binary.BigEndian.PutUint32(b[offArg0Low:], uint32(arg0))
	binary.BigEndian.PutUint32(b[offArg0Low+4:], uint32(arg0>>32))
	return b
}

// seccompArgs is seccompData with args[0] and args[1] set.
func seccompArgs(nr int, auditArch uint32, arg0, arg1 uint64) []byte {
	b := seccompArg0(nr, auditArch, arg0)
	binary.BigEndian.PutUint32(b[offArg1Low:], uint32(arg1))
	binary.BigEndian.PutUint32(b[offArg1Low+4:], uint32(arg1>>32))
	return b
}

// seccompSocket is seccompData for socket or socketpair: family, type
// and protocol in args[0] to args[2].
func seccompSocket(nr int, auditArch uint32, family, typ, protocol uint64) []byte {
	b := seccompArgs(nr, auditArch, family, typ)
	binary.BigEndian.PutUint32(b[offArg2Low:], uint32(protocol))
	binary.BigEndian.PutUint32(b[offArg2Low+4:], uint32(protocol>>32))
	return b
}

// seccompArgN is seccompData with args[i] set to v (and args[1] to
// arg1, as seccompData sets it, unless i is 1).
func seccompArgN(nr int, auditArch uint32, i int, v uint64, arg1 uint64) []byte {
	b := seccompData(nr, auditArch, arg1)
	binary.BigEndian.PutUint32(b[offArgsLow+8*i:], uint32(v))
	binary.BigEndian.PutUint32(b[offArgsLow+8*i+4:], uint32(v>>32))
	return b
}

// kernelTables are go-seccomp-bpf's syscall tables, generated from the
// kernel's: the filter's own numbers must agree with them.
var kernelTables = map[string]*arch.Info{"amd64": arch.X86_64, "arm64": arch.AARCH64}

// TestSyscallNumbers checks each number and audit arch the filter uses
// against the kernel's tables.
func TestSyscallNumbers(t *testing.T) {
	if len(kernelTables) != len(seccompArches) {
		t.Fatalf("the test knows %d architectures, the filter %d", len(kernelTables), len(seccompArches))
	}
	for goarch, a := range seccompArches {
		oracle := kernelTables[goarch]
		if a.audit != uint32(oracle.ID) {
			t.Errorf("%s: audit arch %#x, the kernel's is %#x", goarch, a.audit, uint32(oracle.ID))
		}
		all := append(append([]syscallNr{ioctlNr, prctlNr}, socketNrs...), deniedSyscalls...)
		all = append(all, unsupportedSyscalls...)
		all = append(all, xattrSyscalls...)
		for _, m := range modeSyscalls {
			all = append(all, m.nr)
		}
		for _, sc := range all {
			want, ok := oracle.SyscallNames[sc.name]
			if a.nr(sc) == noSyscall {
				if ok {
					t.Errorf("%s: %s is said to be missing, the kernel's is %d", goarch, sc.name, want)
				}
				continue
			}
			if !ok {
				t.Errorf("%s: the kernel has no syscall %s", goarch, sc.name)
				continue
			}
			if got := a.nr(sc); got != uint32(want) {
				t.Errorf("%s: %s is %d, the kernel's is %d", goarch, sc.name, got, want)
			}
		}
	}
}

// seccompCase is a system call given to a seccomp program, and the
// answer it must get.
type seccompCase struct {
	name string
	data []byte
	want int
}

func TestSeccompProgram(t *testing.T) {
	const (
		eperm  = retErrno | errnoEPERM
		enosys = retErrno | errnoENOSYS
	)
	for goarch, a := range seccompArches {
		oracle := kernelTables[goarch]
		t.Run(goarch, func(t *testing.T) {
			raw, err := seccompProgram(goarch, chmodRefused) // the program cordon ships
			if err != nil {
				t.Fatal(err)
			}
			if n := len(seccompBytes(raw)); n > pipeBuf {
				t.Fatalf("the program is %d bytes: the go-ahead needs it in one pipe write, at most %d", n, pipeBuf)
			}
			insns, ok := bpf.Disassemble(raw)
			if !ok {
				t.Fatal("program does not disassemble")
			}
			vm, err := bpf.NewVM(insns)
			if err != nil {
				t.Fatal(err)
			}
			nr := func(name string) int {
				n, ok := oracle.SyscallNames[name]
				if !ok {
					t.Fatalf("no syscall %s", name)
				}
				return n
			}
			native := uint32(oracle.ID)
			tests := []seccompCase{
				{"read", seccompData(nr("read"), native, 0), retAllow},
				{"openat", seccompData(nr("openat"), native, 0), retAllow},
				{"clone", seccompData(nr("clone"), native, 0), retAllow},
				{"ioctl TCGETS", seccompData(nr("ioctl"), native, 0x5401), retAllow},
				{"ioctl TIOCSTI", seccompData(nr("ioctl"), native, 0x5412), eperm},
				{"ioctl TIOCLINUX", seccompData(nr("ioctl"), native, 0x541C), eperm},
				{"ioctl TIOCSETD", seccompData(nr("ioctl"), native, 0x5423), eperm},
				{"ioctl TIOCGETD", seccompData(nr("ioctl"), native, 0x5424), retAllow},
				{"ioctl TIOCSTI with high bits set", seccompData(nr("ioctl"), native, 0xdead_0000_0000_5412), eperm},
				{"other arch", seccompData(nr("read"), uint32(arch.I386.ID), 0), enosys},
				{"syslog (the kernel log)", seccompData(nr("syslog"), native, 0), eperm},
				{"fspick (the new mount API's reconfiguring door)", seccompData(nr("fspick"), native, 0), eperm},
				{"socket AF_UNIX", seccompSocket(nr("socket"), native, 1, 1, 0), retAllow},
				{"socket AF_UNIX SOCK_SEQPACKET", seccompSocket(nr("socket"), native, 1, 5, 0), retAllow},
				{"socket AF_INET", seccompSocket(nr("socket"), native, 2, 1, 0), retAllow},
				{"socket AF_INET6", seccompSocket(nr("socket"), native, 10, 1, 0), retAllow},
				{"socket AF_NETLINK", seccompSocket(nr("socket"), native, 16, 3, 0), retAllow},
				{"socketpair AF_UNIX", seccompSocket(nr("socketpair"), native, 1, 1, 0), retAllow},
				{"socket AF_VSOCK", seccompSocket(nr("socket"), native, 40, 1, 0), retErrno | errnoEAFNO},
				{"socketpair AF_VSOCK", seccompSocket(nr("socketpair"), native, 40, 1, 0), retErrno | errnoEAFNO},
				{"socket AF_PACKET", seccompSocket(nr("socket"), native, 17, 3, 0), retErrno | errnoEAFNO},
				{"socket AF_ALG", seccompSocket(nr("socket"), native, 38, 5, 0), retErrno | errnoEAFNO},
				{"socket AF_BLUETOOTH", seccompSocket(nr("socket"), native, 31, 1, 0), retErrno | errnoEAFNO},
				{"socket AF_INET with high bits set", seccompSocket(nr("socket"), native, 0xdead_0000_0000_0002, 0xdead_0000_0000_0001, 0xdead_0000_0000_0006), retAllow},
				// Within inet and netlink, what the kernel would load a
				// module for is refused: the family list's doors, again.
				{"socket AF_INET TCP, nonblocking and close-on-exec", seccompSocket(nr("socket"), native, 2, 1|0x800|0x80000, 6), retAllow},
				{"socket AF_INET6 MPTCP", seccompSocket(nr("socket"), native, 10, 1, 262), retAllow},
				{"socket AF_INET UDP", seccompSocket(nr("socket"), native, 2, 2, 17), retAllow},
				{"socket AF_INET ping", seccompSocket(nr("socket"), native, 2, 2, 1), retAllow},
				{"socket AF_INET6 ping", seccompSocket(nr("socket"), native, 10, 2, 58), retAllow},
				{"socket AF_INET raw", seccompSocket(nr("socket"), native, 2, 3, 255), retAllow},
				{"socket AF_INET SCTP", seccompSocket(nr("socket"), native, 2, 1, 132), retErrno | errnoEPROTO},
				{"socket AF_INET SMC", seccompSocket(nr("socket"), native, 2, 1, 256), retErrno | errnoEPROTO},
				{"socket AF_INET6 SCTP with high bits on the protocol", seccompSocket(nr("socket"), native, 10, 1, 0xdead_0000_0000_0084), retErrno | errnoEPROTO},
				{"socket AF_INET L2TP", seccompSocket(nr("socket"), native, 2, 2, 115), retErrno | errnoEPROTO},
				{"socket AF_INET UDP-Lite", seccompSocket(nr("socket"), native, 2, 2, 136), retErrno | errnoEPROTO},
				{"socket AF_INET SOCK_SEQPACKET (SCTP)", seccompSocket(nr("socket"), native, 2, 5, 0), retErrno | errnoESOCKT},
				{"socket AF_INET6 SOCK_DCCP", seccompSocket(nr("socket"), native, 10, 6, 0), retErrno | errnoESOCKT},
				{"socketpair AF_INET SCTP", seccompSocket(nr("socketpair"), native, 2, 1, 132), retErrno | errnoEPROTO},
				{"socket AF_NETLINK route", seccompSocket(nr("socket"), native, 16, 3|0x80000, 0), retAllow},
				{"socket AF_NETLINK sock_diag", seccompSocket(nr("socket"), native, 16, 2, 4), retAllow},
				{"socket AF_NETLINK uevent", seccompSocket(nr("socket"), native, 16, 2, 15), retAllow},
				{"socket AF_NETLINK iSCSI", seccompSocket(nr("socket"), native, 16, 3, 8), retErrno | errnoEPROTO},
				{"socket AF_NETLINK netfilter", seccompSocket(nr("socket"), native, 16, 3, 12), retErrno | errnoEPROTO},
				{"socket AF_NETLINK generic", seccompSocket(nr("socket"), native, 16, 3, 16), retErrno | errnoEPROTO},
				{"socket AF_NETLINK crypto", seccompSocket(nr("socket"), native, 16, 3, 21), retErrno | errnoEPROTO},
				{"prctl PR_SET_PDEATHSIG SIGKILL", seccompArgs(nr("prctl"), native, 1, 9), retAllow},
				{"prctl PR_SET_PDEATHSIG 0", seccompArgs(nr("prctl"), native, 1, 0), eperm},
				{"prctl PR_SET_PDEATHSIG SIGTERM", seccompArgs(nr("prctl"), native, 1, 15), eperm},
				{"prctl PR_SET_PDEATHSIG SIGSTOP", seccompArgs(nr("prctl"), native, 1, 19), eperm},
				{"prctl PR_SET_PDEATHSIG with high option bits", seccompArgs(nr("prctl"), native, 0xdead_0000_0000_0001, 0), eperm},
				{"prctl PR_SET_PDEATHSIG SIGKILL with high bits (the kernel refuses it)", seccompArgs(nr("prctl"), native, 1, 0x1_0000_0009), retAllow},
				{"prctl PR_GET_PDEATHSIG", seccompArgs(nr("prctl"), native, 2, 0), retAllow},
				{"prctl PR_SET_NAME", seccompArgs(nr("prctl"), native, 15, 0), retAllow},
				{"prctl PR_SET_DUMPABLE 0", seccompArgs(nr("prctl"), native, 4, 0), retAllow},
			}
			// No setuid or setgid mode: the box ran as the user, and a
			// setuid copy of sh it left in the workspace gave any other
			// local user the user's rights.
			const oCreat, oTmpfile, oRdonly = 0o100, 0o20200000, 0
			mode := func(name string, flags, mode int, flagsVal, modeVal uint64) []byte {
				b := seccompArgN(nr(name), native, mode, modeVal, 0)
				if flags != noArg {
					binary.BigEndian.PutUint32(b[offArgsLow+8*flags:], uint32(flagsVal))
				}
				return b
			}
			tests = append(tests, []seccompCase{
				{"fchmodat 0755", mode("fchmodat", noArg, 2, 0, 0o755), retAllow},
				{"fchmodat 01755 (sticky)", mode("fchmodat", noArg, 2, 0, 0o1755), retAllow},
				{"fchmodat 04755", mode("fchmodat", noArg, 2, 0, 0o4755), eperm},
				{"fchmodat 02755", mode("fchmodat", noArg, 2, 0, 0o2755), eperm},
				{"fchmodat 04755 with high bits set", mode("fchmodat", noArg, 2, 0, 0xdead_0000_0000_4755), eperm},
				{"fchmodat2 04755", mode("fchmodat2", noArg, 2, 0, 0o4755), eperm},
				{"fchmod 0644", mode("fchmod", noArg, 1, 0, 0o644), retAllow},
				{"fchmod 06755", mode("fchmod", noArg, 1, 0, 0o6755), eperm},
				{"mknodat S_IFREG|04755", mode("mknodat", noArg, 2, 0, 0o104755), eperm},
				{"mknodat S_IFIFO|0644", mode("mknodat", noArg, 2, 0, 0o10644), retAllow},
				{"openat O_CREAT 0644", mode("openat", 2, 3, oCreat, 0o644), retAllow},
				{"openat O_CREAT 04755", mode("openat", 2, 3, oCreat, 0o4755), eperm},
				{"openat O_TMPFILE 02755", mode("openat", 2, 3, oTmpfile, 0o2755), eperm},
				{"openat O_RDONLY, a mode that is not read", mode("openat", 2, 3, oRdonly, 0o4755), retAllow},
				{"openat2", seccompData(nr("openat2"), native, 0), enosys},
				// Nor a chmod that lets others write: one replaced the
				// Makefile the user ran. The group's write is taken off
				// after the run instead, and a new file's mode the umask
				// narrows, so openat's and mknodat's pass.
				{"fchmodat 0777", mode("fchmodat", noArg, 2, 0, 0o777), eperm},
				{"fchmodat 01777 (sticky, but others write)", mode("fchmodat", noArg, 2, 0, 0o1777), eperm},
				{"fchmodat 0646 (o+w)", mode("fchmodat", noArg, 2, 0, 0o646), eperm},
				{"fchmodat 0664 (g+w)", mode("fchmodat", noArg, 2, 0, 0o664), retAllow},
				{"fchmodat2 0757", mode("fchmodat2", noArg, 2, 0, 0o757), eperm},
				{"fchmod 0666", mode("fchmod", noArg, 1, 0, 0o666), eperm},
				{"fchmod 0600", mode("fchmod", noArg, 1, 0, 0o600), retAllow},
				{"openat O_CREAT 0666", mode("openat", 2, 3, oCreat, 0o666), retAllow},
				{"mknodat S_IFIFO|0666", mode("mknodat", noArg, 2, 0, 0o10666), retAllow},
				// No extended attribute set or removed: a POSIX ACL is
				// one, and the filter cannot read its name.
				{"getxattr", seccompData(nr("getxattr"), native, 0), retAllow},
				{"listxattr", seccompData(nr("listxattr"), native, 0), retAllow},
			}...)
			for _, sc := range xattrSyscalls {
				tests = append(tests, seccompCase{sc.name, seccompData(nr(sc.name), native, 0), retErrno | errnoENOTSUP})
			}
			if goarch == "amd64" {
				tests = append(tests, []seccompCase{
					{"chmod 04755", mode("chmod", noArg, 1, 0, 0o4755), eperm},
					{"chmod 0755", mode("chmod", noArg, 1, 0, 0o755), retAllow},
					{"chmod 0777", mode("chmod", noArg, 1, 0, 0o777), eperm},
					{"creat 0666", mode("creat", noArg, 1, 0, 0o666), retAllow},
					{"creat 04755", mode("creat", noArg, 1, 0, 0o4755), eperm},
					{"mknod S_IFREG|02755", mode("mknod", noArg, 1, 0, 0o102755), eperm},
					{"open O_CREAT|O_WRONLY 04755", mode("open", 1, 2, oCreat|1, 0o4755), eperm},
					{"open O_RDONLY", mode("open", 1, 2, oRdonly, 0o4755), retAllow},
				}...)
			}
			for _, sc := range deniedSyscalls {
				tests = append(tests, seccompCase{sc.name, seccompData(nr(sc.name), native, 0), eperm})
			}
			if a.x32 {
				tests = append(tests, seccompCase{"x32 read", seccompData(x32Bit|nr("write"), native, 0), enosys})
			} else {
				tests = append(tests, seccompCase{"arm compat", seccompData(3, uint32(arch.ARM.ID), 0), enosys})
			}
			for _, tt := range tests {
				got, err := vm.Run(tt.data)
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				if got != tt.want {
					t.Errorf("%s: filter returned %#x, want %#x", tt.name, got, tt.want)
				}
			}
		})
	}
}

// TestSeccompWriteClosed: the chmod calls refuse only the write bits they
// are told to (a user whose umask lets the group write makes
// group-writable files themselves).
func TestSeccompWriteClosed(t *testing.T) {
	for goarch, a := range seccompArches {
		raw, err := seccompProgram(goarch, 0o002)
		if err != nil {
			t.Fatal(err)
		}
		insns, _ := bpf.Disassemble(raw)
		vm, err := bpf.NewVM(insns)
		if err != nil {
			t.Fatal(err)
		}
		nr := kernelTables[goarch].SyscallNames["fchmodat"]
		for m, want := range map[uint64]int{0o775: retAllow, 0o664: retAllow, 0o777: retErrno | errnoEPERM, 0o646: retErrno | errnoEPERM} {
			if got, err := vm.Run(seccompArgN(nr, a.audit, 2, m, 0)); err != nil || got != want {
				t.Errorf("%s: fchmodat %#o: %#x, %v; want %#x", goarch, m, got, err, want)
			}
		}
	}
}

func TestSeccompUnknownArch(t *testing.T) {
	if _, err := seccompProgram("mips", 0o022); err == nil {
		t.Fatal("mips was accepted")
	}
}

func TestSeccompBytes(t *testing.T) {
	raw := []bpf.RawInstruction{{Op: 0x20, Jt: 1, Jf: 2, K: 0x01020304}}
	got := seccompBytes(raw)
	want := []byte{0x20, 0x00, 1, 2, 0x04, 0x03, 0x02, 0x01}
	if string(got) != string(want) {
		t.Fatalf("seccompBytes = % x, want % x", got, want)
	}
}
