package policy

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// FuzzLoadConfig feeds arbitrary bytes as a global and a project file.
// Loading must never panic; whenever a project file loads, the result
// validates and is no wider than the global layer alone.
func FuzzLoadConfig(f *testing.F) {
	global := readTestdata(f, "global.yaml")
	for _, name := range []string{"project-narrow.yaml", "project-widen.yaml", "global.yaml"} {
		f.Add(global, readTestdata(f, name))
	}
	f.Add([]byte(InitTemplate()), []byte("network: off\nallow: []\n"))
	f.Add([]byte("network: open\nlimits: {memory: 0}\n"), []byte("limits: {memory: 1GiB}\nnetwork: restricted\n"))
	f.Fuzz(func(t *testing.T, global, project []byte) {
		for _, g := range []*configFile{{path: "global.yaml", data: global}, nil} {
			base, berr := build(testHome, "/w", g, nil, Overrides{})
			p, err := build(testHome, "/w", g, &configFile{path: "/w/.cordon.yaml", data: project}, Overrides{})
			if err != nil {
				continue
			}
			if berr != nil {
				t.Fatalf("the project file loaded over a global file that does not load alone: %v", berr)
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("loaded policy does not validate: %v", err)
			}
			if err := noWider(p, base); err != nil {
				t.Fatalf("project file widened the policy: %v\nglobal %q\nproject %q", err, global, project)
			}
		}
	})
}

// noWider reports how p is wider than base, judged field by field on the
// effective values, independently of narrowWith.
func noWider(p, base *Policy) error {
	if p.Network.rank() > base.Network.rank() {
		return fmt.Errorf("network %s over %s", p.Network, base.Network)
	}
	if base.DenyPrivate && !p.DenyPrivate {
		return fmt.Errorf("deny_private dropped")
	}
	if base.Terminate == TerminateAll && p.Terminate != TerminateAll {
		return fmt.Errorf("terminate %s over all", p.Terminate)
	}
	if p.RunAs != base.RunAs {
		return fmt.Errorf("run_as %s over %s", p.RunAs, base.RunAs)
	}
	for _, l := range []struct {
		key       string
		cur, next int64
	}{
		{"timeout", int64(base.Limits.Timeout), int64(p.Limits.Timeout)},
		{"memory", base.Limits.Memory, p.Limits.Memory},
		{"pids", int64(base.Limits.Pids), int64(p.Limits.Pids)},
		{"tmp_size", base.Limits.TmpSize, p.Limits.TmpSize},
		{"audit_budget", base.Limits.AuditBudget, p.Limits.AuditBudget},
	} {
		if l.cur != 0 && (l.next == 0 || l.next > l.cur) {
			return fmt.Errorf("limits.%s %d over %d", l.key, l.next, l.cur)
		}
	}
	for _, d := range []struct {
		key       string
		base, got []string
	}{{"deny", base.Deny, p.Deny}, {"deny_read", base.DenyRead, p.DenyRead}, {"read_only", base.ReadOnly, p.ReadOnly}, {"deny_commands", base.DenyCommands, p.DenyCommands}} {
		for _, s := range d.base {
			if !slices.Contains(d.got, s) {
				return fmt.Errorf("%s %q dropped", d.key, s)
			}
		}
	}
	for _, l := range []struct {
		key       string
		base, got []string
		covers    func(b, g string) bool
	}{
		{"allow", base.Allow, p.Allow, coversPattern},
		{"exclude", base.Exclude, p.Exclude, coversPattern},
		{"resolve", base.Resolve, p.Resolve, func(b, g string) bool { return b == g }},
		{"extra_ca", base.ExtraCA, p.ExtraCA, func(b, g string) bool { return b == g }},
		{"env", base.Env, p.Env, func(b, g string) bool { return b == g }},
		{"expose", base.Expose, p.Expose, under},
		{"allow_paths", base.AllowPaths, p.AllowPaths, func(b, g string) bool {
			br, _ := ParsePathRule(b)
			gr, _ := ParsePathRule(g)
			return under(br.Path, gr.Path) && (br.Write || !gr.Write)
		}},
	} {
		for _, g := range l.got {
			if !slices.ContainsFunc(l.base, func(b string) bool { return l.covers(b, g) }) {
				return fmt.Errorf("%s %q added", l.key, g)
			}
		}
	}
	for _, c := range p.Credentials {
		if !slices.ContainsFunc(base.Credentials, func(b Credential) bool { return reflect.DeepEqual(b, c) }) {
			return fmt.Errorf("credential %q added or changed", c.Name)
		}
	}
	for _, b := range base.Credentials {
		f := b.Source.File
		if f != "" && !slices.Contains(p.DenyRead, f) && !slices.ContainsFunc(p.Credentials, func(c Credential) bool { return c.Source.File == f }) {
			return fmt.Errorf("credential %q dropped, its source file %s no longer hidden", b.Name, f)
		}
	}
	return nil
}

func coversPattern(b, g string) bool {
	bp, err1 := ParsePattern(b)
	gp, err2 := ParsePattern(g)
	return err1 == nil && err2 == nil && bp.Covers(gp)
}

// under reports whether g is b or below it, by path elements.
func under(b, g string) bool {
	rel, err := filepath.Rel(b, g)
	return err == nil && filepath.IsLocal(rel) || rel == "."
}
