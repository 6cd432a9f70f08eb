//go:build linux

package linux

import (
	"context"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/policy"
	"github.com/cordon-sandbox/cordon/sandbox"
)

func TestMemoised(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	key := memoKey("test", nil, []byte("policy A"))
	runs := 0
	probe := func(status sandbox.Status) func(func(sandbox.Capability)) map[string]probeResult {
		return func(add func(sandbox.Capability)) map[string]probeResult {
			runs++
			add(sandbox.Capability{Name: "box", Status: status})
			return map[string]probeResult{"x": {Name: "x", OK: status != sandbox.Blocked}}
		}
	}
	var got []sandbox.Capability
	add := func(c sandbox.Capability) { got = append(got, c) }
	ctx := context.Background()

	memoised(ctx, key, add, probe(sandbox.Ready))
	r := memoised(ctx, key, add, probe(sandbox.Ready))
	if runs != 1 || len(got) != 2 || !r["x"].OK {
		t.Fatalf("a fresh pass was not reused: runs %d, caps %v, results %v", runs, got, r)
	}
	memoised(sandbox.Fresh(ctx), key, add, probe(sandbox.Ready))
	if runs != 2 {
		t.Fatalf("sandbox.Fresh did not probe anew: runs %d", runs)
	}
	other := memoKey("test", nil, []byte("policy B"))
	memoised(ctx, other, add, probe(sandbox.Blocked))
	memoised(ctx, other, add, probe(sandbox.Blocked))
	if runs != 4 {
		t.Fatalf("a BLOCKED verdict was reused: runs %d", runs)
	}

	// Only the user's own, private, fresh record with this key is trusted.
	path := memoPath(key)
	for name, spoil := range map[string]func(){
		"group-writable": func() { os.Chmod(path, 0o620) },
		"expired":        func() { writeMemo(path, memo{Key: key, Time: time.Now().Add(-2 * memoTTL)}) },
		"other key":      func() { writeMemo(path, memo{Key: other, Time: time.Now()}) },
		"future":         func() { writeMemo(path, memo{Key: key, Time: time.Now().Add(time.Hour)}) },
	} {
		writeMemo(path, memo{Key: key, Time: time.Now(), Results: map[string]probeResult{"x": {OK: true}}})
		os.Chmod(path, 0o600)
		spoil()
		if _, ok := readMemo(path, key); ok {
			t.Errorf("%s: a record that must not be trusted was read", name)
		}
	}
}

// Writing a record removes those past their TTL and keeps fresh ones.
func TestWriteMemoPrunes(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	old, fresh := memoPath(memoKey("test", nil, []byte("old"))), memoPath(memoKey("test", nil, []byte("fresh")))
	writeMemo(old, memo{Key: "old", Time: time.Now()})
	writeMemo(fresh, memo{Key: "fresh", Time: time.Now()})
	past := time.Now().Add(-2 * memoTTL)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	writeMemo(memoPath(memoKey("test", nil, []byte("new"))), memo{Key: "new", Time: time.Now()})
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("an expired record survived: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh record was removed: %v", err)
	}
}

// A memo reads back as it was written, whatever its strings hold, and
// anything but a whole record is refused.
func TestMemoRoundTrip(t *testing.T) {
	m := memo{Key: "abc", Time: time.Unix(0, 1234567890123),
		Caps: []sandbox.Capability{
			{Name: "box", Status: sandbox.Ready, Reason: "works"},
			{Name: "odd \"name\"", Status: sandbox.Degraded, Reason: "line\nbreak, tab\t, \xff", Fix: "do \\ this"},
		},
		Results: map[string]probeResult{
			"b": {Name: "b", OK: false, Detail: "said \"no\""},
			"a": {Name: "a", OK: true},
		}}
	data := appendMemo(nil, m)
	got, ok := parseMemo(data)
	if !ok || !got.Time.Equal(m.Time) {
		t.Fatalf("parseMemo(%q) = %+v, %v", data, got, ok)
	}
	got.Time = m.Time
	if !reflect.DeepEqual(got, m) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
	}
	for name, bad := range map[string]string{
		"empty":           "",
		"old json":        `{"key":"abc","time":"2026-11-30T00:00:00Z"}`,
		"no time":         memoHeader + "key \"abc\"\n",
		"no key":          memoHeader + "time 1\n",
		"two keys":        memoHeader + "key \"a\"\nkey \"b\"\ntime 1\n",
		"cut off":         string(data[:len(data)-1]),
		"unknown line":    memoHeader + "key \"a\"\ntime 1\nextra \"x\"\n",
		"short cap":       memoHeader + "key \"a\"\ntime 1\ncap \"x\" \"ready\"\n",
		"bad bool":        memoHeader + "key \"a\"\ntime 1\nresult \"x\" maybe \"\"\n",
		"bad time":        memoHeader + "key \"a\"\ntime soon\n",
		"unquoted string": memoHeader + "key \"a\nb\"\ntime 1\n",
		"trailing space":  memoHeader + "key \"a\" \ntime 1\n",
	} {
		if got, ok := parseMemo([]byte(bad)); ok {
			t.Errorf("%s: %q was read as %+v", name, bad, got)
		}
	}
}

// Whatever a memo file holds, parseMemo does not panic, and what it
// accepts renders back to a record it reads the same.
func FuzzParseMemo(f *testing.F) {
	f.Add(appendMemo(nil, memo{Key: "k", Time: time.Unix(0, 5), Caps: []sandbox.Capability{{Name: "n", Status: sandbox.Ready}},
		Results: map[string]probeResult{"r": {Name: "r", OK: true, Detail: "d"}}}))
	f.Add([]byte(memoHeader + "key \"\\x00\"\ntime -1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, ok := parseMemo(data)
		if !ok {
			return
		}
		again, ok := parseMemo(appendMemo(nil, m))
		if !ok || !again.Time.Equal(m.Time) {
			t.Fatalf("%+v does not read back: %+v, %v", m, again, ok)
		}
		again.Time = m.Time
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("read back differently:\n got %+v\nwant %+v", again, m)
		}
	})
}

// Every field of a policy, however deep, changes the box probe's memo
// key: a policy that differs anywhere is probed anew.
func TestPolicyKeyCoversEveryField(t *testing.T) {
	zero, ok := appendKey(nil, reflect.ValueOf(policy.Policy{}))
	if !ok {
		t.Fatal("a policy holds a kind appendKey cannot render: the box probe would never be memoised")
	}
	seen := map[string]string{string(zero): "the zero policy"}
	for name, set := range fieldSetters(reflect.TypeFor[policy.Policy](), "Policy") {
		var p policy.Policy
		set(reflect.ValueOf(&p).Elem())
		key, ok := appendKey(nil, reflect.ValueOf(p))
		if !ok {
			t.Fatalf("%s: not rendered", name)
		}
		if other, dup := seen[string(key)]; dup {
			t.Errorf("%s renders as %s does: %q", name, other, key)
		}
		seen[string(key)] = name
	}
	// Lists keep their items apart.
	a, _ := appendKey(nil, reflect.ValueOf(policy.Policy{Allow: []string{"a", "b"}}))
	b, _ := appendKey(nil, reflect.ValueOf(policy.Policy{Allow: []string{"a b"}}))
	c, _ := appendKey(nil, reflect.ValueOf(policy.Policy{Allow: []string{"a"}, Deny: []string{"b"}}))
	if string(a) == string(b) || string(a) == string(c) || string(b) == string(c) {
		t.Errorf("different lists render alike: %q, %q, %q", a, b, c)
	}
}

// fieldSetters returns, for each leaf field under a value of type typ
// (named path), a function that sets it, in a value of that type, to
// something other than its zero.
func fieldSetters(typ reflect.Type, path string) map[string]func(reflect.Value) {
	out := map[string]func(reflect.Value){}
	switch typ.Kind() {
	case reflect.Struct:
		for i := range typ.NumField() {
			for name, set := range fieldSetters(typ.Field(i).Type, path+"."+typ.Field(i).Name) {
				out[name] = func(v reflect.Value) { set(v.Field(i)) }
			}
		}
	case reflect.Slice:
		for name, set := range fieldSetters(typ.Elem(), path+"[0]") {
			out[name] = func(v reflect.Value) {
				v.Set(reflect.MakeSlice(typ, 1, 1))
				set(v.Index(0))
			}
		}
	case reflect.String:
		out[path] = func(v reflect.Value) { v.SetString("x") }
	case reflect.Bool:
		out[path] = func(v reflect.Value) { v.SetBool(true) }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		out[path] = func(v reflect.Value) { v.SetInt(7) }
	default:
		out[path] = func(reflect.Value) {} // appendKey refuses it; the test above says so
	}
	return out
}
