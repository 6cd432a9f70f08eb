package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestEffectiveAllow(t *testing.T) {
	p := &Policy{
		Allow: []string{"example.com"},
		Credentials: []Credential{
			{Name: "provider", Hosts: []string{"api.provider.example", "example.com"}},
			{Name: "other", Hosts: []string{"other.example"}},
		},
	}
	for _, tc := range []struct {
		creds []string
		want  []string
		err   string
	}{
		{nil, []string{"example.com"}, ""},
		{[]string{"provider"}, []string{"example.com", "api.provider.example"}, ""},
		{[]string{"provider", "other"}, []string{"example.com", "api.provider.example", "other.example"}, ""},
		{[]string{"missing"}, nil, `unknown credential "missing"; configured credentials: other, provider`},
	} {
		got, err := p.EffectiveAllow(tc.creds)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("EffectiveAllow(%v) error %v, want %q", tc.creds, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("EffectiveAllow(%v) = %v, %v; want %v", tc.creds, got, err, tc.want)
		}
	}
	if len(p.Allow) != 1 {
		t.Fatalf("EffectiveAllow changed the policy's own list: %v", p.Allow)
	}
	// With none configured, it says where to add one (doctor said
	// "configured: " and nothing after it).
	_, err := (&Policy{}).EffectiveAllow([]string{"provider"})
	if want := `unknown credential "provider": no credentials are configured; add it under credentials: in the cordon config`; err == nil || err.Error() != want {
		t.Errorf("no credentials: %v, want %q", err, want)
	}
}
