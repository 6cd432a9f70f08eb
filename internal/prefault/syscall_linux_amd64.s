#include "textflag.h"

// func rawSyscall(trap, a1, a2, a3 uintptr) (r1, errno uintptr)
TEXT ·rawSyscall(SB), NOSPLIT, $0-48
	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	MOVQ	a3+24(FP), DX
	MOVQ	trap+0(FP), AX
	SYSCALL
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, r1+32(FP)
	NEGQ	AX
	MOVQ	AX, errno+40(FP)
	RET
ok:
	MOVQ	AX, r1+32(FP)
	MOVQ	$0, errno+40(FP)
	RET
