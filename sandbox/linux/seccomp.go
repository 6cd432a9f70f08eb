//go:build linux

package linux

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
)

// deniedSyscalls answer EPERM inside the sandbox: kernel keyrings,
// io_uring, eBPF, perf, userfaultfd, kexec, modules, every way to
// change the mount table, and syslog(2), the kernel log's other door
// (the box has no /dev/kmsg), which a host whose dmesg_restrict is 0
// opens to anyone. Each is numbered per architecture, as the
// kernel's syscall tables number them (seccomp_test.go checks every number
// against go-seccomp-bpf's tables).
var deniedSyscalls = []syscallNr{
	{"keyctl", 250, 219}, {"add_key", 248, 217}, {"request_key", 249, 218},
	{"io_uring_setup", 425, 425}, {"io_uring_enter", 426, 426}, {"io_uring_register", 427, 427},
	{"bpf", 321, 280}, {"perf_event_open", 298, 241}, {"userfaultfd", 323, 282},
	{"kexec_load", 246, 104}, {"kexec_file_load", 320, 294},
	{"init_module", 175, 105}, {"finit_module", 313, 273}, {"delete_module", 176, 106},
	{"mount", 165, 40}, {"umount2", 166, 39}, {"pivot_root", 155, 41},
	{"fsopen", 430, 430}, {"fsconfig", 431, 431}, {"fsmount", 432, 432}, {"fspick", 433, 433}, {"move_mount", 429, 429},
	{"open_tree", 428, 428}, {"open_tree_attr", 467, 467}, {"mount_setattr", 442, 442},
	{"syslog", 103, 116},
}

// ioctlNr is ioctl's number, whose requests deniedIoctls filters.
var ioctlNr = syscallNr{"ioctl", 16, 29}

// socketNrs are the calls that make sockets, whose address family
// allowedFamilies filters.
var socketNrs = []syscallNr{{"socket", 41, 198}, {"socketpair", 53, 199}}

// socketFamilies are the socket address families a box may use, and of
// each the socket types and protocols: unix, IPv4, IPv6 and netlink
// (which getaddrinfo and ip read interfaces through). Every other family
// answers EAFNOSUPPORT: AF_VSOCK above all, which no network namespace
// scopes, so that a box on a virtual machine could talk to the
// hypervisor's or the host's vsock services past the proxy and the
// nftables rules (and AF_PACKET, AF_ALG, Bluetooth, CAN, XDP, AF_SMC,
// AF_TIPC, which a box has no business with). Within inet and netlink,
// a type or protocol the kernel has not registered makes it load the
// module that has (request_module, no capability asked): the same
// kernel code the family list keeps out, and more, came in by another
// door (SMC through IPPROTO_SMC, L2TP through IPPROTO_L2TP, SCTP, DCCP,
// and through netlink iSCSI, crypto_user, nfnetlink, xfrm_user and any
// generic netlink family by its name, TIPCv2 among them). Other types
// answer ESOCKTNOSUPPORT and other protocols EPROTONOSUPPORT, as from a
// kernel without them.
var socketFamilies = []socketFamily{
	{families: []uint32{1}, types: []socketType{{typ: anyValue, protocols: nil}}}, // AF_UNIX
	{families: []uint32{2, 10}, types: []socketType{ // AF_INET, AF_INET6
		{typ: 1, protocols: []uint32{0, 6, 262}},    // SOCK_STREAM: TCP, MPTCP
		{typ: 2, protocols: []uint32{0, 17, 1, 58}}, // SOCK_DGRAM: UDP, ICMP and ICMPv6 (ping)
		{typ: 3, protocols: nil},                    // SOCK_RAW: needs CAP_NET_RAW, which the box lacks
	}},
	// AF_NETLINK: route, sock_diag (which loads a family's diag module only
	// once the family is registered), SELinux, audit, uevent; all built in.
	{families: []uint32{16}, types: []socketType{{typ: anyValue, protocols: []uint32{0, 4, 7, 9, 15}}}},
}

// socketFamily is one entry of socketFamilies: its address families and
// the types (socket's second argument, its flags masked off) and
// protocols each takes.
type socketFamily struct {
	families []uint32
	types    []socketType
}

// socketType is a socket type a family takes (anyValue: every type, the
// family's only entry then) and its protocols (nil: every protocol).
type socketType struct {
	typ       uint32
	protocols []uint32
}

// anyValue is a socketType's typ for a family whose type is not looked at.
const anyValue = ^uint32(0)

// sockTypeMask takes SOCK_NONBLOCK and SOCK_CLOEXEC off a socket type.
const sockTypeMask = 0xf

// prctlNr is prctl's number, whose PR_SET_PDEATHSIG the filter bounds:
// only SIGKILL may be set. bwrap's init, pid 1 of the box, dies with its
// parent by its parent-death signal, SIGKILL, and with it the whole box;
// the command may attach to the init (same user) and make it call prctl,
// and a death signal cleared or changed (a pid namespace's init ignores
// any other signal it has no handler for) left the box running after a
// kill -9 of cordon. The init runs under this filter too.
var prctlNr = syscallNr{"prctl", 157, 167}

// prSetPdeathsig and sigkill are the prctl option and the only signal it
// may set.
const (
	prSetPdeathsig = 1
	sigkill        = 9
)

// chmodRefused is the write permission the box's chmod calls may not
// give: others'. The group's, which sandbox.WriteClosed also names where
// the user's umask withholds it, is only taken off after the run, from
// what the run made: refused in the box it broke chmod +x of a
// group-writable file and git's core.sharedRepository, and a group's
// members are some local users, not every one.
const chmodRefused fs.FileMode = 0o002

// modeSyscalls are the calls that set a file's mode, whose mode argument
// may not hold the setuid or setgid bit (modeBitsDenied): a file the box
// left in the workspace, or a directory it shares with the host, setuid
// to the user (the box runs as the user) ran with the user's rights for
// any other local user who could reach it, outside the box. Nor may the
// mode of the chmod calls, which no umask narrows, give write to others
// (chmodRefused): chmod 777 . or chmod o+w Makefile let another local
// user replace the Makefile the user then ran. Each gives
// the argument holding the mode, and, for the calls that set a mode only
// when they create a file, the argument holding the flags that say so.
// arm64 has only the *at calls.
var modeSyscalls = []modeSyscall{
	{syscallNr{"chmod", 90, noSyscall}, noArg, 1, true},
	{syscallNr{"fchmod", 91, 52}, noArg, 1, true},
	{syscallNr{"fchmodat", 268, 53}, noArg, 2, true},
	{syscallNr{"fchmodat2", 452, 452}, noArg, 2, true},
	{syscallNr{"creat", 85, noSyscall}, noArg, 1, false},
	{syscallNr{"mknod", 133, noSyscall}, noArg, 1, false},
	{syscallNr{"mknodat", 259, 33}, noArg, 2, false},
	{syscallNr{"open", 2, noSyscall}, 1, 2, false},
	{syscallNr{"openat", 257, 56}, 2, 3, false},
}

// modeSyscall is a call of modeSyscalls: flags (or noArg) and mode are
// the indices of its arguments; chmod says the mode is set as it is (the
// umask narrows a new file's).
type modeSyscall struct {
	nr          syscallNr
	flags, mode int
	chmod       bool
}

// noArg is a modeSyscall's flags for a call that always sets the mode.
const noArg = -1

// modeBitsDenied are S_ISUID and S_ISGID; modeCreateFlags are O_CREAT and
// O_TMPFILE's own bit (the same on amd64 and arm64), the flags with which
// open and openat take a mode. The mode of openat2 lies in a struct the
// filter cannot read, so openat2 answers ENOSYS (unsupportedSyscalls), as
// on a kernel older than 5.6, and its callers fall back to openat.
const (
	modeBitsDenied  = 0o6000
	modeCreateFlags = 0o100 | 0o20000000
)

// unsupportedSyscalls answer ENOSYS inside the sandbox.
var unsupportedSyscalls = []syscallNr{{"openat2", 437, 437}}

// xattrSyscalls, which set or remove extended attributes, answer
// EOPNOTSUPP inside the sandbox, as on a file system without them: a POSIX
// ACL is one (system.posix_acl_access, setfacl -m o::rwx or
// u:someone:rwx), which gave other local users the write permission a
// chmod may not (modeSyscalls), and the filter cannot read the name.
// Programs that copy attributes (cp -a, rsync -X, Python's copystat)
// pass over that answer; setfacl and setfattr fail.
var xattrSyscalls = []syscallNr{
	{"setxattr", 188, 5}, {"lsetxattr", 189, 6}, {"fsetxattr", 190, 7}, {"setxattrat", 463, 463},
	{"removexattr", 197, 14}, {"lremovexattr", 198, 15}, {"fremovexattr", 199, 16}, {"removexattrat", 466, 466},
}

// syscallNr is one syscall's number on each supported architecture, or
// noSyscall where that architecture has no such call.
type syscallNr struct {
	name         string
	amd64, arm64 uint32
}

// noSyscall is a syscallNr's number on an architecture without the call.
const noSyscall = ^uint32(0)

// deniedIoctls are terminal requests that inject input or reach the
// console, TIOCSTI and TIOCLINUX, and TIOCSETD, which attaches a line
// discipline to a terminal the box opens (a pty of its own): the route of
// the n_gsm and n_hdlc kernel exploits, and nothing a program in the box
// needs (the same numbers on amd64 and arm64).
var deniedIoctls = []uint32{0x5412, 0x541C, 0x5423}

// seccomp return values and the layout of struct seccomp_data.
const (
	retAllow     = 0x7fff0000
	retErrno     = 0x00050000
	errnoEPERM   = 1
	errnoENOSYS  = 38
	errnoENOTSUP = 95 // EOPNOTSUPP
	errnoEAFNO   = 97 // EAFNOSUPPORT
	errnoEPROTO  = 93 // EPROTONOSUPPORT
	errnoESOCKT  = 94 // ESOCKTNOSUPPORT
	offNr        = 0
	offArch      = 4
	offArg0Low   = 16 + 8*0 // low 32 bits of args[0] on little-endian machines
	offArg1Low   = 16 + 8*1 // and of args[1]
	offArg2Low   = 16 + 8*2 // and of args[2]
	offArgsLow   = 16       // args[i]'s low 32 bits are at offArgsLow + 8*i
	x32Bit       = 0x40000000
)

// seccompArch is one architecture the filter knows.
type seccompArch struct {
	// audit is the AUDIT_ARCH_* value in seccomp_data.arch.
	audit uint32
	// x32 is set on amd64, whose x32 ABI shares the audit arch and is told
	// apart by a bit in the syscall number.
	x32 bool
	// nr picks this architecture's number.
	nr func(syscallNr) uint32
}

var seccompArches = map[string]seccompArch{
	"amd64": {audit: 0xc000003e, x32: true, nr: func(s syscallNr) uint32 { return s.amd64 }},
	"arm64": {audit: 0xc00000b7, nr: func(s syscallNr) uint32 { return s.arm64 }},
}

// seccompProgram assembles the filter for a Go architecture name: native
// syscalls in deniedSyscalls and ioctls in deniedIoctls answer EPERM
// (ioctl's request is compared on its low 32 bits, as the kernel reads
// it), and so does a prctl(PR_SET_PDEATHSIG) of any signal but SIGKILL
// (the kernel refuses a signal with high bits set, so the low 32 bits
// decide), and a call of modeSyscalls whose mode holds modeBitsDenied (for
// open and openat, only with modeCreateFlags, without which the mode is
// not read), or, for the chmod calls, a bit of writeClosed; a socket of a
// family not in socketFamilies answers EAFNOSUPPORT, and of a type or
// protocol its entry does not list ESOCKTNOSUPPORT or EPROTONOSUPPORT
// (on their low 32 bits, as the kernel reads an int); xattrSyscalls answer
// EOPNOTSUPP; unsupportedSyscalls and any other ABI (x32 and i386 on
// amd64, arm on arm64) answer ENOSYS; everything else is allowed.
func seccompProgram(goarch string, writeClosed fs.FileMode) ([]bpf.RawInstruction, error) {
	a, ok := seccompArches[goarch]
	if !ok {
		return nil, fmt.Errorf("seccomp: no syscall table for %s; cordon's Linux sandbox supports amd64 and arm64", goarch)
	}
	// Labels are resolved by counting: the three return blocks sit at the
	// end (allow, EPERM, ENOSYS), the ioctl block just before them (it
	// falls through to allow), the prctl and socket blocks before that.
	var prog []bpf.Instruction
	type jump struct {
		at     int
		target string
		onTrue bool
	}
	var jumps []jump
	jeq := func(val uint32, target string) {
		jumps = append(jumps, jump{at: len(prog), target: target, onTrue: true})
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: val})
	}
	jne := func(val uint32, target string) {
		jumps = append(jumps, jump{at: len(prog), target: target})
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: val})
	}
	prog = append(prog, bpf.LoadAbsolute{Off: offArch, Size: 4})
	jumps = append(jumps, jump{at: len(prog), target: "enosys"})
	prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.audit})
	prog = append(prog, bpf.LoadAbsolute{Off: offNr, Size: 4})
	if a.x32 {
		jumps = append(jumps, jump{at: len(prog), target: "enosys", onTrue: true})
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit})
	}
	for _, sc := range deniedSyscalls {
		jeq(a.nr(sc), "eperm")
	}
	for _, sc := range unsupportedSyscalls {
		jeq(a.nr(sc), "enosys")
	}
	for _, sc := range xattrSyscalls {
		jeq(a.nr(sc), "eopnotsupp")
	}
	for i, m := range modeSyscalls {
		if a.nr(m.nr) != noSyscall {
			jeq(a.nr(m.nr), "mode"+strconv.Itoa(i))
		}
	}
	jeq(a.nr(ioctlNr), "ioctl")
	for _, sc := range socketNrs {
		jeq(a.nr(sc), "socket")
	}
	jeq(a.nr(prctlNr), "prctl")
	prog = append(prog, bpf.RetConstant{Val: retAllow})
	labels := map[string]int{"socket": len(prog)}
	prog = append(prog, bpf.LoadAbsolute{Off: offArg0Low, Size: 4})
	for i, sf := range socketFamilies {
		for _, f := range sf.families {
			jeq(f, "family"+strconv.Itoa(i))
		}
	}
	prog = append(prog, bpf.RetConstant{Val: retErrno | errnoEAFNO})
	// protocols checks socket's third argument against ps (nil: any).
	protocols := func(ps []uint32) {
		if ps == nil {
			prog = append(prog, bpf.RetConstant{Val: retAllow})
			return
		}
		prog = append(prog, bpf.LoadAbsolute{Off: offArg2Low, Size: 4})
		for _, p := range ps {
			jeq(p, "allow")
		}
		prog = append(prog, bpf.RetConstant{Val: retErrno | errnoEPROTO})
	}
	for i, sf := range socketFamilies {
		family := "family" + strconv.Itoa(i)
		labels[family] = len(prog)
		if len(sf.types) == 1 && sf.types[0].typ == anyValue {
			protocols(sf.types[0].protocols)
			continue
		}
		prog = append(prog, bpf.LoadAbsolute{Off: offArg1Low, Size: 4}, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: sockTypeMask})
		for j, st := range sf.types {
			jeq(st.typ, family+"type"+strconv.Itoa(j))
		}
		prog = append(prog, bpf.RetConstant{Val: retErrno | errnoESOCKT})
		for j, st := range sf.types {
			labels[family+"type"+strconv.Itoa(j)] = len(prog)
			protocols(st.protocols)
		}
	}
	labels["prctl"] = len(prog)
	prog = append(prog, bpf.LoadAbsolute{Off: offArg0Low, Size: 4})
	jne(prSetPdeathsig, "allow")
	prog = append(prog, bpf.LoadAbsolute{Off: offArg1Low, Size: 4})
	jeq(sigkill, "allow")
	prog = append(prog, bpf.RetConstant{Val: retErrno | errnoEPERM})
	// jset jumps to target when the accumulator has a bit of val set,
	// and to the next instruction when not.
	jset := func(val uint32, target string) {
		jumps = append(jumps, jump{at: len(prog), target: target, onTrue: true})
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: val})
	}
	for i, m := range modeSyscalls {
		if a.nr(m.nr) == noSyscall {
			continue
		}
		labels["mode"+strconv.Itoa(i)] = len(prog)
		if m.flags != noArg {
			prog = append(prog, bpf.LoadAbsolute{Off: uint32(offArgsLow + 8*m.flags), Size: 4})
			jset(modeCreateFlags, "mode"+strconv.Itoa(i)+"bits")
			prog = append(prog, bpf.RetConstant{Val: retAllow})
			labels["mode"+strconv.Itoa(i)+"bits"] = len(prog)
		}
		prog = append(prog, bpf.LoadAbsolute{Off: uint32(offArgsLow + 8*m.mode), Size: 4})
		denied := uint32(modeBitsDenied)
		if m.chmod {
			denied |= uint32(writeClosed.Perm())
		}
		jset(denied, "eperm")
		prog = append(prog, bpf.RetConstant{Val: retAllow})
	}
	labels["ioctl"] = len(prog)
	prog = append(prog, bpf.LoadAbsolute{Off: offArg1Low, Size: 4})
	for _, req := range deniedIoctls {
		jeq(req, "eperm")
	}
	labels["allow"] = len(prog)
	prog = append(prog, bpf.RetConstant{Val: retAllow})
	labels["eperm"] = len(prog)
	prog = append(prog, bpf.RetConstant{Val: retErrno | errnoEPERM})
	labels["enosys"] = len(prog)
	prog = append(prog, bpf.RetConstant{Val: retErrno | errnoENOSYS})
	labels["eopnotsupp"] = len(prog)
	prog = append(prog, bpf.RetConstant{Val: retErrno | errnoENOTSUP})

	for _, j := range jumps {
		in := prog[j.at].(bpf.JumpIf)
		skip := labels[j.target] - j.at - 1
		if skip < 0 || skip > 255 {
			return nil, fmt.Errorf("seccomp: jump of %d instructions does not fit", skip)
		}
		if j.onTrue {
			in.SkipTrue = uint8(skip)
		} else {
			in.SkipFalse = uint8(skip)
		}
		prog[j.at] = in
	}
	return bpf.Assemble(prog)
}

// seccompBytes renders a program as the struct sock_filter array bwrap's
// --seccomp reads (native byte order; both supported machines are
// little-endian).
func seccompBytes(prog []bpf.RawInstruction) []byte {
	out := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		out = binary.LittleEndian.AppendUint16(out, in.Op)
		out = append(out, in.Jt, in.Jf)
		out = binary.LittleEndian.AppendUint32(out, in.K)
	}
	return out
}

// seccompListing is the human-readable program for --dry-run.
func seccompListing(goarch string, writeClosed fs.FileMode, prog []bpf.RawInstruction) string {
	var b strings.Builder
	names := make([]string, len(deniedSyscalls))
	for i, sc := range deniedSyscalls {
		names[i] = sc.name
	}
	var modes, chmods, xattrs, unsupported []string
	for _, m := range modeSyscalls {
		if seccompArches[goarch].nr(m.nr) != noSyscall {
			modes = append(modes, m.nr.name)
			if m.chmod {
				chmods = append(chmods, m.nr.name)
			}
		}
	}
	for _, sc := range xattrSyscalls {
		xattrs = append(xattrs, sc.name)
	}
	for _, sc := range unsupportedSyscalls {
		unsupported = append(unsupported, sc.name)
	}
	fmt.Fprintf(&b, "seccomp filter for %s: EPERM for %s, ioctl TIOCSTI/TIOCLINUX/TIOCSETD, prctl PR_SET_PDEATHSIG but SIGKILL, a setuid or setgid mode to %s, and a mode with any of the write bits %#o to %s; EAFNOSUPPORT for sockets but unix, inet, inet6 and netlink, and ESOCKTNOSUPPORT or EPROTONOSUPPORT for inet sockets but TCP, MPTCP, UDP, ping and raw, and netlink sockets but route, sock_diag, SELinux, audit and uevent; EOPNOTSUPP for %s; ENOSYS for %s and other ABIs\n", goarch, strings.Join(names, ", "), strings.Join(modes, ", "), uint32(writeClosed.Perm()), strings.Join(chmods, ", "), strings.Join(xattrs, ", "), strings.Join(unsupported, ", "))
	for i, in := range prog {
		fmt.Fprintf(&b, "%3d: %v\n", i, in.Disassemble())
	}
	return b.String()
}
