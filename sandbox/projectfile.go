package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
)

// linkedProjectRefusal is the error for a workspace whose project file
// (at path) is a symbolic link. Policy reads one only when it leads to a
// file inside the workspace, and that file is the box's to write: a bind
// mount over the link would land on its target, whose directory the box
// could rename away, and the link itself could be replaced or removed,
// so no guard keeps the project's narrowing (a deny_read, say) for the
// runs after this one. The run is refused; the fix is to make the project
// file the file itself.
func linkedProjectRefusal(path string) error {
	target, err := os.Readlink(path)
	if err != nil {
		target = "?"
	}
	name := filepath.Base(path)
	return fmt.Errorf("project file %s is a symbolic link (to %s): cordon keeps the project file read-only in the box, and cannot keep a link so (the command could rewrite or rename what it points to, or replace the link, and drop the project's narrowing for the runs after it); make %s the file itself (move the file it points to into its place)", path, target, name)
}
