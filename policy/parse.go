package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"go.yaml.in/yaml/v3"
)

var durationType = reflect.TypeFor[time.Duration]()

// parseLayer reads one config file: every key must be known, every value of
// the right type; only the keys it sets are validated and its paths are
// expanded.
func parseLayer(path string, data []byte, home string) (*layer, error) {
	if err := singleDocument(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	settings, leaves, err := readSettings(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l := newLayer(path)
	keys := slices.Sorted(maps.Keys(leaves))
	for _, k := range keys {
		if err := knownKey(k); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if leaves[k] == nil {
			return nil, fmt.Errorf("%s: key %q has no value; give it one (an empty list is []) or remove the key", path, k)
		}
		l.mark(k)
	}
	var md mapstructure.Metadata
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		DecodeHook: decodeHook,
		Metadata:   &md,
		Result:     &l.p,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := dec.Decode(settings); err != nil {
		return nil, fmt.Errorf("%s: %w", path, describeDecodeErrors(err))
	}
	if len(md.Unused) > 0 {
		slices.Sort(md.Unused)
		return nil, fmt.Errorf("%s: %w", path, unusedKey(md.Unused[0]))
	}
	if err := l.check(home); err != nil {
		return nil, err
	}
	return l, nil
}

// readSettings reads a YAML mapping with its keys lower-cased (config keys
// are case-insensitive), and the dotted name of each leaf: a value that
// is not a mapping. A mapping with no keys is dropped, as if absent.
func readSettings(data []byte) (settings map[string]any, leaves map[string]any, err error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, yamlError(err)
	}
	leaves = map[string]any{}
	if doc == nil {
		return map[string]any{}, leaves, nil
	}
	if !isMapping(doc) {
		return nil, nil, fmt.Errorf("holds %s where a mapping of keys to values belongs; start with a key such as \"network: restricted\"", describeValue(doc))
	}
	settings, err = lowerKeys(doc, "", leaves)
	return settings, leaves, err
}

// lowerKeys copies the mapping m with lower-cased keys, dropping empty
// mappings, and records its leaves under prefix.
func lowerKeys(m any, prefix string, leaves map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for k, v := range reflect.ValueOf(m).Seq2() {
		name, ok := k.Interface().(string)
		if !ok {
			return nil, fmt.Errorf("key %v%s is not a name; config keys are words such as network or allow", k.Interface(), underKey(prefix))
		}
		key := strings.ToLower(name)
		if prefix != "" {
			key = prefix + "." + key
		}
		val := v.Interface()
		if isMapping(val) {
			sub, err := lowerKeys(val, key, leaves)
			if err != nil {
				return nil, err
			}
			if len(sub) == 0 {
				continue
			}
			val = sub
		} else {
			leaves[key] = val
		}
		if _, dup := out[strings.ToLower(name)]; dup {
			return nil, fmt.Errorf("key %q is given twice (keys are case-insensitive); keep one", key)
		}
		out[strings.ToLower(name)] = val
	}
	return out, nil
}

// underKey names where a key sits, for an error.
func underKey(prefix string) string {
	if prefix == "" {
		return ""
	}
	return fmt.Sprintf(" (under %s)", prefix)
}

// isMapping says whether a decoded YAML value is a mapping.
func isMapping(v any) bool {
	return v != nil && reflect.TypeOf(v).Kind() == reflect.Map
}

// noToken is the decoder's error for a character no YAML token starts
// with: a tab in the indentation, most often.
const noToken = "found character that cannot start any token"

// yamlError puts the decoder's type errors, which it lists one a line,
// on one line: cordon prints an error on one line (a newline of the
// file's own text in one is escaped). To noToken it adds the line, which
// the decoder leaves out on the first, and what to write instead.
func yamlError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return fmt.Errorf("yaml: %s", strings.Join(te.Errors, "; "))
	}
	if msg := err.Error(); strings.HasSuffix(msg, noToken) {
		if msg == "yaml: "+noToken {
			msg = "yaml: line 1: " + noToken
		}
		return fmt.Errorf("%s, such as a tab or an unquoted @ or `: indent with spaces, not tabs, and quote a value that starts with @ or `", msg)
	}
	return err
}

// singleDocument refuses a stream of several YAML documents: only the
// first would be read, and a deny in a later one would be silently lost.
func singleDocument(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for n := 0; ; n++ {
		var node yaml.Node
		err := dec.Decode(&node)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return yamlError(err)
		case n == 1:
			return errors.New("holds more than one YAML document (a second '---'); merge them into one")
		}
	}
}

// knownKey reports a dotted key (list items as "[i]") that names no field
// of Policy, listing the keys that would be valid in its place.
func knownKey(key string) error {
	t := reflect.TypeFor[Policy]()
	segs := strings.Split(key, ".")
	for i, seg := range segs {
		for t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil // a value where a scalar belongs: decoding names the type
		}
		name, _, _ := strings.Cut(seg, "[")
		f, ok := fieldByTag(t, name)
		if !ok {
			return fmt.Errorf("unknown key %q; check its spelling (valid here: %s)", strings.Join(segs[:i+1], "."), strings.Join(tagNames(t), ", "))
		}
		t = f.Type
	}
	return nil
}

// unusedKey explains a key that decoding left unused: an unknown one, or
// one whose name holds a dot or a bracket ("limits.pids: 10"), which YAML
// reads as one name, not as a nested key.
func unusedKey(key string) error {
	if err := knownKey(key); err != nil {
		return err
	}
	return fmt.Errorf("key %q: a name with a dot or a bracket in it is no nested key; write nested keys as mappings, such as limits: {pids: 100}", key)
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); f.Tag.Get("mapstructure") == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tagNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		names = append(names, t.Field(i).Tag.Get("mapstructure"))
	}
	return names
}

// decodeHook converts durations and sizes and refuses a value of the
// wrong shape before mapstructure could coerce it.
func decodeHook(_, to reflect.Type, data any) (any, error) {
	switch {
	case to == durationType:
		switch v := data.(type) {
		case string:
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("%q is not a duration; write one such as 90s, 10m or 2h", v)
			}
			return d, nil
		case int:
			if v == 0 {
				return time.Duration(0), nil
			}
		}
	case to.Kind() == reflect.Int64:
		switch v := data.(type) {
		case string:
			return ParseSize(v)
		case int:
			return v, nil
		}
	case fits(to, data):
		return data, nil
	}
	return nil, fmt.Errorf("expected %s, got %s", describeType(to), describeValue(data))
}

// fits reports whether data has the shape a field of type t needs.
func fits(t reflect.Type, data any) bool {
	var ok bool
	switch t.Kind() {
	case reflect.String:
		_, ok = data.(string)
	case reflect.Bool:
		_, ok = data.(bool)
	case reflect.Int:
		_, ok = data.(int)
	case reflect.Slice:
		ok = reflect.TypeOf(data).Kind() == reflect.Slice
	case reflect.Struct:
		ok = reflect.TypeOf(data).Kind() == reflect.Map
	}
	return ok
}

func describeType(t reflect.Type) string {
	switch {
	case t == durationType:
		return "a duration such as 10m"
	case t.Kind() == reflect.Int64:
		return "a size such as 512MiB, 2GiB or a number of bytes"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Int:
		return "a whole number"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "a list of strings such as [a, b]"
	case t.Kind() == reflect.Slice:
		return "a list"
	}
	return "a mapping of keys to values"
}

func describeValue(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("%v", x)
	case int, int64, uint64, float64:
		return fmt.Sprintf("the number %v", x)
	}
	switch reflect.TypeOf(v).Kind() {
	case reflect.Slice:
		return "a list"
	case reflect.Map:
		return "a mapping"
	}
	return fmt.Sprintf("a %T", v)
}

// describeDecodeErrors flattens mapstructure's joined errors into one
// line per key.
func describeDecodeErrors(err error) error {
	var msgs []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var de *mapstructure.DecodeError
		if errors.As(e, &de) {
			msgs = append(msgs, fmt.Sprintf("key %q: %v", de.Name(), de.Unwrap()))
			return
		}
		msgs = append(msgs, e.Error())
	}
	walk(err)
	slices.Sort(msgs)
	return errors.New(strings.Join(msgs, "; "))
}

// sizeUnits maps a lower-case suffix to its multiplier. Bare K, M, G and T
// are binary, as in systemd and Docker.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// FormatSize renders a byte count the way ParseSize reads it, in the
// largest binary unit that divides it exactly: "8GiB", "1536KiB", "100".
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// ParseSize parses a byte count such as "2GiB", "512MiB", "1.5G" or "4096".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, okUnit := sizeUnits[unit]
	n, err := strconv.ParseFloat(num, 64)
	if !okUnit || err != nil || num == "" {
		return 0, fmt.Errorf("size %q: write a number of bytes or a number with a unit such as 512MiB or 2GiB", s)
	}
	v := n * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	// A size under a byte came out as 0, which lifts a limit: --memory
	// 0.5 (meant as GiB) ran with no memory limit at all.
	if v > 0 && v < 1 {
		return 0, fmt.Errorf("size %q is less than a byte, not 0 (which would lift the limit); write the size with its unit, such as 512MiB, or 0 for no limit", s)
	}
	return int64(v), nil
}
