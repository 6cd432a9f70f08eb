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

// privateToMe says whether fi is a regular file of this user's that no one
// else can write.
func privateToMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode().IsRegular() && fi.Mode().Perm()&0o022 == 0 && int(st.Uid) == os.Getuid()
}
