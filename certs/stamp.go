package certs

import (
	"fmt"
	"os"
	"syscall"
)

// fileStamp is what of fi's inode a content change moves: its device,
// number and change time.
func fileStamp(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d %d %d", st.Dev, st.Ino, changeTime(st))
}
